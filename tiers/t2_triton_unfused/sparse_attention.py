"""Sparse attention over an ACSR pattern, unfused: SPLAT's R-SDDMM, a row softmax, R-SpMM.

The scores exist only at allowed positions, in the *compressed* layout S [B·H, Lq, W]: slot t of
row i is the t-th kept key of the row, segments one after another (W = the most keys of any
row; shorter rows are padded with −∞). Three launches:

  1. R-SDDMM   S[i, t] = q_i · k_key(i,t)      keys computed from the affine segments
  2. softmax   tiers/kernels/softmax.py on the rows of S (padding → exact zeros)
  3. R-SpMM    o_i = Σ_t S[i, t] · v_key(i,t)

Each program owns a few rows and walks their slots in blocks; the key of a slot comes from
tiers/kernels/acsr_tiles.py, so no per-non-zero index is ever stored. S is written to and read
back from memory, which the fused tier avoids.
"""
import torch
import triton
import triton.language as tl

from tiers.buffers import empty, empty_like
from tiers.kernels.acsr_tiles import padded_segments, row_group, slot_keys
from tiers.kernels.gemm import block_d
from tiers.kernels.softmax import softmax_rows_
from tiers.validation import interpreting, validate_sparse_attention


@triton.jit
def _rows_of_program(BOUNDS, Lq, G, LOG_G: tl.constexpr, ROWS: tl.constexpr):
    """This program's ROWS rows (clamped into range, with a validity mask) and their groups."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < Lq
    rows = tl.minimum(rows, Lq - 1)
    return rows, row_ok, row_group(BOUNDS, rows, G, LOG_G)


@triton.jit
def _r_sddmm(Q, K, S, BOUNDS, TABLE, Lq, Lk, W, G, H,
             s_qb, s_qh, s_qm, s_qd, s_kb, s_kh, s_kn, s_kd, s_sb, s_sm, s_st,
             MAXSEG: tl.constexpr, LOG_G: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
             ROWS: tl.constexpr, BLOCK_T: tl.constexpr):
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    rows, row_ok, grp = _rows_of_program(BOUNDS, Lq, G, LOG_G, ROWS)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM
    q = tl.load(Q + b * s_qb + h * s_qh + rows[:, None].to(tl.int64) * s_qm + offs_d[None, :] * s_qd,
                mask=d_ok[None, :], other=0.0).to(tl.float32)
    for t0 in range(0, W, BLOCK_T):
        slots = t0 + tl.arange(0, BLOCK_T)
        key, ok = slot_keys(TABLE, grp, rows, slots, Lk, MAXSEG)         # [ROWS, BLOCK_T]
        k = tl.load(K + b * s_kb + h * s_kh + key[:, :, None].to(tl.int64) * s_kn
                    + offs_d[None, None, :] * s_kd, mask=ok[:, :, None] & d_ok[None, None, :], other=0.0)
        s = tl.sum(q[:, None, :] * k.to(tl.float32), 2)
        tl.store(S + bh.to(tl.int64) * s_sb + rows[:, None].to(tl.int64) * s_sm + slots[None, :] * s_st,
                 tl.where(ok, s, float("-inf")), mask=row_ok[:, None] & (slots[None, :] < W))


@triton.jit
def _r_spmm(P, V, O, BOUNDS, TABLE, Lq, Lk, W, G, H,
            s_pb, s_pm, s_pt, s_vb, s_vh, s_vn, s_vd, s_ob, s_oh, s_om, s_od,
            MAXSEG: tl.constexpr, LOG_G: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
            ROWS: tl.constexpr, BLOCK_T: tl.constexpr):
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    rows, row_ok, grp = _rows_of_program(BOUNDS, Lq, G, LOG_G, ROWS)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM
    acc = tl.zeros((ROWS, BLOCK_D), tl.float32)
    for t0 in range(0, W, BLOCK_T):
        slots = t0 + tl.arange(0, BLOCK_T)
        key, ok = slot_keys(TABLE, grp, rows, slots, Lk, MAXSEG)
        p = tl.load(P + bh.to(tl.int64) * s_pb + rows[:, None].to(tl.int64) * s_pm + slots[None, :] * s_pt,
                    mask=ok, other=0.0).to(tl.float32)
        v = tl.load(V + b * s_vb + h * s_vh + key[:, :, None].to(tl.int64) * s_vn + offs_d[None, None, :] * s_vd,
                    mask=ok[:, :, None] & d_ok[None, None, :], other=0.0)
        acc += tl.sum(p[:, :, None] * v.to(tl.float32), 1)
    tl.store(O + b * s_ob + h * s_oh + rows[:, None].to(tl.int64) * s_om + offs_d[None, :] * s_od,
             acc.to(O.dtype.element_ty), mask=row_ok[:, None] & d_ok[None, :])


def sparse_attention(q, k, v, pattern, scale=None):
    """q [B, H, Lq, D], k, v [B, H, Lk, D], pattern an ACSR over [Lq, Lk] -> [B, H, Lq, D]."""
    s = validate_sparse_attention(q, k, v, pattern, scale, tier="t2_triton_unfused")
    bounds, table, slots, log_g = padded_segments(pattern)
    W = int(pattern.row_counts().max())
    o = empty_like(q)
    if W == 0:  # no row has a key: zeros, as FlexAttention
        return o.zero_()
    bounds, table = (torch.tensor(x, device=q.device) for x in (bounds, table))
    BLOCK_D = block_d(s.D)
    rows, block_t = (4, 16) if interpreting() else (4, max(8, 4096 // BLOCK_D))
    grid = (triton.cdiv(s.Lq, rows), s.B * s.H)
    G = table.shape[0]
    meta = dict(MAXSEG=slots, LOG_G=log_g, HEAD_DIM=s.D, BLOCK_D=BLOCK_D, ROWS=rows, BLOCK_T=block_t)
    # scores in float32 whatever the inputs: they are the unfused tier's intermediate in memory
    scores = empty((s.B * s.H, s.Lq, W), dtype=torch.float32, device=q.device)
    _r_sddmm[grid](q, k, scores, bounds, table, s.Lq, s.Lk, W, G, s.H, *q.stride(), *k.stride(),
                   *scores.stride(), **meta)
    softmax_rows_(scores, scale=s.scale)
    _r_spmm[grid](scores, v, o, bounds, table, s.Lq, s.Lk, W, G, s.H, *scores.stride(), *v.stride(),
                  *o.stride(), **meta)
    return o
