"""What the fused code does once, timed and hashed per case: the inspector and t3's `prepare`
(nothing cached but what the inspector left), for an A/B of a host-side change, and with
`--profile` where that one-off time goes on the machine that runs it. Run it once per tree and
round, each in a fresh process (fresh pages are part of what a first `prepare` pays), rounds of
the two trees interleaved:

    PYTHONPATH=<tree> python3 dev/sparse_fusion/once_cost.py OUT.json CASES [--kinds K,..] [--profile]

CASES: comma list of matrix:size:pair (bench.make_matrix's names: poisson2d:1000, poisson3d:100,
poisson3d27:64, powerlaw:1000000). The vector is a CUDA float64 one where a GPU is there, else a
CPU one (then with TRITON_INTERPRET=1). Prints one line per case as it goes, so a run cut short
still says what it reached, and writes {case: [hash, inspector s, prepare s]} at the end (keys
`case/kind` for kinds other than sparse_fusion; with `--profile` the warm medians follow; `prepare`
runs the dataflow executor). The hash covers the schedule, the row tables and every device table
but the blocks' waits (which the factor pairs' dataflow plan leaves as placeholders since
cfee61f): equal hashes, the same plan. (figures/data/once_ab_h200_2026-12-04.txt)

`--profile` times each step's first (cold) call, then the median of three more, then one more
under cProfile, whose top entries by own and by cumulative time go to OUT.txt; the first call is
still the one hashed and reported. On a GPU host it profiles that host's CPU, which the CLI's
`payoff_runs` counts (figures/data/setup_profile_h100_2026-12-07*, written by the script this
option replaced)."""

import argparse
import cProfile
import hashlib
import io
import json
import pstats
import statistics
import time

import numpy as np
import torch

from tiers import fusion_schedules as fs
from tiers.bench import sparse_fusion as bench
from tiers.kernels.sparse_rows import forget_patterns
from tiers.t3_triton_fused import sparse_fusion as t3


def _digest(h, key, x):
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().contiguous().numpy()
    if isinstance(x, np.ndarray):
        h.update(str(key).encode())
        h.update(str(x.dtype).encode())
        h.update(np.ascontiguousarray(x).tobytes())


def _plan_hash(schedule, run):
    h = hashlib.sha1()
    for x in (schedule.level_ptr, schedule.part_ptr, schedule.order, schedule.cost):
        _digest(h, "", x)
    for k, x in sorted(vars(run.tables).items()):
        _digest(h, k, x)
    for k, x in sorted(run.dev.items()):
        _digest(h, k, x)
    plan = run.plan[1] if isinstance(run.plan, tuple) and isinstance(run.plan[1], dict) else {}
    for k, x in sorted(plan.items()):
        if k not in ("dep_ptr", "dep_blk"):
            _digest(h, k, x)
    return h.hexdigest()[:12]


def _timed(fn, profiles, title):
    """(first call's result, its seconds, extra timings); with profiles a list, three more calls'
    median and one profiled call, whose reports are appended to it."""
    start = time.perf_counter()
    result = fn()
    first = time.perf_counter() - start
    if profiles is None:
        return result, first, {}
    more = []
    for _ in range(3):
        start = time.perf_counter()
        fn()
        more.append(time.perf_counter() - start)
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    for key in ("tottime", "cumulative"):
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats(key).print_stats(25)
        profiles.append(f"==== {title} by {key}\n{text.getvalue()}")
    return result, first, {"median_s": round(statistics.median(more), 3)}


def main(out_path, cases, kinds="sparse_fusion", profile=False):
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    out, mats, profiles = {}, {}, [] if profile else None
    for case in cases.split(","):
        name, size, pair = case.split(":")
        A = mats.setdefault((name, size), bench.make_matrix(name, int(size)))
        ops = bench.operands(pair, A)
        v = torch.randn(A.shape[0], dtype=torch.float64, device=dev)
        for kind in kinds.split(","):
            key = case if kind == "sparse_fusion" else f"{case}/{kind}"
            schedule, inspector, more_i = _timed(lambda: fs.inspect(pair, *ops, kind=kind), profiles,
                                                 f"{key} inspect")

            def prepare():
                forget_patterns()
                schedule.forget()
                run = t3.prepare(pair, *ops, like=v, schedule=schedule, executor="dataflow")
                if dev == "cuda":
                    torch.cuda.synchronize()
                return run

            run, setup, more_p = _timed(prepare, profiles, f"{key} prepare")
            out[key] = [_plan_hash(schedule, run), round(inspector, 3), round(setup, 3)]
            if profile:
                out[key] += [more_i["median_s"], more_p["median_s"]]
            print(key, *out[key], flush=True)
    with open(out_path, "w") as f:
        json.dump(out, f, indent=1)
    if profile:
        with open(out_path.rsplit(".", 1)[0] + ".txt", "w") as f:
            f.write("\n".join(profiles))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("cases")
    ap.add_argument("--kinds", default="sparse_fusion", help="schedule kinds, comma list")
    ap.add_argument("--profile", action="store_true", help="warm medians and cProfile reports (OUT.txt)")
    args = ap.parse_args()
    main(args.out, args.cases, args.kinds, args.profile)
