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
  - "LU/2": half of sptrsv_sptrsv(L, triu(A)), the two solves' chains one after the other;
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
from tiers.sparse_matrices import tril_csr, triu_csr
from tiers.t3_triton_fused import sparse_fusion as sf

SHARES = (0, 32, 96)
warnings.filterwarnings("ignore", message="Sparse")


def runners(A, dt, dev):
    """label -> (prepared runner, operand matrices, pair); the runners share the pair's schedules."""
    L = tril_csr(A)
    spmv_of = {"A": A, "tril": L, "diag": sp.diags(A.diagonal()).tocsr()}
    out = {}
    for label, M in spmv_of.items():
        s = fs.inspect("sptrsv_spmv", L, M, kind="sparse_fusion")
        out[label] = (sf.prepare("sptrsv_spmv", L, M, like=dt, schedule=s, executor="dataflow"), (L, M),
                      "sptrsv_spmv")
        if label == "A":
            for share in SHARES:
                keep = sf.SPMV_SHARE
                sf.SPMV_SHARE = {"sptrsv_spmv": share}
                try:
                    out[f"A share:{share}"] = (sf.prepare("sptrsv_spmv", L, M, like=dt, schedule=s,
                                                          executor="dataflow"), (L, M), "sptrsv_spmv")
                finally:
                    sf.SPMV_SHARE = keep
    U = triu_csr(A)
    s = fs.inspect("sptrsv_sptrsv", L, U, kind="sparse_fusion")
    out["LU/2"] = (sf.prepare("sptrsv_sptrsv", L, U, like=dt, schedule=s, executor="dataflow"), (L, U),
                   "sptrsv_sptrsv")
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
            row = {"case": case, "dtype": dtype, "ok": {}, "err": {}, "rounds": {}, "share": {}}
            runs = runners(A, b, dev)
            for label, (r, mats, pair) in runs.items():
                ok, err, msg = bench.check(r(b), bench.reference(pair, mats, b64.numpy()), dtype)
                row["ok"][label], row["err"][label], row["share"][label] = bool(ok), float(err), r.spmv_share
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
            print(json.dumps({k: row[k] for k in ("case", "dtype", "ok", "ms")}), flush=True)
            res["rows"].append(row)
            json.dump(res, open(out, "w"), indent=1)
            del runs
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
