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
Every output is checked against SciPy in float64 first; then rounds of do_bench medians, the order
rotated each round.

    python dev/sparse_fusion/spmv_cost.py OUT.json poisson3d27:64,poisson3d:100 [float64,float32]
"""
import json
import sys
import time
import warnings

import numpy as np
import scipy.sparse as sp
import torch
import triton
from triton.testing import do_bench

from tiers import fusion_schedules as fs
from tiers.bench import sparse_fusion as bench
from tiers.kernels.sparse_fusion_executors import records
from tiers.sparse_matrices import tril_csr, triu_csr
from tiers.t3_triton_fused import sparse_fusion as sf

SHARES = (0, 32, 96)
CHUNK_16 = 16
warnings.filterwarnings("ignore", message="Sparse")


def _prepared(pair, mats, dt, schedule, share=None, chunk=None):
    """t3's dataflow runner of `pair`, prepared with SPMV_SHARE and record_chunk patched around
    `prepare` (both read there: the plan and the kernel's shape are fixed by it)."""
    keep = sf.SPMV_SHARE, records.record_chunk, sf.record_chunk
    if share is not None:
        sf.SPMV_SHARE = {pair: share}
    if chunk is not None:
        records.record_chunk = sf.record_chunk = lambda tables: chunk
    try:
        return sf.prepare(pair, *mats, like=dt, schedule=schedule, executor="dataflow"), mats, pair
    finally:
        sf.SPMV_SHARE, records.record_chunk, sf.record_chunk = keep


def runners(A, dt):
    """label -> (prepared runner, operand matrices, pair). tril and diag run records as wide as
    A's (their own rows would give narrower ones, a smaller kernel: not what is asked here)."""
    L = tril_csr(A)
    s = fs.inspect("sptrsv_spmv", L, A, kind="sparse_fusion")
    out = {"A": _prepared("sptrsv_spmv", (L, A), dt, s)}
    chunk = out["A"][0].record_shape["CHUNK"]
    for share in SHARES:
        out[f"A share:{share}"] = _prepared("sptrsv_spmv", (L, A), dt, s, share=share)
    if chunk > CHUNK_16:
        out[f"A chunk:{CHUNK_16}"] = _prepared("sptrsv_spmv", (L, A), dt, s, chunk=CHUNK_16)
    for label, M in (("tril", L), ("diag", sp.diags(A.diagonal()).tocsr())):
        out[label] = _prepared("sptrsv_spmv", (L, M), dt, fs.inspect("sptrsv_spmv", L, M, kind="sparse_fusion"),
                               chunk=chunk)
    U = triu_csr(A)
    out["LU/2"] = _prepared("sptrsv_sptrsv", (L, U), dt, fs.inspect("sptrsv_sptrsv", L, U, kind="sparse_fusion"),
                            chunk=chunk)
    return out


def main():
    out, cases = sys.argv[1], sys.argv[2].split(",")
    dtypes = sys.argv[3].split(",") if len(sys.argv) > 3 else ["float64"]
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    res = {"device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu", "torch": torch.__version__,
           "triton": triton.__version__, "numpy": np.__version__,
           "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "rows": []}
    for case in cases:
        name, size = case.split(":")
        A = bench.make_matrix(name, int(size))
        b64 = torch.rand(A.shape[0], generator=torch.Generator().manual_seed(3), dtype=torch.float64) + 0.5
        for dtype in dtypes:
            b = b64.to(dev, getattr(torch, dtype))
            row = {"case": case, "dtype": dtype, "ok": {}, "err": {}, "rounds": {}, "share": {}, "chunk": {}}
            runs = runners(A, b)
            for label, (r, mats, pair) in runs.items():
                ok, err, msg = bench.check(r(b), bench.reference(pair, mats, b64.numpy()), dtype)
                row["ok"][label], row["err"][label], row["share"][label] = bool(ok), float(err), r.spmv_share
                row["chunk"][label] = [r.record_shape["CHUNK"], r.record_shape["TAIL"], r.programs_per_sm, r.resident]
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
            print(json.dumps({k: row[k] for k in ("case", "dtype", "ok", "ms", "share", "chunk")}), flush=True)
            res["rows"].append(row)
            json.dump(res, open(out, "w"), indent=1)
            del runs
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
