"""What new values on a prepared pattern cost: t3's Prepared.refresh against preparing again.

A developer's probe, not package code (needs a CUDA GPU to time; on a CPU under TRITON_INTERPRET=1 it
runs the same steps on small matrices, unchecked timings). A preconditioner refactored at every step
of a nonlinear solve keeps its pattern and changes its values. For each case: the runner prepared
(sparse-fusion schedule, the package's executor), its call timed (do_bench median, the replayed graph
for a factor pair); then new values D·A·D on the same pattern handed to `refresh` as a tensor on the
device (host wall time to its return, synchronised, median of 5), the calls after it timed on the
host one by one (with t3.REFRESH_KEEPS_GRAPH on, a factor pair's replaying the graph it kept; then off, as
refresh was before 2026-12-07's second session: the first eager, the second capturing again; then kept
once more) and by do_bench;
`prepare` again on the SciPy matrices with the pattern's tables cached (what a caller did before
refresh) and cuSPARSE's call (the benchmark's anchor, whose call factors from its values anyway) in
the same process. The results after refresh are compared with a runner prepared afresh on the new
values (both t3, the same schedule).

    python dev/sparse_fusion/refresh_cost.py OUT.json powerlaw:1000000:spilu0_sptrsv,poisson3d27:64:spic0_sptrsv
"""
import json
import sys
import time

import numpy as np
import torch

from tiers import fusion_schedules as fs
from tiers import sparse_dags as sd
from tiers import sparse_matrices as sm
from tiers.bench import sparse_fusion as bench
from tiers.t3_triton_fused import sparse_fusion as t3


def _dense_outs(out):
    return [o.values() if o.layout == torch.sparse_csr else o for o in out]


def case(spec, device):
    name, size, pair = spec.split(":")
    A = bench.make_matrix(name, int(size))
    mats = tuple(sd.csr(M) for M in bench.operands(pair, A))
    v = torch.from_numpy(np.random.default_rng(1).standard_normal(A.shape[0])).to(device)
    s = fs.inspect(pair, *mats, kind="sparse_fusion")
    run = t3.prepare(pair, *mats, like=v, schedule=s)
    for _ in range(3):
        run(v)
    row = {"case": spec, "executor": run.executor, "call_ms": bench._device_ms(lambda: run(v), quick=False)[0]}
    new = [sm.rescaled(M, np.random.default_rng(7 + k).uniform(0.5, 2.0, M.shape[0])) for k, M in enumerate(mats)]
    tensors = [torch.from_numpy(M.data).to(device) for M in new]
    default, t3.REFRESH_KEEPS_GRAPH = t3.REFRESH_KEEPS_GRAPH, True
    row["refresh_ms"] = bench._synced_ms(lambda: run.refresh(*tensors), 5)
    row["refresh_scipy_ms"] = bench._synced_ms(lambda: run.refresh(*new), 3)
    row["first_calls_ms"] = [bench._synced_ms(lambda: run(v), 1) for _ in range(3)]
    row["call_after_ms"] = bench._device_ms(lambda: run(v), quick=False)[0]
    for key, keep in (("first_calls_dropping_ms", False), ("first_calls_again_ms", True)):
        t3.REFRESH_KEEPS_GRAPH = keep      # off (graph and template dropped), then on again
        run.refresh(*tensors)
        row[key] = [bench._synced_ms(lambda: run(v), 1) for _ in range(3)]
    t3.REFRESH_KEEPS_GRAPH = default
    got = _dense_outs(run(v))
    row["prepare_again_ms"] = bench._synced_ms(lambda: t3.prepare(pair, *new, like=v, schedule=s), 3)
    fresh = t3.prepare(pair, *new, like=v, schedule=s)
    want = _dense_outs(fresh(v))
    row["max_rel_diff"] = max(float((g - w).norm() / w.norm()) for g, w in zip(got, want))
    if torch.cuda.is_available():
        try:
            bench.warm_anchor("cusparse", pair, "float64")
            call = bench.cupy_call("cusparse", pair, new, v)
            row["cusparse_ms"] = bench._device_ms(call, quick=False)[0]
        except Exception as e:          # recorded, not fatal: the probe is about t3
            row["cusparse_error"] = str(e)[:160]
    print(json.dumps(row), flush=True)
    return row


def main(out, specs):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    env = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu", "torch": torch.__version__,
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    rows = [case(s, device) for s in specs.split(",")]
    with open(out, "w") as f:
        json.dump({"env": env, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:3])
