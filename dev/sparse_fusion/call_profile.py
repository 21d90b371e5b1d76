"""Where a prepared sparse-fusion call spends its time beside its kernels: torch.profiler.

A developer's probe, not package code (needs a CUDA GPU). For each case it times the prepared
call with do_bench, times 30 synchronised calls by the wall clock, and profiles 10 calls:
per call, every kernel's device time and every op's own CPU time; each case's chrome trace
is written too, to see the gaps between kernels.

    python dev/sparse_fusion/call_profile.py OUTDIR poisson3d:100:spilu0_sptrsv:sparse_fusion,...

Data of 2026-12-01 (H200, before the factor calls replayed CUDA graphs): figures/data/prof_call_*;
of 2026-12-02 (commit 861c91c, before rows.factor_out): prof_call_grid_*; of 2026-12-06 (H100, the
power-law factor pairs, commit 12fe829, a trace per case since): prof_call_powerlaw_h100_*.
"""
import json
import sys
import time

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile
from triton.testing import do_bench

from tiers import fusion_schedules as fs
from tiers.bench import sparse_fusion as bench
from tiers.t3_triton_fused import sparse_fusion as sf


def main():
    out, cases = sys.argv[1], sys.argv[2].split(",")
    res = []
    for case in cases:
        name, size, pair, kind = case.split(":")
        A = bench.make_matrix(name, int(size))
        mats = bench.operands(pair, A)
        v = (torch.rand(A.shape[0], dtype=torch.float64) + 0.5).cuda()
        run = sf.prepare(pair, *mats, like=v, schedule=fs.inspect(pair, *mats, kind=kind))
        for _ in range(5):
            run(v)
        torch.cuda.synchronize()
        ms = do_bench(lambda: run(v), warmup=25, rep=300, return_mode="median")
        walls = []
        for _ in range(30):
            torch.cuda.synchronize()
            t = time.perf_counter()
            run(v)
            torch.cuda.synchronize()
            walls.append(time.perf_counter() - t)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                run(v)
            torch.cuda.synchronize()
        events = prof.key_averages()
        device = sorted([(e.key, e.count, e.device_time_total / 10, e.cpu_time_total / 10) for e in events],
                        key=lambda r: -r[2])[:25]
        cpu = sorted([(e.key, e.count, e.self_cpu_time_total / 10) for e in events], key=lambda r: -r[2])[:25]
        row = {"case": case, "do_bench_ms": ms, "wall_ms_median": 1e3 * float(np.median(walls)),
               "device_per_call_us": device, "cpu_self_per_call_us": cpu}
        print(json.dumps(row)[:3000], flush=True)
        prof.export_chrome_trace(f"{out}/trace_{name}_{pair}_{kind}.json")
        res.append(row)
    json.dump(res, open(f"{out}/prof_call.json", "w"), indent=1)


if __name__ == "__main__":
    main()
