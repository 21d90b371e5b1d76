"""A/B in one process: t3's factor pairs with the sparse-fusion schedule, the plan's ticket groups
cut in id order (PLAN_TIES, the package) or in the schedule's order, beside the wavefront schedule.

A developer's probe, not package code (needs a CUDA GPU; on a CPU it only checks the results).
Four runners per case: "sf" (the package), "sf_sched" and "sf_sched2" (PLAN_TIES = "schedule"
while they are prepared; each on its own schedule object, since plans are cached on it) and "wf"
(the wavefront schedule). Checks and rotated rounds are ab_commit.py's (check_and_time). Each
row also holds a checksum of the first 100 000 entries of each plan's block order, so that runs
with equal plans show it.

    python dev/sparse_fusion/ab_ties.py OUT.json powerlaw:1000000:spic0_sptrsv:x[:float32],...

(the fourth field, a schedule kind, is ignored.) Data of 2026-12-03 (H200):
figures/data/ab_ties_powerlaw_*, measured before PLAN_TIES existed by preparing one runner with
ticket_blocks patched to ties="ids" (its "sf_ids"; its "sf" and "sf2" the schedule's order).
"""
import sys

import torch

from ab_commit import check_and_time, operands_and_vectors, run_header, save_row
from tiers import fusion_schedules as fs
from tiers.bench import sparse_fusion as bench
from tiers.t3_triton_fused import sparse_fusion as sf


def prepare(pair, mats, v, kind, ties=None):
    """A runner of the package's defaults on a fresh schedule of `kind`, its plan cut with `ties`."""
    kept = sf.PLAN_TIES
    sf.PLAN_TIES = ties or kept
    try:
        return sf.prepare(pair, *mats, like=v, schedule=fs.inspect(pair, *mats, kind=kind))
    finally:
        sf.PLAN_TIES = kept


def order_sig(run):
    """A checksum of the first 100 000 entries of the runner's block order (None without a plan)."""
    try:
        b = run.plan[1]["blk_iter"].long().cpu()[:100000]
        return int((b * torch.arange(len(b))).sum())
    except (AttributeError, KeyError, TypeError):
        return None


def case_row(case, dev):
    """The case's row: its four runners checked and timed (ab_commit.check_and_time), with their options."""
    pair, _, dtype, mats, v64, v, v2 = operands_and_vectors(case, dev)
    runs = {"sf": prepare(pair, mats, v, "sparse_fusion"),
            "sf_sched": prepare(pair, mats, v, "sparse_fusion", "schedule"),
            "sf_sched2": prepare(pair, mats, v, "sparse_fusion", "schedule"),
            "wf": prepare(pair, mats, v, "wavefront")}
    row = check_and_time(case, runs, list(runs), bench.reference(pair, mats, v64.numpy()), v, v2, dtype)
    row["options"] = {k: dict(executor=r.executor, R=r.block_rows, tickets=r.tickets, fuse_rows=r.fuse_rows,
                              order_sig=order_sig(r)) for k, r in runs.items()}
    return row


def main():
    out, cases = sys.argv[1], sys.argv[2].split(",")
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    res = run_header(dev)
    for case in cases:
        save_row(res, case_row(case, dev), out)


if __name__ == "__main__":
    main()
