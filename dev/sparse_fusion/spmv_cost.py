"""What the SpMV adds to a fused sptrsv_spmv: the same solve L⁻¹b followed by SpMVs of less work.

A developer's probe, not package code (needs a CUDA GPU for times; on a CPU it only checks the
results). On the 27-point grid t3's sptrsv_spmv takes 0.289 ms while its sptrsv_sptrsv, two
solves one after the other, takes 0.493: the pair costs about 40 µs more than one solve, which
is about what an SpMV of A alone costs. Whether that is the SpMV's rows waiting at the end, its
programs' throughput, or the solve slowed by them is told apart here, in one process:
  - "A": the benchmark's pair, y = A·x (A's upper entries make row i wait for x of later rows);
  - "tril": y = tril(A)·x (row i waits for nothing after x_i, so the SpMV can trail the solve
    closely);
  - "diag": y = diag(A)·x (one entry a row: the SpMV's work all but gone);
  - "A share:N": the pair with N of 256 striding programs on the SpMV's blocks (SPMV_SHARE);
  - "A chunk:16": records of 16 entry slots a lane instead of record_chunk's (32 on the 27-point
    grid): the solve's rows (14 slots with the right-hand side) fit, the SpMV's 27 do not, so the
    pattern takes the flat records (reads_flat; _flat, blocks of 8, as on the power-law graph:
    28 registers in sm_90 against the records kernel's 96);
  - "LU/2": half of sptrsv_sptrsv(L, triu(A)), the two solves' chains one after the other
    (records as wide as A's, like tril's and diag's);
  - "spmv": torch's CSR A @ x alone, the SpMV's bandwidth floor on this device.
The variants above run every record as wide as the widest row (STREAM_CHUNKS off, as when they
were measured). Every output is checked against SciPy in float64 first; then rounds of do_bench medians, the order
rotated each round.

`model` (CPU only) asks whether the SpMV's programs can keep up at all: solve row r is done at
level(r)·h, an SpMV row is ready once every x it reads is, and P programs stride over the SpMV's
blocks in the plan's order (ticket_cut, apart), each block taking c µs once ready and its
program free. It prints, for P and c, how long the SpMV's stream runs past the solve. On the
27-point 64³ grid with h = 0.556 µs (the two solves' hop, sptrsv_sptrsv 0.493 ms over 2 × 442
levels): at the package's 264 SpMV programs (64 of 256 of 8 an SM) the tail is under 1 µs up
to c = 0.7 µs and 44 µs at c = 1.0 — about what the pair takes over one solve; at 132
programs it is 43 µs already at c = 0.5. On the 3D 100³ grid (blocks of 8, h = 0.605 µs: 0.362
ms over 2 × 298 levels; 528 SpMV programs, 64 of 256 of 16 an SM) the tail is 0.5 / 21 / 87 µs at c
= 0.5 / 0.7 / 1.0.

    python dev/sparse_fusion/spmv_cost.py OUT.json poisson3d27:64,poisson3d:100 [float64,float32]
    python dev/sparse_fusion/spmv_cost.py OUT.json poisson3d27:64 float64 widths   (width_runners)
    python dev/sparse_fusion/spmv_cost.py model poisson3d27:64[:R[:h]],...    (R rows a block: 4, h: 0.556)
"""
import sys
import warnings

import numpy as np
import scipy.sparse as sp
import torch
from triton.testing import do_bench

from ab_commit import run_header, save_row      # the probes' output header and row writer
from tiers import fusion_schedules as fs
from tiers import sparse_dags as dags
from tiers.bench import sparse_fusion as bench
from tiers.kernels.sparse_fusion_executors import records
from tiers.kernels.sparse_fusion_executors.tickets import ticket_cut
from tiers.sparse_matrices import tril_csr, triu_csr
from tiers.t3_triton_fused import sparse_fusion as sf

SHARES = (0, 32, 96)
CHUNK_16 = 16
warnings.filterwarnings("ignore", message="Sparse")


def _prepared(pair, mats, dt, schedule, share=None, chunk=None, own=None):
    """t3's dataflow runner of `pair`, prepared with SPMV_SHARE, record_chunk and STREAM_CHUNKS
    patched around `prepare` (all read there: the plan and the kernel's shape are fixed by it)."""
    keep = sf.SPMV_SHARE, records.record_chunk, sf.record_chunk, sf.STREAM_CHUNKS
    if share is not None:
        sf.SPMV_SHARE = {pair: share}
    if chunk is not None:
        records.record_chunk = sf.record_chunk = lambda tables: chunk
    if own is not None:
        sf.STREAM_CHUNKS = own
    try:
        return sf.prepare(pair, *mats, like=dt, schedule=schedule, executor="dataflow"), mats, pair
    finally:
        sf.SPMV_SHARE, records.record_chunk, sf.record_chunk, sf.STREAM_CHUNKS = keep


def width_runners(A, dt):
    """`widths`: both pairs with an SpMV, each stream's records as wide as its own rows ("own",
    STREAM_CHUNKS) or every record as wide as the widest row ("one"), where the rule keeps the
    streams together (float32) also apart ("own apart"), and sptrsv_sptrsv on its own records,
    halved ("LU/2")."""
    L, U = tril_csr(A), triu_csr(A)
    out = {}
    for pair, mats in (("sptrsv_spmv", (L, A)), ("spmv_sptrsv", (A, L))):
        s = fs.inspect(pair, *mats, kind="sparse_fusion")
        for own in (True, False):
            out[f"{pair} {'own' if own else 'one'}"] = _prepared(pair, mats, dt, s, own=own)
        if out[f"{pair} own"][0].spmv_share == 0:        # run together by the package (no pipeline): apart too
            keep = sf.spmv_share
            sf.spmv_share = lambda pair, early: sf.SPMV_SHARE.get(pair, 0)
            try:
                out[f"{pair} own apart"] = _prepared(pair, mats, dt, s, own=True)
            finally:
                sf.spmv_share = keep
    out["LU/2"] = _prepared("sptrsv_sptrsv", (L, U), dt, fs.inspect("sptrsv_sptrsv", L, U, kind="sparse_fusion"))
    return out


def runners(A, dt):
    """label -> (prepared runner, operand matrices, pair). tril and diag run records as wide as
    A's (their own rows would give narrower ones, a smaller kernel: not what is asked here)."""
    L = tril_csr(A)
    s = fs.inspect("sptrsv_spmv", L, A, kind="sparse_fusion")
    out = {"A": _prepared("sptrsv_spmv", (L, A), dt, s, own=False)}
    chunk = out["A"][0].record_shape["CHUNK"]
    for share in SHARES:
        r = _prepared("sptrsv_spmv", (L, A), dt, s, share=share, own=False)
        if r[0].spmv_share != out["A"][0].spmv_share:    # spmv_share refuses it without the pipeline
            out[f"A share:{share}"] = r
    if chunk > CHUNK_16:
        out[f"A chunk:{CHUNK_16}"] = _prepared("sptrsv_spmv", (L, A), dt, s, chunk=CHUNK_16)
    for label, M in (("tril", L), ("diag", sp.diags(A.diagonal()).tocsr())):
        out[label] = _prepared("sptrsv_spmv", (L, M), dt, fs.inspect("sptrsv_spmv", L, M, kind="sparse_fusion"),
                               chunk=chunk, own=False)
    U = triu_csr(A)
    out["LU/2"] = _prepared("sptrsv_sptrsv", (L, U), dt, fs.inspect("sptrsv_sptrsv", L, U, kind="sparse_fusion"),
                            chunk=chunk)
    return out


def stream_model(A, h=0.556, programs=(132, 264, 396, 528), block_us=(0.3, 0.5, 0.7, 1.0), R=4):
    """{(P, c): µs the SpMV's stream of sptrsv_spmv(tril(A), A) ends after the solve} (`model`)."""
    L = tril_csr(A)
    s = fs.inspect("sptrsv_spmv", L, A, kind="sparse_fusion")
    n = A.shape[0]
    level = dags.wavefront_levels(dags.kernel_dag("sptrsv_lower", L))
    ready = np.maximum.reduceat(level[A.indices], A.indptr[:-1]) + 1     # SpMV row i: every x_j it reads
    blk_ptr, seq = ticket_cut(s, (L, A), R, sf.TICKET_ORDER["dataflow"], ties="ids", apart=True)
    first = blk_ptr[:-1][seq[blk_ptr[:-1]] >= n]
    blocks = np.maximum.reduceat(ready[seq[first[0]:] - n], first - first[0]) * h
    end = (int(level.max()) + 1) * h
    tails = {}
    for P in programs:
        for c in block_us:
            free = np.zeros(P)
            for k, t in enumerate(blocks):
                free[k % P] = max(free[k % P], t) + c
            tails[P, c] = float(free.max() - end)
    return end, tails


def main():
    if sys.argv[1] == "model":
        for case in sys.argv[2].split(","):
            name, size, R, h = (case.split(":") + ["4", "0.556"])[:4]
            end, tails = stream_model(bench.make_matrix(name, int(size)), float(h), R=int(R))
            print(f"{case}: the solve ends at {end:.1f} µs; the SpMV's stream after it, µs:")
            for (P, c), tail in tails.items():
                print(f"  {P} programs, {c} µs a block: {tail:.1f}")
        return
    out, cases = sys.argv[1], sys.argv[2].split(",")
    dtypes = sys.argv[3].split(",") if len(sys.argv) > 3 else ["float64"]
    widths = len(sys.argv) > 4 and sys.argv[4] == "widths"
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    res = run_header(dev)
    for case in cases:
        name, size = case.split(":")
        A = bench.make_matrix(name, int(size))
        b64 = torch.rand(A.shape[0], generator=torch.Generator().manual_seed(3), dtype=torch.float64) + 0.5
        for dtype in dtypes:
            b = b64.to(dev, getattr(torch, dtype))
            row = {"case": case, "dtype": dtype, "ok": {}, "err": {}, "rounds": {}, "share": {}, "chunk": {}}
            runs = (width_runners if widths else runners)(A, b)
            for label, (r, mats, pair) in runs.items():
                ok, err, msg = bench.check(r(b), bench.reference(pair, mats, b64.numpy()), dtype)
                row["ok"][label], row["err"][label], row["share"][label] = bool(ok), float(err), r.spmv_share
                row["chunk"][label] = [r.record_shape["CHUNK"], r.record_shape["TAIL"], r.programs_per_sm, r.resident,
                                      r.plan[1].get("chunks")]
                if not ok:
                    print("WRONG", case, dtype, label, msg, flush=True)
            Acsr = torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)),
                                           torch.from_numpy(A.indices.astype(np.int64)),
                                           torch.from_numpy(A.data), size=A.shape).to(dev, b.dtype)
            timed = {k: v[0] for k, v in runs.items() if row["ok"][k]}
            timed["spmv"] = lambda: Acsr @ b
            labels = list(timed)
            if dev.type == "cuda":
                for rd in range(5):
                    k = rd % len(labels)
                    for label in labels[k:] + labels[:k]:
                        f = timed[label]
                        ms = do_bench(f if label == "spmv" else (lambda f=f: f(b)), warmup=25, rep=250,
                                      return_mode="median")
                        row["rounds"].setdefault(label, []).append(round(ms * (0.5 if label == "LU/2" else 1), 4))
            row["ms"] = {label: float(np.median(x)) for label, x in row["rounds"].items()}
            del runs, timed
            save_row(res, row, out)


if __name__ == "__main__":
    main()
