"""Scaled dot-product attention, vectorized PyTorch: one matmul for all scores, a masked
softmax, one matmul with V. The full [Lq, Lk] score matrix lives in memory; autograd
gives the backward for free."""
import torch

from tiers.validation import validate_attention


def attention(q, k, v, *, causal=False, scale=None):
    """q [B, H, Lq, D], k and v [B, H, Lk, D] → [B, H, Lq, D]."""
    s = validate_attention(q, k, v, causal, scale, tier="t1_torch")
    # Half-precision scores are accumulated and normalised in float32, as the fused tiers do.
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    scores = torch.matmul(q.to(acc), k.to(acc).transpose(-1, -2)) * s.scale
    if s.causal:
        i = torch.arange(s.Lq, device=q.device)[:, None]
        j = torch.arange(s.Lk, device=q.device)[None, :]
        scores = scores.masked_fill(j > i, float("-inf"))
    p = torch.softmax(scores, dim=-1)
    return torch.matmul(p, v.to(acc)).to(q.dtype)
