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


def _backward_inputs(q, k, v, pattern, dout, scale):
    """What both backward functions start from: the scale, q, k, v, dout in the compute dtype, P
    and O = P·V."""
    s = validate_sparse_attention(q, k, v, pattern, scale, tier="t0_numpy")
    if dout.shape != q.shape:
        raise ValueError(f"dout has shape {dout.shape} but q has {q.shape}")
    dt = _compute_dtype(q)
    q, k, v, dout = (x.astype(dt) for x in (q, k, v, dout))
    p = _probabilities(q, k, pattern.to_mask(), dt(s.scale))
    return s.scale, q, k, v, dout, p, np.einsum("bhij,bhjd->bhid", p, v)


def sparse_attention_backward(q, k, v, pattern, dout, scale=None):
    """Gradients (dq, dk, dv) of sum(sparse_attention(q, k, v, pattern) * dout).

    With P the masked softmax (zero outside the pattern) and dP = dO·Vᵀ:
    dV = Pᵀ dO,  dS = P ⊙ (dP − rowsum(dO ⊙ O)),  dQ = scale · dS K,  dK = scale · dSᵀ Q.
    """
    c, q, k, v, dout, p, out = _backward_inputs(q, k, v, pattern, dout, scale)
    dv = np.einsum("bhij,bhid->bhjd", p, dout)
    dp = np.einsum("bhid,bhjd->bhij", dout, v)
    ds = p * (dp - (dout * out).sum(axis=-1, keepdims=True))
    return c * np.einsum("bhij,bhjd->bhid", ds, k), c * np.einsum("bhij,bhid->bhjd", ds, q), dv


def sparse_attention_backward_magnitudes(q, k, v, pattern, dout, scale=None):
    """What the rounding error of (dq, dk, dv) grows from: sparse_attention_backward's formulas
    with every term by magnitude, |dO|·|V|ᵀ + rowsum(|dO| ⊙ |O|) in place of dP − rowsum(dO ⊙ O),
    |K|, |Q| and |dO| — at least each gradient's own magnitude. A gradient can cancel: a row that
    sees one key has dq = 0 exactly, yet a kernel that takes rowsum(dO ⊙ O) from O (FlashAttention,
    t3) sums dP's one term in two orders, and its dq is round-off of |dP|·|k|. Such a result is
    judged against these magnitudes (tolerances.compare's scale), not against itself."""
    c, q, k, v, dout, p, out = _backward_inputs(q, k, v, pattern, dout, scale)
    ado = np.abs(dout)
    g = p * (np.einsum("bhid,bhjd->bhij", ado, np.abs(v)) + (ado * np.abs(out)).sum(axis=-1, keepdims=True))
    return (c * np.einsum("bhij,bhjd->bhid", g, np.abs(k)), c * np.einsum("bhij,bhid->bhjd", g, np.abs(q)),
            np.einsum("bhij,bhid->bhjd", p, ado))
