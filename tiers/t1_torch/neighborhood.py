"""Neighborhood attention, vectorized PyTorch: every query's neighbourhood is gathered from a
precomputed index table ([N, prod(K)], padded where causal windows are shorter), scored with
one einsum, softmaxed with padded slots at −inf, and summed with one einsum. The gathered K and
V ([B, N, prod(K), H, D]) live in memory; autograd gives the backward for free."""
import torch

from tiers.neighborhood_windows import neighbor_indices
from tiers.validation import validate_neighborhood


def _na(q, k, v, ndim, kernel_size, stride, dilation, is_causal, scale):
    s = validate_neighborhood(q, k, v, kernel_size, stride, dilation, is_causal, scale, ndim=ndim,
                              tier="t1_torch")
    idx, valid = neighbor_indices(s.spatial, s.kernel_size, s.stride, s.dilation, s.causal)
    # copies: the shared tables may be cached, read-only arrays
    idx, valid = torch.tensor(idx, device=q.device), torch.tensor(valid, device=q.device)   # [N, Kmax]
    # Half-precision scores are accumulated and normalised in float32, as the fused tiers do.
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    N = idx.shape[0]
    qf, kf, vf = (x.reshape(s.B, N, s.H, s.D).to(acc) for x in (q, k, v))
    kg, vg = kf[:, idx], vf[:, idx]                               # [B, N, Kmax, H, D]
    scores = torch.einsum("bnhd,bnkhd->bnhk", qf, kg) * s.scale
    scores = scores.masked_fill(~valid[None, :, None, :], float("-inf"))
    p = torch.softmax(scores, dim=-1)
    return torch.einsum("bnhk,bnkhd->bnhd", p, vg).reshape(q.shape).to(q.dtype)


def na1d(q, k, v, kernel_size, stride=1, dilation=1, is_causal=False, scale=None):
    """q, k, v [B, L, H, D] → [B, L, H, D]."""
    return _na(q, k, v, 1, kernel_size, stride, dilation, is_causal, scale)


def na2d(q, k, v, kernel_size, stride=1, dilation=1, is_causal=False, scale=None):
    """q, k, v [B, X, Y, H, D] → [B, X, Y, H, D]; per-axis arguments are ints or 2-tuples."""
    return _na(q, k, v, 2, kernel_size, stride, dilation, is_causal, scale)


def na3d(q, k, v, kernel_size, stride=1, dilation=1, is_causal=False, scale=None):
    """q, k, v [B, X, Y, Z, H, D] → [B, X, Y, Z, H, D]; per-axis arguments are ints or 3-tuples."""
    return _na(q, k, v, 3, kernel_size, stride, dilation, is_causal, scale)
