"""Neighborhood attention as a library of kernels would run it: three launches, with the
attention weights written to memory between them (the "unfused" GEMM-based NA of Hassani et
al., Faster Neighborhood Attention, NeurIPS 2024).

Every token n (spatial position, flattened in C order, N of them) attends only to its
neighbourhood nbr(n, 0..Kmax−1), Kmax = prod(kernel_size), as defined once for every tier in
`tiers.neighborhood_windows` (NATTEN windows: shifted at the borders, dilation, stride, causal
per axis). With the neighbour table idx[n, t] and its valid mask, for each batch b and head h:

    W[n, t] = q_n · k_idx[n,t]            if slot t is valid, else −inf      (stage 1, "PN")
    P[n, :] = softmax(scale · W[n, :])    invalid slots get exactly 0        (stage 2)
    o_n     = Σ_t P[n, t] · v_idx[n,t]                                       (stage 3, "NN")

Why this is the unfused view: the weights W (then P, in place) are a [B, H, N, Kmax] float32
tensor in memory. Stage 1 writes it, stage 2 reads and rewrites it, stage 3 reads it back:
four trips through memory for B·H·N·Kmax numbers that a fused kernel (tier 3) keeps on chip. Unlike
dense attention the cost is linear in N, not quadratic, so the weights are small next to the
[N, N] scores of `attention.py`; the price of unfusing is the traffic, not the footprint.

Both Triton kernels are tiled like a GEMM: a program owns a BLOCK_Q × BLOCK_T tile of W (or a
BLOCK_Q × BLOCK_D tile of the output) for one (b, h) and walks the reduction axis (D, or the
slots t) in chunks, accumulating in float32. They differ from a GEMM in one respect: each
(query, slot) pair gathers its own key row k_idx[n,t], so no operand tile is shared by a whole
row or column of the output tile and `tl.dot` has nothing to multiply. The products are
elementwise multiply-and-sum over a [BLOCK_Q, BLOCK_T, BLOCK_D] block instead (CUDA cores, not
tensor cores). The paper regains tensor cores by multiplying a query tile with the union of
its neighbourhoods as a dense GEMM and scattering the needed entries into W; that needs the
window arithmetic inside the kernel, and here the shared table is the only definition of the
window, so the kernels stay gather-based. The table itself comes from NumPy on the host.
"""
import functools

import numpy as np
import torch
import triton
import triton.language as tl

from tiers.buffers import empty
from tiers.kernels.softmax import softmax_rows_
from tiers.neighborhood_windows import neighbor_indices
from tiers.validation import validate_neighborhood


@triton.jit
def _weights_kernel(Q, K, IDX, W, N, KMAX, H, HEAD_DIM,
                    s_qb, s_qn, s_qh, s_qd, s_kb, s_kn, s_kh, s_kd,
                    BLOCK_Q: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
    """W[bh, n, t] = q[b, n, h] · k[b, idx[n, t], h], −inf on invalid slots (idx = −1)."""
    n_t_tiles = tl.cdiv(KMAX, BLOCK_T)
    pid_q = tl.program_id(0) // n_t_tiles
    pid_t = tl.program_id(0) % n_t_tiles
    bh = tl.program_id(1).to(tl.int64)
    b, h = bh // H, bh % H
    offs_q = pid_q * BLOCK_Q + tl.arange(0, BLOCK_Q)
    offs_t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    offs_d = tl.arange(0, BLOCK_D)
    in_tile = (offs_q[:, None] < N) & (offs_t[None, :] < KMAX)
    # the table is shared by every (b, h): one [BLOCK_Q, BLOCK_T] load serves the whole D loop
    nbr = tl.load(IDX + offs_q[:, None].to(tl.int64) * KMAX + offs_t[None, :], mask=in_tile, other=-1)
    valid = nbr >= 0
    q_ptrs = Q + b * s_qb + h * s_qh + offs_q[:, None].to(tl.int64) * s_qn + offs_d[None, :] * s_qd
    # [BLOCK_Q, BLOCK_T, BLOCK_D]: every (query, slot) pair points at its own key row
    k_ptrs = (K + b * s_kb + h * s_kh + nbr[:, :, None].to(tl.int64) * s_kn
              + offs_d[None, None, :] * s_kd)
    acc = tl.zeros((BLOCK_Q, BLOCK_T), dtype=tl.float32)
    for d0 in range(0, HEAD_DIM, BLOCK_D):
        d_ok = offs_d + d0 < HEAD_DIM
        q = tl.load(q_ptrs, mask=(offs_q[:, None] < N) & d_ok[None, :], other=0.0).to(tl.float32)
        k = tl.load(k_ptrs, mask=valid[:, :, None] & d_ok[None, None, :], other=0.0).to(tl.float32)
        # float32 products summed in float32: exact float32 for fp32 inputs, no TF32 rounding
        acc += tl.sum(q[:, None, :] * k, axis=2)
        q_ptrs += BLOCK_D * s_qd
        k_ptrs += BLOCK_D * s_kd
    # −inf is what the row softmax reads as "masked": it turns these slots into exact zeros
    acc = tl.where(valid, acc, float("-inf"))
    w_ptrs = W + bh * N * KMAX + offs_q[:, None].to(tl.int64) * KMAX + offs_t[None, :]
    tl.store(w_ptrs, acc, mask=in_tile)


@triton.jit
def _apply_kernel(P, V, IDX, O, N, KMAX, H, HEAD_DIM,
                  s_vb, s_vn, s_vh, s_vd, s_ob, s_on, s_oh, s_od,
                  BLOCK_Q: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
    """O[b, n, h, :] = Σ_t P[bh, n, t] · v[b, idx[n, t], h, :]."""
    pid_q = tl.program_id(0)
    pid_d = tl.program_id(1)
    bh = tl.program_id(2).to(tl.int64)
    b, h = bh // H, bh % H
    offs_q = pid_q * BLOCK_Q + tl.arange(0, BLOCK_Q)
    offs_t = tl.arange(0, BLOCK_T)
    offs_d = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    q_ok = offs_q < N
    d_ok = offs_d < HEAD_DIM
    row = offs_q[:, None].to(tl.int64) * KMAX
    acc = tl.zeros((BLOCK_Q, BLOCK_D), dtype=tl.float32)
    for t0 in range(0, KMAX, BLOCK_T):
        in_tile = q_ok[:, None] & (offs_t[None, :] + t0 < KMAX)
        nbr = tl.load(IDX + row + offs_t[None, :] + t0, mask=in_tile, other=-1)
        valid = nbr >= 0
        p = tl.load(P + bh * N * KMAX + row + offs_t[None, :] + t0, mask=in_tile, other=0.0)
        # invalid slots have p = 0 already; masking their load keeps idx = −1 from being read
        v = tl.load(V + b * s_vb + h * s_vh + nbr[:, :, None].to(tl.int64) * s_vn
                    + offs_d[None, None, :] * s_vd,
                    mask=valid[:, :, None] & d_ok[None, None, :], other=0.0).to(tl.float32)
        acc += tl.sum(p[:, :, None] * v, axis=1)
    o_ptrs = (O + b * s_ob + h * s_oh + offs_q[:, None].to(tl.int64) * s_on
              + offs_d[None, :] * s_od)
    tl.store(o_ptrs, acc.to(O.dtype.element_ty), mask=q_ok[:, None] & d_ok[None, :])


@functools.lru_cache(maxsize=8)
def _neighbor_table(spatial, kernel_size, stride, dilation, causal, device):
    """[N, Kmax] int32 flat key index per (query, slot), −1 where the slot is invalid: one
    tensor carries both the index and the mask. Cached because the host loop that builds it
    costs more than both kernels together on a GPU (0.2 s for 128×128 tokens)."""
    idx, valid = neighbor_indices(spatial, kernel_size, stride, dilation, causal)
    idx = np.where(valid, idx, -1).astype(np.int32)
    return torch.from_numpy(idx).to(device)


def _tiles(D, Kmax, device):
    """(BLOCK_Q, BLOCK_T, BLOCK_D) for both kernels."""
    if device.type == "cpu":
        # the interpreter pays per program and per op, not per element: few, large programs
        BQ, BT, BD = 64, 64, 64
    else:
        # the [BQ, BT, BD] product block lives in registers: 8K elements for 4 warps. Few
        # slots and a wide D chunk make each gathered row one 128-byte read in fp16; on an
        # H100 this was the best of the shapes tried, 2× faster than 16 × 16 × 32
        BQ, BT, BD = 16, 8, 64
    return BQ, min(BT, triton.next_power_of_2(Kmax)), min(BD, triton.next_power_of_2(D))


def _na(q, k, v, kernel_size, stride, dilation, is_causal, scale, ndim):
    s = validate_neighborhood(q, k, v, kernel_size, stride, dilation, is_causal, scale,
                              ndim=ndim, tier="t2_triton_unfused")
    N = int(np.prod(s.spatial))
    Kmax = int(np.prod(s.kernel_size))
    BH = s.B * s.H
    # [B, N, H, D] views (copies only when the strides cannot be flattened); kernels take strides
    q4, k4, v4 = (x.reshape(s.B, N, s.H, s.D) for x in (q, k, v))
    idx = _neighbor_table(s.spatial, s.kernel_size, s.stride, s.dilation, s.causal, q.device)
    BQ, BT, BD = _tiles(s.D, Kmax, q.device)

    # stage 1: weights, float32 whatever the input dtype, so the softmax sees exact logits
    weights = empty((BH, N, Kmax), dtype=torch.float32, device=q.device)
    grid = (triton.cdiv(N, BQ) * triton.cdiv(Kmax, BT), BH)
    _weights_kernel[grid](q4, k4, idx, weights, N, Kmax, s.H, s.D, *q4.stride(), *k4.stride(),
                          BLOCK_Q=BQ, BLOCK_T=BT, BLOCK_D=BD, num_warps=4)

    # stage 2: the shared row softmax, in place; its −inf handling is our neighbourhood mask
    softmax_rows_(weights, scale=s.scale)

    # stage 3: gather V rows and reduce over the slots
    out = empty((s.B, *s.spatial, s.H, s.D), dtype=q.dtype, device=q.device)
    o4 = out.view(s.B, N, s.H, s.D)
    grid = (triton.cdiv(N, BQ), triton.cdiv(s.D, BD), BH)
    _apply_kernel[grid](weights, v4, idx, o4, N, Kmax, s.H, s.D, *v4.stride(), *o4.stride(),
                        BLOCK_Q=BQ, BLOCK_T=BT, BLOCK_D=BD, num_warps=4)
    return out


def na1d(q, k, v, kernel_size, stride=1, dilation=1, is_causal=False, scale=None):
    """q, k, v [B, L, H, D] → [B, L, H, D]. Per-axis arguments are ints (bool for is_causal)."""
    return _na(q, k, v, kernel_size, stride, dilation, is_causal, scale, 1)


def na2d(q, k, v, kernel_size, stride=1, dilation=1, is_causal=False, scale=None):
    """q, k, v [B, X, Y, H, D] → [B, X, Y, H, D]. Per-axis arguments: an int or a 2-tuple."""
    return _na(q, k, v, kernel_size, stride, dilation, is_causal, scale, 2)


def na3d(q, k, v, kernel_size, stride=1, dilation=1, is_causal=False, scale=None):
    """q, k, v [B, X, Y, Z, H, D] → [B, X, Y, Z, H, D]. Per-axis arguments: an int or a 3-tuple."""
    return _na(q, k, v, kernel_size, stride, dilation, is_causal, scale, 3)
