"""t3's executors "chains" and "segments" (tiers/t3_triton_fused/sparse_fusion.py): the dataflow
executor over chains of dependent iterations, walked link by link with each value carried in a
register, or solved a piece at a time by a parallel scan of affine maps. executor=None picks
neither (measured in sparse_fusion.py's docstring)."""

import numpy as np
import triton
import triton.language as tl

from tiers import sparse_dags as dags
from tiers.kernels import sparse_rows as rows
from tiers.kernels.sparse_fusion_executors.launch import _launch_dataflow, _next_ticket
from tiers.kernels.sparse_fusion_executors.tickets import _joint, cut_blocks
from tiers.kernels.sparse_rows import affine_fetch, affine_link, affine_step


SEG_CHUNK = 16           # segments: a link's predecessor must be among its row's first SEG_CHUNK entries


@triton.jit
def _block_of(t, BLK_PTR, BLK_ITER, R: tl.constexpr):
    """Ticket t's block: (its first slot, the R slots, which hold an iteration, the iterations)."""
    first = tl.load(BLK_PTR + t)
    lane = first + tl.arange(0, R)
    ok = lane < tl.load(BLK_PTR + t + 1)
    return first, lane, ok, tl.load(BLK_ITER + lane, mask=ok, other=0)


def _walk(head, parent):
    """(first iteration of the chain, position in it) for every iteration: chains follow the
    links parent[v] → v of the iterations that are not heads (pointer jumping, log₂ of the
    longest chain rounds)."""
    ids = np.arange(len(head))
    anc = np.where(head, ids, parent)
    dist = (~head).astype(np.int64)
    while True:
        up = anc[anc]
        if np.array_equal(up, anc):
            return anc, dist
        dist = dist + dist[anc]
        anc = up


def _links(schedule, mats):
    """(u, v, level, parent): the joint DAG's dependences u → v, its wavefront levels, and per
    iteration the one it waits for last in its own kernel (one level up, the largest id), or −1."""
    def build():
        n = schedule.n1 + schedule.n2
        dag, level = _joint(schedule, mats)
        u, v = dag.sources()
        same = (level[u] == level[v] - 1) & ((u < schedule.n1) == (v < schedule.n1))
        parent = np.full(n, -1, dtype=np.int64)
        np.maximum.at(parent, v[same], u[same])
        return u, v, level, parent
    return schedule.cached("chain_links", build)


def _chain_heads(schedule, mats, S, allowed=None):
    """The chains of chain_blocks: (head, top, pos, key) per iteration — whether it starts a
    chain, the chain's first iteration, its position in the chain, the chain's key. `allowed`:
    a mask of the iterations that may extend their parent's chain at all; with it, a chain is
    also cut wherever an iteration waits on another iteration of its own chain than its parent
    (what the segments executor needs)."""
    n = schedule.n1 + schedule.n2
    u, v, level, parent = _links(schedule, mats)
    if allowed is not None:
        parent = np.where(allowed, parent, -1)
    has = np.flatnonzero(parent >= 0)
    first = np.full(n, n, dtype=np.int64)
    np.minimum.at(first, parent[has], has)
    head = np.ones(n, dtype=bool)
    head[has] = first[parent[has]] != has
    while True:
        top, pos = _walk(head, parent)
        key = level[top]
        new = (pos % S == 0) & ~head
        new[v[(top[u] != top[v]) & (key[u] >= key[v])]] = True
        if allowed is not None:
            new[v[(top[u] == top[v]) & (parent[v] != u)]] = True
        new &= ~head
        if not new.any():
            return head, top, pos, key
        head |= new


def _block_heads(schedule, mats, head, top, key, R, by_level):
    """Chains, each a block; single iterations of one key in blocks of R. Returns (heads, block
    of each head, lane of each, chain length of each head), blocks numbered (ticketed) in key
    order, or with `by_level` by their level in the DAG of blocks (1 + the largest level of
    the blocks they wait for), ties in key order. Both are topological orders.

    Key order hands out tickets by the level of a chain's *first* link: a piece (r, s) of a 2D
    grid row, which could run after r + s hops, waits for its ticket behind every block of a
    smaller key. Measured on the H100 (2026-11-25, float64, 2D Poisson 1000², sptrsv_spmv):
    the segment executor at S = 64 took 9.37 ms in key order and 5.16 ms by level, so segments
    go by level; the chain executor took 12.0 ms by level at S = 16 (2.05–2.3 ms in key order
    the same day), so chains keep key order."""
    n = len(head)
    at = np.empty(n, dtype=np.int64)
    at[schedule.order] = np.arange(n)
    length = np.bincount(top, minlength=n)
    heads = np.flatnonzero(head)
    chain = length[heads] > 1
    heads = heads[np.lexsort((at[heads], chain, key[heads]))]
    chain = length[heads] > 1
    block, lane = cut_blocks(key[heads], R, alone=chain)    # a chain in a block of its own
    if not by_level:
        return heads, block, lane, length
    blocks = int(block[-1]) + 1 if len(heads) else 0
    of_head = np.empty(n, dtype=np.int64)
    of_head[heads] = block
    u, v = _links(schedule, mats)[:2]
    bu, bv = of_head[top[u]], of_head[top[v]]
    waits = dags.distinct(bv[bu != bv] * max(blocks, 1) + bu[bu != bv])
    level = dags.wavefront_levels(dags.dag_from_edges(waits % max(blocks, 1), waits // max(blocks, 1), blocks))
    rank = np.empty(blocks, dtype=np.int64)
    rank[np.lexsort((np.arange(blocks), level))] = np.arange(blocks)
    return heads, rank[block], lane, length


def chain_blocks(schedule, mats, R, S):
    """Blocks for executor="chains": (blk_ptr, blk_steps, blk_iter), block t owning slots
    blk_iter[blk_ptr[t] : blk_ptr[t] + R·blk_steps[t]], step-major (slot s·R + lane), −1 for none.

    A chain links each iteration to the iteration of the same kernel it waits for last (one
    wavefront level up; the largest such id, so a 2D stencil chains along its grid rows), when
    it is that iteration's first such successor. Chains are cut every S links, and cut again
    wherever an iteration waits on a chain whose key — the level of its first iteration — is
    not smaller than its own chain's (repeated until none does): then waits only point to
    smaller keys, and tickets in key order (_block_heads) keep the sync-free argument of
    ticket_blocks. A chain of two or more iterations gets a block of its own (lane 0, one step
    per link); single iterations of one key share blocks of R lanes. The schedule orders what
    the keys leave equal."""
    n = schedule.n1 + schedule.n2
    head, top, pos, key = _chain_heads(schedule, mats, S)
    heads, block, lane, length = _block_heads(schedule, mats, head, top, key, R, by_level=False)
    steps = np.zeros(block.max() + 1 if len(heads) else 0, dtype=np.int64)
    np.maximum.at(steps, block, length[heads])
    blk_ptr = np.zeros(len(steps) + 1, dtype=np.int64)
    np.cumsum(steps * R, out=blk_ptr[1:])
    block_of, lane_of = np.empty(n, np.int64), np.empty(n, np.int64)
    block_of[heads], lane_of[heads] = block, lane
    blk_iter = np.full(blk_ptr[-1], -1, dtype=np.int64)
    blk_iter[blk_ptr[block_of[top]] + pos * R + lane_of[top]] = np.arange(n)
    return blk_ptr, steps, blk_iter


def _scannable(tables, parent, chunk):
    """Iterations whose parent's output is read by one of the first `chunk` entries of their row."""
    n = len(parent)
    counts = np.diff(tables.ent_ptr.astype(np.int64))
    row = np.repeat(np.arange(n), counts)
    rel = np.arange(len(row)) - tables.ent_ptr[row]
    p = parent[row]
    hit = (p >= 0) & (rel < chunk)
    hit[hit] = tables.ent_aux[hit] == tables.dst[p[hit]]
    ok = np.zeros(n, dtype=bool)
    ok[row[hit]] = True
    return ok


def segment_blocks(schedule, mats, tables, R, S, chunk=SEG_CHUNK):
    """Blocks for executor="segments": (blk_ptr, blk_iter), block t running the iterations
    blk_iter[blk_ptr[t]:blk_ptr[t+1]] as its lanes, in block (ticket) order. The chains of
    chain_blocks, with two more cuts: a link's predecessor must be read by one of the first
    `chunk` entries of its row, and no link reads another link of its piece than the one before
    it. A piece of a chain (at most S links) is one block, its links in order; single
    iterations of one key share blocks of at most R."""
    n = schedule.n1 + schedule.n2
    parent = _links(schedule, mats)[3]
    head, top, pos, key = _chain_heads(schedule, mats, S, allowed=_scannable(tables, parent, chunk))
    heads, block, lane, length = _block_heads(schedule, mats, head, top, key, R, by_level=True)
    width = np.zeros(block.max() + 1 if len(heads) else 0, dtype=np.int64)
    np.maximum.at(width, block, np.maximum(length[heads], lane + 1))
    blk_ptr = np.zeros(len(width) + 1, dtype=np.int64)
    np.cumsum(width, out=blk_ptr[1:])
    block_of, lane_of = np.empty(n, np.int64), np.empty(n, np.int64)
    block_of[heads], lane_of[heads] = block, lane
    blk_iter = np.empty(blk_ptr[-1], dtype=np.int64)
    blk_iter[blk_ptr[block_of[top]] + lane_of[top] + pos] = np.arange(n)
    return blk_ptr, blk_iter


@triton.jit
def _chains(TICKET, N_BLK, BLK_PTR, BLK_STEPS, BLK_ITER, ENT_PTR, ENT_VAL, ENT_VEC, RHS, DIAG, SIGN, DST, VAL, VEC,
            N_IN, R: tl.constexpr, CHUNK: tl.constexpr, SENT: tl.constexpr, NAP: tl.constexpr, LOOP: tl.constexpr,
            WIDE: tl.constexpr):
    """The dataflow executor over chain blocks: step by step, each lane runs the next iteration
    of its chain, taking the entry its previous step wrote from a register."""
    t = tl.atomic_add(TICKET, 1, sem="relaxed")
    while t < N_BLK:
        base = tl.load(BLK_PTR + t)
        lane = tl.arange(0, R)
        prev_dst = tl.full([R], -1, tl.int32)
        prev_val = tl.zeros([R], dtype=VAL.dtype.element_ty)
        for step in range(0, tl.load(BLK_STEPS + t)):
            v = tl.load(BLK_ITER + base + step * R + lane)
            ok = v >= 0
            start, end, m, pv, px, a, rhs_at, diag_at, d, sign, dst = affine_fetch(
                v, ok, ENT_PTR, ENT_VAL, ENT_VEC, RHS, DIAG, SIGN, DST, VAL, True, CHUNK)
            val = affine_step(ok, start, end, m, px, a, rhs_at, d, sign, dst, prev_dst, prev_val, ENT_VAL, ENT_VEC,
                              VAL, VEC, CHUNK, N_IN, SENT, NAP, WIDE)
            prev_dst = tl.where(ok, dst, -1)
            prev_val = val
        t = _next_ticket(TICKET, N_BLK, LOOP)


def _chain_plan(schedule, mats, R, S, device):
    blk_ptr, steps, blk_iter = chain_blocks(schedule, mats, R, S)
    dev = rows.to_device({"blk_ptr": blk_ptr.astype(np.int32), "blk_steps": steps.astype(np.int32),
                          "blk_iter": blk_iter.astype(np.int32)}, device)
    return len(steps), dev


def _run_chains(run, val, vec):
    sdev = run.plan[1]
    _launch_dataflow(_chains, run, val, vec, sdev["blk_ptr"], sdev["blk_steps"], sdev["blk_iter"])


@triton.jit
def _compose(h1, b1, a1, h2, b2, a2):
    """x ↦ a2 + b2·(a1 + b1·x): two consecutive links' affine maps, the earlier one first. h marks
    a map that ignores x (a piece's head, a single iteration: no entry of its row reads the lane
    before): it takes nothing from there, not even 0·NaN, so an input's NaN reaches only the
    outputs that read it, as in t0."""
    return h1 | h2, b2 * b1, tl.where(h2 != 0, a2, a2 + b2 * a1)


@triton.jit
def _segments(TICKET, N_BLK, BLK_PTR, BLK_ITER, ENT_PTR, ENT_VAL, ENT_VEC, RHS, DIAG, SIGN, DST, VAL, VEC, N_IN,
              R: tl.constexpr, CHUNK: tl.constexpr, SENT: tl.constexpr, NAP: tl.constexpr, LOOP: tl.constexpr,
              WIDE: tl.constexpr):
    """The dataflow executor over segment blocks: every lane waits for the entries its row reads
    from outside the block, then one scan solves the piece's recurrence x_m = α_m + β_m·x_{m−1}
    (single iterations have β = 0 and come out as α)."""
    t = tl.atomic_add(TICKET, 1, sem="relaxed")
    while t < N_BLK:
        first, lane, ok, v = _block_of(t, BLK_PTR, BLK_ITER, R)
        start, end, m, pv, px, a, rhs_at, diag_at, d, sign, dst = affine_fetch(
            v, ok, ENT_PTR, ENT_VAL, ENT_VEC, RHS, DIAG, SIGN, DST, VAL, True, CHUNK)
        # the lane before writes what this lane reads last: not awaited, it becomes β
        before = tl.load(BLK_ITER + lane - 1, mask=ok & (lane > first), other=-1)
        prev_dst = tl.load(DST + before, mask=before >= 0, other=-1)
        alpha, beta, head = affine_link(ok, start, end, m, px, a, rhs_at, d, sign, prev_dst, ENT_VAL, ENT_VEC, VAL,
                                        VEC, CHUNK, N_IN, SENT, NAP, WIDE)
        _, _, x_out = tl.associative_scan((head, beta, alpha), 0, _compose)
        tl.store(VEC + dst, x_out, mask=ok)
        t = _next_ticket(TICKET, N_BLK, LOOP)


def _segment_plan(schedule, mats, tables, R, S, device):
    blk_ptr, blk_iter = segment_blocks(schedule, mats, tables, R, S)
    dev = rows.to_device({"blk_ptr": blk_ptr.astype(np.int32), "blk_iter": blk_iter.astype(np.int32)}, device)
    return len(blk_ptr) - 1, dev


def _run_segments(run, val, vec):
    sdev = run.plan[1]
    lanes = triton.next_power_of_2(max(run.chain_steps, run.block_rows))
    _launch_dataflow(_segments, run, val, vec, sdev["blk_ptr"], sdev["blk_iter"], lanes=lanes, chunk=SEG_CHUNK)
