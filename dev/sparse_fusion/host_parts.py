"""Where a vector pair's call spends its host time (the slow rounds of 2026-12-04 had the call's
host time near its device time: figures/data/slow_rounds_next_*).

A developer's probe, not package code (needs a CUDA GPU). For one prepared t3 call it writes:
  - the call's host time (tiers.bench.sparse_fusion._enqueue_ms, 50 calls back to back, median of
    7) and its device time (do_bench median);
  - each Triton launch of the call replayed alone, its host time through the JIT (kernel[grid](…):
    binding, specialisation key, cache lookup) and through the compiled kernel's runner
    (CompiledKernel[grid](…), the same arguments, no binding);
  - the call with every launch replaced by nothing: the host time of the rest (allocations, views,
    checks);
  - cProfile's top entries over 200 calls (by own time).

    PYTHONPATH=. python3 dev/sparse_fusion/host_parts.py OUT.json [--case poisson3d:100:sptrsv_spmv]
        [--dtype float64]

Run on 2026-12-04 at b597be6 (H200, figures/data/host_parts_*), before a prepared call kept its
launches (t3's BOUND, launch.Bound): since then a call's later launches go through the compiled
kernels' runners, not JITFunction.run, so the probe's patches of JITFunction.run no longer see
them (its launch replays and the call's host time still hold).
"""
import argparse
import cProfile
import inspect
import io
import json
import pstats
import statistics

import torch
from triton.runtime.jit import JITFunction
from triton.testing import do_bench

from tiers import fusion_schedules as fs
from tiers.bench import sparse_fusion as bench
from tiers.t3_triton_fused import sparse_fusion as t3


def host_ms(fn, calls=50, rounds=7):
    """The median of `rounds` of the bench's _enqueue_ms (`calls` calls back to back)."""
    return statistics.median(bench._enqueue_ms(fn, calls) for _ in range(rounds))


def recorded_launches(call):
    """Every JIT launch one call makes: (kernel, grid, args, kwargs)."""
    seen = []
    plain = JITFunction.run

    def run(self, *args, grid, warmup, **kwargs):
        if not warmup:
            seen.append((self, grid, args, dict(kwargs)))
        return plain(self, *args, grid=grid, warmup=warmup, **kwargs)

    JITFunction.run = run
    try:
        call()
    finally:
        JITFunction.run = plain
    torch.cuda.synchronize()
    return seen


def runner(kernel, grid, args, kwargs):
    """The compiled kernel's launcher with the arguments bound once (constexprs included, as
    JITFunction.run passes them)."""
    compiled = kernel.run(*args, grid=grid, warmup=False, **kwargs)
    names = set(kernel.arg_names)
    bound = inspect.signature(kernel.fn).bind(*args, **{k: v for k, v in kwargs.items() if k in names})
    bound.apply_defaults()
    values = list(bound.arguments.values())
    launch = compiled[tuple(grid) + (1,) * (3 - len(grid))]
    return lambda: launch(*values)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--case", default="poisson3d:100:sptrsv_spmv")
    ap.add_argument("--dtype", default="float64")
    args = ap.parse_args()
    name, size, pair = args.case.split(":")
    dtype = getattr(torch, args.dtype)
    A = bench.make_matrix(name, int(size))
    ops = bench.operands(pair, A)
    schedule = fs.inspect(pair, *ops, kind="sparse_fusion")
    v = torch.randn(A.shape[0], dtype=dtype, device="cuda")
    run = t3.prepare(pair, *ops, like=v, schedule=schedule, executor="dataflow")
    call = lambda: run(v)
    want = [o.clone() for o in call()]
    out = {"case": args.case, "dtype": args.dtype, "device": torch.cuda.get_device_name(),
           "torch": torch.__version__}
    import triton
    out["triton"] = triton.__version__
    out["call_host_ms"] = host_ms(call)
    out["call_device_ms"] = do_bench(call, return_mode="median")
    out["call_host_ms_again"] = host_ms(call)

    launches = recorded_launches(call)
    parts = []
    for kernel, grid, a, kw in launches:
        jit = lambda kernel=kernel, grid=grid, a=a, kw=kw: kernel[grid](*a, **kw)
        fast = runner(kernel, grid, a, kw)
        parts.append({"kernel": kernel.__name__, "grid": list(grid), "args": len(a) + len(kw),
                      "jit_host_ms": host_ms(jit, calls=50), "runner_host_ms": host_ms(fast, calls=50)})
        print(parts[-1], flush=True)
    out["launches"] = parts

    plain = JITFunction.run
    JITFunction.run = lambda self, *a, grid, warmup, **kw: None
    try:
        out["call_without_launches_host_ms"] = host_ms(call)
    finally:
        JITFunction.run = plain

    got = call()
    for a, b in zip(got, want):
        assert torch.equal(a, b), "the call's output changed"

    prof = cProfile.Profile()
    torch.cuda.synchronize()
    prof.enable()
    for _ in range(200):
        call()
    prof.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(30)
    out["cprofile_tottime"] = text.getvalue()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(40)
    out["cprofile_cumulative"] = text.getvalue()
    print(json.dumps({k: v for k, v in out.items() if not k.startswith("cprofile")}, indent=1))
    print(out["cprofile_tottime"][:6000])
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
