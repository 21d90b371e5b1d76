"""FlashAttention-2 as one fused Triton kernel, with its backward.

Forward. A program owns BLOCK_M query rows of one (batch, head). It keeps Q in registers and
streams K and V in BLOCK_N-row tiles, never writing the [Lq, Lk] scores:

    s   = Q Kᵀ · scale·log2(e)                    (base-2 logits: exp2 is one instruction)
    m'  = max(m, rowmax(s))                        running row maximum
    P   = exp2(s − m')                             unnormalised probabilities
    l'  = l · exp2(m − m') + rowsum(P)             running denominator
    acc = acc · exp2(m − m') + P V                 unnormalised output
and only at the end O = acc / l. It saves lse = m + log2(l) per row for the backward.
Key tiles wholly visible to every row run without masks; only the tiles on the causal
diagonal or past Lk pay for masking; tiles wholly above the diagonal are never visited.

Backward (recompute instead of storing P). With Δ_i = Σ_d dO_id·O_id and P = exp2(s − lse):
    dV = Pᵀ dO,   dP = dO Vᵀ,   dS = P ⊙ (dP − Δ),   dQ = scale · dS K,   dK = scale · dSᵀ Q
One kernel owns a key tile and loops over query tiles (dK, dV); another owns a query tile and
loops over key tiles (dQ). Neither needs atomics, so the gradients are deterministic.
"""
import os

import torch
import triton
import triton.language as tl

from tiers.buffers import empty, empty_like
from tiers.kernels.gemm import block_d, dot as _dot
from tiers.validation import check_forward_only, interpreting, validate_attention

LOG2E = 1.4426950408889634


@triton.jit
def _fwd_tiles(acc, l_i, m_i, q, k_base, v_base, s_kn, s_kd, s_vn, s_vd,
               offs_m, offs_d, lo, hi, Lk, qk_scale,
               MASKED: tl.constexpr, CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr,
               BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr, IEEE: tl.constexpr):
    d_ok = offs_d < HEAD_DIM
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kt_ptrs = k_base + offs_n[None, :] * s_kn + offs_d[:, None] * s_kd
        v_ptrs = v_base + offs_n[:, None] * s_vn + offs_d[None, :] * s_vd
        if MASKED:
            kt = tl.load(kt_ptrs, mask=d_ok[:, None] & (offs_n[None, :] < Lk), other=0.0)
        elif HEAD_DIM == BLOCK_D:
            kt = tl.load(kt_ptrs)
        else:
            kt = tl.load(kt_ptrs, mask=d_ok[:, None], other=0.0)
        s = _dot(q, kt, tl.zeros((q.shape[0], BLOCK_N), tl.float32), IEEE)
        if MASKED:
            keep = offs_n[None, :] < Lk
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= offs_n[None, :])
            s = tl.where(keep, s, float("-inf"))
        # scale after the max, so that scaling and subtracting the max is one FMA per score
        m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
        p = tl.math.exp2(s * qk_scale - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        if MASKED:
            v = tl.load(v_ptrs, mask=d_ok[None, :] & (offs_n[:, None] < Lk), other=0.0)
        elif HEAD_DIM == BLOCK_D:
            v = tl.load(v_ptrs)
        else:
            v = tl.load(v_ptrs, mask=d_ok[None, :], other=0.0)
        acc = _dot(p.to(v.dtype), v, acc * alpha[:, None], IEEE)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _attn_fwd(Q, K, V, O, LSE, qk_scale, Lq, Lk, H,
              s_qb, s_qh, s_qm, s_qd, s_kb, s_kh, s_kn, s_kd,
              s_vb, s_vh, s_vn, s_vd, s_ob, s_oh, s_om, s_od,
              CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
              IEEE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    if CAUSAL:  # the last query blocks see the most keys: start them first so the tail is short
        pid_m = tl.num_programs(0) - 1 - pid_m
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    start_m = pid_m * BLOCK_M
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    row_ok = offs_m < Lq
    d_ok = offs_d < HEAD_DIM
    q = tl.load(Q + b * s_qb + h * s_qh + offs_m[:, None] * s_qm + offs_d[None, :] * s_qd,
                mask=row_ok[:, None] & d_ok[None, :], other=0.0)
    k_base = K + b * s_kb + h * s_kh
    v_base = V + b * s_vb + h * s_vh

    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_D), tl.float32)
    # [0, full_hi): key tiles every row of this block sees whole; [full_hi, masked_hi): the rest
    whole_tiles_end = Lk - Lk % BLOCK_N
    if CAUSAL:
        full_hi = tl.minimum(start_m, whole_tiles_end)
        masked_hi = tl.minimum(start_m + BLOCK_M, Lk)
    else:
        full_hi = whole_tiles_end
        masked_hi = Lk
    acc, l_i, m_i = _fwd_tiles(acc, l_i, m_i, q, k_base, v_base, s_kn, s_kd, s_vn, s_vd,
                               offs_m, offs_d, 0, full_hi, Lk, qk_scale,
                               False, CAUSAL, HEAD_DIM, BLOCK_D, BLOCK_N, IEEE)
    acc, l_i, m_i = _fwd_tiles(acc, l_i, m_i, q, k_base, v_base, s_kn, s_kd, s_vn, s_vd,
                               offs_m, offs_d, full_hi, masked_hi, Lk, qk_scale,
                               True, CAUSAL, HEAD_DIM, BLOCK_D, BLOCK_N, IEEE)
    out = acc / l_i[:, None]
    tl.store(LSE + bh.to(tl.int64) * Lq + offs_m, m_i + tl.math.log2(l_i), mask=row_ok)
    tl.store(O + b * s_ob + h * s_oh + offs_m[:, None] * s_om + offs_d[None, :] * s_od,
             out.to(O.dtype.element_ty), mask=row_ok[:, None] & d_ok[None, :])


@triton.jit
def _bwd_delta(O, DO, DELTA, Lq, H, s_ob, s_oh, s_om, s_od, s_db, s_dh, s_dm, s_dd,
               HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr):
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    mask = (offs_m[:, None] < Lq) & (offs_d[None, :] < HEAD_DIM)
    o = tl.load(O + b * s_ob + h * s_oh + offs_m[:, None] * s_om + offs_d[None, :] * s_od, mask=mask, other=0.0)
    do = tl.load(DO + b * s_db + h * s_dh + offs_m[:, None] * s_dm + offs_d[None, :] * s_dd, mask=mask, other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    tl.store(DELTA + bh.to(tl.int64) * Lq + offs_m, delta, mask=offs_m < Lq)


@triton.jit
def _bwd_dkdv(Q, K, V, DO, LSE, DELTA, DK, DV, qk_scale, scale, Lq, Lk, H,
              s_qb, s_qh, s_qm, s_qd, s_kb, s_kh, s_kn, s_kd, s_vb, s_vh, s_vn, s_vd,
              s_db, s_dh, s_dm, s_dd,
              CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
              IEEE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    start_n = tl.program_id(0) * BLOCK_N
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    kv_mask = (offs_n[:, None] < Lk) & (offs_d[None, :] < HEAD_DIM)
    k = tl.load(K + b * s_kb + h * s_kh + offs_n[:, None] * s_kn + offs_d[None, :] * s_kd, mask=kv_mask, other=0.0)
    v = tl.load(V + b * s_vb + h * s_vh + offs_n[:, None] * s_vn + offs_d[None, :] * s_vd, mask=kv_mask, other=0.0)
    dk = tl.zeros((BLOCK_N, BLOCK_D), tl.float32)
    dv = tl.zeros((BLOCK_N, BLOCK_D), tl.float32)
    q_base = Q + b * s_qb + h * s_qh
    do_base = DO + b * s_db + h * s_dh
    row_base = bh.to(tl.int64) * Lq
    lo = 0
    if CAUSAL:
        lo = (start_n // BLOCK_M) * BLOCK_M   # query rows above the diagonal never see these keys
    for start_m in range(lo, Lq, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        row_ok = offs_m < Lq
        q_mask = row_ok[:, None] & (offs_d[None, :] < HEAD_DIM)
        q = tl.load(q_base + offs_m[:, None] * s_qm + offs_d[None, :] * s_qd, mask=q_mask, other=0.0)
        do = tl.load(do_base + offs_m[:, None] * s_dm + offs_d[None, :] * s_dd, mask=q_mask, other=0.0)
        lse = tl.load(LSE + row_base + offs_m, mask=row_ok, other=0.0)
        delta = tl.load(DELTA + row_base + offs_m, mask=row_ok, other=0.0)
        st = _dot(k, tl.trans(q), tl.zeros((BLOCK_N, BLOCK_M), tl.float32), IEEE) * qk_scale
        keep = row_ok[None, :]
        if CAUSAL:
            keep = keep & (offs_m[None, :] >= offs_n[:, None])
        pt = tl.where(keep, tl.math.exp2(st - lse[None, :]), 0.0)
        dv = _dot(pt.to(do.dtype), do, dv, IEEE)
        dpt = _dot(v, tl.trans(do), tl.zeros((BLOCK_N, BLOCK_M), tl.float32), IEEE)
        dst = pt * (dpt - delta[None, :])
        dk = _dot(dst.to(q.dtype), q, dk, IEEE)
    tl.store(DK + b * s_kb + h * s_kh + offs_n[:, None] * s_kn + offs_d[None, :] * s_kd,
             (dk * scale).to(DK.dtype.element_ty), mask=kv_mask)
    tl.store(DV + b * s_vb + h * s_vh + offs_n[:, None] * s_vn + offs_d[None, :] * s_vd,
             dv.to(DV.dtype.element_ty), mask=kv_mask)


@triton.jit
def _bwd_dq(Q, K, V, DO, LSE, DELTA, DQ, qk_scale, scale, Lq, Lk, H,
            s_qb, s_qh, s_qm, s_qd, s_kb, s_kh, s_kn, s_kd, s_vb, s_vh, s_vn, s_vd,
            s_db, s_dh, s_dm, s_dd,
            CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
            IEEE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    start_m = tl.program_id(0) * BLOCK_M
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    row_ok = offs_m < Lq
    q_mask = row_ok[:, None] & (offs_d[None, :] < HEAD_DIM)
    q = tl.load(Q + b * s_qb + h * s_qh + offs_m[:, None] * s_qm + offs_d[None, :] * s_qd, mask=q_mask, other=0.0)
    do = tl.load(DO + b * s_db + h * s_dh + offs_m[:, None] * s_dm + offs_d[None, :] * s_dd, mask=q_mask, other=0.0)
    lse = tl.load(LSE + bh.to(tl.int64) * Lq + offs_m, mask=row_ok, other=0.0)
    delta = tl.load(DELTA + bh.to(tl.int64) * Lq + offs_m, mask=row_ok, other=0.0)
    k_base = K + b * s_kb + h * s_kh
    v_base = V + b * s_vb + h * s_vh
    dq = tl.zeros((BLOCK_M, BLOCK_D), tl.float32)
    hi = Lk
    if CAUSAL:
        hi = tl.minimum(start_m + BLOCK_M, Lk)
    for start_n in range(0, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kv_mask = (offs_n[:, None] < Lk) & (offs_d[None, :] < HEAD_DIM)
        k = tl.load(k_base + offs_n[:, None] * s_kn + offs_d[None, :] * s_kd, mask=kv_mask, other=0.0)
        v = tl.load(v_base + offs_n[:, None] * s_vn + offs_d[None, :] * s_vd, mask=kv_mask, other=0.0)
        s = _dot(q, tl.trans(k), tl.zeros((BLOCK_M, BLOCK_N), tl.float32), IEEE) * qk_scale
        keep = row_ok[:, None] & (offs_n[None, :] < Lk)
        if CAUSAL:
            keep = keep & (offs_m[:, None] >= offs_n[None, :])
        p = tl.where(keep, tl.math.exp2(s - lse[:, None]), 0.0)
        dp = _dot(do, tl.trans(v), tl.zeros((BLOCK_M, BLOCK_N), tl.float32), IEEE)
        ds = p * (dp - delta[:, None])
        dq = _dot(ds.to(k.dtype), k, dq, IEEE)
    tl.store(DQ + b * s_qb + h * s_qh + offs_m[:, None] * s_qm + offs_d[None, :] * s_qd,
             (dq * scale).to(DQ.dtype.element_ty), mask=q_mask)


# ---------------------------------------------------------------------------------------
# Launch configuration. On the GPU the forward is autotuned over a few tile shapes per
# (head dim, causal, dtype, lengths); the interpreter uses small tiles so that short test
# sequences still cross several tiles and exercise every masking path.

def _fwd_configs():
    cfgs = []
    for bm, bn, w, s in [(128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 3), (128, 128, 8, 2),
                         (128, 64, 8, 4), (64, 64, 4, 3), (64, 32, 4, 4)]:
        cfgs.append(triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=s))
    return cfgs


def _bwd_configs():
    return [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=s)
            for bm, bn, w, s in [(64, 64, 4, 2), (64, 128, 8, 2), (32, 64, 4, 3), (64, 64, 8, 3)]]


def _prune_fwd(configs, named_args, **kwargs):
    args = {**named_args, **kwargs}  # constexpr arguments arrive in kwargs
    keep = [c for c in configs if c.kwargs["BLOCK_M"] % c.kwargs["BLOCK_N"] == 0]
    if args["HEAD_DIM"] > 128 or args["IEEE"]:  # big tiles spill or exceed shared memory
        keep = [c for c in keep if c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"] <= 64 * 64] or keep[-1:]
    return keep


_FWD_KEY = ["Lq", "Lk", "HEAD_DIM", "CAUSAL", "IEEE"]
_attn_fwd_tuned = triton.autotune(configs=_fwd_configs(), key=_FWD_KEY,
                                  prune_configs_by={"early_config_prune": _prune_fwd})(_attn_fwd)
_bwd_dkdv_tuned = triton.autotune(configs=_bwd_configs(), key=_FWD_KEY)(_bwd_dkdv)
_bwd_dq_tuned = triton.autotune(configs=_bwd_configs(), key=_FWD_KEY)(_bwd_dq)

_INTERPRETER_TILES = {"BLOCK_M": 32, "BLOCK_N": 16}


def _fixed_config(kernel, head_dim, ieee):
    """Tiles used when autotuning is off (TIERS_AUTOTUNE=0, as in the test suite)."""
    if ieee or head_dim > 128:
        return triton.Config({"BLOCK_M": 64, "BLOCK_N": 32}, num_warps=4, num_stages=2)
    if kernel is _attn_fwd:
        return triton.Config({"BLOCK_M": 128, "BLOCK_N": 64}, num_warps=4 if head_dim <= 64 else 8, num_stages=3)
    return triton.Config({"BLOCK_M": 64, "BLOCK_N": 64}, num_warps=4, num_stages=2)


def _launch(kernel, tuned, grid_of, *args, **meta):
    """Interpreter: small tiles. GPU: autotuned, unless TIERS_AUTOTUNE=0 picks fixed tiles."""
    if interpreting():
        kernel[grid_of(_INTERPRETER_TILES)](*args, **meta, **_INTERPRETER_TILES)
    elif os.environ.get("TIERS_AUTOTUNE", "1") == "0":
        cfg = _fixed_config(kernel, meta["HEAD_DIM"], meta["IEEE"])
        kernel[grid_of(cfg.kwargs)](*args, **meta, **cfg.kwargs, num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    else:
        tuned[grid_of](*args, **meta)


def _strides(*ts):
    return [s for t in ts for s in t.stride()]


def _forward(q, k, v, shape):
    B, H, Lq, Lk, D = shape.B, shape.H, shape.Lq, shape.Lk, shape.D
    o = empty_like(q)
    lse = empty((B, H, Lq), dtype=torch.float32, device=q.device)
    meta = dict(CAUSAL=shape.causal, HEAD_DIM=D, BLOCK_D=block_d(D),
                IEEE=q.dtype == torch.float32)
    _launch(_attn_fwd, _attn_fwd_tuned, lambda c: (triton.cdiv(Lq, c["BLOCK_M"]), B * H),
            q, k, v, o, lse, shape.scale * LOG2E, Lq, Lk, H, *_strides(q, k, v, o), **meta)
    return o, lse


def _backward(q, k, v, o, lse, do, shape):
    B, H, Lq, Lk, D = shape.B, shape.H, shape.Lq, shape.Lk, shape.D
    meta = dict(CAUSAL=shape.causal, HEAD_DIM=D, BLOCK_D=block_d(D),
                IEEE=q.dtype == torch.float32)
    delta = empty((B, H, Lq), dtype=torch.float32, device=q.device)
    _bwd_delta[(triton.cdiv(Lq, 64), B * H)](o, do, delta, Lq, H, *_strides(o, do),
                                             HEAD_DIM=D, BLOCK_D=meta["BLOCK_D"], BLOCK_M=64)
    # the gradient kernels write dq/dk/dv with q/k/v's strides: give both one dense layout
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    dq, dk, dv = empty_like(q), empty_like(k), empty_like(v)
    args = (q, k, v, do, lse, delta)
    tail = (shape.scale * LOG2E, shape.scale, Lq, Lk, H, *_strides(q, k, v, do))
    _launch(_bwd_dkdv, _bwd_dkdv_tuned, lambda c: (triton.cdiv(Lk, c["BLOCK_N"]), B * H),
            *args, dk, dv, *tail, **meta)
    _launch(_bwd_dq, _bwd_dq_tuned, lambda c: (triton.cdiv(Lq, c["BLOCK_M"]), B * H),
            *args, dq, *tail, **meta)
    return dq, dk, dv


class _FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, shape):
        o, lse = _forward(q, k, v, shape)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.shape = shape
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = _backward(q, k, v, o, lse, do.contiguous(), ctx.shape)
        return dq, dk, dv, None


def attention(q, k, v, *, causal=False, scale=None):
    """q [B, H, Lq, D], k and v [B, H, Lk, D] → [B, H, Lq, D]; differentiable."""
    return attention_of(q, k, v, validate_attention(q, k, v, causal, scale, tier="t3_triton_fused"))


def attention_of(q, k, v, shape):
    """`attention` on inputs already validated as `shape` (an AttentionShape): for t3 modules
    that validate their own arguments and hand a dense sub-problem on (sparse attention's
    equal blocks), so nothing is checked twice."""
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        return _FlashAttention.apply(q, k, v, shape)
    return _forward(q, k, v, shape)[0]


def attention_with_lse(q, k, v, *, causal=False, scale=None):
    """Forward only: (output, lse) with lse = log Σ_j exp(scale · q_i·k_j) in natural log, [B, H, Lq].
    Inputs that require grad are refused while grad is on: the results would come back cut off from
    autograd (attention() differentiates)."""
    shape = validate_attention(q, k, v, causal, scale, tier="t3_triton_fused")
    check_forward_only((("q", q), ("k", k), ("v", v)), "attention_with_lse", "attention()")
    o, lse2 = _forward(q, k, v, shape)
    return o, lse2 / LOG2E
