"""What the fused code does once, timed and hashed per case: the sparse-fusion inspector and t3's
`prepare` (executor="dataflow", nothing cached but what the inspector left), for an A/B of a
host-side change. Run it once per tree and round, each in a fresh process (fresh pages are part
of what a first `prepare` pays), rounds of the two trees interleaved:

    PYTHONPATH=<tree> python3 dev/sparse_fusion/once_cost.py OUT.json CASES

CASES: comma list of matrix:size:pair (bench.make_matrix's names: poisson2d:1000, poisson3d:100,
poisson3d27:64, powerlaw:1000000). The vector is a CUDA float64 one where a GPU is there, else a
CPU one (then with TRITON_INTERPRET=1). Prints one line per case as it goes, so a run cut short
still says what it reached, and writes {case: [hash, inspector s, prepare s]} at the end. The
hash covers the schedule, the row tables and every device table but the blocks' waits (which the
factor pairs' dataflow plan leaves as placeholders since cfee61f): equal hashes, the same plan.
(figures/data/once_ab_h200_2026-12-04.txt)"""

import hashlib
import json
import sys
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


def main(out_path, cases):
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    out, mats = {}, {}
    for name, size, pair in (c.split(":") for c in cases.split(",")):
        A = mats.setdefault((name, size), bench.make_matrix(name, int(size)))
        ops = bench.operands(pair, A)
        start = time.perf_counter()
        schedule = fs.inspect(pair, *ops, kind="sparse_fusion")
        inspector = time.perf_counter() - start
        v = torch.randn(A.shape[0], dtype=torch.float64, device=dev)
        forget_patterns()
        schedule.forget()
        start = time.perf_counter()
        run = t3.prepare(pair, *ops, like=v, schedule=schedule, executor="dataflow")
        if dev == "cuda":
            torch.cuda.synchronize()
        setup = time.perf_counter() - start
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
        out[f"{name}:{size}:{pair}"] = [h.hexdigest()[:12], round(inspector, 3), round(setup, 3)]
        print(name, size, pair, *out[f"{name}:{size}:{pair}"], flush=True)
    with open(out_path, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
