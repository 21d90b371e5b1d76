"""Fused neighborhood attention (1D/2D/3D), forward and backward, one Triton kernel each.

Each query attends to its neighbourhood only (tiers/neighborhood_windows.py has the per-axis
window of NATTEN). The kernel is FlashAttention's online softmax over the keys a *tile of
queries* can see:

  * Every tensor is viewed as [B, X, Y, Z, H, D] (1D and 2D inputs get singleton axes), so one
    kernel serves all three ranks.
  * Dilation is handled by regrouping: positions with equal (i mod d) on every axis form a
    dense sub-grid, and a tile never mixes groups, so inside a tile the neighbours are a dense
    box in group coordinates and nothing is masked just for being in another group.
  * A program owns a multi-dimensional query tile (e.g. 8×16 in 2D, 2×8×8 in 3D). Windows
    grow monotonically with the query index, so the union of the tile's windows is one box per
    axis, [min lo, max hi). The program walks that box in multi-dimensional key tiles and
    applies the exact per-query window as a mask. Work scales with the neighbourhood size,
    not with the sequence length.
  * The softmax is online (running max m and sum l, as in tiers/t3_triton_fused/attention.py),
    with lse = m + log2(l) saved for the backward. A query may see nothing in a key tile, so the
    running max can still be −∞ there; the update guards that case instead of producing NaN.

Backward (recompute P from lse, as FlashAttention-2): dQ by the same walk as the forward; dK
and dV by a program per key tile walking the queries that can see it. A query sees a key only
within K + s of it on each axis, so that query box is small; the exact window is again the
mask. Δ = rowsum(dO ⊙ O) comes from the dense-attention module's kernel.
"""
import functools

import torch
import triton
import triton.language as tl

from tiers.buffers import empty, empty_like
from tiers.kernels.na_tiles import (Problem, as6d, coords, flat_index, in_window, inside, rows, shared_window, strides6,
                                    tile_of_program, window)
from tiers.kernels.gemm import dot as _dot
from tiers.neighborhood_windows import key_tile_queries
from tiers.t3_triton_fused.attention import LOG2E, _bwd_delta
from tiers.validation import interpreting, validate_neighborhood


@triton.jit
def _na_fwd(Q, K, V, O, LSE, qk_scale, H,
            LX, LY, LZ, KX, KY, KZ, SX, SY, SZ, DX, DY, DZ,
            s_b, s_x, s_y, s_z, s_h, s_d,
            CX: tl.constexpr, CY: tl.constexpr, CZ: tl.constexpr,
            HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, IEEE: tl.constexpr,
            TX: tl.constexpr, TY: tl.constexpr, TZ: tl.constexpr,
            NX: tl.constexpr, NY: tl.constexpr, NZ: tl.constexpr, SPLIT: tl.constexpr):
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
    q_rows = rows(base, gx, gy, gz, ipx, ipy, ipz, DX, DY, DZ, s_x, s_y, s_z)
    q = tl.load(Q + q_rows[:, None] + offs_d[None, :] * s_d, mask=q_ok[:, None] & d_ok[None, :], other=0.0)

    # key tiles inside every query's window (most of them, for large kernels) skip the mask
    ilx, ihx = shared_window(lox, hix, q_ok)
    ily, ihy = shared_window(loy, hiy, q_ok)
    ilz, ihz = shared_window(loz, hiz, q_ok)

    m_i = tl.full((TX * TY * TZ,), float("-inf"), tl.float32)
    l_i = tl.zeros((TX * TY * TZ,), tl.float32)
    acc = tl.zeros((TX * TY * TZ, BLOCK_D), tl.float32)
    jx0, jy0, jz0 = coords(0, 0, 0, NX, NY, NZ)
    # the union of this tile's windows, one box per axis
    for bx in range(tl.min(tl.where(q_ok, lox, lgx)), tl.max(tl.where(q_ok, hix, 0)), NX):
        for by in range(tl.min(tl.where(q_ok, loy, lgy)), tl.max(tl.where(q_ok, hiy, 0)), NY):
            for bz in range(tl.min(tl.where(q_ok, loz, lgz)), tl.max(tl.where(q_ok, hiz, 0)), NZ):
                jx, jy, jz = bx + jx0, by + jy0, bz + jz0
                k_ok = (jx < lgx) & (jy < lgy) & (jz < lgz)
                k_rows = rows(base, gx, gy, gz, jx, jy, jz, DX, DY, DZ, s_x, s_y, s_z)
                kt = tl.load(K + k_rows[None, :] + offs_d[:, None] * s_d, mask=k_ok[None, :] & d_ok[:, None],
                             other=0.0)
                s = _dot(q, kt, tl.zeros((TX * TY * TZ, NX * NY * NZ), tl.float32), IEEE)
                if not (SPLIT and inside(bx, by, bz, NX, NY, NZ, ilx, ihx, ily, ihy, ilz, ihz)):
                    keep = in_window(jx, jy, jz, lox, hix, loy, hiy, loz, hiz) & k_ok[None, :]
                    s = tl.where(keep, s, float("-inf"))
                m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
                m_use = tl.where(m_new == float("-inf"), 0.0, m_new)  # no neighbour seen yet
                p = tl.math.exp2(s * qk_scale - m_use[:, None])
                alpha = tl.math.exp2(m_i - m_use)
                l_i = l_i * alpha + tl.sum(p, 1)
                v = tl.load(V + k_rows[:, None] + offs_d[None, :] * s_d, mask=k_ok[:, None] & d_ok[None, :],
                            other=0.0)
                acc = _dot(p.to(v.dtype), v, acc * alpha[:, None], IEEE)
                m_i = m_new
    l_safe = tl.where(l_i == 0.0, 1.0, l_i)  # only rows outside the input, which are not stored
    flat = flat_index(gx, gy, gz, ipx, ipy, ipz, DX, DY, DZ, LY, LZ)
    tl.store(LSE + bh.to(tl.int64) * LX * LY * LZ + flat, m_i + tl.math.log2(l_safe), mask=q_ok)
    tl.store(O + q_rows[:, None] + offs_d[None, :] * s_d, (acc / l_safe[:, None]).to(O.dtype.element_ty),
             mask=q_ok[:, None] & d_ok[None, :])


@triton.jit
def _na_bwd_dq(Q, K, V, DO, LSE, DELTA, DQ, qk_scale, scale, H,
               LX, LY, LZ, KX, KY, KZ, SX, SY, SZ, DX, DY, DZ,
               s_b, s_x, s_y, s_z, s_h, s_d,
               CX: tl.constexpr, CY: tl.constexpr, CZ: tl.constexpr,
               HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, IEEE: tl.constexpr,
               TX: tl.constexpr, TY: tl.constexpr, TZ: tl.constexpr,
               NX: tl.constexpr, NY: tl.constexpr, NZ: tl.constexpr, SPLIT: tl.constexpr):
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
    q_rows = rows(base, gx, gy, gz, ipx, ipy, ipz, DX, DY, DZ, s_x, s_y, s_z)
    qm = q_ok[:, None] & d_ok[None, :]
    q = tl.load(Q + q_rows[:, None] + offs_d[None, :] * s_d, mask=qm, other=0.0)
    do = tl.load(DO + q_rows[:, None] + offs_d[None, :] * s_d, mask=qm, other=0.0)
    flat = bh.to(tl.int64) * LX * LY * LZ + flat_index(gx, gy, gz, ipx, ipy, ipz, DX, DY, DZ, LY, LZ)
    lse = tl.load(LSE + flat, mask=q_ok, other=0.0)
    delta = tl.load(DELTA + flat, mask=q_ok, other=0.0)
    ilx, ihx = shared_window(lox, hix, q_ok)
    ily, ihy = shared_window(loy, hiy, q_ok)
    ilz, ihz = shared_window(loz, hiz, q_ok)
    all_q = tl.min(q_ok.to(tl.int32)) == 1
    dq = tl.zeros((TX * TY * TZ, BLOCK_D), tl.float32)
    jx0, jy0, jz0 = coords(0, 0, 0, NX, NY, NZ)
    for bx in range(tl.min(tl.where(q_ok, lox, lgx)), tl.max(tl.where(q_ok, hix, 0)), NX):
        for by in range(tl.min(tl.where(q_ok, loy, lgy)), tl.max(tl.where(q_ok, hiy, 0)), NY):
            for bz in range(tl.min(tl.where(q_ok, loz, lgz)), tl.max(tl.where(q_ok, hiz, 0)), NZ):
                jx, jy, jz = bx + jx0, by + jy0, bz + jz0
                k_ok = (jx < lgx) & (jy < lgy) & (jz < lgz)
                k_rows = rows(base, gx, gy, gz, jx, jy, jz, DX, DY, DZ, s_x, s_y, s_z)
                km = k_ok[:, None] & d_ok[None, :]
                k = tl.load(K + k_rows[:, None] + offs_d[None, :] * s_d, mask=km, other=0.0)
                v = tl.load(V + k_rows[:, None] + offs_d[None, :] * s_d, mask=km, other=0.0)
                s = _dot(q, tl.trans(k), tl.zeros((TX * TY * TZ, NX * NY * NZ), tl.float32), IEEE)
                p = tl.math.exp2(s * qk_scale - lse[:, None])
                if not (SPLIT and all_q and inside(bx, by, bz, NX, NY, NZ, ilx, ihx, ily, ihy, ilz, ihz)):
                    keep = in_window(jx, jy, jz, lox, hix, loy, hiy, loz, hiz) & k_ok[None, :] & q_ok[:, None]
                    p = tl.where(keep, p, 0.0)
                dp = _dot(do, tl.trans(v), tl.zeros((TX * TY * TZ, NX * NY * NZ), tl.float32), IEEE)
                dq = _dot((p * (dp - delta[:, None])).to(k.dtype), k, dq, IEEE)
    tl.store(DQ + q_rows[:, None] + offs_d[None, :] * s_d, (dq * scale).to(DQ.dtype.element_ty), mask=qm)


@triton.jit
def _query_span(TABLE, g, o, L, d, N: tl.constexpr):
    """Group coordinates [first, last) of the queries that see a key of the tile at o in group g,
    from the host's [d, n_tiles, 2] table (tiers/neighborhood_windows.py: key_tile_queries)."""
    row = (g * tl.cdiv(tl.cdiv(L, d), N) + o // N) * 2
    return tl.load(TABLE + row), tl.load(TABLE + row + 1)


@triton.jit
def _na_bwd_dkdv(Q, K, V, DO, LSE, DELTA, DK, DV, QX, QY, QZ, qk_scale, scale, H,
                 LX, LY, LZ, KX, KY, KZ, SX, SY, SZ, DX, DY, DZ,
                 s_b, s_x, s_y, s_z, s_h, s_d,
                 CX: tl.constexpr, CY: tl.constexpr, CZ: tl.constexpr,
                 HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, IEEE: tl.constexpr,
                 TX: tl.constexpr, TY: tl.constexpr, TZ: tl.constexpr,
                 NX: tl.constexpr, NY: tl.constexpr, NZ: tl.constexpr, SPLIT: tl.constexpr):
    bh = tl.program_id(1)
    base = (bh // H).to(tl.int64) * s_b + (bh % H).to(tl.int64) * s_h
    # this program owns a key tile of NX·NY·NZ positions of one dilation group
    gx, gy, gz, lgx, lgy, lgz, ox, oy, oz = tile_of_program(tl.program_id(0), LX, LY, LZ, DX, DY, DZ, NX, NY, NZ)
    jx, jy, jz = coords(ox, oy, oz, NX, NY, NZ)
    k_ok = (jx < lgx) & (jy < lgy) & (jz < lgz)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM
    k_rows = rows(base, gx, gy, gz, jx, jy, jz, DX, DY, DZ, s_x, s_y, s_z)
    km = k_ok[:, None] & d_ok[None, :]
    k = tl.load(K + k_rows[:, None] + offs_d[None, :] * s_d, mask=km, other=0.0)
    v = tl.load(V + k_rows[:, None] + offs_d[None, :] * s_d, mask=km, other=0.0)
    dk = tl.zeros((NX * NY * NZ, BLOCK_D), tl.float32)
    dv = tl.zeros((NX * NY * NZ, BLOCK_D), tl.float32)
    qx_lo, qx_hi = _query_span(QX, gx, ox, LX, DX, NX)
    qy_lo, qy_hi = _query_span(QY, gy, oy, LY, DY, NY)
    qz_lo, qz_hi = _query_span(QZ, gz, oz, LZ, DZ, NZ)
    ix0, iy0, iz0 = coords(0, 0, 0, TX, TY, TZ)
    row0 = bh.to(tl.int64) * LX * LY * LZ
    for bx in range(qx_lo, qx_hi, TX):
        for by in range(qy_lo, qy_hi, TY):
            for bz in range(qz_lo, qz_hi, TZ):
                ipx, ipy, ipz = bx + ix0, by + iy0, bz + iz0
                q_ok = (ipx < qx_hi) & (ipy < qy_hi) & (ipz < qz_hi)
                lox, hix = window(ipx, lgx, KX, SX, CX)
                loy, hiy = window(ipy, lgy, KY, SY, CY)
                loz, hiz = window(ipz, lgz, KZ, SZ, CZ)
                q_rows = rows(base, gx, gy, gz, ipx, ipy, ipz, DX, DY, DZ, s_x, s_y, s_z)
                qm = q_ok[:, None] & d_ok[None, :]
                q = tl.load(Q + q_rows[:, None] + offs_d[None, :] * s_d, mask=qm, other=0.0)
                do = tl.load(DO + q_rows[:, None] + offs_d[None, :] * s_d, mask=qm, other=0.0)
                flat = row0 + flat_index(gx, gy, gz, ipx, ipy, ipz, DX, DY, DZ, LY, LZ)
                lse = tl.load(LSE + flat, mask=q_ok, other=0.0)
                delta = tl.load(DELTA + flat, mask=q_ok, other=0.0)
                st = _dot(k, tl.trans(q), tl.zeros((NX * NY * NZ, TX * TY * TZ), tl.float32), IEEE)
                pt = tl.math.exp2(st * qk_scale - lse[None, :])
                ilx, ihx = shared_window(lox, hix, q_ok)
                ily, ihy = shared_window(loy, hiy, q_ok)
                ilz, ihz = shared_window(loz, hiz, q_ok)
                all_q = tl.min(q_ok.to(tl.int32)) == 1
                if not (SPLIT and all_q and inside(ox, oy, oz, NX, NY, NZ, ilx, ihx, ily, ihy, ilz, ihz)):
                    keep = (jx[:, None] >= lox[None, :]) & (jx[:, None] < hix[None, :]) \
                        & (jy[:, None] >= loy[None, :]) & (jy[:, None] < hiy[None, :]) \
                        & (jz[:, None] >= loz[None, :]) & (jz[:, None] < hiz[None, :]) \
                        & k_ok[:, None] & q_ok[None, :]
                    pt = tl.where(keep, pt, 0.0)
                dv = _dot(pt.to(do.dtype), do, dv, IEEE)
                dpt = _dot(v, tl.trans(do), tl.zeros((NX * NY * NZ, TX * TY * TZ), tl.float32), IEEE)
                dk = _dot((pt * (dpt - delta[None, :])).to(q.dtype), q, dk, IEEE)
    tl.store(DK + k_rows[:, None] + offs_d[None, :] * s_d, (dk * scale).to(DK.dtype.element_ty), mask=km)
    tl.store(DV + k_rows[:, None] + offs_d[None, :] * s_d, dv.to(DV.dtype.element_ty), mask=km)


# ---------------------------------------------------------------------------------------
# Tile shapes (query tile T, key tile N, as (x, y, z)) per rank, warps, stages, and whether key
# tiles inside every query's window skip the mask. 2D/3D tiles are boxes so the key box a query
# tile needs stays compact. Measured on an H100 (python -m tiers.bench.tune_neighborhood): the
# split pays in the 1D/2D forward; in the backward the branch costs more than the mask saves.
# The interpreter uses 16-position tiles.

_TILES = {  # rank: (T, N, num_warps, num_stages, split)
    1: ((1, 1, 128), (1, 1, 64), 8, 3, True),
    2: ((1, 8, 16), (1, 8, 8), 8, 3, True),
    3: ((2, 8, 8), (2, 4, 8), 8, 3, False),
}
_TILES_FP32 = {1: ((1, 1, 64), (1, 1, 32), 4, 2, True), 2: ((1, 8, 8), (1, 4, 8), 4, 2, True),
               3: ((1, 8, 8), (1, 4, 8), 4, 2, False)}
_TILES_BWD = {1: ((1, 1, 64), (1, 1, 64), 4, 2, False), 2: ((1, 8, 8), (1, 8, 8), 4, 2, False),
              3: ((2, 4, 8), (2, 4, 8), 4, 2, False)}
_INTERPRETER = {1: ((1, 1, 16), (1, 1, 16)), 2: ((1, 4, 4), (1, 4, 4)), 3: ((1, 4, 4), (2, 2, 4))}


def _tiles(rank, dtype, backward):
    if interpreting():
        t, n = _INTERPRETER[rank]
        return t, n, 4, 1, True  # the interpreter checks the split path; the GPU pass checks both
    if dtype == torch.float32:
        return _TILES_FP32[rank]
    return (_TILES_BWD if backward else _TILES)[rank]


def _forward(q6, k6, v6, prob):
    o = empty_like(q6)
    lse = empty((prob.B * prob.H, prob.N), dtype=torch.float32, device=q6.device)
    T, N, w, st, split = _tiles(prob.rank, q6.dtype, backward=False)
    prob.launch(_na_fwd, T, T, N, w, st, q6, k6, v6, o, lse, prob.scale * LOG2E, *prob.scalars(),
                *strides6(q6), SPLIT=split)
    return o, lse


def _backward(q6, k6, v6, o6, lse, do6, prob):
    B, H, N = prob.B, prob.H, prob.N
    delta = empty((B * H, N), dtype=torch.float32, device=q6.device)
    o3, do3 = o6.reshape(B, N, H, prob.D), do6.reshape(B, N, H, prob.D)
    # Δ per (b, h, query): the dense module's kernel, handed [B, N, H, D] as [B, H, N, D] by strides
    _bwd_delta[(triton.cdiv(N, 64), B * H)](o3, do3, delta, N, H,
                                           o3.stride(0), o3.stride(2), o3.stride(1), o3.stride(3),
                                           do3.stride(0), do3.stride(2), do3.stride(1), do3.stride(3),
                                           HEAD_DIM=prob.D, BLOCK_D=prob.meta["BLOCK_D"], BLOCK_M=64)
    dq, dk, dv = empty_like(q6), empty_like(k6), empty_like(v6)
    T, Nt, w, st, split = _tiles(prob.rank, q6.dtype, backward=True)
    common = (prob.scale * LOG2E, prob.scale, *prob.scalars(), *strides6(q6))
    prob.launch(_na_bwd_dq, T, T, Nt, w, st, q6, k6, v6, do6, lse, delta, dq, *common, SPLIT=split)
    spans = [_key_tile_queries(*axis, n, q6.device) for axis, n in zip(prob.axes(), Nt)]
    prob.launch(_na_bwd_dkdv, Nt, T, Nt, w, st, q6, k6, v6, do6, lse, delta, dk, dv, *spans, *common,
                SPLIT=split)
    return dq, dk, dv


@functools.lru_cache(maxsize=64)
def _key_tile_queries(L, K, d, s, causal, tile, device):
    return torch.tensor(key_tile_queries(L, K, d, s, causal, tile), device=device)


class _NeighborhoodAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, prob):
        q6, k6, v6 = (as6d(x, prob.rank) for x in (q, k, v))
        o6, lse = _forward(q6, k6, v6, prob)
        ctx.save_for_backward(q6, k6, v6, o6, lse)
        ctx.prob, ctx.shape = prob, q.shape
        return o6.reshape(q.shape)

    @staticmethod
    def backward(ctx, do):
        q6, k6, v6, o6, lse = ctx.saved_tensors
        prob = ctx.prob
        dq, dk, dv = _backward(q6, k6, v6, o6, lse, as6d(do, prob.rank), prob)
        return dq.reshape(ctx.shape), dk.reshape(ctx.shape), dv.reshape(ctx.shape), None


def _na(q, k, v, kernel_size, stride, dilation, is_causal, scale, rank):
    shape = validate_neighborhood(q, k, v, kernel_size, stride, dilation, is_causal, scale, ndim=rank,
                                  tier="t3_triton_fused")
    prob = Problem(shape, rank, q.dtype)
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        return _NeighborhoodAttention.apply(q, k, v, prob)
    q6, k6, v6 = (as6d(x, rank) for x in (q, k, v))
    return _forward(q6, k6, v6, prob)[0].reshape(q.shape)


def na1d(q, k, v, kernel_size, stride=1, dilation=1, is_causal=False, scale=None):
    """q, k, v [B, L, H, D] -> [B, L, H, D]: each query attends to its 1D neighbourhood."""
    return _na(q, k, v, kernel_size, stride, dilation, is_causal, scale, 1)


def na2d(q, k, v, kernel_size, stride=1, dilation=1, is_causal=False, scale=None):
    """q, k, v [B, X, Y, H, D] -> [B, X, Y, H, D]: each query attends to its 2D neighbourhood."""
    return _na(q, k, v, kernel_size, stride, dilation, is_causal, scale, 2)


def na3d(q, k, v, kernel_size, stride=1, dilation=1, is_causal=False, scale=None):
    """q, k, v [B, X, Y, Z, H, D] -> [B, X, Y, Z, H, D]: each query attends to its 3D neighbourhood."""
    return _na(q, k, v, kernel_size, stride, dilation, is_causal, scale, 3)
