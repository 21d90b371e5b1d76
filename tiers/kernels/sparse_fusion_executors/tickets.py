"""The order in which t3's sync-free executors hand out their blocks (tiers/t3_triton_fused/
sparse_fusion.py): the joint DAG as the executors see it, with fused rows merged, the levels each
iteration can run at, the ticket orders, and the cutting of the order into blocks of R iterations
that never hold an iteration together with one it needs. Host code, run once per pattern."""

import numpy as np

from tiers import sparse_dags as dags
from tiers.fusion_schedules import JOINT_DAG, JOINT_LEVELS
from tiers.kernels.sparse_rows import CHUNK


def _joint(schedule, mats):
    """(joint DAG, its wavefront levels) of the schedule's pair, built once per schedule and
    shared by every plan the sync-free executors make from it."""
    dag = schedule.cached(JOINT_DAG, lambda: dags.joint_dag(schedule.pair, *mats))
    return dag, schedule.cached(JOINT_LEVELS, lambda: dags.wavefront_levels(dag))


def _latest_levels(schedule, mats, merged=False):
    """As-late-as-possible level of every iteration of the joint DAG, or of the merged one
    (_ticket_graph): depth − 1 − the longest path from it to a sink (the wavefront levels of the
    reversed DAG), cached per schedule."""
    def build():
        dag, level = _ticket_graph(schedule, mats, merged)[:2]
        return int(level.max(initial=0)) - dags.reversed_levels(dag)
    return schedule.cached(("latest_levels", merged), build)


# tickets="mid": an iteration whose row stores more entries than this starts as early as it can
HEAVY = 4 * CHUNK


def _mid_levels(schedule, mats, merged=False):
    """Keys of tickets="mid" (in half levels) on the joint or the merged DAG (_ticket_graph):
    as-soon- plus as-late-as-possible level, halfway, except for heavy iterations (rows of more
    than HEAVY entries, HEAVY / CHUNK trips or more): they keep twice their as-soon-as-possible
    level, and what they depend on moves earlier with them, key(u) = min(key(u), key(v) − 1)
    over u → v. Late is cheap for a short row; a long row started late is the critical path (a
    power-law hub's SpMV row, read by most of the solve). Every dependence still rises by at
    least one.

    Only a key that fell can pull another: for u → v, asap and alap each rise by at least one, so
    key(u) ≤ key(v) − 2 while neither key moved. So the keys settle by walking back from the heavy
    rows, each round from the rows whose keys just fell to what they depend on, until none falls
    (at most the DAG's depth in rounds). Settling every edge level by level from the last down,
    as before 2026-11-29, gives the same keys (checked on the power-law graph's three vector
    pairs), after ordering all 10M edges of that graph's sptrsv_spmv by level for its 11 321
    heavy rows: these keys with the latest levels took 1.58–1.68 s that way and 0.96–1.11 s now
    (development machine's CPU, 3 alternating rounds in one process)."""
    def build():
        dag, asap, cost, _ = _ticket_graph(schedule, mats, merged)
        key = asap + _latest_levels(schedule, mats, merged)
        heavy = cost > HEAVY
        if not heavy.any():
            return key
        key = np.where(heavy, 2 * asap, key)
        fell = np.flatnonzero(heavy)
        while fell.size:
            owner, at = dags.expand_ranges(dag.ptr[fell], dag.ptr[fell + 1])
            u = dag.idx[at]
            before = key[u]
            np.minimum.at(key, u, key[fell[owner]] - 1)
            fell = dags.distinct(u[key[u] < before])
        return key
    return schedule.cached(("mid_levels", merged), build)


TICKETS = ("dag", "alap", "mid", "schedule")


def cut_blocks(keys, R: int, alone=None):
    """(block, lane) of items already sorted by key, cut into blocks: a new block at each change
    of key, around each item of `alone` (a mask: a block of its own), and every R items within
    a run — how ticket_blocks and the chain executor's blocks (chains._block_heads) cut theirs."""
    m = len(keys)
    start = np.ones(m, dtype=bool)
    start[1:] = keys[1:] != keys[:-1]
    if alone is not None:
        start |= alone
        start[1:] |= alone[:-1]
    run = np.maximum.accumulate(np.where(start, np.arange(m), 0))
    start |= (np.arange(m) - run) % R == 0
    block = np.cumsum(start) - 1
    return block, np.arange(m) - np.flatnonzero(start)[block]


def fused_rows(schedule, mats):
    """The rows the flag executor runs fused: for a factor pair, fuse[i] = n1 + i where the
    schedule puts solve row i in the partition of factor row i (one worker runs both, the
    factor row first), else −1; None for the other pairs. One program then computes factor row
    i on registers and solves row i from them (_syncfree): no hop between the two, no reload of
    the row, half the blocks. The sparse-fusion inspector packs nearly every solve row with its
    factor row (interleaved packing); a wavefront schedule never can (solve row i lies a level
    below factor row i), LBC seldom does.

    Why the two may run as one iteration, whatever else the schedule holds: solve row i reads
    factor row i and x_j for the j < i of row i's lower pattern, and factor row i reads the
    factor rows of that same pattern (ILU(0): the pivot rows k with a_ik ≠ 0; IC(0): the rows j
    with l_ij ≠ 0). So the fused iteration waits for fused iterations j < i only, and nothing
    that factor row i feeds reaches solve row i but factor row i itself: merging the two
    leaves the DAG acyclic, the DAG of the factor rows.

    Tried, not kept (2026-11-27, figures/data/dataflow_fused_rows_*): the same for spmv_sptrsv in
    the dataflow executor, whose SpMV row i reads only the input and feeds only solve row i. A
    lane carried SpMV row i in a second part of its record, computed y_i before its wait, stored
    it and took it as the solve's right-hand side: half the blocks, no y hop. Right, but on the
    H100 (float64, package CLI, medians of 3 interleaved rounds) no faster: sparse-fusion
    schedule, fused against apart, 2D 1.263 against 1.273 ms, 3D 0.345 against 0.347, 27-point
    0.438 against 0.443 (wavefront 1.205 / 0.338 / 0.428), and LBC, which fuses a tenth of the
    rows, 0.409 against 0.346 on the 3D grid. The SpMV rows ran beside the solve for free before:
    its chain of hops, not their work, sets the time."""
    if schedule.pair not in dags.FACTOR_PAIRS:
        return None

    def build():
        n1, n = schedule.n1, schedule.n1 + schedule.n2
        part = schedule.partition_of()
        i = np.arange(n1)
        fuse = np.full(n, -1, dtype=np.int64)
        together = i[part[i] == part[n1 + i]]
        fuse[together] = n1 + together
        return fuse
    return schedule.cached("fused_rows", build)


def _ticket_graph(schedule, mats, merged=False):
    """(DAG, wavefront levels, costs, listed) that the tickets are keyed on, cached per schedule:
    the joint DAG, or with `merged` the joint DAG with each solve row that fused_rows fuses
    merged into its factor row — a merged solve row is not listed and keeps no edge, a fused row
    costs both rows, and an edge named twice (solve row j → solve row i, both fused, is factor
    row j → factor row i) is kept once, which changes no level, order or block. Without fused
    rows the two are the same."""
    fuse = fused_rows(schedule, mats) if merged else None
    if merged and (fuse is None or not (fuse >= 0).any()):
        return _ticket_graph(schedule, mats)

    def build():
        dag, level = _joint(schedule, mats)
        cost = schedule.cost if schedule.cost is not None else dags.joint_cost(schedule.pair, *mats)
        if not merged:
            return dag, level, cost, np.ones(dag.n, dtype=bool)
        rep = np.arange(dag.n)
        heads = np.flatnonzero(fuse >= 0)
        rep[fuse[heads]] = heads
        u, v = (rep[x] for x in dag.sources())
        keep = u != v
        fused_dag = dags.dag_of_distinct_edges(u[keep], v[keep], dag.n1, dag.n2)
        cost = cost.copy()
        cost[heads] += cost[fuse[heads]]
        return fused_dag, dags.wavefront_levels(fused_dag), cost, rep == np.arange(dag.n)
    return schedule.cached(("ticket_graph", merged), build)


TIES = ("schedule", "ids")


def ticket_order(schedule, mats, tickets: str = "dag", fuse_rows: bool = False, ties: str = "schedule"):
    """(seq, group): the iterations in ticket order and each one's group key, ascending — the
    order and the groups that ticket_blocks cuts into blocks (its docstring says how each
    `tickets` keys them); with fuse_rows the merged solve rows are not listed. `ties`: the
    order within a group of "dag", "alap" or "mid" — the schedule's ("schedule"), or id order
    ("ids": rows in order, kernel 1's first, whatever the schedule), which the dataflow
    executor's records take (_dataflow_plan): a block then holds rows that lie together. With
    the schedule's order the sparse-fusion schedule ran the grids' vector pairs 2–7 % slower than
    wavefront, whose order within a level is the rows'. Measured on an H200 (2026-11-29, float64,
    dataflow executor, A/B in one call, 3 interleaved rounds, every output checked first,
    figures/data/ties_ab_*), sparse-fusion schedule, schedule's order → ids, ms: 2D sptrsv_sptrsv
    1.987 → 1.855; 3D sptrsv_spmv / spmv_sptrsv / sptrsv_sptrsv 0.241 → 0.242, 0.231 → 0.225,
    0.390 → 0.373; 27-point 0.320 → 0.312, 0.314 → 0.305, 0.555 → 0.516; the wavefront schedule
    within 1 % either way (cuSPARSE 9.50 / 0.906, 0.905, 1.679 / 1.115, 1.121, 2.123 ms in the same
    rounds); the package CLI afterwards (figures/data/ties_cli_*) gave the two schedules the same
    times on the grids' vector pairs. The other plans keep the schedule's order: with ids
    everywhere that call also measured the power-law graph's flat records (flat_plan) at 0.272 /
    0.247 ms on spmv_sptrsv / sptrsv_sptrsv against 0.171 / 0.244 with the schedule's order
    (figures/data/table_h200_*, the same day), and the factor pairs' fused rows (_syncfree_plan)
    even within the rounds' spread (3D ILU(0) in the A/B 0.844 → 0.839; 3D IC(0) at R = 8 in the
    CLI 1.085 against 0.905, its rounds 0.90–1.11). Since 2026-12-03 the flag executor's plan
    takes ids too (PLAN_TIES in tiers/t3_triton_fused/sparse_fusion.py): on an H200 it made the
    power-law graph's IC(0) 10 % faster and its ILU(0) and the 2D grid's 3–6 %."""
    if ties not in TIES:
        raise ValueError(f"ties must be one of {', '.join(TIES)}, got {ties!r}")
    n = schedule.n1 + schedule.n2
    pos = np.empty(n, dtype=np.int64)
    pos[schedule.order] = np.arange(n)
    sizes = np.diff(schedule.part_ptr)
    if fuse_rows and tickets == "schedule":
        raise ValueError("fused rows take their tickets from the merged DAG's levels, not the schedule's steps; "
                         "use tickets 'dag', 'alap' or 'mid' with them")
    _, level, _, listed = _ticket_graph(schedule, mats, fuse_rows)
    keys = {"dag": lambda: level, "alap": lambda: _latest_levels(schedule, mats, fuse_rows),
            "mid": lambda: _mid_levels(schedule, mats, fuse_rows)}
    if tickets in ("dag", "alap", "mid"):
        group = keys[tickets]()
        seq = dags.stable_order(group) if ties == "ids" else np.lexsort((pos, group))
    elif tickets == "schedule":
        step = np.empty(n, np.int64)
        step[schedule.order] = np.arange(n) - np.repeat(schedule.part_ptr[:-1], sizes)
        group = schedule.partition_level()[schedule.partition_of()] * (int(sizes.max(initial=0)) + 1) + step
        seq = np.lexsort((pos, group))                      # within a (level, step): partition order
    else:
        raise ValueError(f"tickets must be one of {', '.join(TICKETS)}, got {tickets!r}")
    seq = seq[listed[seq]]
    return seq, group[seq]


def ticket_blocks(schedule, mats, R: int, tickets: str = "dag", fuse_rows: bool = False, alone=None,
                  ties: str = "schedule"):
    """The sync-free executor's blocks in ticket order, as (blk_ptr, blk_iter, dep_ptr, dep_blk):
    block t runs iterations blk_iter[blk_ptr[t]:blk_ptr[t+1]] and waits for the blocks
    dep_blk[dep_ptr[t]:dep_ptr[t+1]]. With fuse_rows, an iteration i with fused_rows(...)[i] ≥ 0
    also runs that iteration, which is listed in no block: the blocks are those of the joint
    DAG with each such pair merged into one iteration (_ticket_graph), keyed by that DAG's levels, so
    not with tickets="schedule" (ValueError): a merged row would straddle two of the schedule's
    (level, step) groups, and rows between them may need it or be needed by it.

    tickets="dag": iterations sorted by (wavefront level of the joint DAG, position in the
    schedule, or id with ties="ids": ticket_order), each level cut into blocks of at most R — the
    shortest chains of waits, whatever the schedule; the schedule only decides which iterations
    of a level share a block, and with ties="ids" not even that.
    tickets="alap": by as-late-as-possible level (_latest_levels) instead — iterations off the
    critical path wait until just before they are needed (spmv_sptrsv: each SpMV row right before
    the solve row that reads it, not all of them first); the factor pairs' default since
    2026-12-03 (FACTOR_TICKETS in tiers/t3_triton_fused/sparse_fusion.py: on an H200 the
    power-law graph's IC(0) 11 % faster, its ILU(0) 7 %, the grids even). tickets="mid": by
    the sum of both levels, halfway, but rows of more than HEAVY entries as early as they can be (_mid_levels). A
    dependence u → v raises every one of these keys, so every order keeps it in an earlier group.
    tickets="schedule": sorted by (schedule level, step within the partition, partition), each
    (level, step) cut into blocks of at most R — the schedule's own grouping, with the chains
    inside its partitions. Either way the iterations of a block are independent of each other
    and every dependence lies in an earlier block. `alone` (a mask over the iterations): each
    of these gets a block of its own. The blocks alone are ticket_cut's."""
    blk_ptr, seq, block_of, (u, v) = _cut(schedule, mats, R, tickets, fuse_rows, alone, ties)
    B = len(blk_ptr) - 1
    pairs = dags.distinct(block_of[v] * max(B, 1) + block_of[u])      # (waiting block, awaited block), once
    dep_ptr = np.zeros(B + 1, dtype=np.int64)
    np.cumsum(np.bincount(pairs // max(B, 1), minlength=B), out=dep_ptr[1:])
    return blk_ptr, seq, dep_ptr, pairs % max(B, 1)


def ticket_cut(schedule, mats, R: int, tickets: str = "dag", fuse_rows: bool = False, alone=None,
               ties: str = "schedule", apart: bool = False):
    """ticket_blocks' (blk_ptr, blk_iter) without the waits, for the plans whose rows poll their
    entries instead of waiting for blocks (the dataflow records, the lean rows, the factor pairs'
    values as flags): the waits' dedupe is a sort of one key per edge (0.7 s of the 3D grid's
    prepare on the development machine's CPU; without it prepare 1.06–1.57× faster on the grids'
    vector pairs, figures/data/prepare_waits_cpu_2026-12-04.txt). With `apart`, every block of
    kernel 1's iterations comes before every block of kernel 2's, each kernel's in ticket order
    (no dependence runs from kernel 2 to kernel 1, so every block still waits for earlier ones
    only): two streams that programs of their own may stride over (records' STREAMS)."""
    return _cut(schedule, mats, R, tickets, fuse_rows, alone, ties, apart)[:2]


def _cut(schedule, mats, R, tickets, fuse_rows, alone, ties, apart=False):
    """(blk_ptr, blk_iter, each iteration's block, the DAG's edges (u, v)), checked: no block
    waits for itself or a later one. `apart`: ticket_cut's."""
    n = schedule.n1 + schedule.n2
    seq, g = ticket_order(schedule, mats, tickets, fuse_rows, ties)
    if apart and len(seq):
        second = seq >= schedule.n1
        order = np.argsort(second, kind="stable")
        seq, second = seq[order], second[order]
        g = g[order] - g.min() + second * (int(g.max()) - int(g.min()) + 1)    # disjoint: a cut at the switch
    dag = _ticket_graph(schedule, mats, fuse_rows)[0]
    block, lane = cut_blocks(g, R, None if alone is None else alone[seq])
    blk_ptr = np.append(np.flatnonzero(lane == 0), len(seq)).astype(np.int64)
    block_of = np.empty(n, dtype=np.int64)
    block_of[seq] = block
    u, v = dag.sources()
    if (block_of[u] >= block_of[v]).any():      # what the sync-free argument rests on
        raise AssertionError(f"tickets={tickets!r}: a block would wait for itself or a later block")
    return blk_ptr, seq, block_of, (u, v)
