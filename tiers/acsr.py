"""Affine compressed sparse row (ACSR): the sparse-attention pattern format of SPLAT
(Gupta et al., "SPLAT: A framework for optimised GPU code-generation for SParse reguLar
ATtention", 2024), shared by every tier.

A pattern says which keys j ∈ [0, Lk) each query i ∈ [0, Lq) attends to. The rows are split
into contiguous row groups [r0, r1) that cover [0, Lq). Each group has a few segments
(a_start, b_start, stride, a_count, b_count); for a row i of the group a segment holds the keys

    start(i) = a_start·i + b_start                  (i is the absolute row index)
    count(i) = max(a_count·i + b_count, 0)
    keys     = {start(i) + stride·m : 0 ≤ m < count(i)} ∩ [0, Lk)

Out-of-range keys are dropped (clipping), the start is never moved, so the kept keys of a
segment are m_lo ≤ m < m_hi with, in closed form,
    m_lo = max(0, ⌈−start/stride⌉),   m_hi = min(count, ⌊(Lk − 1 − start)/stride⌋ + 1).
The segments of one row are pairwise disjoint (a kernel sums over them without double
counting); `check()` verifies it by expansion.

Metadata is O(groups · segments), never O(nnz): a sliding window over any L is one group
with one segment (5 integers). Example, L = 8, sliding_window(8, 3) (|i − j| ≤ 1), one
group, one segment (1, −1, 1, 0, 3): start = i − 1, count 3, clipped at both edges:

    i=0  ##......        i=4  ...###..
    i=1  ###.....        i=7  ......##

Kernels get flat arrays from `kernel_arrays()`: row_bounds [G+1], seg_ptr [G+1] (group g's
segments are segs[seg_ptr[g]:seg_ptr[g+1]]) and segs [S, 5]; `geometry` (per group, the
strides of its segments) is the hashable key a JIT-specialised kernel compiles for.
`from_mask` recovers an ACSR from any boolean mask (the JIT analysis of SPLAT).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

class Segment(NamedTuple):
    a_start: int
    b_start: int
    stride: int
    a_count: int
    b_count: int


class Group(NamedTuple):
    row0: int
    row1: int
    segments: tuple          # of Segment


class KernelArrays(NamedTuple):
    """What a GPU kernel reads. Group g covers rows row_bounds[g] ≤ i < row_bounds[g+1] and owns
    the segments segs[seg_ptr[g]:seg_ptr[g+1]], each row (a_start, b_start, stride, a_count,
    b_count)."""
    row_bounds: np.ndarray   # [G+1]
    seg_ptr: np.ndarray      # [G+1]
    segs: np.ndarray         # [S, 5], C-contiguous
    Lq: int
    Lk: int
    geometry: tuple


def _int(name, value, minimum):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return int(value)


def _ranks(counts):
    """[0, 1, …, c0−1, 0, 1, …, c1−1, …]: the position of each repeated item in its block."""
    counts = np.asarray(counts, dtype=np.int64)
    ends = np.cumsum(counts)
    return np.arange(ends[-1] if counts.size else 0, dtype=np.int64) - np.repeat(ends - counts, counts)


def _greedy_runs(brk, same, split_pairs=False):
    """Split positions 0..n−1 into runs: stretches joined by equal links.

    brk[p]: there is no link p → p+1 (p ends a sequence; brk[n−1] must be True).
    same[p]: the links p → p+1 and p+1 → p+2 both exist and are equal.
    Each sequence is parsed greedily from its start taking the longest run, except that a
    two-position run is cut to one position when the next position starts a run of three or
    more, so that {0, 10, 11, 12} parses as {0}, {10, 11, 12} rather than {0, 10}, {11, 12}
    (split_pairs: always cut, so a run has one position or three and more).
    All sequences advance together, one run per iteration. Returns (first, last), sorted.
    """
    n = len(brk)
    p = np.arange(n)
    # the first q ≥ p with same[q] False, by a running minimum from the right
    stop = np.minimum.accumulate(np.where(same, n, p)[::-1])[::-1]
    reach = np.where(brk, p, stop + 1)                     # last position of the longest run from p
    pos = np.flatnonzero(np.r_[True, brk[:-1]])
    last = np.full(n, -1)
    while pos.size:
        end = reach[pos]
        nxt = np.minimum(pos + 1, n - 1)
        pair = end == pos + 1
        end = np.where(pair & (split_pairs | (~brk[nxt] & (reach[nxt] >= pos + 3))), pos, end)
        last[pos] = end
        pos = end[~brk[end]] + 1
    first = np.flatnonzero(last >= 0)
    return first, last[first]


def _affine_groups(rows, cols, Lq, split_pairs):
    """Steps 1 and 2 of ACSR.from_mask on the keys (rows, cols) of a mask, row-major:
    (row_bounds, seg_ptr, segs) of unclipped segments, and whether any run has two keys."""
    # 1. runs within rows: a link joins neighbouring keys of a row, labelled by their gap
    last = np.r_[rows[1:] != rows[:-1], True]
    gap = np.r_[np.diff(cols), 0]
    same = np.r_[~last[:-1] & ~last[1:] & (gap[:-1] == gap[1:]), False]
    first, end = _greedy_runs(last, same, split_pairs)
    run_row, start = rows[first], cols[first]
    count = end - first + 1
    stride = np.where(count > 1, gap[first], 1)
    nr = np.bincount(run_row, minlength=Lq)               # runs per row
    off = np.r_[0, np.cumsum(nr)]

    # 2. groups of rows: row i links to i+1 when their runs match in number and strides;
    #    the link is labelled by the per-run changes of start and count
    R = len(start)
    succ = (run_row + 1 < Lq) & (nr[np.minimum(run_row + 1, Lq - 1)] == nr[run_row])
    partner = np.where(succ, np.arange(R) + nr[run_row], 0)     # same run in row i+1
    partner = np.minimum(partner, R - 1)
    ok = succ & (stride[partner] == stride)
    d_start, d_count = start[partner] - start, count[partner] - count
    bad_runs = np.bincount(run_row, weights=~ok, minlength=Lq)
    link = np.r_[nr[:-1] == nr[1:], False] & (bad_runs == 0)
    link_of_run = link[run_row] & link[np.minimum(run_row + 1, Lq - 1)] & (run_row + 1 < Lq)
    p2 = np.where(link_of_run, partner, 0)
    eq = link_of_run & (d_start[p2] == d_start) & (d_count[p2] == d_count)
    diff_runs = np.bincount(run_row, weights=~eq, minlength=Lq)
    same_link = np.r_[link[:-1] & link[1:], False] & (diff_runs == 0)
    g_first, g_last = _greedy_runs(~link, same_link)

    # affine parameters from each group's first row and the change to its second
    ptr = np.r_[0, np.cumsum(nr[g_first])]
    j = np.repeat(off[g_first], nr[g_first]) + _ranks(nr[g_first])      # runs of first rows
    r0 = np.repeat(g_first, nr[g_first])
    multi = np.repeat(g_last > g_first, nr[g_first])
    a_s, a_c = np.where(multi, d_start[j], 0), np.where(multi, d_count[j], 0)
    segs = np.stack([a_s, start[j] - a_s * r0, stride[j], a_c, count[j] - a_c * r0], axis=1)
    return np.r_[g_first, Lq], ptr, segs, bool(np.any(count == 2))


def _kept(segs, rows, Lk):
    """For segments segs [k, 5] over rows [R]: first kept key and number kept, both [R, k]."""
    a, b, s, ac, bc = (segs[:, c][None, :] for c in range(5))
    rows = rows[:, None]
    start, count = a * rows + b, np.maximum(ac * rows + bc, 0)
    m_lo = np.maximum(0, -(start // s))                          # ⌈−start/s⌉, at least 0
    m_hi = np.minimum(count, (Lk - 1 - start) // s + 1)
    return start + s * m_lo, np.broadcast_to(s, start.shape), np.maximum(m_hi - m_lo, 0)


def _reproduces(mask, row_sums, segs, r0, r1):
    """Do segments segs [k, 5], clipped, give exactly the keys of mask rows [r0, r1), each once?"""
    rows = np.arange(r0, r1)
    first, s, n = _kept(segs, rows, mask.shape[1])
    if not np.array_equal(n.sum(axis=1), row_sums[r0:r1]):
        return False
    n = n.reshape(-1)
    row = np.repeat(np.repeat(rows, segs.shape[0]), n)
    col = np.repeat(first.reshape(-1), n) + np.repeat(s.reshape(-1), n) * _ranks(n)
    # every key hit is in the mask and the count matches, so no repeats means exactly the mask
    return bool(mask[row, col].all()) and np.unique(row * mask.shape[1] + col).size == col.size


def _extended(segs, r0, r1, Lq, Lk):
    """segs [k, 5] with every segment that is clipped on a side in all rows [r0, r1) stretched
    on that side past the edge for every row in [0, Lq): the same keys in rows [r0, r1), but a
    candidate for rows whose window reaches further. None when no segment can stretch."""
    a, b, s, ac, bc = (segs[:, c][:, None] for c in range(5))
    ends, whole = np.array([r0, r1 - 1]), np.array([0, Lq - 1])
    start, count = a * ends + b, ac * ends + bc
    live = (count >= 1).all(axis=1)                         # empty rows must stay empty
    left = live & ((start - s).max(axis=1) < 0)             # the key before the first is < 0
    right = live & ((start + s * count).min(axis=1) > Lk - 1)   # the key after the last is ≥ Lk
    if not (left | right).any():
        return None
    s, w_start = s[:, 0], a * whole + b                     # w_: over every row of the mask
    e = np.where(left, np.maximum(w_start.max(axis=1) // s + 1, 0), 0)
    w_stop = (w_start + s[:, None] * (ac * whole + bc)).min(axis=1)
    f = np.where(right, np.maximum(-((w_stop - Lk) // s), 0) + 1, 0)   # ⌈(Lk − stop)/s⌉ + 1
    out = segs.copy()
    out[:, 1] -= s * e
    out[:, 4] += e + f
    return out


def _merge_clipped(mask, bounds, ptr, segs):
    """Merge whole row groups whose keys another group's segments reproduce once clipped.

    Unclipped segments cannot follow a window into an edge: near the top of a dilated window
    the first key is i mod d, not affine in i, so the exact analysis needs a group per d rows.
    The middle group's (start i − h·d, count 2h + 1) gives those rows too, clipped at 0. So,
    largest groups first, every group absorbs neighbouring groups while its segments, clipped,
    reproduce their rows exactly (checked against the mask) — as they are or stretched past an
    edge they are clipped at anyway (_extended; for windows wider than the sequence, which have
    no unclipped middle); repeat until nothing merges. Each absorption is verified, so the
    result still round-trips exactly.
    """
    Lq, Lk = mask.shape
    row_sums = mask.sum(axis=1)
    keys = np.r_[0, np.cumsum(row_sums)]
    G = len(bounds) - 1
    r0, r1 = bounds[:-1].tolist(), bounds[1:].tolist()
    params = [segs[ptr[g]:ptr[g + 1]] for g in range(G)]
    prev, nxt, alive = list(range(-1, G - 1)), list(range(1, G + 1)), [True] * G

    def absorbs(g, o):
        for cand in (params[g], _extended(params[g], r0[g], r1[g], Lq, Lk)):
            if cand is not None and _reproduces(mask, row_sums, cand, r0[o], r1[o]):
                params[g] = cand
                return True
        return False

    changed = True
    while changed:
        changed = False
        # big groups first; among equal sizes, more keys first (the strided group furthest down
        # has every stride back, and clipped it gives the rows above it)
        for g in sorted((g for g in range(G) if alive[g]), key=lambda g: (r0[g] - r1[g], keys[r0[g]] - keys[r1[g]])):
            if not alive[g] or r1[g] - r0[g] == 1:
                continue    # one row's segments are constant in i: they only give identical rows
            for side in (prev, nxt):
                while 0 <= side[g] < G and absorbs(g, side[g]):
                    o = side[g]
                    alive[o], changed = False, True
                    r0[g], r1[g] = min(r0[g], r0[o]), max(r1[g], r1[o])
                    prev[g], nxt[g] = (prev[o], nxt[g]) if o == prev[g] else (prev[g], nxt[o])
                    if prev[g] >= 0:
                        nxt[prev[g]] = g
                    if nxt[g] < G:
                        prev[nxt[g]] = g
    keep = sorted((g for g in range(G) if alive[g]), key=lambda g: r0[g])
    counts = [len(params[g]) for g in keep]
    new_segs = np.concatenate([params[g] for g in keep]) if keep else segs[:0]
    return np.r_[[r0[g] for g in keep], bounds[-1]], np.r_[0, np.cumsum(counts)], new_segs.reshape(-1, 5)


def _affine(a, b, var="i"):
    """'2·i−3', 'i+5', '−i+8', '7' — an affine expression for the repr."""
    if a == 0:
        return str(b)
    head = var if a == 1 else f"-{var}" if a == -1 else f"{a}·{var}"
    return head if b == 0 else f"{head}{b:+d}"


@dataclass(frozen=True, eq=False)
class ACSR:
    """An ACSR pattern over queries [0, Lq) and keys [0, Lk); see the module docstring.

    row_bounds [G+1] int64: 0 = r_0 < r_1 < … < r_G = Lq, group g is rows [r_g, r_{g+1}).
    seg_ptr    [G+1] int64: group g owns segs[seg_ptr[g]:seg_ptr[g+1]] (possibly none: empty rows).
    segs       [S, 5] int64: (a_start, b_start, stride, a_count, b_count), stride ≥ 1.
    The arrays are read-only; instances are hashable, so kernels can cache per pattern.
    """
    Lq: int
    Lk: int
    row_bounds: np.ndarray
    seg_ptr: np.ndarray
    segs: np.ndarray

    def __post_init__(self):
        Lq, Lk = _int("Lq", self.Lq, 1), _int("Lk", self.Lk, 1)
        rb = np.array(self.row_bounds, dtype=np.int64).reshape(-1)
        sp = np.array(self.seg_ptr, dtype=np.int64).reshape(-1)
        segs = np.array(self.segs, dtype=np.int64).reshape(-1, 5)
        if rb.size < 2 or rb[0] != 0 or rb[-1] != Lq or np.any(np.diff(rb) <= 0):
            raise ValueError(f"row_bounds must rise strictly from 0 to Lq = {Lq}, got {rb.tolist()[:8]}…")
        if sp.size != rb.size or sp[0] != 0 or sp[-1] != len(segs) or np.any(np.diff(sp) < 0):
            raise ValueError("seg_ptr must have one entry per row bound, rise from 0 to the number of segments")
        if np.any(segs[:, 2] < 1):
            raise ValueError(f"segment strides must be at least 1, got {segs[segs[:, 2] < 1, 2][0]}")
        for name, value in (("Lq", Lq), ("Lk", Lk), ("row_bounds", rb), ("seg_ptr", sp), ("segs", segs)):
            if isinstance(value, np.ndarray):
                value.setflags(write=False)
            object.__setattr__(self, name, value)
        # the kernels' caches look a pattern up on every call: hash the read-only arrays once
        object.__setattr__(self, "_hash", hash((Lq, Lk, rb.tobytes(), sp.tobytes(), segs.tobytes())))

    # ------------------------------------------------------------------ building

    @classmethod
    def from_groups(cls, Lq: int, Lk: int, groups) -> "ACSR":
        """From an iterable of (row0, row1, segments), segments an iterable of 5-tuples
        (a_start, b_start, stride, a_count, b_count). Groups must be sorted and not overlap;
        rows no group covers get an empty group (no keys)."""
        Lq, Lk = _int("Lq", Lq, 1), _int("Lk", Lk, 1)
        bounds, ptr, segs, row = [0], [0], [], 0
        for r0, r1, group_segs in groups:
            r0, r1 = int(r0), int(r1)
            if not row <= r0 < r1 <= Lq:
                raise ValueError(f"row group [{r0}, {r1}) must be non-empty, sorted, non-overlapping "
                                 f"and inside [0, {Lq})")
            if r0 > row:
                bounds.append(r0)
                ptr.append(len(segs))
            for seg in group_segs:
                if len(seg) != 5:
                    raise ValueError(f"a segment is (a_start, b_start, stride, a_count, b_count), got {seg!r}")
                segs.append(tuple(int(x) for x in seg))
            bounds.append(r1)
            ptr.append(len(segs))
            row = r1
        if row < Lq:
            bounds.append(Lq)
            ptr.append(len(segs))
        return cls(Lq, Lk, np.array(bounds), np.array(ptr), np.array(segs, dtype=np.int64).reshape(-1, 5))

    @classmethod
    def sliding_window(cls, L: int, window: int, causal: bool = False) -> "ACSR":
        """Non-causal |i − j| ≤ window div 2; causal 0 ≤ i − j < window. One group, one segment."""
        L, window = _int("L", L, 1), _int("window", window, 1)
        return cls.dilated_window(L, window, 1, causal)

    @classmethod
    def dilated_window(cls, L: int, window: int, dilation: int, causal: bool = False) -> "ACSR":
        """j = i + m·dilation with |m| ≤ window div 2 (causal: 0 ≤ −m < window). One group, one
        segment of the given stride."""
        L, w, d = _int("L", L, 1), _int("window", window, 1), _int("dilation", dilation, 1)
        if not isinstance(causal, (bool, np.bool_)):
            raise TypeError(f"causal must be a bool, got {type(causal).__name__}")
        if causal:
            seg = (1, -(w - 1) * d, d, 0, w)          # m = −(w−1) … 0
        else:
            h = w // 2
            seg = (1, -h * d, d, 0, 2 * h + 1)        # m = −h … h
        return cls.from_groups(L, L, [(0, L, [seg])])

    @classmethod
    def strided(cls, L: int, local: int, stride: int) -> "ACSR":
        """Sparse Transformer (Child et al. 2019), causal: j ≤ i and (i − j < local or
        (i − j) mod stride = 0). One group, two disjoint segments:
          local    i − local < j ≤ i:               start i − local + 1, count local
          strided  j = i − stride·m, m0 ≤ m ≤ M:    start i − stride·M, count M − m0 + 1
        with m0 = ⌈local/stride⌉ (so i − j ≥ local: no overlap with the local segment) and
        M = (L − 1) div stride, the most strides any row can step back; keys below 0 are clipped,
        which is what makes one affine start serve every row."""
        L, local, stride = _int("L", L, 1), _int("local", local, 1), _int("stride", stride, 1)
        segs = [(1, 1 - local, 1, 0, local)]
        m0, M = -(-local // stride), (L - 1) // stride
        if M >= m0:
            segs.append((1, -stride * M, stride, 0, M - m0 + 1))
        return cls.from_groups(L, L, [(0, L, segs)])

    @classmethod
    def blocked(cls, L: int, block: int) -> "ACSR":
        """i div block = j div block. One group per block (the start is a step function of i,
        not affine), one segment each; the last block is clipped at L. block = 1 is the
        diagonal, one group."""
        L, b = _int("L", L, 1), _int("block", block, 1)
        if b == 1:      # the diagonal: affine after all
            return cls.from_groups(L, L, [(0, L, [(1, 0, 1, 0, 1)])])
        return cls.from_groups(L, L, [(r, min(r + b, L), [(0, r, 1, 0, b)]) for r in range(0, L, b)])

    @classmethod
    def global_local(cls, L: int, window: int, n_global: int) -> "ACSR":
        """Longformer (Beltagy et al. 2020): |i − j| ≤ window div 2, or i < G, or j < G with
        G = n_global. Three groups keep the segments disjoint (window segment shown; the
        global keys [0, G) are the segment (0, 0, 1, 0, G)):
          [0, G)       global rows: every key                   (0, 0, 1, 0, L)
          [G, G + h)   global keys + window G ≤ j ≤ i + h       (0, G, 1, 1, h − G + 1)
          [G + h, L)   global keys + window i − h ≤ j ≤ i + h   (1, −h, 1, 0, 2h + 1)
        (h = window div 2; in the middle group the window would reach into the global keys, so
        its start is held at G and its count grows by one per row)."""
        L, window = _int("L", L, 1), _int("window", window, 1)
        G = _int("n_global", n_global, 0)
        if G > L:
            raise ValueError(f"n_global must be at most L = {L}, got {G}")
        h = window // 2
        if G == 0:
            return cls.sliding_window(L, window)
        glob = (0, 0, 1, 0, G)
        groups = [(0, G, [(0, 0, 1, 0, L)]),
                  (G, min(G + h, L), [glob, (0, G, 1, 1, h - G + 1)]),
                  (G + h, L, [glob, (1, -h, 1, 0, 2 * h + 1)])]
        return cls.from_groups(L, L, [g for g in groups if g[0] < g[1]])

    @classmethod
    def from_mask(cls, mask) -> "ACSR":
        """The JIT analysis: any boolean [Lq, Lk] mask → an ACSR with exactly its keys.

        1. Each row's sorted keys are cut into arithmetic runs (start, stride, count), greedily
           (see _greedy_runs); a single key gets stride 1.
        2. Consecutive rows join one group while they have the same number of runs with the same
           strides and their starts and counts change by the same amounts from row to row, i.e.
           while each segment stays affine in i. Again greedy, by the same routine. The segments
           are unclipped: every key in range.
        3. Groups whose rows another group's segments reproduce once clipped are merged into it
           (_merge_clipped): the edges of a window join its middle.
        If that leaves more than 2 groups and some run had two keys, 1–3 run again with two-key
        runs cut into single keys, and the result with fewer groups is kept. Regular masks give
        few groups; an irregular one falls back to about one group per row, still exact.
        """
        mask = np.asarray(mask)
        if mask.ndim != 2 or mask.dtype != np.bool_:
            raise ValueError(f"mask must be a 2-D boolean array, got shape {mask.shape} dtype {mask.dtype}")
        Lq, Lk = mask.shape
        if Lq < 1 or Lk < 1:
            raise ValueError(f"mask must have at least one row and column, got shape {mask.shape}")
        rows, cols = np.nonzero(mask)
        if rows.size == 0:
            return cls.from_groups(Lq, Lk, [])

        best = None
        for split_pairs in (False, True):
            bounds, ptr, segs, pairs = _affine_groups(rows, cols, Lq, split_pairs)
            found = _merge_clipped(mask, bounds, ptr, segs)
            if best is None or (len(found[0]), len(found[2])) < (len(best[0]), len(best[2])):
                best = found
            # two-key runs have a stride only by accident ({0, i} has stride i): parsed as two
            # single keys they may line up from row to row instead; worth a second pass when
            # the first found more than a window's worth of groups
            if not pairs or len(best[0]) - 1 <= 2:
                break
        return cls(Lq, Lk, *best)

    # ------------------------------------------------------------------ structure

    @property
    def n_groups(self) -> int:
        return len(self.row_bounds) - 1

    @property
    def n_segments(self) -> int:
        return len(self.segs)

    @property
    def table(self) -> np.ndarray:
        """[S, 7] int64: (row0, row1, a_start, b_start, stride, a_count, b_count) per segment."""
        g = np.repeat(np.arange(self.n_groups), np.diff(self.seg_ptr))
        return np.column_stack([self.row_bounds[g], self.row_bounds[g + 1], self.segs])

    def groups(self) -> tuple:
        """The groups as (row0, row1, (Segment, …)) named tuples."""
        rb, sp = self.row_bounds.tolist(), self.seg_ptr.tolist()
        segs = [Segment(*s) for s in self.segs.tolist()]
        return tuple(Group(rb[g], rb[g + 1], tuple(segs[sp[g]:sp[g + 1]])) for g in range(self.n_groups))

    @property
    def geometry(self) -> tuple:
        """Per group, the strides of its segments: ((1, 128),) for strided(L, 128, 128) at any L.
        What a JIT-specialised kernel keys its compile cache on (the other parameters are data)."""
        strides, sp = self.segs[:, 2].tolist(), self.seg_ptr.tolist()
        return tuple(tuple(strides[sp[g]:sp[g + 1]]) for g in range(self.n_groups))

    def kernel_arrays(self, dtype=np.int32) -> KernelArrays:
        """Flat, C-contiguous arrays for a kernel (see KernelArrays). Raises OverflowError if an
        affine expression could leave the range of `dtype` for rows in [0, Lq)."""
        info = np.iinfo(dtype)
        a, b, s, ac, bc = np.abs(self.segs).T
        reach = np.max((a + ac * s) * self.Lq + b + bc * s, initial=max(self.Lq, self.Lk))
        if reach > info.max // 2:
            raise OverflowError(f"segment parameters reach {reach}, too large for {np.dtype(dtype)}")
        cast = lambda x: np.ascontiguousarray(x, dtype=dtype)
        return KernelArrays(cast(self.row_bounds), cast(self.seg_ptr), cast(self.segs), self.Lq, self.Lk,
                            self.geometry)

    def row_tiles(self, block_m: int) -> np.ndarray:
        """[T, 3] int64 (row0, row1, group): every group cut into tiles of at most block_m rows,
        so a kernel can launch one program per tile with one set of segment parameters."""
        block_m = _int("block_m", block_m, 1)
        n_rows = np.diff(self.row_bounds)
        n_tiles = -(-n_rows // block_m)
        g = np.repeat(np.arange(self.n_groups), n_tiles)
        r0 = self.row_bounds[g] + block_m * _ranks(n_tiles)
        return np.column_stack([r0, np.minimum(r0 + block_m, self.row_bounds[g + 1]), g])

    # ------------------------------------------------------------------ expansion

    def _pairs(self, rows=None):
        """Every (row, segment) of the given rows, row-major, with the kept keys of that segment
        in that row: first + stride·t for 0 ≤ t < n. Returns (row, seg, first, stride, n)."""
        rows = np.arange(self.Lq) if rows is None else np.asarray(rows, dtype=np.int64).reshape(-1)
        g = np.searchsorted(self.row_bounds, rows, side="right") - 1
        nseg = self.seg_ptr[g + 1] - self.seg_ptr[g]
        row = np.repeat(rows, nseg)
        seg = np.repeat(self.seg_ptr[g], nseg) + _ranks(nseg)
        a, b, s, ac, bc = self.segs[seg].T
        start, count = a * row + b, np.maximum(ac * row + bc, 0)
        m_lo = np.maximum(0, -(start // s))                         # ⌈−start/s⌉ clipped at 0
        m_hi = np.minimum(count, (self.Lk - 1 - start) // s + 1)
        return row, seg, start + s * m_lo, s, np.maximum(m_hi - m_lo, 0)

    def _expand(self, rows=None):
        """(row, col, seg) of every kept key of the given rows, O(nnz of those rows)."""
        row, seg, first, s, n = self._pairs(rows)
        t = _ranks(n)
        return np.repeat(row, n), np.repeat(first, n) + np.repeat(s, n) * t, np.repeat(seg, n)

    def row_counts(self) -> np.ndarray:
        """[Lq] int64: number of keys of every row, in closed form per (row, segment)."""
        row, _, _, _, n = self._pairs()
        return np.bincount(row, weights=n, minlength=self.Lq).astype(np.int64)

    @property
    def nnz(self) -> int:
        return int(self._pairs()[4].sum())

    def row_keys(self, i: int) -> np.ndarray:
        """Sorted key columns of query row i."""
        i = _int("i", i, 0)
        if i >= self.Lq:
            raise ValueError(f"row {i} is outside [0, {self.Lq})")
        return np.sort(self._expand([i])[1])

    def to_mask(self) -> np.ndarray:
        """bool [Lq, Lk]."""
        mask = np.zeros((self.Lq, self.Lk), dtype=bool)
        row, col, _ = self._expand()
        mask[row, col] = True
        return mask

    def to_csr(self):
        """scipy.sparse.csr_matrix of int8 ones, keys sorted within rows."""
        from scipy.sparse import csr_matrix

        row, col, _ = self._expand()
        order = np.lexsort((col, row))
        indptr = np.r_[0, np.cumsum(np.bincount(row, minlength=self.Lq))]
        return csr_matrix((np.ones(len(col), dtype=np.int8), col[order], indptr), shape=(self.Lq, self.Lk))

    def check(self) -> "ACSR":
        """Raise ValueError unless the segments of every row are pairwise disjoint; returns self."""
        row, col, seg = self._expand()
        key = row * self.Lk + col
        order = np.argsort(key, kind="stable")
        dup = np.flatnonzero(key[order][1:] == key[order][:-1])
        if dup.size:
            x, y = order[dup[0]], order[dup[0] + 1]
            g = int(np.searchsorted(self.seg_ptr, seg[x], side="right") - 1)
            raise ValueError(f"segments overlap: row {row[x]} gets key {col[x]} from segments {seg[x] - self.seg_ptr[g]} "
                             f"and {seg[y] - self.seg_ptr[g]} of row group [{self.row_bounds[g]}, "
                             f"{self.row_bounds[g + 1]})")
        return self

    # ------------------------------------------------------------------ size

    def metadata_bytes(self, itemsize: int = 4) -> int:
        """Bytes of kernel_arrays(): row_bounds and seg_ptr (G+1 each) and segs (5 per segment)."""
        return itemsize * (2 * (self.n_groups + 1) + 5 * self.n_segments)

    def csr_bytes(self, itemsize: int = 4) -> int:
        """Bytes of the same pattern in CSR: indptr (Lq+1) and one column index per key."""
        return itemsize * (self.Lq + 1 + self.nnz)

    def dense_bytes(self) -> int:
        """Bytes of a dense boolean mask, one byte per entry."""
        return self.Lq * self.Lk

    def stats(self, itemsize: int = 4) -> dict:
        nnz, meta = self.nnz, self.metadata_bytes(itemsize)
        csr = itemsize * (self.Lq + 1 + nnz)
        return dict(groups=self.n_groups, segments=self.n_segments, nnz=nnz,
                    density=nnz / (self.Lq * self.Lk), metadata_bytes=meta, csr_bytes=csr,
                    dense_bytes=self.dense_bytes(), csr_over_acsr=csr / meta)

    # ------------------------------------------------------------------ display

    def draw(self, ax=None, max_size: int = 512):
        """The mask, keys coloured by their segment's index within its group, row-group
        boundaries as lines. Above max_size, every (Lq / max_size)-th row is drawn and columns
        are binned, so the cost is O(max_size · keys per row)."""
        import matplotlib.pyplot as plt
        from matplotlib.colors import ListedColormap

        if ax is None:
            _, ax = plt.subplots(figsize=(5, 5 * self.Lq / self.Lk if self.Lk >= self.Lq else 5))
        nr, nc = min(self.Lq, max_size), min(self.Lk, max_size)
        rows = (np.arange(nr) * self.Lq) // nr
        row, col, seg = self._expand(rows)
        img = np.full((nr, nc), -1, dtype=np.int64)
        g = np.searchsorted(self.seg_ptr, seg, side="right") - 1
        img[np.searchsorted(rows, row), (col * nc) // self.Lk] = seg - self.seg_ptr[g]
        colours = ["#ffffff"] + [plt.get_cmap("tab10")(k % 10) for k in range(max(int(img.max()) + 1, 1))]
        ax.imshow(img + 1, cmap=ListedColormap(colours), vmin=0, vmax=len(colours) - 1,
                  interpolation="nearest", extent=(0, self.Lk, self.Lq, 0))
        for r in self.row_bounds[1:-1]:
            ax.axhline(r, color="black", lw=0.6, ls="--")
        ax.set_xlabel("key j")
        ax.set_ylabel("query i")
        ax.set_title(self._summary())
        return ax

    def _summary(self) -> str:
        plural = lambda n, word: f"{n} {word}" + "s" * (n != 1)
        return f"{plural(self.n_groups, 'group')}, {plural(self.n_segments, 'segment')}, nnz={self.nnz:,}"

    def __repr__(self) -> str:
        lines = [f"ACSR({self.Lq}×{self.Lk}, {self._summary()})"]
        for r0, r1, segs in self.groups()[:4]:
            parts = [f"j = {_affine(s.a_start, s.b_start)} + {s.stride}·m, m < {_affine(s.a_count, s.b_count)}"
                     if s.stride != 1 else
                     f"j = {_affine(s.a_start, s.b_start)} + m, m < {_affine(s.a_count, s.b_count)}"
                     for s in segs]
            lines.append(f"  rows [{r0}, {r1}): " + (" | ".join(parts) or "no keys"))
        if self.n_groups > 4:
            lines.append(f"  … {self.n_groups - 4} more groups")
        return "\n".join(lines)

    def __eq__(self, other) -> bool:
        if not isinstance(other, ACSR):
            return NotImplemented
        return (self.Lq, self.Lk) == (other.Lq, other.Lk) and np.array_equal(self.row_bounds, other.row_bounds) \
            and np.array_equal(self.seg_ptr, other.seg_ptr) and np.array_equal(self.segs, other.segs)

    def __hash__(self) -> int:
        return self._hash
