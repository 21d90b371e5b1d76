"""Neighborhood attention as the GEMM-based *unfused* kernels of Faster Neighborhood Attention
(Hassani et al., NeurIPS 2024): three launches, the attention weights written to memory.

Every token n attends to its neighbourhood N(n) (the NATTEN window of tiers/neighborhood_windows.py,
on every axis; Kmax = prod(kernel_size) slots per query). For each batch b and head h:

    W[n, t] = q_n · k_j   for the key j in slot t of n's window, −inf for an empty slot  (stage 1, "PN")
    P[n, :] = softmax(scale · W[n, :])                                                  (stage 2)
    o_n     = Σ_t P[n, t] · v_j                                                         (stage 3, "NN")

Stage 1 is a GEMM: a program owns a multi-dimensional tile of queries of one dilation group
(see tiers/kernels/na_tiles.py); the union of their windows is one box of keys, which it walks
in key tiles, multiplying Q_tile · K_tileᵀ on the tensor cores and scattering each product that
lies in its query's window into that query's slot t = Σ_axis (j'_axis − lo_axis) · (stride of
the slot axis). Stage 3 walks the same boxes, gathers P back into tile shape and multiplies
P_tile · V_tile. Stage 2 is the row softmax of tiers/kernels/softmax.py.

Why this is the unfused view: W is a [B, H, N, Kmax] float32 tensor in memory; stage 1 writes
it, stage 2 reads and rewrites it, stage 3 reads it back. The fused tier keeps it on chip. The
weights grow with N·Kmax, not N², but the traffic is still three passes over them.
"""
import torch
import triton
import triton.language as tl

from tiers.buffers import empty_like
from tiers.kernels.gemm import dot as _dot
from tiers.kernels.na_tiles import Problem, as6d, coords, flat_index, in_window, rows, strides6, \
    tile_of_program, window
from tiers.kernels.softmax import softmax_rows_
from tiers.validation import interpreting, validate_neighborhood


@triton.jit
def _slot(jx, jy, jz, lox, loy, loz, KY, KZ):
    """[queries, keys] slot of each key inside its query's window (C order over the axes)."""
    return ((jx[None, :] - lox[:, None]) * KY + (jy[None, :] - loy[:, None])) * KZ + (jz[None, :] - loz[:, None])


@triton.jit
def _na_weights(Q, K, W, H, LX, LY, LZ, KX, KY, KZ, SX, SY, SZ, DX, DY, DZ,
                s_b, s_x, s_y, s_z, s_h, s_d,
                CX: tl.constexpr, CY: tl.constexpr, CZ: tl.constexpr,
                HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, IEEE: tl.constexpr,
                TX: tl.constexpr, TY: tl.constexpr, TZ: tl.constexpr,
                NX: tl.constexpr, NY: tl.constexpr, NZ: tl.constexpr):
    bh = tl.program_id(1)
    base = (bh // H).to(tl.int64) * s_b + (bh % H).to(tl.int64) * s_h
    gx, gy, gz, lgx, lgy, lgz, ox, oy, oz = tile_of_program(tl.program_id(0), LX, LY, LZ, DX, DY, DZ, TX, TY, TZ)
    ipx, ipy, ipz = coords(ox, oy, oz, TX, TY, TZ)
    q_ok = (ipx < lgx) & (ipy < lgy) & (ipz < lgz)
    lox, hix = window(ipx, lgx, KX, SX, CX)
    loy, hiy = window(ipy, lgy, KY, SY, CY)
    loz, hiz = window(ipz, lgz, KZ, SZ, CZ)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM
    q = tl.load(Q + rows(base, gx, gy, gz, ipx, ipy, ipz, DX, DY, DZ, s_x, s_y, s_z)[:, None] + offs_d[None, :] * s_d,
                mask=q_ok[:, None] & d_ok[None, :], other=0.0)
    kmax = KX * KY * KZ
    w_rows = (bh.to(tl.int64) * LX * LY * LZ + flat_index(gx, gy, gz, ipx, ipy, ipz, DX, DY, DZ, LY, LZ)) * kmax
    jx0, jy0, jz0 = coords(0, 0, 0, NX, NY, NZ)
    for bx in range(tl.min(tl.where(q_ok, lox, lgx)), tl.max(tl.where(q_ok, hix, 0)), NX):
        for by in range(tl.min(tl.where(q_ok, loy, lgy)), tl.max(tl.where(q_ok, hiy, 0)), NY):
            for bz in range(tl.min(tl.where(q_ok, loz, lgz)), tl.max(tl.where(q_ok, hiz, 0)), NZ):
                jx, jy, jz = bx + jx0, by + jy0, bz + jz0
                k_ok = (jx < lgx) & (jy < lgy) & (jz < lgz)
                k_rows = rows(base, gx, gy, gz, jx, jy, jz, DX, DY, DZ, s_x, s_y, s_z)
                kt = tl.load(K + k_rows[None, :] + offs_d[:, None] * s_d, mask=k_ok[None, :] & d_ok[:, None],
                             other=0.0)
                s = _dot(q, kt, tl.zeros((TX * TY * TZ, NX * NY * NZ), tl.float32), IEEE)
                keep = in_window(jx, jy, jz, lox, hix, loy, hiy, loz, hiz) & k_ok[None, :] & q_ok[:, None]
                tl.store(W + w_rows[:, None] + _slot(jx, jy, jz, lox, loy, loz, KY, KZ), s, mask=keep)


@triton.jit
def _na_apply(P, V, O, H, LX, LY, LZ, KX, KY, KZ, SX, SY, SZ, DX, DY, DZ,
              s_b, s_x, s_y, s_z, s_h, s_d,
              CX: tl.constexpr, CY: tl.constexpr, CZ: tl.constexpr,
              HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, IEEE: tl.constexpr,
              TX: tl.constexpr, TY: tl.constexpr, TZ: tl.constexpr,
              NX: tl.constexpr, NY: tl.constexpr, NZ: tl.constexpr):
    bh = tl.program_id(1)
    base = (bh // H).to(tl.int64) * s_b + (bh % H).to(tl.int64) * s_h
    gx, gy, gz, lgx, lgy, lgz, ox, oy, oz = tile_of_program(tl.program_id(0), LX, LY, LZ, DX, DY, DZ, TX, TY, TZ)
    ipx, ipy, ipz = coords(ox, oy, oz, TX, TY, TZ)
    q_ok = (ipx < lgx) & (ipy < lgy) & (ipz < lgz)
    lox, hix = window(ipx, lgx, KX, SX, CX)
    loy, hiy = window(ipy, lgy, KY, SY, CY)
    loz, hiz = window(ipz, lgz, KZ, SZ, CZ)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM
    kmax = KX * KY * KZ
    w_rows = (bh.to(tl.int64) * LX * LY * LZ + flat_index(gx, gy, gz, ipx, ipy, ipz, DX, DY, DZ, LY, LZ)) * kmax
    acc = tl.zeros((TX * TY * TZ, BLOCK_D), tl.float32)
    jx0, jy0, jz0 = coords(0, 0, 0, NX, NY, NZ)
    for bx in range(tl.min(tl.where(q_ok, lox, lgx)), tl.max(tl.where(q_ok, hix, 0)), NX):
        for by in range(tl.min(tl.where(q_ok, loy, lgy)), tl.max(tl.where(q_ok, hiy, 0)), NY):
            for bz in range(tl.min(tl.where(q_ok, loz, lgz)), tl.max(tl.where(q_ok, hiz, 0)), NZ):
                jx, jy, jz = bx + jx0, by + jy0, bz + jz0
                k_ok = (jx < lgx) & (jy < lgy) & (jz < lgz)
                keep = in_window(jx, jy, jz, lox, hix, loy, hiy, loz, hiz) & k_ok[None, :] & q_ok[:, None]
                p = tl.load(P + w_rows[:, None] + _slot(jx, jy, jz, lox, loy, loz, KY, KZ), mask=keep, other=0.0)
                k_rows = rows(base, gx, gy, gz, jx, jy, jz, DX, DY, DZ, s_x, s_y, s_z)
                v = tl.load(V + k_rows[:, None] + offs_d[None, :] * s_d, mask=k_ok[:, None] & d_ok[None, :],
                            other=0.0)
                acc = _dot(p.to(v.dtype), v, acc, IEEE)
    out_rows = rows(base, gx, gy, gz, ipx, ipy, ipz, DX, DY, DZ, s_x, s_y, s_z)
    tl.store(O + out_rows[:, None] + offs_d[None, :] * s_d, acc.to(O.dtype.element_ty),
             mask=q_ok[:, None] & d_ok[None, :])


# (query tile, key tile, num_warps, num_stages) per rank; the interpreter uses 16-position tiles
_TILES = {1: ((1, 1, 64), (1, 1, 64), 4, 2), 2: ((1, 8, 8), (1, 8, 8), 4, 2), 3: ((2, 4, 8), (2, 4, 8), 4, 2)}
_INTERPRETER = {1: ((1, 1, 16), (1, 1, 16)), 2: ((1, 4, 4), (1, 4, 4)), 3: ((1, 4, 4), (2, 2, 4))}


def _na(q, k, v, kernel_size, stride, dilation, is_causal, scale, rank):
    shape = validate_neighborhood(q, k, v, kernel_size, stride, dilation, is_causal, scale, ndim=rank,
                                  tier="t2_triton_unfused")
    prob = Problem(shape, rank, q.dtype)
    q6, k6, v6 = (as6d(x, rank) for x in (q, k, v))
    T, N, warps, stages = (*_INTERPRETER[rank], 4, 1) if interpreting() else _TILES[rank]
    kmax = prob.K[0] * prob.K[1] * prob.K[2]
    # slots a causal window leaves empty must read as −∞ in the softmax: start from −∞ everywhere
    weights = torch.full((prob.B * prob.H, prob.N, kmax), float("-inf"), dtype=torch.float32, device=q.device)
    prob.launch(_na_weights, T, T, N, warps, stages, q6, k6, weights, *prob.scalars(), *strides6(q6))
    softmax_rows_(weights, scale=prob.scale)
    out = empty_like(q6)
    prob.launch(_na_apply, T, T, N, warps, stages, weights, v6, out, *prob.scalars(), *strides6(v6))
    return out.reshape(q.shape)


def na1d(q, k, v, kernel_size, stride=1, dilation=1, is_causal=False, scale=None):
    """q, k, v [B, L, H, D] -> [B, L, H, D]: each query attends to its 1D neighbourhood."""
    return _na(q, k, v, kernel_size, stride, dilation, is_causal, scale, 1)


def na2d(q, k, v, kernel_size, stride=1, dilation=1, is_causal=False, scale=None):
    """q, k, v [B, X, Y, H, D] -> [B, X, Y, H, D]: each query attends to its 2D neighbourhood."""
    return _na(q, k, v, kernel_size, stride, dilation, is_causal, scale, 2)


def na3d(q, k, v, kernel_size, stride=1, dilation=1, is_causal=False, scale=None):
    """q, k, v [B, X, Y, Z, H, D] -> [B, X, Y, Z, H, D]: each query attends to its 3D neighbourhood."""
    return _na(q, k, v, kernel_size, stride, dilation, is_causal, scale, 3)
