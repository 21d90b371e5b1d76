"""t3's dataflow executor over flat records (the power-law graph's vector pairs, reads_flat in
tiers/t3_triton_fused/sparse_fusion.py): a block is 32 entry slots, one per thread, its rows'
entries one after another, summed per row by a segmented scan across the warp; a hub row is cut
into pieces that are rows of their own."""

from typing import NamedTuple

import numpy as np
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from tiers import sparse_dags as dags
from tiers.kernels import sparse_rows as rows
from tiers.kernels.sparse_fusion_executors.tickets import ticket_order
from tiers.kernels.sparse_rows import vec_await_entries


class HubTrees(NamedTuple):
    """Every hub's pieces (flat_plan), hub by hub, generation by generation; per piece its hub
    (index into the hubs), generation and size, for the first generation where its entries
    start in `entries` (each hub's entries in the order they are written), for the later ones
    the first piece of the generation before that it sums; per hub its generations and its last
    generation's first piece and count."""
    hub: np.ndarray
    gen: np.ndarray
    size: np.ndarray
    start: np.ndarray
    src_lo: np.ndarray
    entries: np.ndarray
    gens: np.ndarray
    last_lo: np.ndarray
    last_count: np.ndarray


def _hub_trees(tables, hubs, W, writer) -> HubTrees:
    """The hub rows' pieces (flat_plan): a hub's first generation sums its entries, in the order
    they are written (`writer`: ticket position of each VEC entry's writer), in ⌈L/W⌉ pieces as
    even as np.array_split makes them; each next generation sums W results of the one before,
    until the hub row's own W slots hold the last generation's results and its right-hand side."""
    lens = np.diff(tables.ent_ptr)[hubs]
    extra = (tables.rhs[hubs] >= 0).astype(np.int64)
    owner, e = dags.expand_ranges(tables.ent_ptr[hubs], tables.ent_ptr[hubs + 1])
    entries = e[np.lexsort((writer[tables.ent_aux[e]], owner))]
    counts = [-(-lens // W)]
    while (counts[-1] + extra > W).any():
        c = counts[-1]
        counts.append(np.where(c + extra > W, -(-c // W), 0))
    N = np.stack(counts, axis=1) if len(hubs) else np.zeros((0, 1), np.int64)
    gens = (N > 0).sum(axis=1)
    base = (np.cumsum(N.ravel()) - N.ravel()).reshape(N.shape)       # each (hub, generation)'s first piece
    cell, q = dags.expand_ranges(np.zeros(N.size, np.int64), N.ravel())
    hub, gen = np.divmod(cell, N.shape[1])
    even, more = np.divmod(lens, np.maximum(N[:, 0], 1))              # np.array_split: `more` pieces of even + 1
    size0 = even[hub] + (q < more[hub])
    start = (np.cumsum(lens) - lens)[hub] + q * even[hub] + np.minimum(q, more[hub])
    prev = np.where(gen > 0, N[hub, np.maximum(gen - 1, 0)], 0)
    size = np.where(gen == 0, size0, np.minimum(q * W + W, prev) - q * W)
    src_lo = np.where(gen > 0, base[hub, np.maximum(gen - 1, 0)] + q * W, -1)
    last = np.maximum(gens - 1, 0)
    rows_ = np.arange(len(hubs))
    return HubTrees(hub, gen, size, np.where(gen == 0, start, -1), src_lo, entries, gens,
                    base[rows_, last], N[rows_, last])


def _pack(key, cnt, order, R, W):
    """(block, lane, offset) of each virtual row (flat_plan), taken in `order`: a new block where
    the key changes, or R rows or W entries are full. The greedy cut is followed from block start
    to block start (the next start of every position found at once), not row by row."""
    K, C = key[order], cnt[order]
    V = len(order)
    q = np.arange(V)
    ends = np.append(np.flatnonzero(K[1:] != K[:-1]) + 1, V)
    run_end = ends[np.searchsorted(ends, q, side="right")]
    inc = np.cumsum(C)
    exc = inc - C
    nxt = np.maximum(q + 1, np.minimum(np.minimum(q + R, run_end), np.searchsorted(inc, exc + W, side="right")))
    starts, s, nx = [], 0, nxt.tolist()
    while s < V:
        starts.append(s)
        s = nx[s]
    starts = np.asarray(starts, dtype=np.int64)
    first = np.zeros(V, dtype=bool)
    first[starts] = True
    b = np.cumsum(first) - 1
    blk, lane, off = (np.empty(V, dtype=np.int64) for _ in range(3))
    blk[order], lane[order], off[order] = b, q - starts[b], exc - exc[starts[b]]
    return blk, lane, off


def flat_plan(schedule, mats, tables, R, tickets, device, W):
    """The dataflow blocks as flat records (_flat). Block t's record is W entry slots t·W + k, one
    per thread: its rows' entries one after another, each row's right-hand side one more entry
    of coefficient 1, so a block of short rows takes one gather and no row takes a second trip.
    A block holds at most R rows (lane j of block t writes VEC entry n + t·R + j, as in
    _dataflow_plan) and W entries. A row of more than W entries (a power-law hub) is cut into
    pieces (_hub_trees): each piece is a row of its own, without divisor or place in row order,
    whose result only the next generation reads. Blocks follow ticket_order's groups in order,
    a row's pieces in blocks of their own just before its group, the first generation first, so
    every dependence still lies in an earlier block; a hub of 3000 entries becomes three hops of
    one gather each, where tail_sum took 24 trips of two dependent round trips. A new block
    starts where the group or the generation changes, or where R rows or W entries are full.
    Per entry slot: its VEC position in the slot layout (−1: none), its value index (−2:
    coefficient 1, −1: none), its row's sign, and seg = 4·j + 2·(first of its row) + (last of its
    row), which the segmented sum (_seg_add) and the stores read; per lane its divisor index
    (−1: none) and its place in row order (−1: none).

    Why: with no poll ever waiting (each call's slots left holding the last call's results) the
    records of _dataflow_plan took 0.349 / 0.352 / 0.342 ms on the power-law graph's sptrsv_spmv
    / spmv_sptrsv / sptrsv_sptrsv against 0.405 / 0.418 / 0.482 as they are (H100, 2026-11-28,
    float64, sparse-fusion schedule, figures/data/nowait_powerlaw_*): not the waits but a block's
    own cost set the time. Measured on the H100 (2026-11-28, same case, 3 interleaved rounds,
    every output checked first; ms as is, then with no poll waiting):
      flat_ab_*, divisors loaded after the gather: records 0.336 / 0.317 / 0.366 (0.280 / 0.282 /
        0.261); flat R = 4 0.283 / 0.241 / 0.331, R = 8 0.272 / 0.229 / 0.329 (0.190 / 0.188 /
        0.171), R = 16 0.263 / 0.237 / 0.319;
      flat_ab2_*, divisors loaded with the record (as now): records 0.308 / 0.319 / 0.371 (0.280 /
        0.289 / 0.260); W = 32: R = 8 0.239 / 0.218 / 0.275 (0.195 / 0.192 / 0.167), R = 16 0.253
        / 0.234 / 0.275; W = 64: R = 16 0.270 / 0.274 / 0.303 (0.173 / 0.177 / 0.151), R = 32
        0.283 / 0.231 / 0.294 — wider blocks cost less with no waiting and more as they are, a
        block waiting for all its rows' entries (FLAT_WIDTH, FLAT_BLOCK_ROWS).
    The three schedules stay within 2 % of each other (figures/data/flat_cli_powerlaw_*)."""
    n = tables.n1
    seq, group = ticket_order(schedule, mats, tickets)
    m = len(seq)
    gid = np.cumsum(np.r_[False, group[1:] != group[:-1]])                 # by ticket position, from 0
    lens = np.diff(tables.ent_ptr)
    has_rhs = tables.rhs >= 0
    items = lens + has_rhs
    writer = np.full(tables.vec_len, -1, dtype=np.int64)
    writer[tables.dst[seq]] = np.arange(m)
    cnt = np.maximum(items[seq], 1)                  # an empty row still stores its 0 (one empty slot)
    hp = np.flatnonzero(items[seq] > W)              # the hubs' ticket positions
    tree = _hub_trees(tables, seq[hp], W, writer)
    cnt[hp] = tree.last_count + has_rhs[seq[hp]]     # a hub row sums its last generation and b_i
    # virtual rows: the m rows, then every hub's pieces, hub by hub, generation by generation
    v_gid = np.concatenate([gid, gid[hp][tree.hub]])
    v_rank = np.concatenate([np.zeros(m, np.int64), tree.gen - tree.gens[tree.hub]])
    v_pos = np.concatenate([np.arange(m), hp[tree.hub]])
    v_cnt = np.concatenate([cnt, tree.size])
    order = np.lexsort((np.arange(len(v_pos)), v_pos, v_rank, v_gid))
    blk, lane, off = _pack(v_gid * 1024 + v_rank + 512, v_cnt, order, R, W)
    B = int(blk.max(initial=-1)) + 1
    slot = blk * R + lane                            # per virtual row
    where = np.arange(tables.vec_len, dtype=np.int32)
    where[tables.dst[seq]] = n + slot[:m]
    px = np.full(B * W, -1, dtype=np.int32)          # int32 as uploaded: half the pages to fill and scatter
    pv = np.full(B * W, -1, dtype=np.int32)
    sg = np.zeros(B * W, dtype=np.int8)
    seg = np.full(B * W, 2, dtype=np.int8)           # padding: a segment of its own, stored nowhere

    def put(v, c, k, x, val, sign):
        """Entry k of virtual row v, of c: VEC position x, value index val, sign."""
        at = blk[v] * W + off[v] + k
        px[at], pv[at], sg[at] = x, val, sign
        seg[at] = 4 * lane[v] + 2 * (k == 0) + (k == c - 1)

    # the rows that are not cut, all at once: their entries, then their right-hand sides, then the
    # one empty slot of a row with neither (its position and value index stay −1). The entries'
    # slots run on from each row's first: per row once, then repeated along its entries, not
    # gathered per entry (the power-law sptrsv_spmv's flat_plan 3.1–3.6 s against 4.2–4.6, the
    # same plan: figures/data/flat_plan_host_cpu_2026-12-05.txt). Their positions come without owners
    # (range_values), and the tables are int32 from the start, as uploaded: sptrsv_spmv's plan 1.33 s against
    # 1.86, spmv_sptrsv's 1.04 against 1.16, sptrsv_sptrsv's even (figures/data/flat_plan_host_cpu_2026-12-07.txt)
    plain = np.flatnonzero(items[seq] <= W)
    i, c = seq[plain], cnt[plain]
    e0, n_e = tables.ent_ptr[i].astype(np.int64), lens[i]
    e = dags.range_values(e0, e0 + n_e)
    at = np.repeat(blk[plain] * W + off[plain] - e0, n_e) + e
    px[at], pv[at], sg[at] = where[tables.ent_aux[e]], tables.ent_val[e], np.repeat(tables.sign[i], n_e)
    ends = np.cumsum(n_e)
    edge = np.zeros(len(e), dtype=np.int8)                # 2: a row's first slot, 1: its last
    edge[(ends - n_e)[n_e > 0]] = 2
    edge[(ends - 1)[(n_e > 0) & (n_e == c)]] += 1
    seg[at] = np.repeat(4 * lane[plain], n_e) + edge
    rh = np.flatnonzero(has_rhs[i])
    put(plain[rh], c[rh], lens[i[rh]], where[tables.rhs[i[rh]]], -2, 1)
    none = np.flatnonzero(items[i] == 0)
    put(plain[none], 1, 0, -1, -1, 0)
    # the first generation's pieces: a hub's entries in the order they are written
    first = np.flatnonzero(tree.gen == 0)
    piece, k = dags.expand_ranges(np.zeros(len(first), np.int64), tree.size[first])
    e = tree.entries[tree.start[first][piece] + k]
    hub = seq[hp][tree.hub[first][piece]]
    put(m + first[piece], tree.size[first][piece], k, where[tables.ent_aux[e]], tables.ent_val[e], tables.sign[hub])
    # later pieces and the hub rows: results of pieces of the generation before, coefficient 1
    later = np.flatnonzero(tree.gen > 0)
    lo = np.concatenate([tree.src_lo[later], tree.last_lo])
    c = np.concatenate([tree.size[later], tree.last_count])
    owner, src = dags.expand_ranges(lo, lo + c)
    v = np.concatenate([m + later, hp])
    total = np.concatenate([tree.size[later], cnt[hp]])
    put(v[owner], total[owner], src - lo[owner], n + slot[m + src], -2, 1)
    hr = np.flatnonzero(has_rhs[seq[hp]])           # a hub row's right-hand side comes last
    put(hp[hr], cnt[hp][hr], tree.last_count[hr], where[tables.rhs[seq[hp][hr]]], -2, 1)
    diag = np.full(B * R, -1, dtype=np.int64)
    dst = np.full(B * R, -1, dtype=np.int64)
    diag[slot[:m]], dst[slot[:m]] = tables.diag[seq], tables.dst[seq]
    read = np.zeros(n + B * R, dtype=bool)
    read[px[px >= n]] = True
    awaited = read[n:].reshape(B, R).any(1)
    host = {"px": px, "pv": pv, "sign": sg, "seg": seg,
            "diag": diag.astype(np.int32), "dst": dst.astype(np.int32), "back": where[n:].astype(np.int32)}
    if not awaited.all():
        host["awaited"] = awaited.astype(np.int8)
    return B, rows.to_device(host, device)


@triton.jit
def _seg_add(a, fa, b, fb):
    """The segmented sum's step: a segment's first entry (flag fb) starts the sum anew."""
    return tl.where(fb != 0, b, a + b), fa | fb


@triton.jit
def _flat(PX, N_BLK, PA, SEG, D, DINV, DST, VEC, OUT, N_IN, IN, R: tl.constexpr, W: tl.constexpr,
          SENT: tl.constexpr, NAP: tl.constexpr, PDL: tl.constexpr, DIRECT: tl.constexpr,
          LOOP: tl.constexpr = True, STRIDE: tl.constexpr = True):
    """The dataflow executor over flat records (flat_plan): program p of P runs blocks p, p + P, …
    Thread k of block t reads entry slot t·W + k: position, signed value, seg. The entries are
    gathered at once (input positions, below N_IN, from IN), the ones still holding the sentinel
    polled again (vec_await_entries), and the products summed per row by a segmented scan across
    the warp (_seg_add), which leaves each row's sum r on its last slot's thread; that thread
    divides (r·(1/d) with one Markstein correction, as _finish), stores lane j's result at VEC
    entry N_IN + t·R + j and, with DIRECT, at OUT[dst], its place in row order. The divisors are
    loaded with the record, before the gather, so that no load waits after it. Nothing is
    prefetched: the kernel is bound by L2 throughput, not by waiting (Nsight Compute, H200,
    2026-11-28: L2 76–82 % busy, L1 hit rate 0), and asking L1 for the next block's record, as
    _dataflow does, only added L2 requests — without it sptrsv_spmv / spmv_sptrsv / sptrsv_sptrsv
    took 0.203 / 0.168 / 0.242 ms against 0.214 / 0.187 / 0.245 (figures/data/flat_prefetch_ab_*).
    PDL: as _dataflow's. LOOP and STRIDE are what _launch_claimed gives every sync-free kernel;
    _flat always strides (reads_flat)."""
    t = tl.program_id(0)
    P = tl.num_programs(0)
    k = tl.arange(0, W)
    if PDL:
        gdc_wait()
    while t < N_BLK:
        e = t * W + k
        px = tl.load(PX + e)
        a = tl.load(PA + e)
        seg = tl.load(SEG + e).to(tl.int32)
        last = (seg & 1) != 0
        lane = t * R + (seg >> 2)
        d = tl.load(D + lane, mask=last, other=1.0)
        dinv = tl.load(DINV + lane, mask=last, other=1.0)
        m = px >= 0
        xp = tl.where(px < N_IN, IN + px, VEC + px)
        x = tl.load(xp, mask=m, other=0.0, volatile=True)
        x = vec_await_entries(x, xp, px, m, N_IN, SENT, NAP)
        r, _ = tl.associative_scan((a * x, (seg >> 1) & 1), 0, _seg_add)
        q = r * dinv
        q = tl.fma(tl.fma(-q, d, r), dinv, q)
        tl.store(VEC + N_IN + lane, q, mask=last)
        if DIRECT:
            dst = tl.load(DST + lane, mask=last, other=-1)
            tl.store(OUT + dst, q, mask=last & (dst >= 0))
        t += P
    if PDL:
        gdc_launch_dependents()
