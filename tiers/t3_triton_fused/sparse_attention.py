"""Fused sparse attention over an ACSR pattern (SPLAT), forward and backward.

For each query i the allowed keys are the union of a few disjoint affine segments
(tiers/acsr.py): keys start(i) + σ·m, 0 ≤ m < count(i), clipped to [0, Lk), with start and count
affine in i. The kernel is FlashAttention's online softmax over exactly those keys, specialised
just in time on the pattern's geometry:

  * Segments are sorted into *classes* by (σ, a_start mod σ, b_start mod σ). Within a class,
    the queries i = ρ + σ·t of one residue class ρ see keys of one residue class κ only:
    j = κ + σ·u. So a program owns a tile of queries ρ + σ·(t0 … t0+BLOCK_M) and walks its
    keys in dense tiles of u: a dilated window becomes a plain sliding window, the strided
    part of a Sparse-Transformer pattern a plain causal triangle — nothing is masked merely for
    lying in another residue class. σ, the number of segment slots and the group count are
    constexprs: Triton compiles one kernel per geometry.
  * Per query and slot, the key range [lo, hi) in u comes from the segment parameters of the
    query's row group (found by a binary search over the group boundaries); a tile walks the
    union of its queries' ranges and masks only key tiles that are not inside every range.
  * A pattern with several classes (e.g. local window + strided) runs one launch per class;
    because the segments are disjoint, the softmax over their union is the log-sum-exp merge
    of the per-class results, done in place by the later launch. Rows without any key get
    zeros (as FlexAttention), and lse = −∞.

  * Equal square blocks (blocked(L, b) with b dividing L, b ≥ 512) are a batch of dense
    attentions: the pattern runs as FlashAttention over a [B, H·L/b, b, D] view, forward and
    backward (tiers/t3_triton_fused/attention.py) — measured faster than the general kernels
    there, slower for smaller blocks.

Backward (recompute P from lse), per class: dQ by the forward's walk; dK and dV by a program per
key tile that walks the query rows able to see it — in class coordinates a segment is a band
a·t + β ≤ u < (a + γ)·t + β + δ, so those rows are one interval per (group, slot), solved from
the two inequalities. No atomics. Δ = rowsum(dO ⊙ O) is computed by the first dQ launch.

  * Block-diagonal patterns with blocks of at most 256 rows (blocked(L, 256) and smaller, or
    such masks through from_mask, blocks of any sizes) run on kernels that know the geometry:
    a program is one tile of one block, listed by the host as (first row, r0, r1), so it finds
    its keys with three independent loads instead of a group search and a segment table.
    The forward is _blocks_fwd. The backward is either one pass (_blocks_bwd: a program owns a
    block, so it can sum dQ over the block's key tiles itself, FlashAttention-2's five products
    per step instead of seven) or split (_blocks_bwd_dq, then _blocks_bwd_dkdv), by head dim, as
    measured on the H100: see _BLOCKS_FWD and _BLOCKS_BWD.
"""
import functools
import math

import numpy as np
import torch
import triton
import triton.language as tl

from tiers.buffers import empty, empty_like
from tiers.kernels.acsr_tiles import row_group
from tiers.kernels.gemm import block_d, dot as _dot
from tiers.t3_triton_fused.attention import LOG2E, attention_of as dense_attention
from tiers.validation import AttentionShape, interpreting, validate_sparse_attention


@triton.jit
def _slot_range(TABLE, grp, rows, row_ok, slot, MAXSEG: tl.constexpr, SIGMA: tl.constexpr, kappa, Uk):
    """Key range [lo, hi) in u (key j = κ + σ·u) of segment slot `slot` for each row, clipped."""
    p = TABLE + (grp * MAXSEG + slot) * 4
    start = tl.load(p) * rows + tl.load(p + 1)
    count = tl.maximum(tl.load(p + 2) * rows + tl.load(p + 3), 0)
    u0 = (start - kappa) // SIGMA            # exact: start ≡ κ (mod σ) within a class
    lo = tl.maximum(u0, 0)
    hi = tl.maximum(tl.minimum(u0 + count, Uk), lo)
    return tl.where(row_ok, lo, 0), tl.where(row_ok & (count > 0), hi, 0)


@triton.jit
def _class_tile(pid, Lq, Lk, BOUNDS, G, A_MOD, B_MOD, SIGMA: tl.constexpr, LOG_G: tl.constexpr,
                BLOCK_M: tl.constexpr):
    """Program -> its query rows ρ + σ·(t0 + 0..BLOCK_M), their groups, the key residue κ and
    the number Uk of keys κ + σ·u of that residue."""
    per_class = tl.cdiv(tl.cdiv(Lq, SIGMA), BLOCK_M)
    rho = pid // per_class
    rows = rho + SIGMA * ((pid % per_class) * BLOCK_M + tl.arange(0, BLOCK_M))
    kappa = (A_MOD * rho + B_MOD) % SIGMA
    Uk = tl.maximum(tl.cdiv(Lk - kappa, SIGMA), 0)
    grp = row_group(BOUNDS, tl.minimum(rows, Lq - 1), G, LOG_G)
    return rows, rows < Lq, grp, kappa, Uk


@triton.jit
def _sparse_fwd(Q, K, V, O, LSE, BOUNDS, TABLE, ORDER, qk_scale, H, Lq, Lk, G, A_MOD, B_MOD,
                s_qb, s_qh, s_qm, s_qd, s_kb, s_kh, s_kn, s_kd, s_vb, s_vh, s_vn, s_vd,
                s_ob, s_oh, s_om, s_od,
                SIGMA: tl.constexpr, MAXSEG: tl.constexpr, LOG_G: tl.constexpr, FIRST: tl.constexpr, LPT: tl.constexpr,
                HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, IEEE: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    bh = tl.program_id(0) if LPT else tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    rows, row_ok, grp, kappa, Uk = _class_tile(tl.load(ORDER + tl.program_id(1)) if LPT else tl.program_id(0), Lq, Lk, BOUNDS, G, A_MOD, B_MOD, SIGMA, LOG_G,
                                               BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM
    q = tl.load(Q + b * s_qb + h * s_qh + rows[:, None].to(tl.int64) * s_qm + offs_d[None, :] * s_qd,
                mask=row_ok[:, None] & d_ok[None, :], other=0.0)
    k_base = K + b * s_kb + h * s_kh
    v_base = V + b * s_vb + h * s_vh
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_D), tl.float32)
    for slot in tl.static_range(MAXSEG):
        lo, hi = _slot_range(TABLE, grp, rows, row_ok, slot, MAXSEG, SIGMA, kappa, Uk)
        has = hi > lo
        # keys every valid row of the tile sees: key tiles inside need no mask
        in_lo = tl.max(tl.where(row_ok, lo, 0))
        in_hi = tl.min(tl.where(row_ok, hi, Uk))
        for u_start in range(tl.min(tl.where(has, lo, Uk)), tl.max(hi), BLOCK_N):
            us = u_start + tl.arange(0, BLOCK_N)
            keys = (kappa + SIGMA * us).to(tl.int64)
            k_ok = us < Uk
            kt = tl.load(k_base + keys[None, :] * s_kn + offs_d[:, None] * s_kd,
                         mask=k_ok[None, :] & d_ok[:, None], other=0.0)
            s = _dot(q, kt, tl.zeros((BLOCK_M, BLOCK_N), tl.float32), IEEE)
            if (u_start < in_lo) | (u_start + BLOCK_N > in_hi):
                s = tl.where((us[None, :] >= lo[:, None]) & (us[None, :] < hi[:, None]), s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
            m_use = tl.where(m_new == float("-inf"), 0.0, m_new)   # no key seen yet
            p = tl.math.exp2(s * qk_scale - m_use[:, None])
            alpha = tl.math.exp2(m_i - m_use)
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(v_base + keys[:, None] * s_vn + offs_d[None, :] * s_vd,
                        mask=k_ok[:, None] & d_ok[None, :], other=0.0)
            acc = _dot(p.to(v.dtype), v, acc * alpha[:, None], IEEE)
            m_i = m_new
    l_safe = tl.where(l_i == 0.0, 1.0, l_i)
    o = acc / l_safe[:, None]
    lse = tl.where(l_i > 0.0, m_i + tl.math.log2(l_safe), float("-inf"))
    o_ptrs = O + b * s_ob + h * s_oh + rows[:, None].to(tl.int64) * s_om + offs_d[None, :] * s_od
    lse_ptrs = LSE + bh.to(tl.int64) * Lq + rows
    if not FIRST:  # merge with the classes already done: log-sum-exp of disjoint key sets
        lse_prev = tl.load(lse_ptrs, mask=row_ok, other=float("-inf"))
        o_prev = tl.load(o_ptrs, mask=row_ok[:, None] & d_ok[None, :], other=0.0).to(tl.float32)
        top = tl.maximum(lse_prev, lse)
        top = tl.where(top == float("-inf"), 0.0, top)
        w_prev = tl.math.exp2(lse_prev - top)
        w_new = tl.math.exp2(lse - top)
        total = w_prev + w_new
        t_safe = tl.where(total == 0.0, 1.0, total)
        o = (o_prev * w_prev[:, None] + o * w_new[:, None]) / t_safe[:, None]
        lse = tl.where(total > 0.0, top + tl.math.log2(t_safe), float("-inf"))
    tl.store(lse_ptrs, lse, mask=row_ok)
    tl.store(o_ptrs, o.to(O.dtype.element_ty), mask=row_ok[:, None] & d_ok[None, :])


@triton.jit
def _sparse_bwd_dq(Q, K, V, O, DO, LSE, DELTA, DQ, BOUNDS, TABLE, ORDER, qk_scale, scale, H, Lq, Lk, G,
                   A_MOD, B_MOD,
                   s_qb, s_qh, s_qm, s_qd, s_kb, s_kh, s_kn, s_kd, s_vb, s_vh, s_vn, s_vd,
                   s_db, s_dh, s_dm, s_dd, s_gb, s_gh, s_gm, s_gd,
                   SIGMA: tl.constexpr, MAXSEG: tl.constexpr, LOG_G: tl.constexpr, FIRST: tl.constexpr, LPT: tl.constexpr,
                   HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, IEEE: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """dQ of one class's query tiles, the forward's walk; later classes add to what the first wrote.
    Every launch covers every query row, so the first one also computes Δ = rowsum(dO ⊙ O) from
    the dO tile it loads anyway (O has dO's strides) and stores it for the dK/dV kernels and the
    later classes: no separate pass over dO."""
    bh = tl.program_id(0) if LPT else tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    rows, row_ok, grp, kappa, Uk = _class_tile(tl.load(ORDER + tl.program_id(1)) if LPT else tl.program_id(0), Lq, Lk, BOUNDS, G, A_MOD, B_MOD, SIGMA, LOG_G,
                                               BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM
    qm = row_ok[:, None] & d_ok[None, :]
    rows64 = rows[:, None].to(tl.int64)
    q = tl.load(Q + b * s_qb + h * s_qh + rows64 * s_qm + offs_d[None, :] * s_qd, mask=qm, other=0.0)
    do = tl.load(DO + b * s_db + h * s_dh + rows64 * s_dm + offs_d[None, :] * s_dd, mask=qm, other=0.0)
    lse = tl.load(LSE + bh.to(tl.int64) * Lq + rows, mask=row_ok, other=0.0)
    lse = tl.where(lse == float("-inf"), 0.0, lse)  # rows without keys: every p below is masked to 0
    if FIRST:
        o = tl.load(O + b * s_db + h * s_dh + rows64 * s_dm + offs_d[None, :] * s_dd, mask=qm, other=0.0)
        delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
        tl.store(DELTA + bh.to(tl.int64) * Lq + rows, delta, mask=row_ok)
    else:
        delta = tl.load(DELTA + bh.to(tl.int64) * Lq + rows, mask=row_ok, other=0.0)
    k_base = K + b * s_kb + h * s_kh
    v_base = V + b * s_vb + h * s_vh
    dq = tl.zeros((BLOCK_M, BLOCK_D), tl.float32)
    for slot in tl.static_range(MAXSEG):
        lo, hi = _slot_range(TABLE, grp, rows, row_ok, slot, MAXSEG, SIGMA, kappa, Uk)
        has = hi > lo
        in_lo = tl.max(tl.where(row_ok, lo, 0))
        in_hi = tl.min(tl.where(row_ok, hi, Uk))
        for u_start in range(tl.min(tl.where(has, lo, Uk)), tl.max(hi), BLOCK_N):
            us = u_start + tl.arange(0, BLOCK_N)
            keys = (kappa + SIGMA * us).to(tl.int64)
            km = (us < Uk)[:, None] & d_ok[None, :]
            k = tl.load(k_base + keys[:, None] * s_kn + offs_d[None, :] * s_kd, mask=km, other=0.0)
            v = tl.load(v_base + keys[:, None] * s_vn + offs_d[None, :] * s_vd, mask=km, other=0.0)
            s = _dot(q, tl.trans(k), tl.zeros((BLOCK_M, BLOCK_N), tl.float32), IEEE)
            p = tl.math.exp2(s * qk_scale - lse[:, None])
            if (u_start < in_lo) | (u_start + BLOCK_N > in_hi):
                p = tl.where((us[None, :] >= lo[:, None]) & (us[None, :] < hi[:, None]), p, 0.0)
            dp = _dot(do, tl.trans(v), tl.zeros((BLOCK_M, BLOCK_N), tl.float32), IEEE)
            dq = _dot((p * (dp - delta[:, None])).to(k.dtype), k, dq, IEEE)
    dq_ptrs = DQ + b * s_gb + h * s_gh + rows64 * s_gm + offs_d[None, :] * s_gd
    dq = dq * scale
    if not FIRST:
        dq += tl.load(dq_ptrs, mask=qm, other=0.0).to(tl.float32)
    tl.store(dq_ptrs, dq.to(DQ.dtype.element_ty), mask=qm)


@triton.jit
def _sparse_bwd_dkdv(Q, K, V, DO, LSE, DELTA, DK, DV, ITEM_PTR, ITEMS, TABLE, ORDER, qk_scale, scale, H, Lq, Lk,
                     s_qb, s_qh, s_qm, s_qd, s_kb, s_kh, s_kn, s_kd, s_vb, s_vh, s_vn, s_vd,
                     s_db, s_dh, s_dm, s_dd, s_gb, s_gh, s_gn, s_gd,
                     SIGMA: tl.constexpr, FIRST: tl.constexpr, LPT: tl.constexpr,
                     HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, IEEE: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """dK, dV of one key tile of one class; later classes add to what the first wrote (every
    launch covers every key tile, so the first writes all of DK and DV).

    In class coordinates (rows i = ρ + σt, keys j = κ + σu) a segment of group g is the band
    a·t + β ≤ u < a·t + β + γ·t + δ. The rows that can see key tile [u0, u1) form one interval
    of t per (ρ, group, slot); the host lists the non-empty ones per key tile (`_dkdv_items`),
    so a program walks only rows that meet its tile and never loops over every group. The
    per-row mask below is exact; the intervals may be a superset."""
    bh = tl.program_id(0) if LPT else tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    tile = tl.load(ORDER + tl.program_id(1)) if LPT else tl.program_id(0)
    per_class = tl.cdiv(tl.cdiv(Lk, SIGMA), BLOCK_N)
    kappa = tile // per_class
    u0 = (tile % per_class) * BLOCK_N
    Uk = tl.maximum(tl.cdiv(Lk - kappa, SIGMA), 0)
    us = u0 + tl.arange(0, BLOCK_N)
    k_ok = us < Uk
    keys = (kappa + SIGMA * us).to(tl.int64)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM
    km = k_ok[:, None] & d_ok[None, :]
    k = tl.load(K + b * s_kb + h * s_kh + keys[:, None] * s_kn + offs_d[None, :] * s_kd, mask=km, other=0.0)
    v = tl.load(V + b * s_vb + h * s_vh + keys[:, None] * s_vn + offs_d[None, :] * s_vd, mask=km, other=0.0)
    dk = tl.zeros((BLOCK_N, BLOCK_D), tl.float32)
    dv = tl.zeros((BLOCK_N, BLOCK_D), tl.float32)
    for it in range(tl.load(ITEM_PTR + tile), tl.load(ITEM_PTR + tile + 1)):
        item = ITEMS + it * 4
        rho = tl.load(item)
        seg = TABLE + tl.load(item + 1) * 4          # (group, slot) of the band
        t_lo = tl.load(item + 2)
        t_hi = tl.load(item + 3)
        a = tl.load(seg)
        ac = tl.load(seg + 2)
        beta = (a * rho + tl.load(seg + 1) - kappa) // SIGMA   # exact within the class
        gamma = ac * SIGMA
        delta_c = ac * rho + tl.load(seg + 3)
        for t_start in range(t_lo, t_hi, BLOCK_M):
            ts = t_start + tl.arange(0, BLOCK_M)
            t_ok = ts < t_hi
            rows = (rho + SIGMA * ts).to(tl.int64)
            qm = t_ok[:, None] & d_ok[None, :]
            q = tl.load(Q + b * s_qb + h * s_qh + rows[:, None] * s_qm + offs_d[None, :] * s_qd,
                        mask=qm, other=0.0)
            do = tl.load(DO + b * s_db + h * s_dh + rows[:, None] * s_dm + offs_d[None, :] * s_dd,
                         mask=qm, other=0.0)
            lse = tl.load(LSE + bh.to(tl.int64) * Lq + rows, mask=t_ok, other=0.0)
            lse = tl.where(lse == float("-inf"), 0.0, lse)
            dlt = tl.load(DELTA + bh.to(tl.int64) * Lq + rows, mask=t_ok, other=0.0)
            start = a * ts + beta
            lo = tl.maximum(start, 0)
            hi = tl.minimum(start + tl.maximum(gamma * ts + delta_c, 0), Uk)
            st = _dot(k, tl.trans(q), tl.zeros((BLOCK_N, BLOCK_M), tl.float32), IEEE)
            pt = tl.math.exp2(st * qk_scale - lse[None, :])
            # Most steps lie wholly inside the band (every key of the tile seen by every row) and
            # skip the per-element mask, as the forward does. Decided on scalars at the step's two
            # end rows, no reduction: the band's start a·t + β is monotone in t, and its end,
            # max((a + γ)·t + β + δ, a·t + β), is at least the larger of the two lines' minima.
            t_end = t_start + BLOCK_M - 1
            end_lo = tl.maximum(tl.minimum((a + gamma) * t_start, (a + gamma) * t_end) + beta + delta_c,
                                tl.minimum(a * t_start, a * t_end) + beta)
            inside = ((t_end < t_hi) & (tl.maximum(a * t_start, a * t_end) + beta <= u0)
                      & (tl.minimum(end_lo, Uk) >= u0 + BLOCK_N))
            if not inside:
                pt = tl.where((us[:, None] >= lo[None, :]) & (us[:, None] < hi[None, :]) & t_ok[None, :], pt, 0.0)
            dv = _dot(pt.to(do.dtype), do, dv, IEEE)
            dpt = _dot(v, tl.trans(do), tl.zeros((BLOCK_N, BLOCK_M), tl.float32), IEEE)
            dk = _dot((pt * (dpt - dlt[None, :])).to(q.dtype), q, dk, IEEE)
    g_ptrs = b * s_gb + h * s_gh + keys[:, None] * s_gn + offs_d[None, :] * s_gd
    dk = dk * scale
    if not FIRST:
        dk += tl.load(DK + g_ptrs, mask=km, other=0.0).to(tl.float32)
        dv += tl.load(DV + g_ptrs, mask=km, other=0.0).to(tl.float32)
    tl.store(DK + g_ptrs, dk.to(DK.dtype.element_ty), mask=km)
    tl.store(DV + g_ptrs, dv.to(DV.dtype.element_ty), mask=km)


@triton.jit
def _block_tile(TILES, L, HEAD_DIM: tl.constexpr):
    """Program -> (batch·H + head, where that head's [L, D] matrix starts in every contiguous
    [B, H, L, D] tensor, first row of its tile, its block [r0, r1)): one row of the host's tile
    list, three loads that do not wait on one another."""
    tile = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    first = tl.load(TILES + 3 * tile)
    r0 = tl.load(TILES + 3 * tile + 1)
    r1 = tl.load(TILES + 3 * tile + 2)
    return bh, bh * L * HEAD_DIM, first, r0, r1


@triton.jit
def _rows_at(idx, offs_d, HEAD_DIM: tl.constexpr):
    """Offsets of rows `idx` × columns `offs_d` of a contiguous [L, HEAD_DIM] matrix."""
    return idx[:, None].to(tl.int64) * HEAD_DIM + offs_d[None, :]


# The block kernels take q, k, v, o, dO and the gradients contiguous (the wrapper makes them so),
# which spares sixteen or twenty stride arguments: Triton's launch costs about a microsecond an
# argument, and a short call (L = 2048) is bound by its launch, not by the GPU.

@triton.jit
def _blocks_fwd(Q, K, V, O, LSE, TILES, qk_scale, L,
                HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, IEEE: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Forward of one query tile of one diagonal block [r0, r1) × [r0, r1): FlashAttention over
    the block's keys and nothing else. The host lists every tile as (first row, r0, r1), three
    independent loads, where the general kernel finds its rows' group by a binary search and their
    key ranges from the segment table, dependent loads a short program cannot hide. Every row
    of a block sees a key, so no row is empty and only a ragged block's last key tile is masked."""
    bh, off, m0, r0, r1 = _block_tile(TILES, L, HEAD_DIM)
    rows = m0 + tl.arange(0, BLOCK_M)
    r_ok = rows < r1
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM
    qm = r_ok[:, None] & d_ok[None, :]
    q = tl.load(Q + off + _rows_at(rows, offs_d, HEAD_DIM), mask=qm, other=0.0)
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_D), tl.float32)
    for n0 in range(r0, r1, BLOCK_N):
        keys = n0 + tl.arange(0, BLOCK_N)
        k_ok = keys < r1
        kv_off = off + _rows_at(keys, offs_d, HEAD_DIM)
        kt = tl.load(K + off + keys[None, :].to(tl.int64) * HEAD_DIM + offs_d[:, None],
                     mask=k_ok[None, :] & d_ok[:, None], other=0.0)
        s = _dot(q, kt, tl.zeros((BLOCK_M, BLOCK_N), tl.float32), IEEE)
        if n0 + BLOCK_N > r1:
            s = tl.where(k_ok[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)     # finite: the tile holds a key
        p = tl.math.exp2(s * qk_scale - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + kv_off, mask=k_ok[:, None] & d_ok[None, :], other=0.0)
        acc = _dot(p.to(v.dtype), v, acc * alpha[:, None], IEEE)
        m_i = m_new
    tl.store(LSE + bh * L + rows, m_i + tl.math.log2(l_i), mask=r_ok)
    tl.store(O + off + _rows_at(rows, offs_d, HEAD_DIM), (acc / l_i[:, None]).to(O.dtype.element_ty), mask=qm)


@triton.jit
def _blocks_bwd_dq(Q, K, V, O, DO, LSE, DELTA, DQ, TILES, qk_scale, scale, L,
                   HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, IEEE: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Split backward, first launch: dQ of one query tile of a diagonal block over the block's key
    tiles (three products per step), and Δ = rowsum(dO ⊙ O) of its rows for the dK/dV launch."""
    bh, off, m0, r0, r1 = _block_tile(TILES, L, HEAD_DIM)
    rows = m0 + tl.arange(0, BLOCK_M)
    r_ok = rows < r1
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM
    qm = r_ok[:, None] & d_ok[None, :]
    q_off = off + _rows_at(rows, offs_d, HEAD_DIM)
    q = tl.load(Q + q_off, mask=qm, other=0.0)
    do = tl.load(DO + q_off, mask=qm, other=0.0)
    o = tl.load(O + q_off, mask=qm, other=0.0)
    dlt = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    tl.store(DELTA + bh * L + rows, dlt, mask=r_ok)
    lse = tl.load(LSE + bh * L + rows, mask=r_ok, other=0.0)
    dq = tl.zeros((BLOCK_M, BLOCK_D), tl.float32)
    for n0 in range(r0, r1, BLOCK_N):
        keys = n0 + tl.arange(0, BLOCK_N)
        k_ok = keys < r1
        km = k_ok[:, None] & d_ok[None, :]
        kv_off = off + _rows_at(keys, offs_d, HEAD_DIM)
        k = tl.load(K + kv_off, mask=km, other=0.0)
        v = tl.load(V + kv_off, mask=km, other=0.0)
        s = _dot(q, tl.trans(k), tl.zeros((BLOCK_M, BLOCK_N), tl.float32), IEEE)
        p = tl.math.exp2(s * qk_scale - lse[:, None])
        if n0 + BLOCK_N > r1:
            p = tl.where(k_ok[None, :], p, 0.0)
        dp = _dot(do, tl.trans(v), tl.zeros((BLOCK_M, BLOCK_N), tl.float32), IEEE)
        dq = _dot((p * (dp - dlt[:, None])).to(k.dtype), k, dq, IEEE)
    tl.store(DQ + q_off, (dq * scale).to(DQ.dtype.element_ty), mask=qm)


@triton.jit
def _kv_step(k, v, q, do, lse, dlt, dk, dv, valid, masked, qk_scale, IEEE: tl.constexpr):
    """One (key tile, query tile) step of dK and dV inside a diagonal block, in transposed form:
    Pᵀ from lse, dV += Pᵀ dO, dSᵀ = Pᵀ ⊙ (V dOᵀ − Δ), dK += dSᵀ Q (unscaled). `masked` (a ragged
    block's last tiles) zeroes Pᵀ outside `valid`. Returns dK, dV and dSᵀ, from which the one-pass
    kernel also takes dQ."""
    st = _dot(k, tl.trans(q), tl.zeros((k.shape[0], q.shape[0]), tl.float32), IEEE)
    pt = tl.math.exp2(st * qk_scale - lse[None, :])
    if masked:
        pt = tl.where(valid, pt, 0.0)
    dv = _dot(pt.to(do.dtype), do, dv, IEEE)
    dpt = _dot(v, tl.trans(do), tl.zeros((k.shape[0], q.shape[0]), tl.float32), IEEE)
    dst = (pt * (dpt - dlt[None, :])).to(q.dtype)
    return _dot(dst, q, dk, IEEE), dv, dst


@triton.jit
def _blocks_bwd_dkdv(Q, K, V, DO, LSE, DELTA, DK, DV, TILES, qk_scale, scale, L,
                     HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, IEEE: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Split backward, second launch: dK, dV of one key tile of a diagonal block over the block's
    query tiles (four products per step), reading the Δ the dQ launch stored."""
    bh, off, n0, r0, r1 = _block_tile(TILES, L, HEAD_DIM)
    keys = n0 + tl.arange(0, BLOCK_N)
    k_ok = keys < r1
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM
    km = k_ok[:, None] & d_ok[None, :]
    kv_off = off + _rows_at(keys, offs_d, HEAD_DIM)
    k = tl.load(K + kv_off, mask=km, other=0.0)
    v = tl.load(V + kv_off, mask=km, other=0.0)
    dk = tl.zeros((BLOCK_N, BLOCK_D), tl.float32)
    dv = tl.zeros((BLOCK_N, BLOCK_D), tl.float32)
    for m0 in range(r0, r1, BLOCK_M):
        rows = m0 + tl.arange(0, BLOCK_M)
        r_ok = rows < r1
        qm = r_ok[:, None] & d_ok[None, :]
        q_off = off + _rows_at(rows, offs_d, HEAD_DIM)
        q = tl.load(Q + q_off, mask=qm, other=0.0)
        do = tl.load(DO + q_off, mask=qm, other=0.0)
        lse = tl.load(LSE + bh * L + rows, mask=r_ok, other=0.0)
        dlt = tl.load(DELTA + bh * L + rows, mask=r_ok, other=0.0)
        dk, dv, _ = _kv_step(k, v, q, do, lse, dlt, dk, dv, r_ok[None, :], m0 + BLOCK_M > r1, qk_scale, IEEE)
    tl.store(DK + kv_off, (dk * scale).to(DK.dtype.element_ty), mask=km)
    tl.store(DV + kv_off, dv.to(DV.dtype.element_ty), mask=km)


@triton.jit
def _blocks_bwd(Q, K, V, O, DO, LSE, DQ, DQ_ACC, DK, DV, BOUNDS, qk_scale, scale, L,
                HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, IEEE: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """dQ, dK, dV of one diagonal block [r0, r1) × [r0, r1), FlashAttention-2's backward in one
    pass: five products per (key tile, query tile) step instead of the seven of separate dQ and
    dK/dV walks, because one program owns every step that touches its block's rows and so can
    add dQ up itself, in a float32 scratch (no atomics, no zeroing): the first key tile writes it,
    the last one adds, scales and stores dQ; a barrier after each scratch store makes it visible
    to the whole program. Δ = rowsum(dO ⊙ O) is recomputed per step from an O tile rather than
    read from a pass of its own."""
    blk = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    off = bh * L * HEAD_DIM
    r0 = tl.load(BOUNDS + blk)
    r1 = tl.load(BOUNDS + blk + 1)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM
    for n0 in range(r0, r1, BLOCK_N):
        keys = n0 + tl.arange(0, BLOCK_N)
        k_ok = keys < r1
        km = k_ok[:, None] & d_ok[None, :]
        kv_off = off + _rows_at(keys, offs_d, HEAD_DIM)
        k = tl.load(K + kv_off, mask=km, other=0.0)
        v = tl.load(V + kv_off, mask=km, other=0.0)
        dk = tl.zeros((BLOCK_N, BLOCK_D), tl.float32)
        dv = tl.zeros((BLOCK_N, BLOCK_D), tl.float32)
        for m0 in range(r0, r1, BLOCK_M):
            rows = m0 + tl.arange(0, BLOCK_M)
            r_ok = rows < r1
            qm = r_ok[:, None] & d_ok[None, :]
            q_off = off + _rows_at(rows, offs_d, HEAD_DIM)
            q = tl.load(Q + q_off, mask=qm, other=0.0)
            do = tl.load(DO + q_off, mask=qm, other=0.0)
            o = tl.load(O + q_off, mask=qm, other=0.0)
            dlt = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
            lse = tl.load(LSE + bh * L + rows, mask=r_ok, other=0.0)
            dk, dv, dst = _kv_step(k, v, q, do, lse, dlt, dk, dv, k_ok[:, None] & r_ok[None, :],
                                   (n0 + BLOCK_N > r1) | (m0 + BLOCK_M > r1), qk_scale, IEEE)
            dq = _dot(tl.trans(dst), k, tl.zeros((BLOCK_M, BLOCK_D), tl.float32), IEEE)
            if n0 > r0:
                dq += tl.load(DQ_ACC + q_off, mask=qm, other=0.0)
            if n0 + BLOCK_N >= r1:
                tl.store(DQ + q_off, (dq * scale).to(DQ.dtype.element_ty), mask=qm)
            else:
                tl.store(DQ_ACC + q_off, dq, mask=qm)
                tl.debug_barrier()      # the block's threads see the scratch when they read it back
        tl.store(DK + kv_off, (dk * scale).to(DK.dtype.element_ty), mask=km)
        tl.store(DV + kv_off, dv.to(DV.dtype.element_ty), mask=km)


# ---------------------------------------------------------------------------------------
# Host side: the JIT analysis of a pattern into classes, tiles, launches.

class _Class:
    """The segments of one (σ, a mod σ, b mod σ) class as a [G, slots, 4] table of
    (a_start, b_start, a_count, b_count); missing slots have count 0."""

    def __init__(self, sigma, a_mod, b_mod, host_table, table):
        self.sigma, self.a_mod, self.b_mod = sigma, a_mod, b_mod
        self.host_table, self.table = host_table, table


@functools.lru_cache(maxsize=32)
def _plan(pattern, device):
    ka = pattern.kernel_arrays(np.int32)
    G = len(ka.row_bounds) - 1
    by_class = {}
    for g in range(G):
        for a, bs, sigma, ac, bc in ka.segs[ka.seg_ptr[g]:ka.seg_ptr[g + 1]]:
            key = (int(sigma), int(a) % int(sigma), int(bs) % int(sigma))
            by_class.setdefault(key, {}).setdefault(g, []).append((a, bs, ac, bc))
    classes = []
    for (sigma, a_mod, b_mod), groups in sorted(by_class.items()):
        slots = max(len(v) for v in groups.values())
        table = np.zeros((G, slots, 4), dtype=np.int32)
        for g, segs in groups.items():
            table[g, :len(segs)] = segs
        classes.append(_Class(sigma, a_mod, b_mod, table, torch.tensor(table, device=device)))
    bounds = torch.tensor(ka.row_bounds, device=device)
    return bounds, G, max(0, math.ceil(math.log2(G))) if G > 1 else 0, classes


def dkdv_items(pattern, class_index, block_n):
    """Band inversion on the host: for each key tile of one class (tile = κ·per_class + u0/BLOCK_N,
    as the dK/dV grid numbers them), the non-empty (ρ, group·slots + slot, t_lo, t_hi) intervals of
    query rows ρ + σt that can see the tile. Returns (ptr [tiles+1], items [n, 4]) as int32.

    For a band a·t + β ≤ u < (a + γ)·t + β + δ and a tile [u0, u1): the band starts before u1
    when a·t + β < u1 and ends after u0 when (a + γ)·t + β + δ > u0; each bounds t on one side when
    its slope is positive, empties the interval when its slope is 0 and it fails, and is left to
    the per-row mask when its slope is negative."""
    _, _, _, classes = _plan(pattern, torch.device("cpu"))
    c = classes[class_index]
    sigma, Lk = c.sigma, pattern.Lk
    bounds = pattern.kernel_arrays(np.int64).row_bounds
    G, S = c.host_table.shape[:2]
    tab = c.host_table.astype(np.int64).reshape(G * S, 4)
    a, b, ac, bc = tab.T
    per_class = -(-(-(-Lk // sigma)) // block_n)
    u0 = np.arange(per_class, dtype=np.int64)[:, None] * block_n       # [tiles, 1]
    u1 = u0 + block_n
    per_tile = [[] for _ in range(sigma * per_class)]
    live = ~((ac == 0) & (bc <= 0))                                     # empty slots hold zeros
    for rho in range(sigma):
        kappa = (c.a_mod * rho + c.b_mod) % sigma
        r0, r1 = np.repeat(bounds[:-1], S), np.repeat(bounds[1:], S)
        t_lo = np.broadcast_to((r0 - rho + sigma - 1) // sigma, (per_class, G * S)).copy()
        t_hi = np.broadcast_to((r1 - rho + sigma - 1) // sigma, (per_class, G * S)).copy()
        beta = (a * rho + b - kappa) // sigma
        delta = ac * rho + bc
        e = a + ac * sigma
        with np.errstate(divide="ignore"):
            hi_a = np.where(a > 0, (u1 - beta - 1) // np.where(a > 0, a, 1) + 1, t_hi)
            lo_e = np.where(e > 0, (u0 - beta - delta) // np.where(e > 0, e, 1) + 1, t_lo)
        t_hi = np.minimum(t_hi, hi_a)
        t_lo = np.maximum(t_lo, lo_e)
        dead = ~live | ((a == 0) & (beta >= u1)) | ((e == 0) & (beta + delta <= u0))
        t_hi = np.where(dead, t_lo, t_hi)
        for tile, gs in zip(*np.nonzero(t_hi > t_lo)):
            per_tile[kappa * per_class + tile].append((rho, gs, t_lo[tile, gs], t_hi[tile, gs]))
    ptr = np.zeros(len(per_tile) + 1, dtype=np.int32)
    ptr[1:] = np.cumsum([len(x) for x in per_tile])
    items = np.array([it for x in per_tile for it in x], dtype=np.int32).reshape(-1, 4)
    return ptr, items


def query_tile_steps(pattern, class_index, block_m, block_n):
    """Key-tile steps each query tile of one class takes in the forward (and dQ) kernel, by tile
    number as the kernels number them (tile = ρ·per_class + t0/BLOCK_M): the host mirror of the
    kernel's walk over the union of its rows' ranges, used to start the longest tiles first."""
    _, _, _, classes = _plan(pattern, torch.device("cpu"))
    c = classes[class_index]
    sigma, Lq, Lk = c.sigma, pattern.Lq, pattern.Lk
    bounds = pattern.kernel_arrays(np.int64).row_bounds
    per_class = -(-(-(-Lq // sigma)) // block_m)
    rho = np.arange(sigma)[:, None, None]
    rows = rho + sigma * (np.arange(per_class)[None, :, None] * block_m + np.arange(block_m)[None, None, :])
    ok = rows < Lq
    grp = np.searchsorted(bounds, np.minimum(rows, Lq - 1), side="right") - 1
    kappa = (c.a_mod * rho + c.b_mod) % sigma
    Uk = np.maximum(-(-(Lk - kappa) // sigma), 0)
    steps = np.zeros((sigma, per_class), dtype=np.int64)
    for slot in range(c.host_table.shape[1]):
        a, b, ac, bc = (c.host_table[grp, slot, f].astype(np.int64) for f in range(4))
        start, count = a * rows + b, ac * rows + bc
        lo = np.maximum((start - kappa) // sigma, 0)
        hi = np.maximum(np.minimum((start - kappa) // sigma + np.maximum(count, 0), Uk), lo)
        has = ok & (count > 0) & (hi > lo)
        first = np.where(has, lo, Uk).min(-1)
        last = np.where(has, hi, 0).max(-1)
        steps += -(-np.maximum(last - first, 0) // block_n)
    return steps.reshape(-1)


# Equal square blocks at least this large run as a batch of dense attentions (see uniform_block).
# Measured on the H100 (python -m tiers.bench.tune_sparse_attention --blocks, fp16, L = 8192): from
# b = 512 the dense kernels beat the general ones (forward 0.21 vs 0.23 ms at D = 64, forward+backward
# 1.53 vs 1.97 ms at b = 1024); at b = 256 and below they lose.
_DENSE_VIEW_MIN = 512


def diagonal_blocks(pattern):
    """Row bounds [r0, r1, …] when every row group of the pattern sees exactly its own rows as
    keys — a block-diagonal pattern (blocked(L, b), or such a mask through from_mask) with Lq = Lk
    — else None."""
    ka = pattern.kernel_arrays(np.int64)
    rows, L = ka.row_bounds, pattern.Lq
    if pattern.Lk != L or len(rows) < 2 or (np.diff(ka.seg_ptr) != 1).any():
        return None
    a, start, stride, ac, count = ka.segs.T           # one segment per group: its keys, clipped
    lo, hi = np.maximum(start, 0), np.minimum(start + np.maximum(count, 0), L)
    ok = (a == 0) & (ac == 0) & (stride == 1) & (lo == rows[:-1]) & (hi == rows[1:])
    return rows if ok.all() else None


def uniform_block(pattern):
    """b when the pattern is block diagonal with equal square blocks b ≥ _DENSE_VIEW_MIN tiling
    Lq = Lk (blocked(L, b) with b dividing L, or such a mask through from_mask): then it is dense
    attention over a [B, H·L/b, b, D] view of q, k and v (no copy for contiguous inputs), and t3
    runs FlashAttention's kernels on it. Else None."""
    rows = diagonal_blocks(pattern)
    if rows is None:
        return None
    sizes = np.diff(rows)
    b = int(sizes[0])
    return b if b >= _DENSE_VIEW_MIN and (sizes == b).all() else None


@functools.lru_cache(maxsize=32)
def _uniform_block(pattern):
    return uniform_block(pattern)


# Block-diagonal patterns whose largest block is at most this many rows run on the block kernels
# (_blocks_fwd, and _blocks_bwd or _blocks_bwd_dq + _blocks_bwd_dkdv), as far as the head dim's
# entries of _BLOCKS_FWD and _BLOCKS_BWD say; larger blocks make the one-pass walk too long.
_SMALL_BLOCKS_MAX = 256


@functools.lru_cache(maxsize=32)
def _small_blocks_on(pattern, device):
    """(row bounds on the device, largest block) of a block-diagonal pattern whose blocks are all
    at most _SMALL_BLOCKS_MAX rows, or None."""
    rows = diagonal_blocks(pattern)
    if rows is None or np.diff(rows).max() > _SMALL_BLOCKS_MAX:
        return None
    return torch.tensor(rows, dtype=torch.int32, device=device), int(np.diff(rows).max())


def block_tiles(rows, size):
    """[n, 3] int32 (first row, r0, r1) of every tile of `size` rows of every block [r0, r1) of the
    row bounds `rows`: one program each of the block kernels, a block's tiles side by side."""
    rows = np.asarray(rows, dtype=np.int64)
    r0, r1 = rows[:-1], rows[1:]
    per_block = -(-(r1 - r0) // size)
    blk = np.repeat(np.arange(len(r0)), per_block)
    first = r0[blk] + size * (np.arange(per_block.sum()) - np.repeat(np.cumsum(per_block) - per_block, per_block))
    return np.stack([first, r0[blk], r1[blk]], 1).astype(np.int32)


@functools.lru_cache(maxsize=64)
def _block_tiles_on(pattern, size, device):
    return torch.tensor(block_tiles(diagonal_blocks(pattern), size), device=device)


def _longest_first(steps):
    """(tile order, whether to use it): longest first, used when the longest tile takes over
    three times the median one."""
    steps = np.asarray(steps)
    lpt = bool(steps.size and steps.max() > 3 * max(np.median(steps), 1))
    return np.argsort(-steps, kind="stable").astype(np.int32), lpt


@functools.lru_cache(maxsize=64)
def _query_order_on(pattern, class_index, block_m, block_n, device):
    order, lpt = _longest_first(query_tile_steps(pattern, class_index, block_m, block_n))
    return torch.tensor(order, device=device), lpt


@functools.lru_cache(maxsize=64)
def _dkdv_items_on(pattern, class_index, block_n, block_m, device):
    ptr, items = dkdv_items(pattern, class_index, block_n)
    rows = -(-(items[:, 3].astype(np.int64) - items[:, 2]) // block_m)
    steps = np.add.reduceat(np.append(rows, 0), ptr[:-1]) * (np.diff(ptr) > 0)
    order, lpt = _longest_first(steps)
    return torch.tensor(ptr, device=device), torch.tensor(items, device=device), (torch.tensor(order, device=device), lpt)

# (BLOCK_M, BLOCK_N, warps, stages) by head-dim block; measured on an H100 with
# python -m tiers.bench.tune_sparse_attention (64×64 tiles won on every pattern at L = 8192)
_TILES = {16: (64, 64, 4, 3), 32: (64, 64, 4, 3), 64: (64, 64, 4, 3), 128: (64, 64, 4, 3), 256: (64, 32, 8, 2)}
_TILES_FP32 = (64, 32, 4, 2)
# backward: (dQ kernel, dK/dV kernel), each (BLOCK_M, BLOCK_N, warps, stages); swept one kernel at a
# time with python -m tiers.bench.tune_sparse_attention --bwd: 32-row steps under a 64-key tile
# won for dK/dV on 7 of the 8 pattern × head-dim cases (4–10 % at D = 64), 64×64 for dQ
_TILES_BWD = {64: ((64, 64, 4, 2), (32, 64, 4, 2)), 128: ((64, 64, 4, 2), (32, 64, 4, 2)),
              256: ((32, 32, 8, 1), (32, 32, 8, 1))}


# Small diagonal blocks (_SMALL_BLOCKS_MAX), by head-dim block. Forward: _blocks_fwd's (BLOCK_M,
# BLOCK_N, warps, stages), or None for the general kernel. Backward: ("one_pass", tiles) for
# _blocks_bwd, ("split", dQ tiles, dK/dV tiles) for _blocks_bwd_dq then _blocks_bwd_dkdv, or None
# for the general kernels. Swept on the H100 with python -m tiers.bench.tune_sparse_attention
# --small-blocks (blocked(8192, 256), fp16).
_BLOCKS_FWD = {16: (128, 64, 8, 3), 32: (128, 64, 8, 3), 64: (128, 64, 8, 3), 128: (128, 32, 4, 3), 256: None}
_BLOCKS_BWD = {16: ("one_pass", (64, 128, 8, 2)), 32: ("one_pass", (64, 128, 8, 2)),
               64: ("one_pass", (64, 128, 8, 2)), 128: ("split", (128, 32, 4, 3), (32, 64, 4, 3)), 256: None}


def _blocks_plan(head_block, dtype, backward):
    """The table's entry for small diagonal blocks, with small tiles for float32 and the interpreter."""
    entry = (_BLOCKS_BWD if backward else _BLOCKS_FWD).get(head_block)
    small = (16, 16, 4, 1) if interpreting() else (32, 32, 4, 1) if dtype == torch.float32 else None
    if entry is None or small is None:
        return entry
    return (entry[0],) + (small,) * (len(entry) - 1) if backward else small


def _tiles(head_block, dtype, backward):
    if interpreting():
        return ((16, 16, 4, 1),) * 2 if backward else (16, 16, 4, 1)
    if dtype == torch.float32:
        return ((32, 32, 4, 1),) * 2 if backward else _TILES_FP32
    if backward:
        return _TILES_BWD.get(head_block, ((64, 64, 4, 2),) * 2)
    return _TILES[head_block]


def _class_tiles(tiles, sigma, Lq):
    """Forward tiles for one class. Its queries come in σ residue classes of ⌈Lq/σ⌉ rows each,
    so when a residue has fewer rows than the table's tile (the strided class of a Sparse-Transformer
    pattern at L ≤ 4K: 16 or 32 rows) a tile that size wastes the rest on masked rows, and the
    class is σ·B·H programs of one short step each, bound by latency: a tile of the residue's size
    with two warps lets more of them share an SM. Measured on the H100 (strided class of
    strided(L, 128, 128), fp16; `sparse_tune_short_class_*`): L = 2048, D = 64: 0.079 -> 0.039 ms
    at 16×16; L = 4096: 0.086 -> 0.061 ms at 32×32; D = 128: 0.154 -> 0.058, 0.165 -> 0.102."""
    rows = -(-Lq // sigma)
    if rows > tiles[0] // 2:
        return tiles
    bm = block_d(rows)          # the same padding: a power of two, at least tl.dot's 16
    return (bm, bm, 2, 1 if bm == 16 else 2)


def _grid(order, lpt, BH):
    """Launch grid and LPT flag for one class. When a few tiles take far longer than the rest
    (Longformer's global rows see every key), heads vary fastest and tiles go longest first, so
    every head's long tile starts early instead of trailing at the end. Otherwise tiles vary
    fastest in their natural order, which keeps neighbouring tiles of one head (sharing keys)
    close in time; measured faster on the H100 for uniform patterns (dilated window: 15 %)."""
    return (BH, len(order)) if lpt else (len(order), BH)


def _blocks_forward(q, k, v, shape, pattern, tiles):
    BM, BN, warps, stages = tiles
    o = empty_like(q)
    lse = empty((shape.B * shape.H, shape.Lq), dtype=torch.float32, device=q.device)
    starts = _block_tiles_on(pattern, BM, q.device)
    _blocks_fwd[(len(starts), shape.B * shape.H)](
        q, k, v, o, lse, starts, shape.scale * LOG2E, shape.Lq,
        HEAD_DIM=shape.D, BLOCK_D=block_d(shape.D), IEEE=q.dtype == torch.float32,
        BLOCK_M=BM, BLOCK_N=BN, num_warps=warps, num_stages=stages)
    return o, lse


def _forward(q, k, v, shape, pattern):
    tiles = _small_blocks_on(pattern, q.device) and _blocks_plan(block_d(shape.D), q.dtype,
                                                                 backward=False)
    if tiles:
        return _blocks_forward(q, k, v, shape, pattern, tiles)
    bounds, G, log_g, classes = _plan(pattern, q.device)
    o = empty_like(q)
    lse = empty((shape.B * shape.H, shape.Lq), dtype=torch.float32, device=q.device)
    BLOCK_D = block_d(shape.D)
    tiles = _tiles(BLOCK_D, q.dtype, backward=False)
    if not classes:  # no row has a key: zeros, as FlexAttention
        o.zero_()
        lse.fill_(float("-inf"))
    for n, c in enumerate(classes):
        BM, BN, warps, stages = _class_tiles(tiles, c.sigma, shape.Lq)
        order, lpt = _query_order_on(pattern, n, BM, BN, q.device)
        _sparse_fwd[_grid(order, lpt, shape.B * shape.H)](
            q, k, v, o, lse, bounds, c.table, order, shape.scale * LOG2E, shape.H, shape.Lq, shape.Lk, G, c.a_mod, c.b_mod,
            *q.stride(), *k.stride(), *v.stride(), *o.stride(),
            SIGMA=c.sigma, MAXSEG=c.table.shape[1], LOG_G=log_g, FIRST=n == 0, LPT=lpt,
            HEAD_DIM=shape.D, BLOCK_D=BLOCK_D, IEEE=q.dtype == torch.float32, BLOCK_M=BM, BLOCK_N=BN,
            num_warps=warps, num_stages=stages)
    return o, lse


def _blocks_backward(q, k, v, o, lse, do, shape, pattern, plan):
    B, H, L, D = shape.B, shape.H, shape.Lq, shape.D
    assert o.is_contiguous() and do.is_contiguous(), "the block kernels take contiguous tensors"
    dq, dk, dv = (empty(q.shape, dtype=q.dtype, device=q.device) for _ in range(3))
    meta = dict(HEAD_DIM=D, BLOCK_D=block_d(D), IEEE=q.dtype == torch.float32)
    if plan[0] == "one_pass":
        rows, largest = _small_blocks_on(pattern, q.device)
        BM, BN, warps, stages = plan[1]
        # dQ between key tiles. When every block fits one key tile the kernel never touches it and
        # lse stands in: a float32 pointer all the same, since Triton 3.6 fails to compile the
        # kernel (TritonGPUPipeline) when the scratch has dQ's float16 type
        scratch = empty(q.shape, dtype=torch.float32, device=q.device) if largest > BN else lse
        _blocks_bwd[(len(rows) - 1, B * H)](
            q, k, v, o, do, lse, dq, scratch, dk, dv, rows, shape.scale * LOG2E, shape.scale, L,
            BLOCK_M=BM, BLOCK_N=BN, num_warps=warps, num_stages=stages, **meta)
        return dq, dk, dv
    delta = empty((B * H, L), dtype=torch.float32, device=q.device)    # written by the dQ launch
    BM, BN, warps, stages = plan[1]
    starts = _block_tiles_on(pattern, BM, q.device)
    _blocks_bwd_dq[(len(starts), B * H)](
        q, k, v, o, do, lse, delta, dq, starts, shape.scale * LOG2E, shape.scale, L,
        BLOCK_M=BM, BLOCK_N=BN, num_warps=warps, num_stages=stages, **meta)
    BM, BN, warps, stages = plan[2]
    starts = _block_tiles_on(pattern, BN, q.device)
    _blocks_bwd_dkdv[(len(starts), B * H)](
        q, k, v, do, lse, delta, dk, dv, starts, shape.scale * LOG2E, shape.scale, L,
        BLOCK_M=BM, BLOCK_N=BN, num_warps=warps, num_stages=stages, **meta)
    return dq, dk, dv


def _backward(q, k, v, o, lse, do, shape, pattern):
    plan = _small_blocks_on(pattern, q.device) and _blocks_plan(block_d(shape.D), q.dtype,
                                                                backward=True)
    if plan:
        return _blocks_backward(q, k, v, o, lse, do, shape, pattern, plan)
    bounds, G, log_g, classes = _plan(pattern, q.device)
    B, H, Lq, D = shape.B, shape.H, shape.Lq, shape.D
    BLOCK_D = block_d(D)
    delta = empty((B * H, Lq), dtype=torch.float32, device=q.device)   # written by the first dQ launch
    assert o.stride() == do.stride(), "the dQ kernel reads O with dO's strides"
    # one class writes the gradients in the input dtype; several add up in float32 first
    acc = q.dtype if len(classes) <= 1 else torch.float32
    dq, dk, dv = (empty(x.shape, dtype=acc, device=q.device) for x in (q, k, v))
    if not classes:  # no row has a key: every gradient is zero
        return dq.zero_(), dk.zero_(), dv.zero_()
    tiles_dq, tiles_kv = _tiles(BLOCK_D, q.dtype, backward=True)
    for n, c in enumerate(classes):
        strides = (*q.stride(), *k.stride(), *v.stride(), *do.stride())
        meta = dict(SIGMA=c.sigma, FIRST=n == 0, HEAD_DIM=D, BLOCK_D=BLOCK_D, IEEE=q.dtype == torch.float32)
        BM, BN, warps, stages = tiles_dq
        order, lpt = _query_order_on(pattern, n, BM, BN, q.device)
        _sparse_bwd_dq[_grid(order, lpt, B * H)](
            q, k, v, o, do, lse, delta, dq, bounds, c.table, order, shape.scale * LOG2E, shape.scale, H, Lq,
            shape.Lk, G, c.a_mod, c.b_mod, *strides, *dq.stride(), MAXSEG=c.table.shape[1], LOG_G=log_g, LPT=lpt,
            BLOCK_M=BM, BLOCK_N=BN, num_warps=warps, num_stages=stages, **meta)
        BM, BN, warps, stages = tiles_kv
        item_ptr, items, (order, lpt) = _dkdv_items_on(pattern, n, BN, BM, q.device)
        _sparse_bwd_dkdv[_grid(order, lpt, B * H)](
            q, k, v, do, lse, delta, dk, dv, item_ptr, items, c.table, order, shape.scale * LOG2E, shape.scale, H, Lq,
            shape.Lk, *strides, *dk.stride(), LPT=lpt, BLOCK_M=BM, BLOCK_N=BN, num_warps=warps, num_stages=stages,
            **meta)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


class _SparseAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, shape, pattern):
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        o, lse = _forward(q, k, v, shape, pattern)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.shape, ctx.pattern = shape, pattern
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = _backward(q, k, v, o, lse, do.contiguous(), ctx.shape, ctx.pattern)
        return dq, dk, dv, None, None


def sparse_attention(q, k, v, pattern, scale=None):
    """q [B, H, Lq, D], k, v [B, H, Lk, D], pattern an ACSR over [Lq, Lk] -> [B, H, Lq, D]."""
    shape = validate_sparse_attention(q, k, v, pattern, scale, tier="t3_triton_fused")
    block = _uniform_block(pattern)
    if block:      # a batch of dense attentions: the view is free, and so is autograd through it
        B, H, L, D = q.shape

        def view(x):
            return x.reshape(B, H * (L // block), block, D)
        dense = AttentionShape(B, H * (L // block), block, block, D, shape.scale, causal=False)
        return dense_attention(view(q), view(k), view(v), dense).reshape(B, H, L, D)
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        return _SparseAttention.apply(q, k, v, shape, pattern)
    return _forward(q.contiguous(), k.contiguous(), v.contiguous(), shape, pattern)[0]
