"""Sparse attention over an ACSR pattern (SPLAT), vectorized PyTorch: only the allowed keys are
gathered, never an Lq × Lk score matrix.

Rows are processed in chunks. For a chunk, every row's keys are listed in a padded table
idx [R, W] (+ valid [R, W]) computed on q's device from the segment parameters alone: for
row i and segment k of its group, the kept keys are first_ik + stride_k·t for t < n_ik (the
closed-form clipping of tiers/acsr.py), and slot t of the row belongs to the segment whose
running total of n first exceeds t (one batched searchsorted). Then K and V are gathered
([B, H, R, W, D]), scored with one einsum, softmaxed with padded slots at −inf (rows with no
key give zeros, not NaN) and summed with one einsum. Chunks are sized so the gathered K and V
stay under _CHUNK_ELEMENTS elements each; autograd gives the backward, recomputing one chunk
at a time (activation checkpointing) so that it too holds one chunk's gathered keys at most.
"""
import numpy as np
import torch
from torch.utils.checkpoint import checkpoint

from tiers.validation import validate_sparse_attention

_CHUNK_ELEMENTS = 1 << 26


def _device_meta(pattern, device):
    return tuple(torch.tensor(x, dtype=torch.int64, device=device)     # copies: ACSR arrays are read-only
                 for x in (pattern.row_bounds, pattern.seg_ptr, pattern.segs))


def _table(meta, Lk, row0, row1, width, smax):
    """idx [R, width] int64 (0 in padded slots) and valid [R, width] bool for rows [row0, row1)."""
    row_bounds, seg_ptr, segs = meta
    device = row_bounds.device
    rows = torch.arange(row0, row1, device=device)
    if smax == 0:   # no row of the chunk has a segment
        return (torch.zeros((len(rows), width), dtype=torch.int64, device=device),
                torch.zeros((len(rows), width), dtype=torch.bool, device=device))
    g = torch.searchsorted(row_bounds, rows, right=True) - 1
    seg = seg_ptr[g, None] + torch.arange(smax, device=device)            # [R, smax]
    present = seg < seg_ptr[g + 1, None]
    a, b, s, ac, bc = segs[seg.clamp(max=len(segs) - 1)].unbind(-1)
    i = rows[:, None]
    start, count = a * i + b, (ac * i + bc).clamp(min=0)
    m_lo = (-torch.div(start, s, rounding_mode="floor")).clamp(min=0)      # ⌈−start/s⌉, at least 0
    m_hi = torch.minimum(count, torch.div(Lk - 1 - start, s, rounding_mode="floor") + 1)
    n = (m_hi - m_lo).clamp(min=0) * present
    end = n.cumsum(dim=1)
    t = torch.arange(width, device=device).expand(len(rows), width).contiguous()
    k = torch.searchsorted(end, t, right=True)                             # segment of slot t
    valid = k < smax
    k = k.clamp(max=smax - 1)
    col = (start + s * m_lo).gather(1, k) + s.gather(1, k) * (t - (end - n).gather(1, k))
    return torch.where(valid, col, 0), valid


def _chunks(pattern, cost_per_key):
    """(row0, row1, width, smax) chunks covering [0, Lq): rows · width · cost_per_key stays
    under _CHUNK_ELEMENTS (one row at least), width = most keys of a row in the chunk (≥ 1, so
    rows with no key still take part in autograd), smax = most segments of a row."""
    counts = pattern.row_counts()
    nseg = np.repeat(np.diff(pattern.seg_ptr), np.diff(pattern.row_bounds))
    out, row0, R = [], 0, pattern.Lq
    while row0 < pattern.Lq:
        R = min(2 * R, pattern.Lq - row0)
        while R > 1 and R * (max(int(counts[row0:row0 + R].max()), 1) * cost_per_key
                             + int(nseg[row0:row0 + R].max())) > _CHUNK_ELEMENTS:
            R = (R + 1) // 2
        out.append((row0, row0 + R, max(int(counts[row0:row0 + R].max()), 1), int(nseg[row0:row0 + R].max())))
        row0 += R
    return out


def key_table(pattern, row0=0, row1=None, device="cpu"):
    """The padded key table of rows [row0, row1) (default all): idx [R, W] int64 and valid
    [R, W] bool, W the most keys of any of those rows; keys in segment order within a row."""
    row1 = pattern.Lq if row1 is None else row1
    counts = pattern.row_counts()[row0:row1]
    nseg = np.repeat(np.diff(pattern.seg_ptr), np.diff(pattern.row_bounds))[row0:row1]
    return _table(_device_meta(pattern, device), pattern.Lk, row0, row1, max(int(counts.max()), 1),
                  int(nseg.max()))


def _attend(qc, kf, vf, idx, valid, scale):
    """Sparse attention of the query rows qc [B, H, R, D] over the keys idx [R, W] (valid)."""
    kg, vg = kf[:, :, idx], vf[:, :, idx]                                   # [B, H, R, W, D]
    scores = torch.einsum("bhrd,bhrwd->bhrw", qc, kg) * scale
    scores = scores.masked_fill(~valid, float("-inf"))
    # the shift only guards exp against overflow, so it needs no gradient; a row with no key
    # has max −inf, shifted by 0 instead so that its exp is 0, not NaN
    row_max = scores.detach().amax(dim=-1, keepdim=True)
    e = torch.exp(scores - torch.where(torch.isfinite(row_max), row_max, 0))
    total = e.sum(dim=-1, keepdim=True)
    p = e / torch.where(total > 0, total, 1)
    return torch.einsum("bhrw,bhrwd->bhrd", p, vg)


def sparse_attention(q, k, v, pattern, scale=None):
    """q [B, H, Lq, D], k and v [B, H, Lk, D], pattern an ACSR over Lq × Lk → [B, H, Lq, D]."""
    s = validate_sparse_attention(q, k, v, pattern, scale, tier="t1_torch")
    # Half-precision scores are accumulated and normalised in float32, as the fused tiers do.
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    qf, kf, vf = (x.to(acc) for x in (q, k, v))
    # Autograd would keep every chunk's gathered K and V (nnz·D each); recomputing a chunk in
    # the backward keeps memory at one chunk instead.
    recompute = torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v))
    meta = _device_meta(pattern, q.device)
    outs = []
    for row0, row1, width, smax in _chunks(pattern, s.B * s.H * s.D):
        idx, valid = _table(meta, s.Lk, row0, row1, width, smax)
        args = (qf[:, :, row0:row1], kf, vf, idx, valid, s.scale)
        outs.append(checkpoint(_attend, *args, use_reentrant=False, preserve_rng_state=False) if recompute
                    else _attend(*args))
    return torch.cat(outs, dim=2).to(q.dtype)
