"""Sparse attention over an ACSR pattern (SPLAT), the specification.

The pattern (tiers/acsr.py) gives each query i a set of keys N(i) ⊆ [0, Lk). For each batch b,
head h and query i:
    s_ij = scale · q_i · k_j                          for j in N(i)
    p_ij = exp(s_ij − max_j s_ij) / Σ_j exp(s_ij − max_j s_ij)
    o_i  = Σ_j p_ij v_j
and o_i = 0 when N(i) is empty (an empty sum, not 0/0). Written densely: all Lq × Lk scores,
the mask M = pattern.to_mask(), scores outside M set to −inf, a softmax that leaves rows with
no key at zero, and P·V. In float64 unless the inputs are float32.
"""
import numpy as np

from tiers.validation import validate_sparse_attention


def _compute_dtype(q):
    return np.float32 if q.dtype == np.float32 else np.float64


def _probabilities(q, k, mask, scale):
    """P [B, H, Lq, Lk]: the masked softmax of the scores, rows with no key all zero."""
    scores = np.where(mask, scale * np.einsum("bhid,bhjd->bhij", q, k), -np.inf)
    row_max = scores.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0)       # empty rows: exp(−inf) = 0 anyway
    p = np.exp(scores - row_max)
    total = p.sum(axis=-1, keepdims=True)
    return p / np.where(total > 0, total, 1)


def sparse_attention(q, k, v, pattern, scale=None):
    """q [B, H, Lq, D], k and v [B, H, Lk, D], pattern an ACSR over Lq × Lk → [B, H, Lq, D]."""
    s = validate_sparse_attention(q, k, v, pattern, scale, tier="t0_numpy")
    dt = _compute_dtype(q)
    q, k, v = q.astype(dt), k.astype(dt), v.astype(dt)
    p = _probabilities(q, k, pattern.to_mask(), dt(s.scale))
    return np.einsum("bhij,bhjd->bhid", p, v)


def sparse_attention_backward(q, k, v, pattern, dout, scale=None):
    """Gradients (dq, dk, dv) of sum(sparse_attention(q, k, v, pattern) * dout).

    With P the masked softmax (zero outside the pattern) and dP = dO·Vᵀ:
    dV = Pᵀ dO,  dS = P ⊙ (dP − rowsum(dO ⊙ O)),  dQ = scale · dS K,  dK = scale · dSᵀ Q.
    """
    s = validate_sparse_attention(q, k, v, pattern, scale, tier="t0_numpy")
    if dout.shape != q.shape:
        raise ValueError(f"dout has shape {dout.shape} but q has {q.shape}")
    dt = _compute_dtype(q)
    q, k, v, dout = (x.astype(dt) for x in (q, k, v, dout))
    p = _probabilities(q, k, pattern.to_mask(), dt(s.scale))
    out = np.einsum("bhij,bhjd->bhid", p, v)
    dv = np.einsum("bhij,bhid->bhjd", p, dout)
    dp = np.einsum("bhid,bhjd->bhij", dout, v)
    ds = p * (dp - (dout * out).sum(axis=-1, keepdims=True))
    return s.scale * np.einsum("bhij,bhjd->bhid", ds, k), s.scale * np.einsum("bhij,bhid->bhjd", ds, q), dv
