"""Row softmax of a score matrix, in place, with a scale and an optional causal mask.

Each program owns ROWS rows. Pass 1 streams them in BLOCK-column chunks keeping, per lane,
a running maximum m and a running sum l of exp(x − m), rescaling l whenever m grows (the
"online softmax"). Pass 2 streams the rows again and writes exp(x − m) / l. Masked entries
(key j > query i when causal) become exact zeros. Any row length works.
"""
import triton
import triton.language as tl

from tiers.validation import check_triton_device


@triton.jit
def _softmax_kernel(S, M, N, s_b, s_m, s_n, scale_log2e,
                    CAUSAL: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    batch = tl.program_id(1).to(tl.int64)
    base = S + batch * s_b + rows[:, None] * s_m
    # per-row number of visible keys: all N, or i + 1 when causal
    if CAUSAL:
        visible = tl.minimum(rows + 1, N)
    else:
        visible = tl.full((ROWS,), N, tl.int32)
    visible = tl.where(rows < M, visible, 0)
    hi = tl.max(visible, 0)
    m = tl.full((ROWS, BLOCK), float("-inf"), tl.float32)
    l = tl.zeros((ROWS, BLOCK), tl.float32)
    for start in range(0, hi, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        keep = cols[None, :] < visible[:, None]
        x = tl.load(base + cols[None, :] * s_n, mask=keep, other=float("-inf")).to(tl.float32) * scale_log2e
        m_new = tl.maximum(m, x)
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)  # lanes that saw nothing stay at l = 0
        l = l * tl.exp2(m - shift) + tl.exp2(x - shift)
        m = m_new
    m_row = tl.max(m, 1)
    m_row_safe = tl.where(m_row == float("-inf"), 0.0, m_row)
    l_row = tl.sum(l * tl.exp2(m - m_row_safe[:, None]), 1)
    l_row = tl.where(l_row == 0.0, 1.0, l_row)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        keep = cols[None, :] < visible[:, None]
        x = tl.load(base + cols[None, :] * s_n, mask=keep, other=float("-inf")).to(tl.float32) * scale_log2e
        p = tl.exp2(x - m_row_safe[:, None]) / l_row[:, None]
        tl.store(base + cols[None, :] * s_n, p.to(S.dtype.element_ty),
                 mask=(rows[:, None] < M) & (cols[None, :] < N))


def softmax_rows_(scores, *, scale=1.0, causal=False):
    """In place: scores [Bt, M, N] ← softmax(scale · scores) along the last axis.

    With `causal`, entry (i, j) with j > i is masked (top-left aligned, as SDPA's is_causal).
    """
    check_triton_device("scores", scores)
    if scores.ndim != 3:
        raise ValueError(f"scores must be [Bt, M, N], got shape {tuple(scores.shape)}")
    Bt, M, N = scores.shape
    if scores.device.type == "cuda":
        rows, block = 4, min(triton.next_power_of_2(N), 1024)
    else:  # interpreter: fewer, larger programs
        rows, block = 32, min(triton.next_power_of_2(N), 256)
    grid = (triton.cdiv(M, rows), Bt)
    _softmax_kernel[grid](scores, M, N, *scores.stride(), scale * 1.4426950408889634,
                          CAUSAL=causal, ROWS=rows, BLOCK=block, num_warps=4)
    return scores
