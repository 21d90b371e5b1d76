"""A/B in one process: t3's factor pairs at an earlier commit against the working tree, as
ab_commit.py does, but on the 2D grid by the lean rows at 16 lanes a block in both, beside the
working tree's values as flags (lean=False); elsewhere by each package's rule, the commit twice.

A developer's probe, not package code (needs a CUDA GPU). COMMIT may name a tar file of the
commit's package (ab_commit.import_old).

    python dev/sparse_fusion/ab_commit_lean.py COMMIT|FILE.tar OUT.json poisson2d:1000:spic0_sptrsv:sparse_fusion,...

Data of 2026-12-03 (H200): figures/data/ic_rsqrt_ab2_* (and ic_rsqrt_ab_*, from a first form that
took every 1M-row case for the 2D grid).
"""
import sys

import torch

from ab_commit import check_and_time, import_old, operands_and_vectors, run_header, save_row
from tiers import fusion_schedules as fs
from tiers.bench import sparse_fusion as bench
from tiers.t3_triton_fused import sparse_fusion as sf


def main():
    old, out, cases = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
    fs_old, sf_old = import_old(old)
    dev = torch.device("cuda")
    res = run_header(dev, old=old, probe="ic_rsqrt_ab")
    for case in cases:
        pair, kind, dtype, mats, v64, v, v2 = operands_and_vectors(case, dev)
        s_new, s_old = fs.inspect(pair, *mats, kind=kind), fs_old.inspect(pair, *mats, kind=kind)
        two = case.startswith("poisson2d")
        kw = dict(executor="dataflow", lean=True, block_rows=16) if two else dict(executor="dataflow")
        runs = {"new": sf.prepare(pair, *mats, like=v, schedule=s_new, **kw),
                "old": sf_old.prepare(pair, *mats, like=v, schedule=s_old, **kw)}
        if two:
            runs["flags"] = sf.prepare(pair, *mats, like=v, schedule=s_new, executor="dataflow", lean=False)
        else:
            runs["old2"] = sf_old.prepare(pair, *mats, like=v, schedule=s_old, **kw)
        row = check_and_time(case, runs, list(runs), bench.reference(pair, mats, v64.numpy()), v, v2, dtype)
        row["lean"] = {k: bool(r.lean) for k, r in runs.items()}
        del runs
        save_row(res, row, out)


if __name__ == "__main__":
    main()
