"""t3's executor "levels" (tiers/t3_triton_fused/sparse_fusion.py): one launch per level of the
schedule, a program walking LANES of the level's partitions in lockstep."""

import numpy as np
import triton
import triton.language as tl

from tiers.kernels import sparse_rows as rows
from tiers.kernels.sparse_rows import CHUNK, iterations


@triton.jit
def _level(P0, NPART, PART_PTR, ORDER, KIND, ENT_PTR, ENT_VAL, ENT_AUX, UPD_PTR, UPD_A, UPD_B, RHS, DIAG,
           SIGN, DST, FAC_PTR, HOLD_LEN, STEP_BITS, VAL, VEC, FACTOR: tl.constexpr, LANES: tl.constexpr,
           CHUNK: tl.constexpr, WIDE: tl.constexpr, W: tl.constexpr, S: tl.constexpr, C: tl.constexpr,
           WALK: tl.constexpr):
    """Partitions P0 + pid·LANES … of one level, walked in lockstep."""
    p = P0 + tl.program_id(0) * LANES + tl.arange(0, LANES)
    ok = p < P0 + NPART
    first = tl.load(PART_PTR + p, mask=ok, other=0)
    last = tl.load(PART_PTR + p + 1, mask=ok, other=0)
    for k in range(0, tl.max(last - first, 0)):
        step = ok & (first + k < last)
        v = tl.load(ORDER + first + k, mask=step, other=0)
        iterations(v, step, KIND, ENT_PTR, ENT_VAL, ENT_AUX, UPD_PTR, UPD_A, UPD_B, RHS, DIAG, SIGN, DST,
                   FAC_PTR, HOLD_LEN, STEP_BITS, VAL, VEC, FACTOR, CHUNK, WIDE, W, S, C, WALK)
        tl.debug_barrier()


def _lanes(partitions: int, device, most: int = 32) -> int:
    """Partitions per program, at most `most`: on a GPU at least ~256 programs per level while
    lanes ≤ 32 (a level of a few hundred rows still spreads over every SM); in the interpreter,
    which pays per program, as few programs as possible."""
    if device.type != "cuda":
        return min(most, triton.next_power_of_2(partitions))
    lanes = 1
    while lanes < most and partitions >= 512 * lanes:
        lanes *= 2
    return lanes


def _level_plan(schedule, tables, device):
    """Per level: (first partition, partitions, lanes, programs), and the schedule on the device.
    Held factor rows (sparse_rows.RowTables.held) take at most as many lanes as stay held."""
    lp = schedule.level_ptr
    most = tables.held_lanes(32)
    launches = []
    for s in range(schedule.levels()):
        P = int(lp[s + 1] - lp[s])
        if P:
            lanes = _lanes(P, device, most)
            launches.append((int(lp[s]), P, lanes, triton.cdiv(P, lanes)))
    dev = rows.to_device({"part_ptr": schedule.part_ptr.astype(np.int32), "order": schedule.order.astype(np.int32)},
                         device)
    return launches, dev


def _run_levels(run, val, vec):
    launches, sdev = run.plan
    args = rows.table_args(run.dev)
    for p0, P, lanes, grid in launches:
        W, S, C = run.tables.held(lanes)
        _level[(grid,)](p0, P, sdev["part_ptr"], sdev["order"], *args, val, vec, FACTOR=run.tables.factor,
                        LANES=lanes, CHUNK=CHUNK, WIDE=run.tables.wide(CHUNK), W=W, S=S, C=C,
                        WALK=run.tables.walks, num_warps=run.num_warps)
