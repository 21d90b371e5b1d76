"""Probe: how fast can a factor pair run where its factor rewrites only the diagonal?

A developer's probe, not package code (needs a CUDA GPU for timings; on a CPU under
TRITON_INTERPRET=1 it only checks its results). On the 5- and 7-point grids in natural order no
update of ILU(0) lands off the diagonal: for (i, k), k < i, row k's entries right of k meet row i
only at (i, i). Then row i of the pair spilu0_sptrsv is

    l_ik = a_ik / u_kk   (k < i in row i),   u_ii = a_ii − Σ_k l_ik·a_ki,   x_i = b_i − Σ_k l_ik·x_k,

a row that reads two values of each predecessor — its pivot u_kk and x_k — and nothing else that
is being computed: the shape of a vector pair's row (IC(0): l_ik = a_ik / l_kk, l_ii = √(a_ii −
Σ_k l_ik²), x_i = (b_i − Σ_k l_ik·x_k) / l_ii). Two kernels run exactly that, u_ii (l_ii) and x_i
each its own ready flag (sentinel until stored, as t3's dataflow executor does):

  * lean rows (DiagRunner, ILU(0) only; shapes R=…,PPS=…[,ST=1[,J=1|,PK=1]]): one lane per row,
    rows in blocks of R of one wavefront level, blocks handed out by ticket to PPS persistent
    programs per SM, or with ST=1 strided (_lean_stride: program p runs blocks p, p + P, …,
    reading ahead); J=1 polls the pivots and x in one loop (the package's vec_await_at; lean_joint_* was
    measured with the probe's own copy of that loop, which tested one OR of the two masks: 496
    sm_90 instructions against 504 now, 64 registers both), else the pivots first; KNOWN=1 (with
    --stamps) starts from the factor of a first call, so that only x is waited for (the pivots'
    polls pass at once): on an H200 the path's hop was 0.86–0.90 µs against 1.25–1.28 with the
    pivots in the making on the 3D grid, 0.67–0.70 against 1.09–1.12 on the 2D grid, the rows'
    work the same (lean_known_stamps_*, lean_stride_stamps_*); UF=1 stores u_ii first, then x_i
    and l_ik (else l_ik, x_i, u_ii): on an H200 the hop stayed 1.25–1.31 µs on the 3D grid and
    1.09 on the 2D grid (lean_ufirst_stamps_*), timed 0.589 ms against 0.601 (lean_ufirst_probe_*);
    PK=1 (with ST=1 or --stamps, float64) has each row store u_ii and x_i side by side in a third
    buffer, by one st.global.v2.f64 before its other stores, and poll its pivots and x_k there,
    each pair by one 16-byte load (ld.volatile.global.v2.b64): whether x_i becomes visible a
    round trip after u_ii because the two lie in different lines. Compiled for sm_90: 62
    registers, 432 instructions against 512, no other volatile load. On an H200 (2026-12-03,
    figures/data/packed_pivots_*) the path's hop fell to 0.93–0.96 µs on the 3D grid and
    0.38–0.42 on the 2D grid, and the 3D ILU(0) took 0.527 ms against 0.610 apart (2D 2.095
    against 2.815); the package runs such rows since (tiers/kernels/sparse_fusion_executors/lean.py);
  * chains (ChainRunner; shapes K=…,S=…,PPS=…,PIPE=…): a row links to its predecessor one level
    up with the largest index (a grid's rows chain along x), chains are cut every S links (S=0:
    never), K chains of one key walk side by side in a program, the parent's pivot and x carried
    in registers; PIPE=1 reads a step's tables two steps ahead and its values and the other
    chains' pivots and x one step ahead.

Each is timed against t3's dataflow executor (general factor rows: held steps, grids, stages)
and cuSPARSE, in one process, every output checked first (ab_commit.check_and_time).

    python dev/sparse_fusion/diag_probe.py OUT.json poisson3d:100[:float32[:spic0_sptrsv]],... "R=8,PPS=16;K=32,S=0,PPS=16,PIPE=1"

Data of 2026-12-03 (H200): figures/data/lean_row_probe_*, chain_probe_factor_*, lean_stride_probe_*,
lean_joint_probe_*.

    python dev/sparse_fusion/diag_probe.py --stamps OUT.json poisson3d:100[:float32],... R=8,PPS=16[,J=1][,KNOWN=1][,UF=1][,PK=1]

stamps the strided lean rows (%globaltimer as a block's wait starts, as its values are in, as it
is stored) and splits a level into late starts, hops and work (stamp_report); 68 registers
against 64 unstamped on sm_90. Data of 2026-12-03 (H200): figures/data/lean_stride_stamps_*,
lean_joint_stamps_*, lean_known_stamps_*, lean_ufirst_stamps_*. A fourth stamp, once the pivots
are in (before x's poll), splits the hop into the pivots' wait and x's after it (`pivots_us`,
`x_after_us`; 68 registers, 520 instructions on sm_90). On an H200 (lean_split_stamps_*) the
path's hop of 1.25–1.31 µs on the 3D grid was 0.74 µs until the pivots were in and 0.45 after
them for x (2D grid: 1.12 = 0.61 + 0.51).
"""
import json
import os
import sys
import time

import numpy as np
import torch
import triton
import triton.language as tl

from tiers import sparse_dags as dags
from tiers.kernels.sparse_fusion_executors.tickets import cut_blocks
from tiers.kernels.sparse_rows import SENTINEL, SENTINEL_BITS, _div, _pending, _sqrt, vec_await_at, vec_await_entries
from stamps import critical_path, latest_producers          # beside this file

PAIR = "spilu0_sptrsv"


def diag_only(S) -> bool:
    """Whether every ILU(0) update of S (dags.ILU0Structure) lands on its row's diagonal."""
    rows = np.repeat(np.arange(S.n), np.diff(S.indptr))
    lower = np.repeat(np.arange(len(S.indices)), np.diff(S.upd_ptr))
    return bool(np.all(S.upd_target == S.diag[rows[lower]]))


def _lower(S):
    """(CH, rows, p, k, c) of S's entries left of the diagonal: the slot tables' width (a power of
    2), each entry's row, position and column, and its index within its row."""
    CH = max(1, triton.next_power_of_2(int((S.diag - S.indptr[:-1]).max())))
    rows, p = dags.expand_ranges(S.indptr[:-1], S.diag)
    return CH, rows, p, S.indices[p].astype(np.int64), p - S.indptr[rows]


def _slot_tables(S, slot, nslot, CH, rows, p, k, c, pos_ki, par):
    """Per slot and lower entry (−1 padding): its position LP, column LK, k's diagonal LD, the
    position LQ of (k, i), and PAR (whether k is the chain's parent)."""
    tabs = {}
    for name, val in (("LP", p), ("LK", k), ("LD", S.diag[k]), ("LQ", pos_ki), ("PAR", par)):
        t = np.full((nslot, CH), -1, np.int32)
        t[slot[rows], c] = val
        tabs[name] = t
    return tabs


def plan(A, R):
    """Slot tables: rows by wavefront level of ILU(0)'s DAG, blocks of R slots in one level
    (padding −1); per slot its row, diagonal position, and per lower entry (CH of them, −1 padding)
    its position, column k, k's diagonal position and the position of (k, i)."""
    S, ok = _structure(A, PAIR)
    if not ok:
        raise ValueError("ILU(0) of this pattern rewrites entries off the diagonal")
    n = S.n
    CH, rows, p, k, c = _lower(S)
    level = dags.wavefront_levels(dags.dag_from_edges(k, rows, n))
    order = np.lexsort((np.arange(n), level))
    blk, lane = cut_blocks(level[order], R)
    nblk = int(blk[-1]) + 1
    slot = np.empty(n, np.int64)
    slot[order] = blk * R + lane
    ROW = np.full(nblk * R, -1, np.int32)
    ROW[slot] = np.arange(n)
    DP = np.zeros(nblk * R, np.int32)
    DP[slot] = S.diag
    # (k, i)'s position: row k's entries searched once for column i
    pos = dags._positions(S.indptr, S.indices, (n, n), k, rows)
    return nblk, CH, ROW, DP, _slot_tables(S, slot, nblk * R, CH, rows, p, k, c, pos, 0), S


@triton.jit
def _clock(dep):
    """%globaltimer (ns), read once `dep` (an int32) exists."""
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [dep], dtype=tl.int64, is_pure=False,
                                     pack=1)


@triton.jit
def _dep(x):
    """An int32 that exists only once every element of x does."""
    return (tl.sum(tl.ravel(x).to(tl.float32)) == 1.2345e-7).to(tl.int32)


@triton.jit
def _lean_row(LU, X, UX, i, p, k, dk, dp, a_ik, a_ki, a_ii, b, u, xk, SENT: tl.constexpr, STAMPS, t,
              STAMP: tl.constexpr, JOINT: tl.constexpr = False, UFIRST: tl.constexpr = False,
              PACK: tl.constexpr = 0):
    """A lean ILU(0) row once its values are read: the pivots and x_k polled until none holds the
    sentinel (they are their own flags; JOINT: in one loop, else the pivots' first), then l_ik,
    u_ii and x_i computed and stored, in the order l_ik, x_i, u_ii (UFIRST: u_ii, x_i, l_ik).
    STAMP: STAMPS[4t..4t+3] = the clock as the wait starts, once the values are in, once stored,
    and (not JOINT) once the pivots are in, between the two polls (a clock read and a sum across
    the row more there, tens of ns). PACK: each row also stores u_ii and x_i side by side in UX
    (UX[2i], UX[2i + 1], one 16-byte store before the others), and a row polls its pivots and
    x_k there, both by one load, instead of in LU and X (the values are not read ahead, _vals);
    PACK=2 stores the pair by one st.global.v2.f64 in inline PTX (the GPU's form), PACK=1 by
    tl.store (the interpreter's)."""
    ok = i >= 0
    m = p >= 0
    if STAMP:
        tl.store(STAMPS + 4 * t, _clock(t))
    if PACK:
        o = tl.arange(0, 2)
        at = 2 * k[:, :, None] + o[None, None, :]
        mm = m[:, :, None] & (o[None, None, :] >= 0)
        ux = tl.load(UX + at, mask=mm, other=1.0, volatile=True)
        while _pending(ux, at, mm, 0, SENT) != 0:
            ux = tl.load(UX + at, mask=mm, other=1.0, volatile=True)
        u, xk = tl.split(ux)
        if STAMP:
            tl.store(STAMPS + 4 * t + 3, _clock(_dep(u)))
    elif JOINT:                          # both polled in one loop, only what still holds the sentinel
        u, xk = vec_await_at(u, LU + dk, dk, m, xk, X + k, k, m, 0, SENT, 0, True)
    else:
        u = vec_await_entries(u, LU + dk, dk, m, 0, SENT, 0)
        if STAMP:
            tl.store(STAMPS + 4 * t + 3, _clock(_dep(u)))
        xk = vec_await_entries(xk, X + k, k, m, 0, SENT, 0)
    if STAMP:
        in_at = _clock(_dep(u) + _dep(xk))
        tl.store(STAMPS + 4 * t + 1, in_at)
        if JOINT:
            tl.store(STAMPS + 4 * t + 3, in_at)
    l_ik = _div(a_ik, tl.where(m, u, 1.0))
    uii = a_ii - tl.sum(tl.where(m, l_ik * a_ki, 0.0), 1)
    xi = b - tl.sum(tl.where(m, l_ik * xk, 0.0), 1)
    if PACK == 2:   # one st.global.v2.f64 (a [R, 2] store spreads over the warp's threads, unvectorized)
        tl.inline_asm_elementwise(
            "{ .reg .pred p; setp.ne.s32 p, $4, 0; @p st.global.v2.f64 [$1], {$2, $3}; mov.u32 $0, 0; }",
            "=r,l,d,d,r", [(UX + 2 * i).to(tl.int64, bitcast=True), uii, xi, ok.to(tl.int32)], dtype=tl.int32,
            is_pure=False, pack=1)
    elif PACK:      # the interpreter's form (no inline PTX there)
        o2 = tl.arange(0, 2)
        tl.store(UX + 2 * i[:, None] + o2[None, :], tl.where(o2[None, :] == 0, uii[:, None], xi[:, None]),
                 mask=ok[:, None])
    if UFIRST:
        tl.store(LU + dp, uii, mask=ok)
        tl.store(X + i, xi, mask=ok)
        tl.store(LU + p, l_ik, mask=m)
    else:
        tl.store(LU + p, l_ik, mask=m)
        tl.store(X + i, xi, mask=ok)
        tl.store(LU + dp, uii, mask=ok)
    if STAMP:
        tl.store(STAMPS + 4 * t + 2, _clock(_dep(uii) + _dep(xi)))


@triton.jit
def _diag_ilu(TICKET, N_BLK, ROW, DP, LP, LK, LD, LQ, A, B, LU, X, R: tl.constexpr, CH: tl.constexpr,
              SENT: tl.constexpr):
    """The lean rows by ticket: block t's tables, then its values, then its wait."""
    t = tl.atomic_add(TICKET, 1, sem="relaxed")
    while t < N_BLK:
        s = t * R + tl.arange(0, R)
        i = tl.load(ROW + s)
        ok = i >= 0
        e = s[:, None] * CH + tl.arange(0, CH)[None, :]
        p = tl.load(LP + e)
        m = p >= 0
        k = tl.load(LK + e, mask=m, other=0)
        dk = tl.load(LD + e, mask=m, other=0)
        q = tl.load(LQ + e, mask=m, other=0)
        dp = tl.load(DP + s, mask=ok, other=0)
        a_ik, a_ki, a_ii, b, u, xk = _vals(A, B, LU, X, i, p, k, dk, q, p * 0, dp)     # no parent
        _lean_row(LU, X, LU, i, p, k, dk, dp, a_ik, a_ki, a_ii, b, u, xk, SENT, LU, t, False)
        t = tl.atomic_add(TICKET, 1, sem="relaxed")


def _structure(A, pair):
    """(ILU0Structure or IC0Structure, whether its factor rewrites no entry but the diagonal)."""
    if pair == PAIR:
        S = dags.ilu0_symbolic(A)
        return S, diag_only(S)
    S = dags.ic0_symbolic(A)
    rows = np.repeat(np.arange(S.n), np.diff(S.indptr))
    counts = np.diff(S.pair_ptr)
    return S, bool(np.all(counts[S.indices < rows] == 0))


def chain_plan(A, K, steps, pair=PAIR):
    """Chains of the pair's factor rows, as t3's chain executor makes them (chains._chain_heads on a
    wavefront schedule's joint DAG: a row links to its predecessor one level up with the largest
    index, when it is that row's first such successor, so a grid's rows chain along x; cut every
    `steps` links, and wherever a chain would wait on one of no smaller key), and bundles of K of
    them of one key, ticketed in key order. Slot of (bundle b, step s, lane j): base[b] + s·K + j.
    A: the pair's matrix (IC(0) reads its lower triangle)."""
    from tiers import fusion_schedules as fs
    from tiers.kernels.sparse_fusion_executors.chains import _chain_heads
    from tiers.sparse_matrices import tril_csr
    S, ok = _structure(A if pair == PAIR else tril_csr(A), pair)
    if not ok:
        raise ValueError("the factor of this pattern rewrites entries off the diagonal")
    n = S.n
    CH, rows, p, k, c = _lower(S)
    head, top, pos, key = (x[:n] for x in _chain_heads(fs.inspect(pair, A, kind="wavefront"), (A,), steps))
    heads = np.flatnonzero(head)
    heads = heads[np.lexsort((heads, key[heads]))]
    length = np.bincount(top, minlength=n)[heads]
    blk, lane = cut_blocks(key[heads], K)
    nblk = int(blk[-1]) + 1
    nsteps = np.zeros(nblk, np.int64)
    np.maximum.at(nsteps, blk, length)
    base = np.zeros(nblk + 1, np.int64)
    np.cumsum(nsteps * K, out=base[1:])
    blk_of, lane_of = np.empty(n, np.int64), np.empty(n, np.int64)
    blk_of[heads], lane_of[heads] = blk, lane
    slot = base[blk_of[top]] + pos * K + lane_of[top]
    nslot = int(base[-1])
    ROW = np.full(nslot, -1, np.int32)
    ROW[slot] = np.arange(n)
    DP = np.zeros(nslot, np.int32)
    DP[slot] = S.diag
    pos_ki = dags._positions(S.indptr, S.indices, (n, n), k, rows) if pair == PAIR else p
    par = (top[k] == top[rows]) & (pos[k] == pos[rows] - 1)
    return (nblk, CH, base[:-1].astype(np.int32), nsteps.astype(np.int32), ROW, DP,
            _slot_tables(S, slot, nslot, CH, rows, p, k, c, pos_ki, par), S)


@triton.jit
def _tab(ROW, DP, LP, LK, LD, LQ, PAR, base, step, nst, K: tl.constexpr, CH: tl.constexpr):
    """Step `step`'s tables, all independent loads (padding holds −1); none past the last step."""
    lane = tl.arange(0, K)
    slot = base + step * K + lane
    live = (lane * 0 + step) < nst
    i = tl.load(ROW + slot, mask=live, other=-1)
    e = slot[:, None] * CH + tl.arange(0, CH)[None, :]
    lv = live[:, None] & (e >= 0)
    p = tl.load(LP + e, mask=lv, other=-1)
    k = tl.load(LK + e, mask=lv, other=0)
    dk = tl.load(LD + e, mask=lv, other=0)
    q = tl.load(LQ + e, mask=lv, other=0)
    par = tl.load(PAR + e, mask=lv, other=0)
    dp = tl.load(DP + slot, mask=live, other=0)
    return i, p, k, dk, q, par, dp


@triton.jit
def _vals(A, B, LU, X, i, p, k, dk, q, par, dp, AHEAD: tl.constexpr = True):
    """A step's values: the matrix's (static) and, issued without waiting (AHEAD; PK=1's rows poll
    their own pairs and read none), the pivots and x_k of rows of other chains."""
    ok = i >= 0
    m = p >= 0
    ext = m & (par == 0)
    a_ik = tl.load(A + p, mask=m, other=0.0)
    a_ki = tl.load(A + q, mask=m, other=0.0)
    a_ii = tl.load(A + dp, mask=ok, other=1.0)
    b = tl.load(B + i, mask=ok, other=0.0)
    if AHEAD:
        u = tl.load(LU + dk, mask=ext, other=1.0, volatile=True)
        xk = tl.load(X + k, mask=ext, other=0.0, volatile=True)
    else:
        u = tl.zeros_like(a_ik) + 1.0
        xk = tl.zeros_like(a_ik)
    return a_ik, a_ki, a_ii, b, u, xk


@triton.jit
def _chain_ilu(TICKET, N_BLK, BASE, NSTEPS, ROW, DP, LP, LK, LD, LQ, PAR, A, B, LU, X, K: tl.constexpr,
               CH: tl.constexpr, SENT: tl.constexpr, PIPE: tl.constexpr, IC: tl.constexpr):
    """K chains side by side, step by step, the parent's pivot and x from registers. PIPE: tables
    two steps ahead, values and polls one step ahead; else each step reads its own."""
    t = tl.atomic_add(TICKET, 1, sem="relaxed")
    while t < N_BLK:
        base = tl.load(BASE + t)
        nst = tl.load(NSTEPS + t)
        i0, p0, k0, dk0, q0, par0, dp0 = _tab(ROW, DP, LP, LK, LD, LQ, PAR, base, 0, nst, K, CH)
        i1, p1, k1, dk1, q1, par1, dp1 = _tab(ROW, DP, LP, LK, LD, LQ, PAR, base, 1, nst, K, CH)
        a_ik, a_ki, a_ii, b, u, xk = _vals(A, B, LU, X, i0, p0, k0, dk0, q0, par0, dp0)
        prev_u = tl.full([K], 1.0, LU.dtype.element_ty)
        prev_x = tl.zeros([K], LU.dtype.element_ty)
        for st in range(0, nst):
            if not PIPE:
                i0, p0, k0, dk0, q0, par0, dp0 = _tab(ROW, DP, LP, LK, LD, LQ, PAR, base, st, nst, K, CH)
                a_ik, a_ki, a_ii, b, u, xk = _vals(A, B, LU, X, i0, p0, k0, dk0, q0, par0, dp0)
            i2, p2, k2, dk2, q2, par2, dp2 = _tab(ROW, DP, LP, LK, LD, LQ, PAR, base, st + 2, nst, K, CH)
            a_ik1, a_ki1, a_ii1, b1, u1, xk1 = _vals(A, B, LU, X, i1, p1, k1, dk1, q1, par1, dp1)
            ok = i0 >= 0
            m = p0 >= 0
            ext = m & (par0 == 0)
            u = vec_await_entries(u, LU + dk0, dk0, ext, 0, SENT, 0)
            xk = vec_await_entries(xk, X + k0, k0, ext, 0, SENT, 0)
            inner = m & (par0 != 0)
            u = tl.where(inner, prev_u[:, None], u)
            xk = tl.where(inner, prev_x[:, None], xk)
            l_ik = _div(a_ik, tl.where(m, u, 1.0))
            if IC:
                rest = a_ii - tl.sum(tl.where(m, l_ik * l_ik, 0.0), 1)
                uii = tl.where(rest > 0, _sqrt(tl.where(rest > 0, rest, 1.0)), rest)
                xi = _div(b - tl.sum(tl.where(m, l_ik * xk, 0.0), 1), uii)
            else:
                uii = a_ii - tl.sum(tl.where(m, l_ik * a_ki, 0.0), 1)
                xi = b - tl.sum(tl.where(m, l_ik * xk, 0.0), 1)
            tl.store(LU + p0, l_ik, mask=m)
            tl.store(X + i0, xi, mask=ok)
            tl.store(LU + dp0, uii, mask=ok)
            prev_u, prev_x = uii, xi
            i0, p0, k0, dk0, q0, par0, dp0 = i1, p1, k1, dk1, q1, par1, dp1
            i1, p1, k1, dk1, q1, par1, dp1 = i2, p2, k2, dk2, q2, par2, dp2
            a_ik, a_ki, a_ii, b, u, xk = a_ik1, a_ki1, a_ii1, b1, u1, xk1
        t = tl.atomic_add(TICKET, 1, sem="relaxed")


@triton.jit
def _lean_stride(N_BLK, ROW, DP, LP, LK, LD, LQ, PAR, A, B, LU, X, UX, STAMPS, R: tl.constexpr,
                 CH: tl.constexpr, SENT: tl.constexpr, STAMP: tl.constexpr, JOINT: tl.constexpr = False,
                 UFIRST: tl.constexpr = False, PACK: tl.constexpr = 0):
    """The lean rows, program p of P running blocks p, p + P, … (all P resident): block t + 2P's
    tables and block t + P's values and first polls are read while block t waits and works."""
    P = tl.num_programs(0)
    t = tl.program_id(0)
    i0, p0, k0, dk0, q0, par0, dp0 = _tab(ROW, DP, LP, LK, LD, LQ, PAR, t * R, 0, (t < N_BLK).to(tl.int32), R, CH)
    a_ik, a_ki, a_ii, b, u, xk = _vals(A, B, LU, X, i0, p0, k0, dk0, q0, par0, dp0, PACK == 0)
    i1, p1, k1, dk1, q1, par1, dp1 = _tab(ROW, DP, LP, LK, LD, LQ, PAR, (t + P) * R, 0,
                                          (t + P < N_BLK).to(tl.int32), R, CH)
    for _ in range(0, tl.cdiv(N_BLK - t, P)):
        i2, p2, k2, dk2, q2, par2, dp2 = _tab(ROW, DP, LP, LK, LD, LQ, PAR, (t + 2 * P) * R, 0,
                                              (t + 2 * P < N_BLK).to(tl.int32), R, CH)
        a_ik1, a_ki1, a_ii1, b1, u1, xk1 = _vals(A, B, LU, X, i1, p1, k1, dk1, q1, par1, dp1, PACK == 0)
        _lean_row(LU, X, UX, i0, p0, k0, dk0, dp0, a_ik, a_ki, a_ii, b, u, xk, SENT, STAMPS, t, STAMP, JOINT, UFIRST,
                  PACK)
        i0, p0, k0, dk0, q0, par0, dp0 = i1, p1, k1, dk1, q1, par1, dp1
        i1, p1, k1, dk1, q1, par1, dp1 = i2, p2, k2, dk2, q2, par2, dp2
        a_ik, a_ki, a_ii, b, u, xk = a_ik1, a_ki1, a_ii1, b1, u1, xk1
        t += P


class _Runner:
    """What both runners share: A's values, the diagonal's positions and the ticket on the device,
    the grid (PPS persistent programs per SM, or one per block), and each call's fresh buffers."""

    def _setup(self, A, S, like, pps):
        dev, dt = like.device, like.dtype
        self.diag = torch.from_numpy(S.diag.astype(np.int64)).to(dev)
        self.A = torch.from_numpy(A.data).to(dev, dt)
        self.ticket = torch.zeros(1, dtype=torch.int32, device=dev)
        self.bits, self.sent = SENTINEL_BITS[dt], SENTINEL[dt]
        if dev.type == "cuda" and pps > 0:
            self.grid = min(self.nblk, torch.cuda.get_device_properties(dev).multi_processor_count * pps)
        else:
            self.grid = self.nblk

    def _buffers(self, b):
        """(LU: A's values, the sentinel on the diagonal — or, where the pivots are known, the
        factor of an earlier call; X: all sentinel), the ticket at zero."""
        known = getattr(self, "known", None)
        LU = self.A.clone() if known is None else known.clone()
        if known is None:
            LU.view(self.bits)[self.diag] = self.sent
        X = torch.empty_like(b)
        X.view(self.bits).fill_(self.sent)
        self.ticket.zero_()
        return LU, X


class ChainRunner(_Runner):
    """runner(b) → (LU values, x), the chain-bundle kernel."""

    def __init__(self, A, like, K=32, steps=1 << 20, pps=16, pipe=1, pair=PAIR):
        self.pipe, self.ic = bool(pipe), pair != PAIR
        self.nblk, self.CH, BASE, NST, ROW, DP, tabs, S = chain_plan(A, K, steps, pair)
        if self.ic:
            from tiers.sparse_matrices import tril_csr
            A = tril_csr(A)                 # its values are IC(0)'s
        self.K = K
        put = lambda a: torch.from_numpy(a).to(like.device)
        self.tab = {name: put(t) for name, t in tabs.items()}
        self.BASE, self.NST, self.ROW, self.DP = put(BASE), put(NST), put(ROW), put(DP)
        self._setup(A, S, like, pps)

    def __call__(self, b):
        LU, X = self._buffers(b)
        T = self.tab
        _chain_ilu[(self.grid,)](self.ticket, self.nblk, self.BASE, self.NST, self.ROW, self.DP, T["LP"], T["LK"],
                                 T["LD"], T["LQ"], T["PAR"], self.A, b, LU, X, K=self.K, CH=self.CH, SENT=self.sent,
                                 PIPE=self.pipe, IC=self.ic, num_warps=1)
        return LU, X


class DiagRunner(_Runner):
    """runner(b) → (LU values, x), the lean rows' kernel with its tables on the device."""

    def __init__(self, A, like, R=32, pps=16, stride=0, stamp=False, joint=0, known=0, ufirst=0, pack=0):
        self.nblk, self.CH, ROW, DP, tabs, S = plan(A, R)
        self.R, self.stride, self.stamp, self.joint, self.ufirst = R, bool(stride), stamp, bool(joint), bool(ufirst)
        self.pack = (2 if like.is_cuda else 1) if pack else 0
        if self.pack and (not self.stride or known or like.dtype != torch.float64):
            raise ValueError("PK=1 runs the strided lean rows (ST=1) in float64, without KNOWN")
        self.stamps = torch.zeros(4 * self.nblk, dtype=torch.int64, device=like.device)
        self.tab = {name: torch.from_numpy(t).to(like.device) for name, t in tabs.items()}
        self.ROW, self.DP = torch.from_numpy(ROW).to(like.device), torch.from_numpy(DP).to(like.device)
        self._setup(A, S, like, pps)
        if self.stride and like.is_cuda:       # every program resident: at most what the registers allow
            T = self.tab
            k = _lean_stride.warmup(self.nblk, self.ROW, self.DP, T["LP"], T["LK"], T["LD"], T["LQ"], T["PAR"],
                                    self.A, like, self.A, like, self.A, self.ticket, R=R, CH=self.CH,
                                    SENT=self.sent, STAMP=stamp, JOINT=self.joint, UFIRST=self.ufirst,
                                    PACK=self.pack, num_warps=1, grid=(1,))
            k._init_handles()              # n_regs is read from the loaded module
            per_sm = min(32, 65536 // (32 * ((k.n_regs + 7) // 8 * 8)), pps)
            self.grid = min(self.nblk, torch.cuda.get_device_properties(like.device).multi_processor_count * per_sm)
            self.regs = k.n_regs
        if known:       # the pivots of a first call: only x is waited for (a triangular solve's chain)
            self.known = self(like)[0]

    def __call__(self, b):
        LU, X = self._buffers(b)
        T = self.tab
        if self.stride:
            UX = LU
            if self.pack:
                UX = torch.empty(2 * b.shape[0], dtype=b.dtype, device=b.device)
                UX.view(self.bits).fill_(self.sent)
            _lean_stride[(self.grid,)](self.nblk, self.ROW, self.DP, T["LP"], T["LK"], T["LD"], T["LQ"], T["PAR"],
                                       self.A, b, LU, X, UX, self.stamps, R=self.R, CH=self.CH, SENT=self.sent,
                                       STAMP=self.stamp, JOINT=self.joint, UFIRST=self.ufirst, PACK=self.pack,
                                       num_warps=1)
            return LU, X
        _diag_ilu[(self.grid,)](self.ticket, self.nblk, self.ROW, self.DP, T["LP"], T["LK"], T["LD"], T["LQ"],
                                self.A, b, LU, X, R=self.R, CH=self.CH, SENT=self.sent, num_warps=1)
        return LU, X


def stamp_report(run, b):
    """One stamped call of a strided DiagRunner (stamp=True), each block related to its latest
    stored predecessor block: `late`, how long after that store the block's wait began (> 0: its
    program was still busy); `hop`, from the later of the two until its values were in; `work`,
    from then until stored; the hop split at the pivots' arrival (`pivots`, from the later of the
    two until the pivots were in; `x_after`, from then until x was in; 0 with J=1). Medians over
    all blocks and along the critical path (from the last store back through latest
    predecessors), in µs."""
    run(b)
    torch.cuda.synchronize()
    st = run.stamps.view(-1, 4).cpu().numpy()
    R, nblk = run.R, run.nblk
    ROW = run.ROW.cpu().numpy()
    LP, LK = run.tab["LP"].cpu().numpy(), run.tab["LK"].cpu().numpy()
    blk_of = np.zeros(int(ROW.max()) + 1, np.int64)
    live = np.flatnonzero(ROW >= 0)
    blk_of[ROW[live]] = live // R
    slot, c = np.nonzero(LP >= 0)
    mine, pred = slot // R, blk_of[LK[slot, c]]
    pdone, latest = latest_producers(nblk, mine, pred, st[pred, 2])
    has = latest >= 0
    late = np.where(has, st[:, 0] - pdone, 0) / 1e3
    hop = np.where(has, st[:, 1] - np.maximum(st[:, 0], pdone), 0) / 1e3
    work = (st[:, 2] - st[:, 1]) / 1e3
    piv = np.where(has, st[:, 3] - np.maximum(st[:, 0], pdone), 0) / 1e3
    x_after = (st[:, 1] - st[:, 3]) / 1e3
    path = critical_path(latest, int(np.argmax(st[:, 2])))[1:]      # the first block waits for none
    med = lambda x: round(float(np.median(x)), 3)
    return {"span_us": round((st[:, 2].max() - st[:, 0].min()) / 1e3, 1), "blocks": int(nblk), "grid": run.grid,
            "all": {"late_us": med(late[has]), "late_frac": round(float((late[has] > 0).mean()), 3),
                    "hop_us": med(hop[has]), "work_us": med(work), "pivots_us": med(piv[has]),
                    "x_after_us": med(x_after[has])},
            "path": {"levels": len(path), "late_us": med(np.maximum(late[path], 0)),
                     "hop_us": med(hop[path]), "work_us": med(work[path]), "pivots_us": med(piv[path]),
                     "x_after_us": med(x_after[path]),
                     "late_frac": round(float((late[path] > 0).mean()), 3),
                     "per_level_us": round(float((st[path[-1], 2] - st[path[0], 2]) / 1e3 / max(len(path) - 1, 1)),
                                           3)}}


def main():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))      # ab_commit.py beside it
    from ab_commit import check_and_time, run_header, save_row
    from tiers import fusion_schedules as fs
    from tiers.bench import sparse_fusion as bench
    from tiers.t3_triton_fused import sparse_fusion as sf
    if sys.argv[1] == "--stamps":          # --stamps OUT.json CASES R,PPS: stamped strided lean rows
        return stamps_main(*sys.argv[2:])
    out, cases = sys.argv[1], sys.argv[2].split(",")
    shapes = [_shape(s) for s in (sys.argv[3] if len(sys.argv) > 3 else "R=32,PPS=16").split(";")]
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    res = run_header(dev)
    for case in cases:
        name, size, *rest = case.split(":")
        dtype = rest[0] if rest else "float64"
        pair = rest[1] if len(rest) > 1 else PAIR
        A = bench.make_matrix(name, int(size))
        mats = bench.operands(pair, A)
        g = torch.Generator().manual_seed(3)
        v64 = torch.rand(A.shape[0], generator=g, dtype=torch.float64) + 0.5
        v = v64.to(dev, getattr(torch, dtype))
        v2 = (torch.rand(A.shape[0], generator=g, dtype=torch.float64) + 0.5).to(dev, getattr(torch, dtype))
        t0 = time.perf_counter()
        runs = {}
        for sh in shapes:
            if "K" in sh:
                runs[f"chain_K{sh['K']}_S{sh.get('S', 0)}_P{sh['PPS']}_pipe{sh.get('PIPE', 1)}"] = ChainRunner(
                    A, v, K=sh["K"], steps=sh.get("S", 0) or 1 << 20, pps=sh["PPS"], pipe=sh.get("PIPE", 1),
                    pair=pair)
            elif pair == PAIR:
                pk = f"_pk{sh['PK']}" if sh.get("PK") else ""
                runs[f"diag_R{sh['R']}_P{sh['PPS']}_st{sh.get('ST', 0)}_j{sh.get('J', 0)}_uf{sh.get('UF', 0)}{pk}"] = (
                    DiagRunner(A, v, R=sh["R"], pps=sh["PPS"], stride=sh.get("ST", 0), joint=sh.get("J", 0),
                               ufirst=sh.get("UF", 0), pack=sh.get("PK", 0)))
        plan_s = time.perf_counter() - t0
        runs["t3"] = sf.prepare(pair, *mats, like=v, schedule=fs.inspect(pair, *mats, kind="sparse_fusion"),
                                executor="dataflow")
        row = check_and_time(f"{case}:{pair}", runs, list(runs), bench.reference(pair, mats, v64.numpy()), v, v2,
                             dtype)
        row["probe_plan_s"] = round(plan_s, 2)
        if dev.type == "cuda":
            from triton.testing import do_bench
            try:
                call = bench.cupy_call("cusparse", pair, mats, v)
                row["ms"]["cusparse"] = do_bench(call, warmup=25, rep=250, return_mode="median")
                row["ratio_vs_cusparse"] = {k: row["ms"]["cusparse"] / ms for k, ms in row["ms"].items()}
            except Exception as e:       # noqa: BLE001 - the probe records why the anchor did not run
                row["cusparse_error"] = repr(e)
        del runs
        save_row(res, row, out)


def _shape(text):
    """{"R": 8, "PPS": 16, …} from "R=8,PPS=16,…"."""
    return dict((kv.split("=")[0], int(kv.split("=")[1])) for kv in text.split(","))


def stamps_main(out, cases, shape):
    from ab_commit import run_header                      # beside this file (main put it on the path)
    from tiers.bench import sparse_fusion as bench
    sh = _shape(shape)
    res = run_header(torch.device("cuda"), shape=sh)
    for case in cases.split(","):
        name, size, *rest = case.split(":")
        A = bench.make_matrix(name, int(size))
        v = (torch.rand(A.shape[0], dtype=torch.float64) + 0.5).to("cuda", getattr(torch, rest[0] if rest else
                                                                                   "float64"))
        run = DiagRunner(A, v, R=sh["R"], pps=sh["PPS"], stride=1, stamp=True, joint=sh.get("J", 0),
                         known=sh.get("KNOWN", 0), ufirst=sh.get("UF", 0), pack=sh.get("PK", 0))
        rows = [stamp_report(run, v) for _ in range(3)]
        for r in rows:
            print(json.dumps({"case": case, **r}), flush=True)
        res["rows"].append({"case": case, "calls": rows})
        json.dump(res, open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
