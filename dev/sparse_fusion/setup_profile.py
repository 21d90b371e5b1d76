"""Where the one-off host time goes: the inspector and t3's `prepare`, profiled on the machine that
runs the benchmark (the CLI's `inspector_ms` and `setup_ms`, which its `payoff_runs` counts).

A developer's probe, not package code (runs on any machine; on a GPU machine `prepare` also uploads
and compiles). For each case: `inspect` per schedule kind, wall time of a first (cold) call and the
median of three more, then one more under cProfile; t3's `prepare` likewise, the pattern's tables
forgotten before each call as the CLI forgets them. The profiles' top entries by own time and by
cumulative time go to OUT.txt, the times to OUT.json. Written on 2026-12-07 after the inspectors'
sort and `ufunc.at` reductions came out (figures/data/inspector_merge_cpu_2026-12-07.txt): 30 %
less time on the development machine's 2-core CPU, none in the CLI on the GPU machine's.

    PYTHONPATH=. python3 dev/sparse_fusion/setup_profile.py OUT powerlaw:1000000:spilu0_sptrsv \\
        [--kinds sparse_fusion,wavefront]
"""
import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import time

import torch

from tiers import fusion_schedules as fs
from tiers import sparse_dags as sd
from tiers.bench import sparse_fusion as bench
from tiers.kernels.sparse_rows import forget_patterns
from tiers.t3_triton_fused import sparse_fusion as t3


def _timed(fn, profile_into, title):
    first = time.perf_counter()
    fn()
    first = time.perf_counter() - first
    more = []
    for _ in range(3):
        t = time.perf_counter()
        fn()
        more.append(time.perf_counter() - t)
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    for key in ("tottime", "cumulative"):
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats(key).print_stats(25)
        profile_into.append(f"==== {title} by {key}\n{out.getvalue()}")
    return {"first_s": first, "median_s": statistics.median(more)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("cases")
    ap.add_argument("--kinds", default="sparse_fusion,wavefront")
    args = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    rows, text = [], []
    for spec in args.cases.split(","):
        name, size, pair = spec.split(":")
        A = bench.make_matrix(name, int(size))
        mats = tuple(sd.csr(M) for M in bench.operands(pair, A))
        v = torch.ones(A.shape[0], dtype=torch.float64, device=device)
        for kind in args.kinds.split(","):
            row = {"case": spec, "kind": kind, "step": "inspect"}
            row.update(_timed(lambda: fs.inspect(pair, *mats, kind=kind), text, f"{spec} inspect {kind}"))
            rows.append(row)
            print(json.dumps(row), flush=True)
            s = fs.inspect(pair, *mats, kind=kind)

            def prepare():
                forget_patterns()
                s.forget()
                t3.prepare(pair, *mats, like=v, schedule=s)
                if device == "cuda":
                    torch.cuda.synchronize()

            row = {"case": spec, "kind": kind, "step": "prepare"}
            row.update(_timed(prepare, text, f"{spec} prepare {kind}"))
            rows.append(row)
            print(json.dumps(row), flush=True)
    import numpy
    env = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu", "torch": torch.__version__,
           "numpy": numpy.__version__, "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    with open(args.out + ".json", "w") as f:
        json.dump({"env": env, "rows": rows}, f, indent=1)
    with open(args.out + ".txt", "w") as f:
        f.write("\n".join(text))


if __name__ == "__main__":
    main()
