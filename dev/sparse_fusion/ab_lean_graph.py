"""A/B in one process: t3's lean rows replaying their CUDA graph (LEAN_GRAPHS) against the same
plan launched as it comes (lean.run_lean, as every call ran before the graphs), beside the values
as flags (lean=False, graphed); on the 2D grid 1000² also by 16 lanes a block.

A developer's probe, not package code (needs a CUDA GPU). Every runner's results are checked
first, then timed in rotated rounds (ab_commit.py's check_and_time). Writes OUT.json and prints
each row.

    python dev/sparse_fusion/ab_lean_graph.py OUT.json poisson3d:100:spilu0_sptrsv:sparse_fusion,...

Data of 2026-12-03 (H200): figures/data/lean_graph_ab_*.
"""
import sys

import torch

from ab_commit import check_and_time, operands_and_vectors, run_header, save_row
from tiers import fusion_schedules as fs
from tiers.bench import sparse_fusion as bench
from tiers.kernels.sparse_fusion_executors.lean import run_lean
from tiers.t3_triton_fused import sparse_fusion as sf


def eager(run):
    """A call of `run` as every lean call was before LEAN_GRAPHS: checked, then launched as it comes."""
    def call(v):
        run.check(v)
        return run_lean(run, v)
    return call


def main():
    out, cases = sys.argv[1], sys.argv[2].split(",")
    dev = torch.device("cuda")
    res = run_header(dev, probe="ab_lean_graph")
    for case in cases:
        pair, kind, dtype, mats, v64, v, v2 = operands_and_vectors(case, dev)
        s = fs.inspect(pair, *mats, kind=kind)
        R = [None] + ([16] if mats[0].shape[0] == 1000 ** 2 else [])
        runs = {"flags": sf.prepare(pair, *mats, like=v, schedule=s, executor="dataflow", lean=False)}
        for r in R:
            g = sf.prepare(pair, *mats, like=v, schedule=s, executor="dataflow", lean=True, block_rows=r)
            e = sf.prepare(pair, *mats, like=v, schedule=s, executor="dataflow", lean=True, block_rows=r)
            tag = "" if r is None else str(r)
            runs["graph" + tag], runs["eager" + tag] = g, eager(e)
        row = check_and_time(case, runs, list(runs), bench.reference(pair, mats, v64.numpy()), v, v2, dtype)
        row["graphed"] = {k: getattr(r, "graph", None) is not None for k, r in runs.items()}
        del runs
        save_row(res, row, out)


if __name__ == "__main__":
    main()
