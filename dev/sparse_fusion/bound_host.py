"""Host time of a prepared call's kept launches, their runners stubbed out (CPU, interpreter).

A developer's probe, not package code: t2's and t3's prepared sptrsv_spmv on a small 3D grid,
each kept launch (launch.Bound) given a runner that does nothing, so that a call's time is the
Python around the launches: keyed over every positional argument (as before Bound's `varying`)
or over the per-call ones alone, the others checked to be the first call's objects. Rounds
alternate; µs per call.

    PYTHONPATH=. python dev/sparse_fusion/bound_host.py [grid side, default 12]
"""
import os
import sys
import time

os.environ["TRITON_INTERPRET"] = "1"      # the first call, which keeps the launches, runs here

import torch  # noqa: E402

from tiers import fusion_schedules as fs  # noqa: E402
from tiers.bench import sparse_fusion as bench  # noqa: E402
from tiers.kernels.sparse_fusion_executors import launch  # noqa: E402
from tiers.t2_triton_unfused import sparse_fusion as t2  # noqa: E402
from tiers.t3_triton_fused import sparse_fusion as t3  # noqa: E402


def stub(bounds, run, v, every):
    """Give each Bound a runner that does nothing, keyed over every argument (`every`) or as its
    `varying` says, from the arguments of one call."""
    calls, real = {}, launch.Bound.__call__

    def catch(self, *args):
        calls[id(self)] = args
        return real(self, *args)

    launch.Bound.__call__ = catch
    try:
        run(v)
    finally:
        launch.Bound.__call__ = real
    for b in filter(None, bounds):
        args = calls[id(b)]
        b.own_varying = getattr(b, "own_varying", b.varying)
        b.varying = None if every else b.own_varying
        apart = set(range(len(args))) if b.varying is None else {i % len(args) for i in b.varying}
        b.fixed = tuple((i, a) for i, a in enumerate(args) if i not in apart)
        b.runner, b.rest, b.spec = (lambda *a: None), (), b._key(args)


def main():
    side = int(sys.argv[1]) if len(sys.argv) > 1 else 12
    A = bench.make_matrix("poisson3d", side)
    pair = "sptrsv_spmv"
    ops = bench.operands(pair, A)
    v = torch.randn(A.shape[0], dtype=torch.float64)
    for tier in ("t2", "t3"):
        if tier == "t2":
            run = t2.prepare(pair, *ops, like=v)
            run(v)
            bounds, n = run.kept, 300
        else:
            run = t3.prepare(pair, *ops, like=v, schedule=fs.inspect(pair, *ops, kind="sparse_fusion"),
                             executor="dataflow")
            run(v)
            bounds, n = run.launches, 3000
        res = {"every argument": [], "per-call arguments": []}
        for _ in range(5):
            for every, label in ((True, "every argument"), (False, "per-call arguments")):
                stub(bounds, run, v, every)
                t = time.perf_counter()
                for _ in range(n):
                    run(v)
                res[label].append(round(1e6 * (time.perf_counter() - t) / n, 1))
        print(tier, pair, f"poisson3d:{side}", "kept launches", sum(b is not None for b in bounds),
              "µs per call keyed over", res, flush=True)


if __name__ == "__main__":
    main()
