"""Triton building blocks for neighborhood attention, shared by the unfused (t2) and fused (t3)
kernels: the NATTEN window of tiers/neighborhood_windows.py written as Triton code, and the
decoding of a program index into a multi-dimensional tile of one dilation group.

Every tensor is viewed as [B, X, Y, Z, H, D]; a tile is TX×TY×TZ positions of one dilation
group (g_x, g_y, g_z), addressed by group coordinates i' (the real index is g + i'·d).
"""
import torch
import triton
import triton.language as tl

from tiers.kernels.gemm import block_d


@triton.jit
def window(ip, Lg, K, s, CAUSAL: tl.constexpr):
    """Group-coordinate window [lo, hi) of queries at group coordinates ip (the shared formula)."""
    if CAUSAL:
        leader = tl.minimum((ip // s) * s + s - 1, Lg - 1)
        lo = tl.maximum(leader - K + 1, 0)
        hi = ip + 1
    else:
        leader = tl.minimum((ip // s) * s + s // 2, Lg - 1)
        lo = tl.minimum(tl.maximum(leader - K // 2, 0), Lg - K)
        hi = lo + K
    return lo, hi


@triton.jit
def _tile_origin(pid, L, d, T: tl.constexpr):
    """Program index along one axis -> (dilation group g, group length Lg, first group coordinate)."""
    n_tiles = tl.cdiv(tl.cdiv(L, d), T)
    g = pid // n_tiles
    return g, (L - g + d - 1) // d, (pid % n_tiles) * T


@triton.jit
def tile_of_program(pid, LX, LY, LZ, DX, DY, DZ, TX: tl.constexpr, TY: tl.constexpr, TZ: tl.constexpr):
    """Program index -> (groups, group lengths, tile origin) of a TX×TY×TZ tile, per axis."""
    cnt_z = DZ * tl.cdiv(tl.cdiv(LZ, DZ), TZ)
    cnt_y = DY * tl.cdiv(tl.cdiv(LY, DY), TY)
    gx, lgx, ox = _tile_origin(pid // (cnt_z * cnt_y), LX, DX, TX)
    gy, lgy, oy = _tile_origin((pid // cnt_z) % cnt_y, LY, DY, TY)
    gz, lgz, oz = _tile_origin(pid % cnt_z, LZ, DZ, TZ)
    return gx, gy, gz, lgx, lgy, lgz, ox, oy, oz


@triton.jit
def coords(ox, oy, oz, TX: tl.constexpr, TY: tl.constexpr, TZ: tl.constexpr):
    """Group coordinates of the TX·TY·TZ positions of a tile, flattened in C order."""
    r = tl.arange(0, TX * TY * TZ)
    return ox + r // (TY * TZ), oy + (r // TZ) % TY, oz + r % TZ


@triton.jit
def rows(base, gx, gy, gz, ipx, ipy, ipz, DX, DY, DZ, s_x, s_y, s_z):
    """Element offsets of the [*, H, D] rows at group coordinates (ipx, ipy, ipz)."""
    return base + (gx + ipx * DX).to(tl.int64) * s_x + (gy + ipy * DY).to(tl.int64) * s_y \
        + (gz + ipz * DZ).to(tl.int64) * s_z


@triton.jit
def flat_index(gx, gy, gz, ipx, ipy, ipz, DX, DY, DZ, LY, LZ):
    """C-order token index n of positions given in group coordinates."""
    return ((gx + ipx * DX) * LY + (gy + ipy * DY)) * LZ + (gz + ipz * DZ)


@triton.jit
def shared_window(lo, hi, ok):
    """[max lo, min hi) over the valid queries of a tile: the keys every one of them sees."""
    return tl.max(tl.where(ok, lo, 0)), tl.min(tl.where(ok, hi, 2147483647))


@triton.jit
def inside(bx, by, bz, NX: tl.constexpr, NY: tl.constexpr, NZ: tl.constexpr, lx, hx, ly, hy, lz, hz):
    """Whether the key tile at (bx, by, bz) lies in the box [lx, hx) × [ly, hy) × [lz, hz)."""
    return (bx >= lx) & (bx + NX <= hx) & (by >= ly) & (by + NY <= hy) & (bz >= lz) & (bz + NZ <= hz)


@triton.jit
def in_window(jx, jy, jz, lox, hix, loy, hiy, loz, hiz):
    """[queries, keys] mask: key (jx, jy, jz) lies in the query's window on every axis."""
    return (jx[None, :] >= lox[:, None]) & (jx[None, :] < hix[:, None]) \
        & (jy[None, :] >= loy[:, None]) & (jy[None, :] < hiy[:, None]) \
        & (jz[None, :] >= loz[:, None]) & (jz[None, :] < hiz[:, None])


# ---------------------------------------------------------------------------------------
# Host side: the [B, X, Y, Z, H, D] view and the per-axis scalars every NA kernel takes.

def grid_axis(L, d, T):
    return d * triton.cdiv(triton.cdiv(L, d), T)


class Problem:
    """Everything the kernels need besides tensors: per-axis tuples padded to 3 axes."""

    def __init__(self, shape, rank, dtype):
        pad = 3 - rank
        self.rank, self.B, self.H, self.D = rank, shape.B, shape.H, shape.D
        self.L = (1,) * pad + shape.spatial
        self.K = (1,) * pad + shape.kernel_size
        self.S = (1,) * pad + shape.stride
        self.Dl = (1,) * pad + shape.dilation
        self.C = (False,) * pad + shape.causal
        self.scale = shape.scale
        self.N = self.L[0] * self.L[1] * self.L[2]
        self.meta = dict(CX=self.C[0], CY=self.C[1], CZ=self.C[2], HEAD_DIM=shape.D,
                         BLOCK_D=block_d(shape.D), IEEE=dtype == torch.float32)

    def axes(self):
        """(L, K, d, s, causal) of each of the three axes."""
        return tuple(zip(self.L, self.K, self.Dl, self.S, self.C))

    def scalars(self):
        return (self.H, *self.L, *self.K, *self.S, *self.Dl)

    def grid(self, tile):
        n = 1
        for L, d, t in zip(self.L, self.Dl, tile):
            n *= grid_axis(L, d, t)
        return (n, self.B * self.H)

    def launch(self, kernel, owner_tile, T, N, warps, stages, *args, **constexprs):
        kernel[self.grid(owner_tile)](*args, **self.meta, **constexprs, TX=T[0], TY=T[1], TZ=T[2], NX=N[0], NY=N[1],
                                      NZ=N[2], num_warps=warps, num_stages=stages)


def as6d(x, rank):
    """[B, *spatial, H, D] -> contiguous [B, X, Y, Z, H, D] view with singleton leading axes."""
    x = x.contiguous()
    for _ in range(3 - rank):
        x = x.unsqueeze(1)
    return x


def strides6(x):
    s = x.stride()
    return (s[0], s[1], s[2], s[3], s[4], s[5])
