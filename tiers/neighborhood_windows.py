"""Neighborhood-attention windows (NATTEN semantics), shared by every tier.

Per axis of length L, with kernel size K, dilation d, stride s and query index i:
  dilation groups   g = i mod d,  i' = i div d,  L_g = len(range(g, L, d));
                    only keys j with j mod d = g take part, at group coordinate j' = j div d.
  non-causal        leader = min((i' div s)·s + s div 2, L_g − 1)
                    start  = clamp(leader − K div 2, 0, L_g − K);   neighbours start ≤ j' < start + K
  causal            leader = min((i' div s)·s + s − 1, L_g − 1)
                    start  = max(leader − K + 1, 0);                neighbours start ≤ j' ≤ i'
A key is a neighbour of a query when it is one on every axis. The window shifts to stay
inside the input; it is never zero-padded. With s = d = 1 non-causal, start = clamp(i − K div 2,
0, L − K); stride = kernel_size gives blocked attention; K = L non-causal is self attention.

  L = 10, K = 3, d = 1, s = 1:        L = 10, K = 3, d = 2 (two interleaved groups):
  i=0  [###.......]                   i=0  [#.#.#.....]   group 0: 0 2 4 6 8
  i=4  [...###....]                   i=1  [.#.#.#....]   group 1: 1 3 5 7 9
  i=9  [.......###]                   i=9  [.....#.#.#]
"""
from __future__ import annotations

import numpy as np


def group_length(L: int, d: int, g):
    """Number of positions in dilation group g of an axis of length L."""
    return (L - g + d - 1) // d


def window_bounds(ip, Lg, K: int, s: int, causal: bool, xp=np):
    """The window [lo, hi) in group coordinates of queries at group coordinates ip, in a group of
    length Lg. Array-generic: xp is numpy or torch (so FlexAttention's mask uses this formula too)."""
    if causal:
        leader = xp.minimum((ip // s) * s + s - 1, Lg - 1)
        lo = xp.where(leader - K + 1 > 0, leader - K + 1, 0)
        return lo, ip + 1
    leader = xp.minimum((ip // s) * s + s // 2, Lg - 1)
    lo = xp.minimum(xp.where(leader - K // 2 > 0, leader - K // 2, 0), Lg - K)
    return lo, lo + K


def axis_windows(L: int, K: int, d: int = 1, s: int = 1, causal: bool = False):
    """For every query index i of one axis: (g, lo, hi) with neighbours j = g + j'·d for
    lo ≤ j' < hi (group coordinates). Arrays of length L."""
    i = np.arange(L)
    g = i % d
    lo, hi = window_bounds(i // d, group_length(L, d, g), K, s, causal)
    return g, lo, hi


def key_tile_queries(L: int, K: int, d: int, s: int, causal: bool, tile: int) -> np.ndarray:
    """For every dilation group g and key tile t (group coordinates t·tile ≤ j' < (t+1)·tile): the
    queries whose window meets the tile, as [first, last) group coordinates. [d, n_tiles, 2] int32.
    Windows only move forward as the query moves forward, so those queries are contiguous; the
    backward kernel that owns a key tile walks exactly them."""
    n_tiles = -(-group_length(L, d, 0) // tile)
    out = np.zeros((d, n_tiles, 2), dtype=np.int32)
    k0 = np.arange(n_tiles) * tile
    for g in range(d):
        Lg = group_length(L, d, g)
        lo, hi = window_bounds(np.arange(Lg), Lg, K, s, causal)
        first = np.searchsorted(hi, k0, side="right")                        # first query with hi > k0
        last = np.searchsorted(lo, np.minimum(k0 + tile, Lg), side="left")   # queries with lo < k1
        out[g, :, 0], out[g, :, 1] = first, np.maximum(first, last)
    return out


def is_neighbor(i, j, L: int, K: int, d: int, s: int, causal: bool, xp=np):
    """Elementwise: is key index j a neighbour of query index i along one axis (arrays of xp)."""
    g = i % d
    lo, hi = window_bounds(i // d, (L - g + d - 1) // d, K, s, causal, xp)
    return (j % d == g) & (j // d >= lo) & (j // d < hi)


def axis_neighbors(L: int, K: int, d: int = 1, s: int = 1, causal: bool = False) -> np.ndarray:
    """[L, L] boolean: entry (i, j) says key j is a neighbour of query i along this axis."""
    i = np.arange(L)
    return is_neighbor(i[:, None], i[None, :], L, K, d, s, causal)


def neighbor_mask(shape, kernel_size, stride, dilation, causal) -> np.ndarray:
    """[N, N] boolean over tokens flattened in C order (N = prod(shape)); per-axis tuples."""
    mask = np.ones((1, 1), dtype=bool)
    for L, K, s, d, c in zip(shape, kernel_size, stride, dilation, causal):
        mask = np.einsum("ij,kl->ikjl", mask, axis_neighbors(L, K, d, s, c)).reshape(
            mask.shape[0] * L, mask.shape[1] * L)
    return mask


def neighbor_indices(shape, kernel_size, stride, dilation, causal):
    """Per query (C order), the flat indices of its neighbourhood, padded: ([N, Kmax] int64,
    [N, Kmax] bool valid), Kmax = prod(kernel_size). Slots follow the window in C order over
    the axes, so neighbours are listed in key order."""
    r = len(shape)
    N, Kmax = int(np.prod(shape)), int(np.prod(kernel_size))
    flat = np.zeros([1] * (2 * r), dtype=np.int64)   # axes: r query axes, then r slot axes
    valid = np.ones([1] * (2 * r), dtype=bool)
    for a, (L, K, s, d, c) in enumerate(zip(shape, kernel_size, stride, dilation, causal)):
        g, lo, hi = axis_windows(L, K, d, s, c)
        jp = lo[:, None] + np.arange(K)[None, :]        # [L, K] group coordinates of the slots
        view = [1] * (2 * r)
        view[a], view[r + a] = L, K
        flat = flat + ((g[:, None] + jp * d) * int(np.prod(shape[a + 1:]))).reshape(view)
        valid = valid & (jp < hi[:, None]).reshape(view)
    flat, valid = np.broadcast_to(flat, tuple(shape) + tuple(kernel_size)), np.broadcast_to(
        valid, tuple(shape) + tuple(kernel_size))
    idx = np.where(valid, flat, 0).reshape(N, Kmax)  # padded slots point at token 0; `valid` masks them
    return idx, np.ascontiguousarray(valid).reshape(N, Kmax)
