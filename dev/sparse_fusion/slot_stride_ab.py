"""A/B in one process: t3's dataflow runners of the working tree with the package's slot stride
(slot_stride: a 32-byte sector of output slots per block) against one patched to a 128-byte line
per block, with ab_commit.py's checks and rotated rounds (4). A developer's probe, not package
code (needs a CUDA GPU).

    python dev/sparse_fusion/slot_stride_ab.py OUT.json poisson3d27:64:sptrsv_spmv:sparse_fusion,...

Data of 2026-12-03 (H200): figures/data/line_slots_ab_* (run from a scratch copy of this file).
"""
import sys

import torch

from ab_commit import check_and_time, operands_and_vectors, run_header, save_row
from tiers import fusion_schedules as fs
from tiers.bench import sparse_fusion as bench
from tiers.t3_triton_fused import sparse_fusion as sf


def main():
    out, cases = sys.argv[1], sys.argv[2].split(",")
    res = run_header(torch.device("cuda"), probe="line_slots")
    rule = sf.slot_stride
    for case in cases:
        pair, kind, dtype, mats, v64, v, v2 = operands_and_vectors(case, torch.device("cuda"))
        s = fs.inspect(pair, *mats, kind=kind)
        runs = {"rule": sf.prepare(pair, *mats, like=v, schedule=s, executor="dataflow")}
        sf.slot_stride = lambda R, dt: max(R, 128 // dt.itemsize)
        try:
            runs["line"] = sf.prepare(pair, *mats, like=v, schedule=s, executor="dataflow")
        finally:
            sf.slot_stride = rule
        row = check_and_time(case, runs, list(runs), bench.reference(pair, mats, v64.numpy()), v, v2, dtype, rounds=4)
        row["stride"] = {k: r.slot_stride for k, r in runs.items()}
        save_row(res, row, out)


if __name__ == "__main__":
    main()
