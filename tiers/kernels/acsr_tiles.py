"""Triton building blocks for ACSR sparse attention (tiers/acsr.py), shared by the unfused (t2)
and fused (t3) kernels: which row group a row is in, and which key a compressed slot holds.

Nothing here reads per-non-zero metadata: a kernel gets the group boundaries [G+1] and a small
[G, slots, 5] table of segments (a_start, b_start, stride, a_count, b_count), and computes
every key from the affine formulas.
"""
import numpy as np
import triton
import triton.language as tl


@triton.jit
def row_group(BOUNDS, rows, G, LOG_G: tl.constexpr):
    """Group of each row: the largest g with bounds[g] ≤ row (a binary search of LOG_G steps)."""
    lo = tl.zeros_like(rows)
    hi = lo + G
    for _ in tl.static_range(LOG_G):
        mid = (lo + hi) // 2
        go = tl.load(BOUNDS + mid) <= rows
        lo = tl.where(go, mid, lo)
        hi = tl.where(go, hi, mid)
    return lo


@triton.jit
def slot_keys(TABLE, grp, rows, slots, Lk, MAXSEG: tl.constexpr):
    """Key of compressed slot `slots` of each row ([R] rows × [P] slots), and whether it exists.

    A row's slots list its kept keys segment after segment: segment k holds start + σ·m for
    m_lo ≤ m < m_hi, with the clipping to [0, Lk) in closed form (only non-negative numerators
    are divided, so truncating and flooring division agree)."""
    key = tl.zeros((rows.shape[0], slots.shape[0]), tl.int32)
    ok = key < 0
    first = tl.zeros_like(rows)          # first slot of the current segment, per row
    for k in tl.static_range(MAXSEG):
        p = TABLE + (grp * MAXSEG + k) * 5
        sigma = tl.load(p + 2)
        start = tl.load(p) * rows + tl.load(p + 1)
        count = tl.maximum(tl.load(p + 3) * rows + tl.load(p + 4), 0)
        m_lo = tl.where(start < 0, (sigma - 1 - start) // sigma, 0)
        m_hi = tl.where(start > Lk - 1, 0, tl.minimum(count, (tl.maximum(Lk - 1 - start, 0)) // sigma + 1))
        n = tl.maximum(m_hi - m_lo, 0)
        t = slots[None, :] - first[:, None]
        inside = (t >= 0) & (t < n[:, None])
        key = tl.where(inside, start[:, None] + sigma[:, None] * (m_lo[:, None] + t), key)
        ok = ok | inside
        first += n
    return key, ok


def padded_segments(pattern):
    """Host side: (bounds [G+1] int32, table [G, slots, 5] int32 with empty slots of count 0,
    slots, ceil(log2 G)) for the kernels above."""
    ka = pattern.kernel_arrays(np.int32)
    G = len(ka.row_bounds) - 1
    per_group = np.diff(ka.seg_ptr)
    slots = max(int(per_group.max()) if G else 0, 1)
    table = np.zeros((G, slots, 5), dtype=np.int32)
    table[:, :, 2] = 1                   # stride 1 in empty slots: never divides by zero
    for g in range(G):
        table[g, :per_group[g]] = ka.segs[ka.seg_ptr[g]:ka.seg_ptr[g + 1]]
    return ka.row_bounds, table, slots, int(np.ceil(np.log2(G))) if G > 1 else 0
