"""Scaled dot-product attention, the specification.

For each batch b, head h and query row i:
    s_j = scale · q_i · k_j                   for every key j (j ≤ i when causal)
    p_j = exp(s_j − max s) / Σ_j exp(s_j − max s)
    o_i = Σ_j p_j v_j
One query row at a time, in float64 unless the inputs are float32.
"""
import numpy as np

from tiers.validation import validate_attention


def _compute_dtype(q):
    return np.float32 if q.dtype == np.float32 else np.float64


def attention(q, k, v, *, causal=False, scale=None):
    """q [B, H, Lq, D], k and v [B, H, Lk, D] → [B, H, Lq, D]."""
    s = validate_attention(q, k, v, causal, scale, tier="t0_numpy")
    dt = _compute_dtype(q)
    q, k, v = q.astype(dt), k.astype(dt), v.astype(dt)
    out = np.empty((s.B, s.H, s.Lq, s.D), dtype=dt)
    for b in range(s.B):
        for h in range(s.H):
            for i in range(s.Lq):
                n = min(i + 1, s.Lk) if s.causal else s.Lk   # keys this query may see
                scores = s.scale * (k[b, h, :n] @ q[b, h, i])
                p = np.exp(scores - scores.max())
                p /= p.sum()
                out[b, h, i] = p @ v[b, h, :n]
    return out


def attention_backward(q, k, v, dout, *, causal=False, scale=None):
    """Gradients (dq, dk, dv) of sum(attention(q, k, v) * dout), row by row.

    With P the softmax row and dP = dO·Vᵀ:  dV = Pᵀ dO,  dS = P ⊙ (dP − rowsum(dO ⊙ O)),
    dQ = scale · dS K,  dK = scale · dSᵀ Q.
    """
    s = validate_attention(q, k, v, causal, scale, tier="t0_numpy")
    dt = _compute_dtype(q)
    q, k, v, dout = (x.astype(dt) for x in (q, k, v, dout))
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    for b in range(s.B):
        for h in range(s.H):
            for i in range(s.Lq):
                n = min(i + 1, s.Lk) if s.causal else s.Lk
                scores = s.scale * (k[b, h, :n] @ q[b, h, i])
                p = np.exp(scores - scores.max())
                p /= p.sum()
                o = p @ v[b, h, :n]
                dp = v[b, h, :n] @ dout[b, h, i]
                ds = p * (dp - dout[b, h, i] @ o)
                dv[b, h, :n] += np.outer(p, dout[b, h, i])
                dq[b, h, i] = s.scale * (ds @ k[b, h, :n])
                dk[b, h, :n] += s.scale * np.outer(ds, q[b, h, i])
    return dq, dk, dv
