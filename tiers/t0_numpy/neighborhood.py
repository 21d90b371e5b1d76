"""Neighborhood attention (NATTEN semantics), the specification.

Tokens lie on a grid of 1, 2 or 3 spatial axes, heads last: q, k, v [B, *spatial, H, D].
Along one axis of length L, with kernel size K, stride s, dilation d and query index i,
`axis_windows` (tiers/neighborhood_windows.py) gives (g, lo, hi); the neighbours along that
axis are the keys
    j = g + j'·d    for lo ≤ j' < hi        (g = i mod d: only the query's dilation group)
A key is a neighbour of a query when it is one on every axis, so the neighbourhood N(i) is
the product of the per-axis windows: prod(K) keys, fewer on causal axes. Then, for each
batch b, head h and query position i:
    s_j = scale · q_i · k_j                   for j in N(i)
    p_j = exp(s_j − max s) / Σ_j exp(s_j − max s)
    o_i = Σ_j p_j v_j
K = L non-causal on every axis is dense attention; stride = K is blocked attention.
One query position and head at a time, in float64 unless the inputs are float32.
"""
import itertools

import numpy as np

from tiers.neighborhood_windows import axis_windows
from tiers.validation import validate_neighborhood


def _compute_dtype(q):
    return np.float32 if q.dtype == np.float32 else np.float64


def _axis_ranges(s):
    """Per axis, per query index along it: the range of neighbour indices along that axis."""
    ranges = []
    for L, K, st, d, c in zip(s.spatial, s.kernel_size, s.stride, s.dilation, s.causal):
        g, lo, hi = axis_windows(L, K, d, st, c)
        ranges.append([range(int(g[i] + lo[i] * d), int(g[i] + hi[i] * d), d) for i in range(L)])
    return ranges


def _neighbours(ranges, pos):
    """Index arrays (one per spatial axis) of every neighbour of query position `pos`."""
    keys = list(itertools.product(*(r[i] for r, i in zip(ranges, pos))))
    return tuple(np.array(axis) for axis in zip(*keys))


def _softmax_row(s, kn, qi):
    scores = s.scale * (kn @ qi)
    p = np.exp(scores - scores.max())
    return p / p.sum()


def _na(q, k, v, ndim, kernel_size, stride, dilation, is_causal, scale):
    s = validate_neighborhood(q, k, v, kernel_size, stride, dilation, is_causal, scale, ndim=ndim,
                              tier="t0_numpy")
    dt = _compute_dtype(q)
    q, k, v = q.astype(dt), k.astype(dt), v.astype(dt)
    ranges = _axis_ranges(s)
    out = np.empty_like(q)
    for b in range(s.B):
        for pos in itertools.product(*(range(L) for L in s.spatial)):
            nb = _neighbours(ranges, pos)
            for h in range(s.H):
                kn, vn = k[(b, *nb, h)], v[(b, *nb, h)]          # [n, D]
                p = _softmax_row(s, kn, q[(b, *pos, h)])
                out[(b, *pos, h)] = p @ vn
    return out


def na1d(q, k, v, kernel_size, stride=1, dilation=1, is_causal=False, scale=None):
    """q, k, v [B, L, H, D] → [B, L, H, D]."""
    return _na(q, k, v, 1, kernel_size, stride, dilation, is_causal, scale)


def na2d(q, k, v, kernel_size, stride=1, dilation=1, is_causal=False, scale=None):
    """q, k, v [B, X, Y, H, D] → [B, X, Y, H, D]; per-axis arguments are ints or 2-tuples."""
    return _na(q, k, v, 2, kernel_size, stride, dilation, is_causal, scale)


def na3d(q, k, v, kernel_size, stride=1, dilation=1, is_causal=False, scale=None):
    """q, k, v [B, X, Y, Z, H, D] → [B, X, Y, Z, H, D]; per-axis arguments are ints or 3-tuples."""
    return _na(q, k, v, 3, kernel_size, stride, dilation, is_causal, scale)


def na_backward(q, k, v, dout, kernel_size, stride=1, dilation=1, is_causal=False, scale=None):
    """Gradients (dq, dk, dv) of sum(na{n}d(q, k, v, ...) * dout), n = q.ndim − 3, row by row.

    Same formulas as attention_backward, over each query's neighbourhood: with P the softmax
    row and dP = dO·Vᵀ:  dV = Pᵀ dO,  dS = P ⊙ (dP − rowsum(dO ⊙ O)),  dQ = scale · dS K,
    dK = scale · dSᵀ Q.
    """
    ndim = np.ndim(q) - 3
    if ndim not in (1, 2, 3):
        raise ValueError(f"q must have rank 4, 5 or 6 [B, *spatial, H, D], got shape {np.shape(q)}")
    s = validate_neighborhood(q, k, v, kernel_size, stride, dilation, is_causal, scale, ndim=ndim,
                              tier="t0_numpy")
    if np.shape(dout) != np.shape(q):
        raise ValueError(f"dout has shape {np.shape(dout)} but q has {np.shape(q)}")
    dt = _compute_dtype(q)
    q, k, v, dout = (np.asarray(x).astype(dt) for x in (q, k, v, dout))
    ranges = _axis_ranges(s)
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    for b in range(s.B):
        for pos in itertools.product(*(range(L) for L in s.spatial)):
            nb = _neighbours(ranges, pos)
            for h in range(s.H):
                i, n = (b, *pos, h), (b, *nb, h)
                kn, vn, qi, doi = k[n], v[n], q[i], dout[i]
                p = _softmax_row(s, kn, qi)
                dp = vn @ doi
                ds = p * (dp - doi @ (p @ vn))
                dv[n] += np.outer(p, doi)          # a neighbourhood lists each key once
                dq[i] = s.scale * (ds @ kn)
                dk[n] += s.scale * np.outer(ds, qi)
    return dq, dk, dv
