"""t3's bands executor (prepare(..., executor="bands"), the vector pairs): the rows of each kernel cut
into *bands* of consecutive rows, one program a band, a band's own dependences kept inside its
program.

Why. The dataflow executor pays a dependence hop — a store, then a poll on another SM that sees
it, 0.5–0.6 µs on an H200 — for every level of the joint DAG, so a solve's time is about
levels · hop whatever its rows' work (docs/sparse_fusion_log.md). In natural order the rows a
grid row reads mostly lie among the rows just before it: a band of consecutive rows (a plane of
a 3D grid, a strip of lines of a 2D one) holds most of its own dependences. A program that runs
a band walks the band's own levels, its *steps*, one after another with a barrier between them,
and only the edges between bands cross SMs. The critical path then costs about

    (steps on it) · c_step + (band crossings on it) · hop,

which beats levels · hop where a step inside a program, c_step, costs well below a hop.

Measured, it does not (NVIDIA H200, 2026-12-05, docs/sparse_fusion_log.md): stamped, a step took
1.0–2.75 µs, more than the hop it replaces, and the 27-point grid's vector pairs took 3.6–4.3×
the dataflow executor's time. So executor=None never picks it; it stays as a second way to cut
the work — by rows rather than by levels — which is right, tested, and slower.

A step is at most LANES rows of one level of the band's own DAG, one row a thread; a row is a
record of C slots (position, coefficient), its entries and, for a solve, its right-hand side:

    x_i = (Σ_e coef_e · X[pos_e]) / d_i      solve: coef −t_ij on x_j, 1 on b_i; d_i = t_ii
                                              SpMV:  coef a_ij on the input or x_j;  d_i = 1

X holds the input and both kernels' outputs, [input (n) | out₁ (n) | out₂ (n)], as the dataflow
executor's VEC does (one kernel copies the input and puts the sentinel — a signalling NaN no
arithmetic produces — in every output). A slot is OWN (a
row of the same band, or the input: read by a plain load after the barrier) or APART (a row of
another band or of the other kernel: read K steps ahead into a ring of registers by volatile
loads, so that its round trip through L2 overlaps K steps). Every operand, own or apart, is
checked against the sentinel and read again through L2 until it is not: a stale cache costs
time, never a wrong result. The tables are stored [step, slot, lane] — a slot of every lane
side by side — so that the tables' loads and the gathers of X share one layout (one thread a
row); stored [step, lane, slot] they took layouts of their own and a step converted between
them through shared memory (dev/sparse_fusion/band_probe.py, which measures the variants).

Both kernels run in one launch: kernel 1's bands, then kernel 2's, numbered so that a band
depends only on bands of lower number (an upper solve's bands from the bottom up; an SpMV's
rows wait on nothing of their own band, so its bands are SPMV_SPLIT times shorter). G
persistent programs all run at once (a cooperative launch, G at most what the SMs hold), and
program g runs bands g, g + G, … in order: the lowest unfinished band waits on nothing
unfinished, so every program finishes. The interpreter runs one program over every band.

Every program starts at once, so a band whose operands come late — an SpMV band waiting for the
solve, the upper solve's bands waiting for the lower one's last rows, any band waiting for the
band before it — polls from the start of the launch: up to hundreds of programs, each reading
every pending slot of its step through L2 again and again, beside the few that work. So a poll
that found a sentinel SPINS times in a row sleeps BAND_NAP ns before the next (GPU only): a
short wait, the kind on a critical path, costs no sleep, and a long one polls a few times a
microsecond instead of continuously (on the H200 it changed the probe's times by -1.2 to +2.4 %,
no consistent gain: docs/sparse_fusion_log.md).

How a pattern is cut (band_shape): β = the most frequent offset |i − j| among the far ones (at
least half the largest): on a grid in natural order, its line or its plane, so that bands start
where lines or planes do — a band of the 27-point grid cut at its largest offset (a plane, a line
and a row) mixes two planes, and the model of band_probe.py puts its solve 12 times slower at
0.1 µs a step. A band is m·β rows, m the smallest power of two whose band has a level of at
least 32 rows (a 2D grid's line is a chain of single rows: 32 lines a band; a 3D grid's plane has
levels of up to 100 rows: a plane), and LANES the power of two from 32 to 128 that holds its
widest level.
"""

from typing import NamedTuple

import numpy as np
import torch
import triton
import triton.language as tl

from tiers import sparse_dags as dags
from tiers.kernels.sparse_fusion_executors.launch import _launch_claimed, _slots_from
from tiers.kernels.sparse_fusion_executors.records import _ask_l1
from tiers.kernels.sparse_fusion_executors.tickets import cut_blocks
from tiers.kernels.sparse_rows import SENTINEL, SENTINEL_BITS, nap
from tiers.validation import interpreting

PAIRS = ("sptrsv_spmv", "spmv_sptrsv", "sptrsv_sptrsv")
RING = 2            # K: steps ahead a band reads other bands' operands (H200: K = 0 or 1 fastest, 2 up to 35 % slower)
PREFETCH = 8        # PF: steps ahead that a band asks L1 for its tables (GPU only; H200: 4 % slower to 18 % faster)
SPMV_SPLIT = 8      # an SpMV's bands are this many times shorter than its solve's
BAND_NAP = 256      # ns a poll sleeps before the next once SPINS polls in a row found a sentinel (GPU only)
SPINS = tl.constexpr(8)
MAX_SLOTS = 64      # a row's record, held in registers, has at most this many slots
LANE_RANGE = (32, 128)
OWN, APART = 1, 2   # a slot's kind (0: padding, coefficient 0)
KIND_SHIFT = 29     # a slot's kind and position are one word: position | kind << 29
_OWN, _APART, _SHIFT = tl.constexpr(OWN), tl.constexpr(APART), tl.constexpr(KIND_SHIFT)
_POSITION = tl.constexpr((1 << KIND_SHIFT) - 1)


# ------------------------------------------------------------------------------------------- the plan

class Rows(NamedTuple):
    """One kernel's rows as records: row i's slots at ptr[i]:ptr[i+1], each a position in X and
    the index of its coefficient in the pair's values (SOURCE_ONE: 1, the right-hand side's),
    with its sign; the divisor's index (SOURCE_ONE: 1)."""
    ptr: np.ndarray
    pos: np.ndarray
    src: np.ndarray
    sign: np.ndarray
    dsrc: np.ndarray


SOURCE_ONE = -1


def _solve_rows(T, base, out_at, rhs_at) -> Rows:
    """x = T⁻¹r, T triangular canonical CSR whose values start at `base` in the pair's values,
    x_i written at out_at + i, r_i read at rhs_at + i: entries −t_ij x_j, then 1·r_i."""
    n = T.shape[0]
    rows, cols = dags.row_ids(T.indptr), T.indices.astype(np.int64)
    diag = cols == rows
    dsrc = np.full(n, SOURCE_ONE, dtype=np.int64)
    dsrc[rows[diag]] = base + np.flatnonzero(diag)
    off = np.flatnonzero(~diag)
    ptr = np.r_[0, np.cumsum(np.bincount(rows[off], minlength=n) + 1)]
    last = ptr[1:] - 1
    entry = np.ones(ptr[-1], dtype=bool)
    entry[last] = False
    pos, src, sign = np.empty(ptr[-1], np.int64), np.empty(ptr[-1], np.int64), np.empty(ptr[-1])
    pos[entry], src[entry], sign[entry] = out_at + cols[off], base + off, -1.0
    pos[last], src[last], sign[last] = rhs_at + np.arange(n), SOURCE_ONE, 1.0
    return Rows(ptr, pos, src, sign, dsrc)


def _spmv_rows(A, base, in_at) -> Rows:
    """y = A·v, A canonical CSR whose values start at `base`, v_j read at in_at + j."""
    nnz = A.indptr[-1]
    return Rows(A.indptr.astype(np.int64), in_at + A.indices.astype(np.int64), base + np.arange(nnz, dtype=np.int64),
                np.ones(nnz), np.full(A.shape[0], SOURCE_ONE, dtype=np.int64))


def band_shape(T, lower: bool) -> tuple:
    """(rows a band, LANES) for a triangular solve of T (module docstring): m·β rows, β the most
    frequent of the far offsets, m the smallest power of two whose first band has a level of 32
    rows or more, and LANES the power of two that holds its widest level, within LANE_RANGE."""
    n = T.shape[0]
    rows, cols = dags.row_ids(T.indptr), T.indices.astype(np.int64)
    offsets = np.abs(rows - cols)
    far = offsets[2 * offsets >= max(1, int(offsets.max(initial=0)))]
    kinds, counts = np.unique(far, return_counts=True)
    beta = int(kinds[np.argmax(counts)]) if far.size else 1      # the smallest of the most frequent

    def levels(k):
        """The own levels' sizes of the first band of k rows (the last, for an upper solve)."""
        lo = 0 if lower else max(0, n - k)
        inside = (rows >= lo) & (rows < lo + k) & (cols >= lo) & (cols < lo + k) & (rows != cols)
        u, v = cols[inside] - lo, rows[inside] - lo
        return np.bincount(dags.wavefront_levels(dags.dag_from_edges(u, v, min(k, n))))

    m, widest = 1, int(levels(beta).max(initial=1))
    while m * beta < n and widest < LANE_RANGE[0]:
        m *= 2
        widest = int(levels(m * beta).max())
    lanes = min(max(1 << (widest - 1).bit_length(), LANE_RANGE[0]), LANE_RANGE[1])
    return m * beta, lanes


class KernelPlan(NamedTuple):
    """One kernel's bands (pattern only): per step and slot and lane (stored [S, C, LANES]) the
    word (position | kind << KIND_SHIFT), the coefficient's index and sign; per step and lane the
    row written (−1: none) and the divisor's index; SP [P + 1], band p's steps SP[p]:SP[p+1] (a
    multiple of K). C: slots a record; K: the ring's depth (0: the kernel has no APART slot or
    no band more than one level deep)."""
    word: np.ndarray
    src: np.ndarray
    sign: np.ndarray
    row: np.ndarray
    dsrc: np.ndarray
    SP: np.ndarray
    C: int
    K: int
    P: int
    steps: int
    edges_own: int
    edges_apart: int


def kernel_plan(r: Rows, out_at, outputs, band, lanes, K) -> KernelPlan:
    """The bands of one kernel whose rows write X[out_at + i] (`band`: each row's band; a band
    reads only bands of lower number and the other kernel's rows; `outputs`: the range of X that
    either kernel writes, the rest being the input)."""
    n = len(r.ptr) - 1
    counts = np.diff(r.ptr)
    C = 1 << (int(counts.max(initial=1)) - 1).bit_length()
    v = dags.row_ids(r.ptr)
    mine = (r.pos >= out_at) & (r.pos < out_at + n)
    own = mine & (band[np.where(mine, r.pos - out_at, 0)] == band[v])
    apart = (r.pos >= outputs[0]) & (r.pos < outputs[1]) & ~own
    u = r.pos[own] - out_at
    step_level = dags.wavefront_levels(dags.dag_from_edges(u, v[own], n))
    depth = int(step_level.max(initial=0)) + 1
    K = K if depth > 1 and apart.any() else 0
    order = np.lexsort((np.arange(n), step_level, band))
    step_in_all, lane = cut_blocks(band[order] * depth + step_level[order], lanes)
    P = int(band.max(initial=-1)) + 1
    steps = np.bincount(band[order][lane == 0], minlength=P)
    padded = -(-steps // max(K, 1)) * max(K, 1)
    SP, first = np.zeros(P + 1, dtype=np.int64), np.zeros(P + 1, dtype=np.int64)
    np.cumsum(padded, out=SP[1:])
    np.cumsum(steps, out=first[1:])
    step = step_in_all - first[band[order]] + SP[band[order]]
    S = int(SP[-1])
    row = np.full((S, lanes), -1, dtype=np.int32)
    row[step, lane] = out_at + order
    dsrc = np.full((S, lanes), SOURCE_ONE, dtype=np.int64)
    dsrc[step, lane] = r.dsrc[order]
    row_step, row_lane = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    row_step[order], row_lane[order] = step, lane
    k = np.arange(len(r.pos)) - np.repeat(r.ptr[:-1], counts)
    slot = (row_step[v] * C + k) * lanes + row_lane[v]          # stored [S, C, LANES]
    word = np.zeros(S * C * lanes, dtype=np.int32)
    src = np.full(S * C * lanes, SOURCE_ONE, dtype=np.int64)
    sign = np.zeros(S * C * lanes, dtype=np.int8)
    word[slot] = r.pos | (np.where(apart, APART, OWN) << KIND_SHIFT)
    src[slot], sign[slot] = r.src, r.sign
    return KernelPlan(word, src, sign, row, dsrc, SP, C, K, P, S, int(own.sum()), int(apart.sum()))


def slot_words(word) -> tuple:
    """(kind, position) of a plan's slot words (KernelPlan.word), on the host."""
    return word >> KIND_SHIFT, word & ((1 << KIND_SHIFT) - 1)


class BandPlan(NamedTuple):
    """A vector pair's two kernels as bands over X = [input | out₁ | out₂] (band_plan)."""
    kernels: tuple
    n: int
    lanes: int
    band_rows: int


def band_plan(pair, mats, K=RING, shape=None) -> BandPlan:
    """The bands of a vector pair on canonical CSR matrices (the module docstring). The pair's
    values are mats[0].data then mats[1].data (pair_values). shape: (rows a band, LANES) for
    every solve instead of band_shape's (the tests cut small matrices into many bands)."""
    if pair not in PAIRS:
        raise ValueError(f"the bands executor runs the vector pairs ({', '.join(PAIRS)}), not {pair}")
    n = mats[0].shape[0]
    if 3 * n > 1 << KIND_SHIFT:
        raise ValueError(f"the bands executor addresses at most {(1 << KIND_SHIFT) // 3} rows, got {n}")
    inp, out1, out2, base2 = 0, n, 2 * n, int(mats[0].indptr[-1])
    solve = 0 if pair != "spmv_sptrsv" else 1
    band_rows, lanes = shape or band_shape(mats[solve], lower=True)
    bands = np.arange(n) // band_rows
    short = np.arange(n) // max(lanes, band_rows // SPMV_SPLIT)
    if pair == "sptrsv_spmv":
        first, second = (_solve_rows(mats[0], 0, out1, inp), bands), (_spmv_rows(mats[1], base2, out1), short)
    elif pair == "spmv_sptrsv":
        first, second = (_spmv_rows(mats[0], 0, inp), short), (_solve_rows(mats[1], base2, out2, out1), bands)
    else:
        up_rows, up_lanes = shape or band_shape(mats[1], lower=False)
        lanes = max(lanes, up_lanes)
        up = np.arange(n)[::-1] // up_rows      # an upper solve's bands from the bottom up
        first, second = (_solve_rows(mats[0], 0, out1, inp), bands), (_solve_rows(mats[1], base2, out2, out1), up)
    longest = max(int(np.diff(r.ptr).max(initial=1)) for r, _ in (first, second))
    if longest > MAX_SLOTS:         # checked before the tables, which hold every row at the longest's width
        raise ValueError(f"the bands executor holds a row's entries in registers, at most {MAX_SLOTS}; this "
                         f"pair has rows of {longest} (use the dataflow executor)")
    plans = tuple(kernel_plan(r, at, (out1, 3 * n), b, lanes, K) for (r, b), at in ((first, out1), (second, out2)))
    return BandPlan(plans, n, lanes, band_rows)


def pair_values(mats, dtype, device) -> torch.Tensor:
    """The pair's values as band_plan indexes them, then a 1 (SOURCE_ONE, index −1); each matrix
    as SciPy sparse, or as a tensor of its stored values on `device` (t3's refresh)."""
    parts = [M.to(dtype) if isinstance(M, torch.Tensor) else torch.from_numpy(M.data).to(device=device, dtype=dtype)
             for M in mats]
    return torch.cat(parts + [torch.ones(1, dtype=dtype, device=device)])


class DeviceBands(NamedTuple):
    """A BandPlan's tables on a device with a pair's values: per kernel (word, value, row, divisor,
    its reciprocal, SP)."""
    tables: tuple
    n: int
    lanes: int
    metas: tuple       # per kernel (C, K)
    P: tuple           # per kernel, bands
    gathers: tuple = ()  # per kernel (src, sign, dsrc) on the device: where new values go (bands_take_values)


def device_bands(plan: BandPlan, values: torch.Tensor, prefetch: int) -> DeviceBands:
    """The plan's tables on values' device, the coefficients gathered from `values` (pair_values):
    what a prepared call keeps. Tables are padded by `prefetch` + 1 steps, which the L1 prefetch
    reads past a band's last step."""
    dev, tables, gathers = values.device, [], []

    def t(a):
        return torch.from_numpy(np.ascontiguousarray(a)).to(dev)

    for p in plan.kernels:
        pad = (prefetch + 1) * plan.lanes * p.C
        src, sign, dsrc = t(p.src), t(p.sign).to(values.dtype), t(p.dsrc.reshape(-1))
        coef = values[src] * sign
        d = values[dsrc]
        zeros = torch.zeros(pad, dtype=values.dtype, device=dev)
        tables.append((t(np.r_[p.word, np.zeros(pad, np.int32)]), torch.cat([coef, zeros]), t(p.row), d, 1.0 / d,
                       t(p.SP)))
        gathers.append((src, sign, dsrc))
    return DeviceBands(tuple(tables), plan.n, plan.lanes, tuple((p.C, p.K) for p in plan.kernels),
                       tuple(p.P for p in plan.kernels), tuple(gathers))


def bands_take_values(bands: DeviceBands, values: torch.Tensor) -> DeviceBands:
    """bands with the coefficients, divisors and reciprocals of new `values` (pair_values, on the
    patterns the plan was cut from) written in place, gathered as device_bands gathered them: no
    index table crosses to the device again, and what a kept launch reads stays where it was."""
    for (_, coef, _, d, rd, _), (src, sign, dsrc) in zip(bands.tables, bands.gathers):
        torch.mul(values[src], sign, out=coef[:src.numel()])     # an index −1 is the 1 pair_values ends with
        d.copy_(values[dsrc])
        torch.reciprocal(d, out=rd)
    return bands


# --------------------------------------------------------------------------------------------- kernel

@triton.jit
def _look_apart(X, WORD, s, lane, c, LANES: tl.constexpr, C: tl.constexpr):
    """Step s's operands from other bands (bits), read once by volatile loads, not waited for; 0
    in every other slot."""
    w = tl.load(WORD + (s * C + c) * LANES + lane)
    return tl.load(X + (w & _POSITION), mask=(w >> _SHIFT) == _APART, other=0, volatile=True)


@triton.jit
def _clock():
    """The GPU's %globaltimer, ns."""
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _await(x, X, pos, m, SENT: tl.constexpr, NAP: tl.constexpr, t0=0, DEADLINE_NS: tl.constexpr = 0):
    """x (bits) read from X[pos] over the mask m, read again through L2 where it holds the
    sentinel; after SPINS polls in a row, with a sleep of NAP ns before each next one (GPU only).
    DEADLINE_NS > 0 (GPU only; dev/sparse_fusion/band_probe.py's guard): no longer once
    DEADLINE_NS have passed since t0 (_clock), so that a plan bug leaves sentinels in the result
    instead of a kernel that never ends."""
    w = m & (x == SENT)
    polls = 0
    while tl.max(tl.max(w.to(tl.int32), 1), 0) != 0:
        if NAP > 0:
            if polls >= SPINS:
                nap(NAP)
            polls += 1
        x = tl.where(w, tl.load(X + pos, mask=w, other=0, volatile=True), x)
        w = m & (x == SENT)
        if DEADLINE_NS > 0:
            w = w & (_clock() - t0 < DEADLINE_NS)
    return x


@triton.jit
def _record(WORD, VAL, ROW, D, RD, s, lane, c, LANES: tl.constexpr, C: tl.constexpr):
    """Step s's tables: per slot and lane the position, kind and coefficient; per lane the row
    written, its divisor and the divisor's reciprocal."""
    at = (s * C + c) * LANES + lane
    w = tl.load(WORD + at)
    one = tl.arange(0, LANES)
    return (w & _POSITION, w >> _SHIFT, tl.load(VAL + at), tl.load(ROW + s * LANES + one),
            tl.load(D + s * LANES + one), tl.load(RD + s * LANES + one))


@triton.jit
def _divided(r, d, rd):
    """r / d from r · (1/d) and one Markstein step, which rounds as the division does."""
    q = r * rd
    return tl.fma(tl.fma(-q, d, r), rd, q)


@triton.jit
def _step(X, WORD, VAL, ROW, D, RD, s, lane, c, xa, LANES: tl.constexpr, C: tl.constexpr, PF: tl.constexpr,
          SENT: tl.constexpr, NAP: tl.constexpr):
    """Step s: every lane's row from its record, its APART operands xa read earlier; then a
    barrier, after which the band's next step reads what this one stored."""
    if PF > 0:      # the tables of step s + PF into L1, one ask per 128-byte line
        _ask_l1(WORD + (s + PF) * C * LANES + tl.arange(0, C * LANES // 32) * 32)
        _ask_l1(VAL + (s + PF) * C * LANES + tl.arange(0, C * LANES // 16) * 16)
    pos, kind, a, row, d, rd = _record(WORD, VAL, ROW, D, RD, s, lane, c, LANES, C)
    own = kind == _OWN
    x = _await(tl.where(own, tl.load(X + pos, mask=own, other=0), xa), X, pos, own | (kind == _APART), SENT, NAP)
    q = _divided(tl.sum(a * x.to(a.dtype, bitcast=True), 1), d, rd)
    tl.store(X + row, q.to(X.dtype.element_ty, bitcast=True), mask=row >= 0)
    tl.debug_barrier()


@triton.jit
def _band_span(SP, p, LANES: tl.constexpr, C: tl.constexpr):
    """A step's lane and slot indices ([LANES, C] each) and band p's steps s0:s1."""
    lane = tl.arange(0, LANES)[:, None] + tl.zeros([LANES, C], tl.int32)
    c = tl.arange(0, C)[None, :] + tl.zeros([LANES, C], tl.int32)
    return lane, c, tl.load(SP + p), tl.load(SP + p + 1)


@triton.jit
def _walk_band(X, WORD, VAL, ROW, D, RD, SP, p, LANES: tl.constexpr, C: tl.constexpr, K: tl.constexpr,
               PF: tl.constexpr, SENT: tl.constexpr, NAP: tl.constexpr):
    """Band p's steps in order, the APART operands of step s + K read at step s (K = 0: at step s)."""
    lane, c, s0, s1 = _band_span(SP, p, LANES, C)
    if K == 0:
        for s in range(s0, s1):
            _step(X, WORD, VAL, ROW, D, RD, s, lane, c, _look_apart(X, WORD, s, lane, c, LANES, C), LANES, C, PF,
                  SENT, NAP)
    else:
        ring = ()
        for j in tl.static_range(K):
            ring = ring + (_look_apart(X, WORD, s0 + j, lane, c, LANES, C),)
        for s in range(s0, s1, K):
            for j in tl.static_range(K):
                _step(X, WORD, VAL, ROW, D, RD, s + j, lane, c, ring[j], LANES, C, PF, SENT, NAP)
                # read after the step has used ring[j], so that the load lands in ring[j]'s own
                # registers: issued before, the loop's back edge copied it there, waiting for it
                # (the sm_90 SASS), and the ring was one step deep whatever K
                nxt = tl.minimum(s + j + K, s1 - 1)       # past the band's end: its last step again
                ring = ring[:j] + (_look_apart(X, WORD, nxt, lane, c, LANES, C),) + ring[j + 1:]


@triton.jit
def _bands(X, WORD1, VAL1, ROW1, D1, RD1, SP1, WORD2, VAL2, ROW2, D2, RD2, SP2, P1, P,
           LANES: tl.constexpr, C1: tl.constexpr, K1: tl.constexpr, C2: tl.constexpr, K2: tl.constexpr,
           PF: tl.constexpr, SENT: tl.constexpr, SLEEP: tl.constexpr):
    """Both kernels' bands: program g of G runs bands g, g + G, … of P (kernel 1's below P1, then
    kernel 2's), all G programs resident."""
    for b in range(tl.program_id(0), P, tl.num_programs(0)):
        if b < P1:
            _walk_band(X, WORD1, VAL1, ROW1, D1, RD1, SP1, b, LANES, C1, K1, PF, SENT, SLEEP)
        else:
            _walk_band(X, WORD2, VAL2, ROW2, D2, RD2, SP2, b - P1, LANES, C2, K2, PF, SENT, SLEEP)


# --------------------------------------------------------------------------------------------- launch

def run_bands(run, vector: torch.Tensor) -> tuple:
    """The pair's two output vectors for `vector` (checked by the caller): X = [input | sentinel
    (2n)], one launch, the outputs as views of X. `run` (t3's Prepared) holds the tables
    (run.bands: DeviceBands) and what launch.claimed takes: striding programs, as many as the SMs
    hold of the compiled kernel (a cooperative launch; one program in the interpreter)."""
    dev = run.bands
    n = dev.n
    X = _slots_from(vector, 3 * n).view(SENTINEL_BITS[vector.dtype])
    (C1, K1), (C2, K2) = dev.metas
    PF, SLEEP = (0, 0) if interpreting() else (PREFETCH, BAND_NAP)
    meta = dict(LANES=dev.lanes, C1=C1, K1=K1, C2=C2, K2=K2, PF=PF, SENT=SENTINEL[vector.dtype], SLEEP=SLEEP,
                num_warps=band_warps(dev.lanes))
    _launch_claimed(_bands, run, sum(dev.P), (X, *dev.tables[0], *dev.tables[1], dev.P[0], sum(dev.P)), meta)
    out = X[n:].view(vector.dtype)
    return out[:n], out[n:]


def band_warps(lanes) -> int:
    """Warps a program of LANES lanes runs (one a 32 lanes)."""
    return max(1, lanes // 32)
