"""What Eisenstat's trick would give sptrsv_spmv on the benchmark's matrices, where L = tril(A).

A developer's probe, not package code (needs a CUDA GPU and CuPy for times; on a CPU it only
checks the results). With L = tril(A) and x = L⁻¹b, A·x = L·x + triu(A, 1)·x = b + triu(A, 1)·x:
the SpMV need not read A's lower triangle again, whose products the solve has just summed
(Eisenstat, "Efficient implementation of a class of preconditioned conjugate gradient methods",
1981, uses the same identity for SSOR). On the power-law graph, where t3's pair is bound by L2
throughput on its gathers, that is 4 of the pair's 10 gathers a row. The package does not do it:
this probe asks whether it would reach 4× cuSPARSE before anyone writes it into a kernel.
Timed in one process, outputs checked against SciPy first (y against A·x, not against b + ...):
  - "t3 A": the package's t3 sptrsv_spmv(L, A, b), dataflow executor, sparse-fusion schedule;
  - "t3 upper": t3's sptrsv_spmv(L, triu(A, 1), b), whose y' = triu(A, 1)·x: the time a fused
    kernel adding b_i in the SpMV's rows would take, less one coalesced read (a bound, not a kernel);
  - "t3 upper + b": the same with y = y' + b after it (a second launch, as a user could do today);
  - "cuSPARSE A", "cuSPARSE upper + b": the anchor (SpSV analysis once, then SpSV + SpMV), and
    the anchor given the same trick, so that the ratio the trick buys is told apart from fusion's;
  - "t3 diag", "cuSPARSE diag": y = diag(A)·x, the SpMV's work all but gone: about the solve
    alone, a floor that no way of doing the SpMV goes under.

    python dev/sparse_fusion/eisenstat.py OUT.json powerlaw:1000000,poisson3d27:64 [float64,float32]
"""
import sys
import warnings

import numpy as np
import scipy.sparse as sp
import torch

from ab_commit import rotated_rounds, run_header, save_row      # the probes' shared parts
from tiers import fusion_schedules as fs
from tiers.bench import sparse_fusion as bench
from tiers.sparse_matrices import tril_csr, triu_csr
from tiers.t3_triton_fused import sparse_fusion as sf

warnings.filterwarnings("ignore", message="Sparse")


def t3_runners(L, A, U1, b):
    """label -> call returning (x, y), t3's dataflow runners with the sparse-fusion schedule."""
    full = sf.prepare("sptrsv_spmv", L, A, like=b, executor="dataflow",
                      schedule=fs.inspect("sptrsv_spmv", L, A, kind="sparse_fusion"))
    upper = sf.prepare("sptrsv_spmv", L, U1, like=b, executor="dataflow",
                       schedule=fs.inspect("sptrsv_spmv", L, U1, kind="sparse_fusion"))

    D = sp.diags(A.diagonal()).tocsr()
    alone = sf.prepare("sptrsv_spmv", L, D, like=b, executor="dataflow",
                       schedule=fs.inspect("sptrsv_spmv", L, D, kind="sparse_fusion"))

    def upper_b(v):
        x, y = upper(v)
        return x, y + v
    return {"t3 A": full, "t3 upper": upper, "t3 upper + b": upper_b, "t3 diag": alone}


def cusparse_runners(L, A, U1, b):
    """label -> call of no argument on `b`'s memory (the anchor's calls read it in place)."""
    import cupy

    full = bench.cupy_call("cusparse", "sptrsv_spmv", (L, A), b)
    upper = bench.cupy_call("cusparse", "sptrsv_spmv", (L, U1), b)
    solve = bench.cupy_call("cusparse", "sptrsv_spmv", (L, sp.diags(A.diagonal()).tocsr()), b)
    v = cupy.asarray(b)

    def upper_b():
        x, y = upper()
        return x, y + v
    return {"cuSPARSE A": full, "cuSPARSE upper + b": upper_b, "cuSPARSE diag": solve}


def main():
    out, cases = sys.argv[1], sys.argv[2].split(",")
    dtypes = sys.argv[3].split(",") if len(sys.argv) > 3 else ["float64"]
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    res = run_header(dev)
    for case in cases:
        name, size = case.split(":")
        A = bench.make_matrix(name, int(size))
        L, U1 = tril_csr(A), triu_csr(A, 1)
        b64 = torch.rand(A.shape[0], generator=torch.Generator().manual_seed(3), dtype=torch.float64) + 0.5
        ref = bench.reference("sptrsv_spmv", (L, A), b64.numpy())
        for dtype in dtypes:
            b = b64.to(dev, getattr(torch, dtype))
            row = {"case": case, "dtype": dtype, "n": int(A.shape[0]), "nnz_A": int(A.nnz), "nnz_L": int(L.nnz),
                   "nnz_upper": int(U1.nnz), "ok": {}, "err": {}, "rounds": {}}
            t3 = t3_runners(L, A, U1, b)
            calls = {k: (lambda f=f: f(b)) for k, f in t3.items()}
            if dev.type == "cuda":
                try:
                    calls.update(cusparse_runners(L, A, U1, b))
                except Exception as e:                      # t3's rows are still worth timing
                    row["cusparse_error"] = f"{type(e).__name__}: {e}"
                    print("cuSPARSE:", row["cusparse_error"], flush=True)
            for label, f in calls.items():
                outs = [torch.as_tensor(o, device=dev) for o in f()]   # CuPy arrays through the array interface
                if label == "t3 upper":
                    outs[1] = outs[1] + b                             # checked as y, timed without the add
                want = ref if "diag" not in label else [ref[0], A.diagonal() * ref[0]]
                ok, err, msg = bench.check(outs, want, dtype)
                row["ok"][label], row["err"][label] = bool(ok), float(err)
                if not ok:
                    print("WRONG", case, dtype, label, msg, flush=True)
            labels = [k for k in calls if row["ok"][k]]
            if dev.type == "cuda":
                row["rounds"], row["ms"] = rotated_rounds(calls, labels)
                cus = row["ms"].get("cuSPARSE A", np.nan)
                row["over_cusparse"] = {label: cus / ms for label, ms in row["ms"].items()}
            del t3, calls
            save_row(res, row, out)


if __name__ == "__main__":
    main()
