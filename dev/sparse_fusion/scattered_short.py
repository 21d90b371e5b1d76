"""Persistent programs an SM for the dataflow executor on a pattern of short, scattered rows.

A developer's probe, not package code (needs a CUDA GPU and CuPy for times; on a CPU it only
checks the results). `dataflow_programs` gives a pattern whose rows all fit a record 16
programs an SM, a choice measured on the 2D and 3D grids, whose columns lie near the row. On the
power-law graph t3's sptrsv_spmv(tril(A), diag(A)) took that shape and ran slower (0.214 ms) than
sptrsv_spmv(tril(A), triu(A, 1)), which takes the hubs' 32 and does more work (0.175 ms;
figures/data/eisenstat_h100_2026-12-08.*). So: on rows that are short but scattered, does a
program count other than the rule's win? And records of 8 slots a lane instead of the rule's, as
wide as the longest row (the random graph's rows average 7 entries, its longest 22: 32 slots, and
then 8 programs an SM, LONG_PROGRAMS_PER_SM, measured on the 27-point grid's rows of 14 and 27)?
Cases, each at the rule's count and at 8, 16, 24 and 32 programs an SM, and with 8-slot records
where the rule's are wider, beside cuSPARSE, outputs checked against SciPy first:
  - "random": the Laplacian + I of a random graph of 3n edges (ends drawn uniformly; no hubs,
    rows of about 7 entries, columns anywhere), its three vector pairs;
  - "powerlaw diag": the power-law graph's sptrsv_spmv(tril(A), diag(A)).

    python dev/sparse_fusion/scattered_short.py OUT.json random:1000000,powerlaw:1000000 [float64]
"""
import sys
import warnings

import numpy as np
import scipy.sparse as sp
import torch

from ab_commit import rotated_rounds, run_header, save_row      # the probes' shared parts
from tiers import fusion_schedules as fs
from tiers.bench import sparse_fusion as bench
from tiers.kernels.sparse_fusion_executors import records
from tiers.sparse_matrices import tril_csr, triu_csr
from tiers.t3_triton_fused import sparse_fusion as sf

warnings.filterwarnings("ignore", message="Sparse")
COUNTS = (8, 16, 24, 32)
CHUNK_8 = 8


def random_laplacian(n, edges_per_row=3, seed=0):
    """Laplacian + I of a graph of edges_per_row·n edges with uniformly drawn ends (repeats and
    loops dropped): short rows whose columns lie anywhere."""
    rng = np.random.default_rng(seed)
    i, j = rng.integers(0, n, (2, edges_per_row * n))
    keep = i != j
    W = sp.coo_matrix((np.ones(keep.sum()), (i[keep], j[keep])), shape=(n, n))
    W = ((W + W.T) > 0).astype(np.float64).tocsr()
    return (sp.diags(np.asarray(W.sum(axis=1)).ravel() + 1.0) - W).tocsr()


def _narrow(pair, mats, b, schedule, programs):
    """t3's dataflow runner with records of CHUNK_8 slots a lane (longer rows read the rest through
    tail_sum, as the power-law graph's do), record_chunk patched around `prepare` as spmv_cost.py
    patches it; programs None: what dataflow_programs gives that shape."""
    keep = records.record_chunk, sf.record_chunk
    records.record_chunk = sf.record_chunk = lambda tables: CHUNK_8
    try:
        return sf.prepare(pair, *mats, like=b, executor="dataflow", schedule=schedule, programs_per_sm=programs)
    finally:
        records.record_chunk, sf.record_chunk = keep


def cases(spec):
    """(label, pair, matrices, SciPy's reference on b) of one case spec."""
    name, size = spec.split(":")
    if name == "random":
        A = random_laplacian(int(size))
        L, U = tril_csr(A), triu_csr(A)
        return [("random", p, m) for p, m in (("sptrsv_spmv", (L, A)), ("spmv_sptrsv", (A, L)),
                                                ("sptrsv_sptrsv", (L, U)))]
    A = bench.make_matrix(name, int(size))
    return [(f"{name} diag", "sptrsv_spmv", (tril_csr(A), sp.diags(A.diagonal()).tocsr()))]


def main():
    out, specs = sys.argv[1], sys.argv[2].split(",")
    dtypes = sys.argv[3].split(",") if len(sys.argv) > 3 else ["float64"]
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    res = run_header(dev, counts=COUNTS)
    for spec in specs:
        for label, pair, mats in cases(spec):
            n = mats[0].shape[0]
            b64 = torch.rand(n, generator=torch.Generator().manual_seed(3), dtype=torch.float64) + 0.5
            ref = bench.reference(pair, mats, b64.numpy())
            schedule = fs.inspect(pair, *mats, kind="sparse_fusion")
            for dtype in dtypes:
                b = b64.to(dev, getattr(torch, dtype))
                rule = sf.prepare(pair, *mats, like=b, executor="dataflow", schedule=schedule)
                row = {"case": label, "spec": spec, "pair": pair, "dtype": dtype, "n": n,
                       "nnz": [int(m.nnz) for m in mats], "rule_programs": rule.programs_per_sm,
                       "record_shape": rule.record_shape, "spmv_share": rule.spmv_share, "ok": {}, "err": {},
                       "rounds": {}}
                calls = {"rule": lambda r=rule: r(b)}
                for c in COUNTS:
                    r = sf.prepare(pair, *mats, like=b, executor="dataflow", schedule=schedule, programs_per_sm=c)
                    calls[f"{c} an SM"] = lambda r=r: r(b)
                if rule.record_shape["CHUNK"] > CHUNK_8:
                    for c in (None, 32):
                        r = _narrow(pair, mats, b, schedule, c)
                        calls[f"chunk 8, {c or r.programs_per_sm} an SM"] = lambda r=r: r(b)
                if dev.type == "cuda":
                    try:
                        calls["cuSPARSE"] = bench.cupy_call("cusparse", pair, mats, b)
                    except Exception as e:
                        row["cusparse_error"] = f"{type(e).__name__}: {e}"
                for k, f in calls.items():
                    outs = [torch.as_tensor(o, device=dev) for o in f()]
                    ok, err, msg = bench.check(outs, ref, dtype)
                    row["ok"][k], row["err"][k] = bool(ok), float(err)
                    if not ok:
                        print("WRONG", label, pair, dtype, k, msg, flush=True)
                labels = [k for k in calls if row["ok"][k]]
                if dev.type == "cuda":
                    row["rounds"], row["ms"] = rotated_rounds(calls, labels)
                del calls, rule
                save_row(res, row, out)


if __name__ == "__main__":
    main()
