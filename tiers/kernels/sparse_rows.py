"""Building blocks of the Triton tiers of sparse fusion (tiers/t2_triton_unfused/sparse_fusion.py,
tiers/t3_triton_fused/sparse_fusion.py): one *iteration* — one row of one kernel — done for a
vector of R independent iterations at once, the index tables that describe the iterations, and
what both tiers do around a launch.

Both tiers run t0's row algorithms (tiers/t0_numpy/sparse_fusion.py) in two shapes of work,
read from tables that the host builds once per sparsity pattern and that hold *positions*, not
values:

  affine row (SpMV, SpTRSV)    dst = (rhs + σ · Σ_e VAL[val_e] · VEC[vec_e]) / VAL[diag]
      SpMV    y_i = Σ_j a_ij x_j                    σ = +1, no rhs, no divisor
      SpTRSV  x_i = (b_i − Σ_{j≠i} t_ij x_j) / t_ii   σ = −1, rhs b_i, divisor t_ii (none if unit)
  factor row (ILU(0), IC(0)), in place on the factor's values, one *step* per entry of the row,
  in increasing column (tiers/sparse_dags.py lists the pairs each step touches):
      ILU, IKJ     for k < i:  a_ik ← a_ik / u_kk;  a_ij ← a_ij − a_ik · u_kj  (j > k in both rows)
      IC, up-looking  for j ≤ i:  s = a_ij − Σ_k l_ik · l_jk  (k < j in both rows);
                                 l_ij = s / l_jj,  or l_ii = √s on the diagonal

A factor row walks its steps one after another — step s reads what step s − 1 wrote — so the
latency of one step is paid as many times as the row has entries below the diagonal, and every
row on the DAG's critical path pays it. Rows are therefore *held* (held_fetch, held_finish): the
row's entries up to the last one its steps touch, its pivots and every update pair's finished
operand are loaded at once, the steps run on registers, and those entries are stored once at
the end. An ILU(0) row touches its entries below the diagonal and the targets of their pairs,
not the rest of its upper part (u_ij = a_ij there), so a row holds a prefix of itself. A step
reads its operands from a grid gathered before the steps, one per entry of the row (GRID_WORK;
rows of the smallest shapes find their pairs in a list by one-hot masks instead). The
rare rows whose shape lies outside what nearly all rows need walk in memory beside them
(HOLD_SHARE). Where the rows a row reads finish at different times — on the 27-point grid they
lie 1 to 7 levels below it — the values-as-flags executor runs the steps before the first late
one as soon as their own operands are there (late_steps, held_finish's STAGED).

VAL is one buffer holding the values of every matrix of the pair (or the factor being computed)
and VEC one buffer holding the input vector and both outputs, so an iteration of either kernel
is "read these positions, write that one": a fused launch needs a branch per shape of work, not
per kernel. Loads of what other iterations write go through L2 (`.cg`): in the sync-free kernel
another SM may have written it a moment ago, and L1 is not coherent across SMs.

t3's flag executor also runs a factor pair with the values as flags (its DATA mode, which
executor="dataflow" takes): VAL is then the factor as the other rows see it, every entry a step
rewrites (rewritten) holding a sentinel until its row stores it, and OWN a copy of A's values in
which each row works on its own entries; whatever a row reads of another row is polled until it
no longer holds the sentinel (val_polled), so the stored values are the only signal.
"""
import functools
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
import triton
import triton.language as tl

from tiers import buffers
from tiers import sparse_dags as dags
from tiers.validation import check_no_grad, factor_breakdown, validate_refresh

AFFINE, ILU, IC = 0, 1, 2        # the iteration kinds of the tables
CHUNK = 8                        # non-zeros of a row loaded per trip (a 5-point row fits in one)
HELD_WIDTH = 64                  # factor rows holding at most this many entries may be held (held_fetch)
HOLD_SHARE = 0.999
"""The held shape (W, S, C) is the smallest that covers this share of the factor rows in each of
its three sizes (entries held, steps, pairs of a step); rows outside it walk in memory, in the
same blocks (factor_iterations, t3's _syncfree). Every held step reads an [S, W] grid gathered
per row (or, within GRID_WORK, does [C, W] one-hot work), so a shape sized for the longest row
would make a million short rows pay for a few hubs. On the power-law graph (1M nodes, m = 3)
an ILU(0) row holds 4 entries in 3 steps of 1 pair at the median, and the hubs' rows are
thousands of entries long; before, any row wider than HELD_WIDTH
made every row walk. Now the shape is 8 · 4 · 2 with 940 rows walked in the measurements
below, and 730 since a row that fits the shape's powers of two is held too (held_spans; that
last refinement was not measured on a GPU, the device time was spent). Measured on an H200
(2026-11-29, float64, flag executor, 3 interleaved rounds in one call, every output checked
first, figures/data/held_spans_ab_*): the power-law ILU(0) pair 2.35 ms against 2.91 with the
sparse-fusion schedule (cuSPARSE in the same rounds 2.66: 1.13× instead of 0.91×) and 3.12
against 3.56 with wavefront; R = 8 instead of 4, 2.56. The package CLI on the next lease gave
2.68 against cuSPARSE's 2.72 (figures/data/held_spans_cli_powerlaw_*). On the grids every
interior row has the same shape and none walks; their times did not move (27-point ILU(0) 5.59
against 5.47 ms, IC(0) 5.65 against 5.92, 3D ILU(0) 1.26 against 1.28, within the rounds'
spread).

Tried, not kept (same day, figures/data/held_lists_ab_*): a held row as a list of exactly the
entries its steps touch, read through an index table, and the steps' local indices through a
second one. On the power-law ILU(0) as fast or faster (2.12 against 2.72 ms, shape 8 · 4 · 2
with 238 rows walked), but on the 27-point and 3D grids 6–17 % slower than the windows
(27-point ILU(0) 5.68 against 5.39 ms, IC(0), whose lists are its whole rows, 6.92 against 5.97):
the gathers cost more than the narrower lists saved."""
HELD_WORK = 16384
"""Steps · pairs · entries (S · C · W) of a held row at most: a held step picked its pairs out of
registers by one-hot sums over [C, W], S times a row, so past some size the walk in memory was
faster (measured so; past GRID_WORK rows now take a grid instead, and where this bound lies for
the grid was not measured). Measured on the H100 (2026-11-26,
figures/data/walk_vs_held_sparse_fusion_*, 27-point grid 64³, flag executor, R = 1): natural
order, held against walked, ILU(0) (S · C · W = 8192) 4.92 against 14.0 ms, IC(0) (4096) 6.90
against 13.7; after RCM, ILU(0) (16384) 11.5 against 29.7,
IC(0) (32 steps of up to 32 pairs over 32 entries: 32768) 38.1 against 29.6. The bound lies
between the last two; no shape in between was measured.

Tried, not kept (2026-11-27, figures/data/held_unrolled_*): a step without one-hot work. The host
laid each step's operands out [step, entry] (an int8 table of offsets from the pivot, the step's
own entry marked), the steps were unrolled, and a step became elementwise work over the row plus
one exchange across it (a gather for ILU, a sum for IC), the pivots' reciprocals taken before
the steps. Right to 2e-16, but on the H100 (flag executor, float64, wavefront, best of R = 1, 2,
4, in the same call as the code here) slower where it mattered: 27-point ILU(0) / IC(0) 12.5 /
14.5 ms against 5.03 / 6.98, 3D 2.63 / 3.07 against 1.70 / 1.83; only 2D gained, 5.21 / 6.42
against 5.74 / 7.30. ncu on the 3D ILU(0) at R = 4: 757 M instructions executed against 390 M,
139 registers a thread against 70 (12 programs an SM against 28); both issued about a third of
an instruction a cycle per scheduler, so the time doubled with the instructions. With 500 000
blocks the work of all of them, not one row's chain of steps, sets the time, and the unrolled
loads run in every block, the solve's too. A first version kept the operands in one [R, S, W]
load; Triton 3.6 (the GPU's) spread its steps across threads, so every step's pick went through
shuffles and shared memory (27-point ILU(0) 25 ms), which the CPU's Triton 3.9 had not shown:
compile with the GPU's Triton before judging a layout. Since 2026-12-02 the grid's steps (below,
GRID_WORK) are unrolled, from operands each thread already holds step by step, and ILU(0)'s
exchange is one indexed shuffle: 27-point ILU(0) 2.60 → 1.86 ms on the H200's dataflow executor
(held_steps; docs/sparse_fusion_log.md)."""
HELD_BUDGET = 1024               # operand positions a program may prefetch, lanes · held_pairs (RowTables.held)


@triton.jit
def _div(a, b):
    """a / b rounded as IEEE says (Triton's `/` on float32 is a faster, 2-ulp division)."""
    if a.dtype == tl.float32:
        return tl.div_rn(a, b)
    else:
        return a / b


@triton.jit
def _recip(x):
    """1 / x, rounded as _div rounds."""
    return _div(tl.full(x.shape, 1.0, x.dtype), x)


@triton.jit
def _sqrt(a):
    if a.dtype == tl.float32:
        return tl.sqrt_rn(a)
    else:
        return tl.sqrt(a)


@triton.jit
def ic_pivot(rest):
    """IC(0)'s pivot l_ii = √rest where rest = a_ii − Σ_k l_ik² is positive; a non-positive rest is
    kept as the pivot, for the wrapper to report as a breakdown after the run."""
    return tl.where(rest > 0, _sqrt(tl.where(rest > 0, rest, 1.0)), rest)


@triton.jit
def affine_fetch(v, ok, ENT_PTR, ENT_VAL, ENT_VEC, RHS, DIAG, SIGN, DST, VAL,
                 STATIC: tl.constexpr, CHUNK: tl.constexpr, first=None, last=None):
    """Everything an affine iteration reads that no other iteration writes: where its entries
    are, its first CHUNK positions, and — when VAL is STATIC (no factor is being computed) —
    their values and the divisor. The sync-free executor loads these *before* it waits, so
    that after the wait only the vector entries remain to be read. `first`, `last`: ENT_PTR[v]
    and ENT_PTR[v + 1] already read (a block's record, t3's BLK_REC), one round of loads fewer."""
    if first is None:
        start = tl.load(ENT_PTR + v, mask=ok, other=0)
        end = tl.load(ENT_PTR + v + 1, mask=ok, other=0)
    else:
        start = tl.where(ok, first, 0)
        end = tl.where(ok, last, 0)
    e = start[:, None] + tl.arange(0, CHUNK)[None, :]
    m = ok[:, None] & (e < end[:, None])
    px = tl.load(ENT_VEC + e, mask=m, other=0)
    pv = tl.load(ENT_VAL + e, mask=m, other=0)
    rhs_at = tl.load(RHS + v, mask=ok, other=-1)
    diag_at = tl.load(DIAG + v, mask=ok, other=-1)
    sign = tl.load(SIGN + v, mask=ok, other=0).to(VAL.dtype.element_ty)
    dst = tl.load(DST + v, mask=ok, other=0)
    if STATIC:
        a = tl.load(VAL + pv, mask=m, other=0.0)
        d = tl.load(VAL + diag_at, mask=ok & (diag_at >= 0), other=1.0)
    else:
        a = tl.zeros(pv.shape, dtype=VAL.dtype.element_ty)
        d = tl.zeros(v.shape, dtype=VAL.dtype.element_ty)
    return start, end, m, pv, px, a, rhs_at, diag_at, d, sign, dst


@triton.jit
def _waiting(x, at, m, N_IN, SENT: tl.constexpr):
    """Where x, read from VEC[at] (over m) past the input vector, still holds SENT."""
    if x.dtype == tl.float64:
        bits = x.to(tl.int64, bitcast=True)
    else:
        bits = x.to(tl.int32, bitcast=True)
    return m & (at >= N_IN) & (bits == SENT)


@triton.jit
def nap(ns):
    """Sleep for about `ns` nanoseconds (PTX nanosleep; GPU only), returning ns."""
    return tl.inline_asm_elementwise("nanosleep.u32 $1; mov.b32 $0, $1;", "=r,r", [ns], dtype=tl.int32,
                                     is_pure=False, pack=1)


@triton.jit
def _pending(x, at, m, N_IN, SENT: tl.constexpr):
    """1 while some entry of x read from VEC[at] (over m) past the input vector still holds SENT."""
    return tl.max(_waiting(x, at, m, N_IN, SENT).to(tl.int32))


@triton.jit
def vec_loads(VEC, px, m, rhs_at, mr, N_IN, AWAIT: tl.constexpr, SENT: tl.constexpr, NAP: tl.constexpr,
              PENDING: tl.constexpr = False):
    """(VEC[px] over m, VEC[rhs_at] over mr). With AWAIT, VEC's outputs (positions ≥ N_IN) start
    out holding the sentinel SENT, a signalling-NaN bit pattern that arithmetic never produces,
    and both loads are repeated together until none of the entries read holds it (vec_await):
    each value is its own ready flag, and one round trip brings everything a row waits for.
    Volatile loads go to L2 every time, where the writer's store lands."""
    if AWAIT:
        x, rhs = vec_look(VEC, px, m, rhs_at, mr)
        x, rhs = vec_await(VEC, x, px, m, rhs, rhs_at, mr, N_IN, SENT, NAP, PENDING)
    else:
        x = tl.load(VEC + px, mask=m, other=0.0, cache_modifier=".cg")
        rhs = tl.load(VEC + rhs_at, mask=mr, other=0.0, cache_modifier=".cg")
    return x, rhs


@triton.jit
def vec_look(VEC, px, m, rhs_at, mr):
    """VEC[px] over m and VEC[rhs_at] over mr read once, through L2 (volatile), without waiting:
    what still holds the sentinel is for vec_await to poll."""
    return vec_look_at(VEC + px, m, VEC + rhs_at, mr)


@triton.jit
def vec_look_at(xp, m, rp, mr):
    """vec_look from the addresses of the entries (xp) and right-hand sides (rp)."""
    return (tl.load(xp, mask=m, other=0.0, volatile=True),
            tl.load(rp, mask=mr, other=0.0, volatile=True))


@triton.jit
def vec_await(VEC, x, px, m, rhs, rhs_at, mr, N_IN, SENT: tl.constexpr, NAP: tl.constexpr, PENDING: tl.constexpr):
    """x and rhs, read once from VEC[px] over m and VEC[rhs_at] over mr, read again until none
    holds the sentinel (vec_loads). NAP > 0: sleep that many nanoseconds between polls, leaving
    the SM's load pipeline and L2 to the rows that are running. PENDING: a repeated poll reads
    only the entries that still held the sentinel (an entry is written once, so what arrived
    stays) — fewer loads in flight for long rows, a few more instructions per poll for short
    ones (measured: polls_pending in t3's sparse_fusion)."""
    return vec_await_at(x, VEC + px, px, m, rhs, VEC + rhs_at, rhs_at, mr, N_IN, SENT, NAP, PENDING)


@triton.jit
def vec_await_at(x, xp, px, m, rhs, rp, rhs_at, mr, N_IN, SENT: tl.constexpr, NAP: tl.constexpr,
                 PENDING: tl.constexpr):
    """vec_await from the entries' addresses xp and rp; their VEC positions px and rhs_at say
    which may hold the sentinel (those past the N_IN inputs)."""
    if PENDING:
        wx = _waiting(x, px, m, N_IN, SENT)
        wr = _waiting(rhs, rhs_at, mr, N_IN, SENT)
        while tl.max(wx.to(tl.int32)) + tl.max(wr.to(tl.int32)) != 0:
            x, rhs, wx, wr = _poll_pending(x, xp, px, wx, rhs, rp, rhs_at, wr, N_IN, SENT, NAP)
    else:
        busy = tl.maximum(_pending(x, px, m, N_IN, SENT), _pending(rhs, rhs_at, mr, N_IN, SENT))
        while busy != 0:
            if NAP > 0:
                nap(tl.full([], NAP, tl.int32))
            x = tl.load(xp, mask=m, other=0.0, volatile=True)
            rhs = tl.load(rp, mask=mr, other=0.0, volatile=True)
            busy = tl.maximum(_pending(x, px, m, N_IN, SENT), _pending(rhs, rhs_at, mr, N_IN, SENT))
    return x, rhs


@triton.jit
def vec_await_dot(a, x, xp, px, m, rhs, rp, rhs_at, mr, N_IN, SENT: tl.constexpr, NAP: tl.constexpr = 0):
    """rhs + Σ_k a·x along each row, x and rhs awaited as vec_await_at's PENDING polls await them
    (NAP as there), the sum taken after every poll instead of once after the last: the sum's
    shuffles then run beside the check for what is still pending, not after it."""
    wx = _waiting(x, px, m, N_IN, SENT)
    wr = _waiting(rhs, rhs_at, mr, N_IN, SENT)
    r = rhs + tl.sum(a * x, 1)
    while tl.max(wx.to(tl.int32)) + tl.max(wr.to(tl.int32)) != 0:
        x, rhs, wx, wr = _poll_pending(x, xp, px, wx, rhs, rp, rhs_at, wr, N_IN, SENT, NAP)
        r = rhs + tl.sum(a * x, 1)
    return r


@triton.jit
def _poll_pending(x, xp, px, wx, rhs, rp, rhs_at, wr, N_IN, SENT: tl.constexpr, NAP: tl.constexpr):
    """One poll of vec_await_at's PENDING loop (and vec_await_dot's): after a nap of NAP ns, the
    entries and right-hand sides still pending (wx, wr) read again; returns them with what is
    still pending after it."""
    if NAP > 0:
        nap(tl.full([], NAP, tl.int32))
    x = tl.where(wx, tl.load(xp, mask=wx, other=0.0, volatile=True), x)
    rhs = tl.where(wr, tl.load(rp, mask=wr, other=0.0, volatile=True), rhs)
    return x, rhs, _waiting(x, px, wx, N_IN, SENT), _waiting(rhs, rhs_at, wr, N_IN, SENT)


@triton.jit
def vec_await_entries(x, xp, px, m, N_IN, SENT: tl.constexpr, NAP: tl.constexpr):
    """x, read once from the addresses xp (VEC positions px) over m, read again where it still
    holds the sentinel until none does: vec_await_at's PENDING polls for entries alone (the flat
    records of t3's dataflow executor carry the right-hand side as one more entry)."""
    return vec_await_looking(x, xp, px, m, 0.0, None, False, N_IN, SENT, NAP, LOOK=False)[0]


@triton.jit
def vec_await_looking(x, xp, px, m, y, yp, my, N_IN, SENT: tl.constexpr, NAP: tl.constexpr,
                      LOOK: tl.constexpr = True):
    """(x, y): x awaited as vec_await_entries awaits it, and with LOOK at every poll the entries
    of y over `my` read again without being checked (y itself the load's `other`, as
    vec_relook's), so that the last poll, the one that finds x in, has also issued a load of y:
    where y is written with x (a factor row's operands with its pivot, in one store), y's check
    after it (vec_await_entries) mostly finds y there instead of starting a round trip of its
    own. Without LOOK, y is returned as given (vec_await_entries)."""
    w = _waiting(x, px, m, N_IN, SENT)
    while tl.max(w.to(tl.int32)) != 0:
        if NAP > 0:
            nap(tl.full([], NAP, tl.int32))
        if LOOK:
            y = tl.load(yp, mask=my, other=y, volatile=True)
        x = tl.where(w, tl.load(xp, mask=w, other=0.0, volatile=True), x)
        w = _waiting(x, px, w, N_IN, SENT)
    return x, y


@triton.jit
def vec_relook(x, VEC, px, m, N_IN, SENT: tl.constexpr):
    """x, read from VEC[px] over m, read once more where it still holds the sentinel, without
    waiting: issued while other work runs, the load brings a later value for vec_await_entries.
    x itself is the load's `other`, not a select after it: nothing uses the result until the
    await, so nothing waits for the load before then. On an H200 (2026-12-03, A/B in one
    process, figures/data/ab_relook_d_* and ab_paired_poll_*) the 27-point ILU(0) took 1.807 and
    1.816 ms with it against 1.825–1.826 with the select."""
    w = _waiting(x, px, m, N_IN, SENT)
    return tl.load(VEC + px, mask=w, other=x, volatile=True)


@triton.jit
def val_polled(VAL, at, m, other, SENT: tl.constexpr, NAP: tl.constexpr):
    """VAL[at] over m, read through L2 until none holds the sentinel: a factor entry that another
    row is still computing starts out as SENT (the flag executor's DATA mode), an entry no step
    rewrites holds its final value from the start."""
    x = tl.load(VAL + at, mask=m, other=other, volatile=True)
    return vec_await_entries(x, VAL + at, at, m, 0, SENT, NAP)


@triton.jit
def tail_sum(ok, start, end, rhs_at, ENT_VAL, ENT_VEC, VAL, VEC, CHUNK: tl.constexpr, N_IN, AWAIT: tl.constexpr,
             SENT: tl.constexpr, NAP: tl.constexpr, WIDE: tl.constexpr, PENDING: tl.constexpr = False,
             TRIP_DIV: tl.constexpr = 1, VAL_AWAIT: tl.constexpr = False):
    """Σ a·x over a row's entries past its first CHUNK. Up to 4·CHUNK entries the R rows go side by
    side, CHUNK entries a trip. Past that — a power-law hub's thousands of non-zeros — each such
    row goes alone, 32·CHUNK / TRIP_DIV entries a trip across the whole program: every trip costs
    the same two dependent round trips to memory (positions, then values and vector entries), so
    a hub of 3000 entries takes 12 trips (TRIP_DIV 1) instead of 375. A narrower trip holds fewer
    registers all through the kernel that inlines it (t3's WIDE_TRIP_DIV). WIDE (RowTables.wide:
    some row has more than 4·CHUNK entries) compiles that stage in; where no row needs it the
    kernel stays as it was. A first version checked at run time instead, a reduction after every
    wait, and the grids were slower in the call that measured it (2D Poisson 1.73 against 1.50 ms,
    on a host that was slow too, so the check's share is not known). Where WIDE, one reduction
    now asks whether any of the block's rows takes the stage before its per-row loop runs: that
    loop's reductions, run for every block, had been half the instructions of a power-law block
    that has no hub, and the kernel issues about every other cycle. Measured on the H100
    (2026-11-28, power-law graph, float64, t3 dataflow, sparse-fusion schedule, 3 interleaved
    rounds, figures/data/wide_guard_ab_*), sptrsv_spmv / spmv_sptrsv / sptrsv_sptrsv 0.418 / 0.415
    / 0.467 ms → 0.322 / 0.316 / 0.347; with no poll waiting 0.349 / 0.352 / 0.342 → 0.277 / 0.285
    / 0.262. PENDING: as vec_loads'. VAL_AWAIT: the values too are polled (val_polled)."""
    acc = tl.zeros(start.shape, dtype=VAL.dtype.element_ty)
    if WIDE:
        near = tl.minimum(end, start + 4 * CHUNK)
    else:
        near = end
    for c in range(CHUNK, tl.max(near - start, 0), CHUNK):
        e = start[:, None] + c + tl.arange(0, CHUNK)[None, :]
        me = ok[:, None] & (e < near[:, None])
        pe = tl.load(ENT_VAL + e, mask=me, other=0)
        if VAL_AWAIT:
            ae = tl.load(VAL + pe, mask=me, other=0.0, volatile=True)
        else:
            ae = tl.load(VAL + pe, mask=me, other=0.0, cache_modifier=".cg")
        xe, _ = vec_loads(VEC, tl.load(ENT_VEC + e, mask=me, other=0), me, rhs_at, ok & False, N_IN, AWAIT, SENT,
                          NAP, PENDING)
        if VAL_AWAIT:
            ae = vec_await_entries(ae, VAL + pe, pe, me, 0, SENT, NAP)
        acc += tl.sum(ae * xe, 1)
    if WIDE:
        far = tl.max((ok & (end - start > 4 * CHUNK)).to(tl.int32))
        if far != 0:
            lanes = tl.arange(0, start.shape[0])
            for r in range(start.shape[0]):
                here = ok & (lanes == r)
                lo = tl.sum(tl.where(here, start, 0)) + 4 * CHUNK
                hi = tl.sum(tl.where(here, end, 0))
                part = tl.zeros([32 * CHUNK // TRIP_DIV], dtype=VAL.dtype.element_ty)
                for c in range(lo, hi, 32 * CHUNK // TRIP_DIV):
                    e = c + tl.arange(0, 32 * CHUNK // TRIP_DIV)
                    me = e < hi
                    if VAL_AWAIT:
                        ae = val_polled(VAL, tl.load(ENT_VAL + e, mask=me, other=0), me, 0.0, SENT, NAP)
                    else:
                        ae = tl.load(VAL + tl.load(ENT_VAL + e, mask=me, other=0), mask=me, other=0.0,
                                     cache_modifier=".cg")
                    xe, _ = vec_loads(VEC, tl.load(ENT_VEC + e, mask=me, other=0), me, rhs_at, ok & False, N_IN,
                                      AWAIT, SENT, NAP, PENDING)
                    part += ae * xe
                acc += tl.where(lanes == r, tl.sum(part), 0.0)
    return acc


@triton.jit
def affine_finish(ok, start, end, m, pv, px, a, rhs_at, diag_at, d, sign, dst, ENT_VAL, ENT_VEC, VAL, VEC,
                  STATIC: tl.constexpr, CHUNK: tl.constexpr, N_IN, AWAIT: tl.constexpr, SENT: tl.constexpr,
                  NAP: tl.constexpr, WIDE: tl.constexpr, VAL_AWAIT: tl.constexpr = False):
    """dst = (rhs + σ·Σ a·x) / d from what affine_fetch read. AWAIT: the vector entries are
    read by vec_loads' wait; VAL_AWAIT: the values too (val_polled: a solve row reading a factor
    row that another block computes)."""
    if VAL_AWAIT:                      # issued with the vector's loads, awaited after them
        a = tl.load(VAL + pv, mask=m, other=0.0, volatile=True)
        d = tl.load(VAL + diag_at, mask=ok & (diag_at >= 0), other=1.0, volatile=True)
    elif not STATIC:
        a = tl.load(VAL + pv, mask=m, other=0.0, cache_modifier=".cg")
        d = tl.load(VAL + diag_at, mask=ok & (diag_at >= 0), other=1.0, cache_modifier=".cg")
    x, rhs = vec_loads(VEC, px, m, rhs_at, ok & (rhs_at >= 0), N_IN, AWAIT, SENT, NAP)
    if VAL_AWAIT:
        a = vec_await_entries(a, VAL + pv, pv, m, 0, SENT, NAP)
        d = vec_await_entries(d, VAL + diag_at, diag_at, ok & (diag_at >= 0), 0, SENT, NAP)
    acc = tl.sum(a * x, 1) + tail_sum(ok, start, end, rhs_at, ENT_VAL, ENT_VEC, VAL, VEC, CHUNK, N_IN, AWAIT,
                                      SENT, NAP, WIDE, VAL_AWAIT=VAL_AWAIT)
    tl.store(VEC + dst, _div(rhs + sign * acc, d), mask=ok)


@triton.jit
def affine_step(ok, start, end, m, px, a, rhs_at, d, sign, dst, prev_dst, prev_val, ENT_VAL, ENT_VEC, VAL, VEC,
                CHUNK: tl.constexpr, N_IN, SENT: tl.constexpr, NAP: tl.constexpr, WIDE: tl.constexpr):
    """One step of R chains (static values, awaited vector entries): like affine_finish, but an
    entry that the lane's previous step wrote (prev_dst) is taken from that step's value
    (prev_val) instead of being read back, so a link of a chain costs no round trip to L2.
    Returns the values written."""
    own = px == prev_dst[:, None]
    x, rhs = vec_loads(VEC, px, m & ~own, rhs_at, ok & (rhs_at >= 0), N_IN, True, SENT, NAP)
    x = tl.where(own, prev_val[:, None], x)
    acc = tl.sum(a * x, 1) + tail_sum(ok, start, end, rhs_at, ENT_VAL, ENT_VEC, VAL, VEC, CHUNK, N_IN, True,
                                      SENT, NAP, WIDE)
    val = _div(rhs + sign * acc, d)
    tl.store(VEC + dst, val, mask=ok)
    return val


@triton.jit
def affine_link(ok, start, end, m, px, a, rhs_at, d, sign, prev_dst, ENT_VAL, ENT_VEC, VAL, VEC,
                CHUNK: tl.constexpr, N_IN, SENT: tl.constexpr, NAP: tl.constexpr, WIDE: tl.constexpr):
    """(α, β, h) of R iterations (static values, awaited vector entries) whose entry that reads
    prev_dst — the output of the link before, which the same program is about to compute — is
    left open: dst = α + β·VEC[prev_dst]; h = 1 where no entry reads it (β = 0, and the link
    ignores VEC[prev_dst] even where it is NaN). The other entries are awaited as in
    affine_finish; prev_dst must lie among the first CHUNK entries."""
    own = m & (px == prev_dst[:, None])
    x, rhs = vec_loads(VEC, px, m & ~own, rhs_at, ok & (rhs_at >= 0), N_IN, True, SENT, NAP)
    acc = tl.sum(a * x, 1) + tail_sum(ok, start, end, rhs_at, ENT_VAL, ENT_VEC, VAL, VEC, CHUNK, N_IN, True,
                                      SENT, NAP, WIDE)
    head = tl.sum(own.to(tl.int32), 1) == 0
    return _div(rhs + sign * acc, d), _div(sign * tl.sum(tl.where(own, a, 0.0), 1), d), head.to(tl.int32)


@triton.jit
def affine_rows(v, ok, ENT_PTR, ENT_VAL, ENT_VEC, RHS, DIAG, SIGN, DST, VAL, VEC,
                STATIC: tl.constexpr, CHUNK: tl.constexpr, WIDE: tl.constexpr):
    """Affine iterations v[ok] (an [R] vector), fetched and finished in one go."""
    start, end, m, pv, px, a, rhs_at, diag_at, d, sign, dst = affine_fetch(
        v, ok, ENT_PTR, ENT_VAL, ENT_VEC, RHS, DIAG, SIGN, DST, VAL, STATIC, CHUNK)
    affine_finish(ok, start, end, m, pv, px, a, rhs_at, diag_at, d, sign, dst, ENT_VAL, ENT_VEC, VAL, VEC,
                  STATIC, CHUNK, 0, False, 0, 0, WIDE)


@triton.jit
def _own_or_polled(OWN, VAL, q, m, r0, r1, SENT: tl.constexpr, NAP: tl.constexpr):
    """Factor entries q over m: from OWN where they lie in the lane's own row [r0, r1), else
    polled from VAL (factor_rows' DATA mode)."""
    own = m & (q >= r0[:, None]) & (q < r1[:, None])
    mine = tl.load(OWN + q, mask=own, other=0.0, cache_modifier=".cg")
    return tl.where(own, mine, val_polled(VAL, q, m & ~own, 0.0, SENT, NAP))


@triton.jit
def factor_rows(v, ok, ENT_PTR, ENT_VAL, ENT_AUX, UPD_PTR, UPD_A, UPD_B, VAL,
                FACTOR: tl.constexpr, CHUNK: tl.constexpr, OWN, FAC_PTR, DATA: tl.constexpr = False,
                SENT: tl.constexpr = 0, NAP: tl.constexpr = 0):
    """ILU(0) (FACTOR = 1) or IC(0) (FACTOR = 2) rows v[ok] in place on VAL, their steps in
    lockstep across the R lanes. Step s of a row handles its s-th entry p = ENT_VAL[e]:

      ILU  p = (i, k):  a_p ← a_p / VAL[aux]  (aux: u_kk),  then VAL[UPD_A[t]] −= a_p · VAL[UPD_B[t]]
      IC   p = (i, j):  a_p ← (a_p − Σ_t VAL[UPD_A[t]] · VAL[UPD_B[t]]) / VAL[aux]  (aux: l_jj),
                        or √(a_p − Σ …) on the diagonal (aux = −1)

    with t over UPD_PTR[p]..UPD_PTR[p+1] (tiers/sparse_dags.py builds both lists). A step writes
    entries of its row that the next step reads, so every step ends at a barrier: afterwards
    the whole program sees the row as it now is. Each read-then-overwrite of an entry also has a
    barrier between the two: with more threads than a tensor has elements, Triton gives each
    element to several threads (in different warps), and one warp's store must not land before
    another warp's copy of the load. Without these barriers multi-warp programs raced: the flag
    executor on 27-point ILU(0) at R = 16 with 2 or 4 warps was right in 0 of 6 runs (H100,
    2026-11-25), and t2 (2 warps at R = 32) got the power-law graph's ILU(0) wrong; with them
    every such run was right (H200, 2026-11-26, figures/data/race_fix_*). Lanes never touch
    each other's rows: the executors only put independent iterations side by side.

    OWN is VAL, except in DATA mode (t3's flag executor with the values as flags): there VAL is
    the factor as the other rows see it, each entry a step rewrites holding the sentinel SENT
    until its row is done, and OWN a copy of A's values in which each row is worked on; the
    entries of other rows are polled from VAL (val_polled), and the finished row is copied from
    OWN to VAL at the end, CHUNK entries a trip. Tried, not kept (2026-12-06, H200, A/B in one
    process, figures/data/copy_trip_ab_*): that copy in trips of 128 or 512 entries, since the
    power-law graph's largest hub (3 034 entries) takes 380 trips and up to 22 walked rows lie on
    one chain of its ILU(0): 0.97 → 1.18 / 1.63 ms (float32 0.82 → 0.95 / 1.21). Each trip was
    [R, trip] wide, and compiled for sm_90 (Triton 3.6, on the CPU) at that graph's blocks of 8
    rows the kernel spilled at its cap of 112 registers: 88 and 1 256 bytes of stack, against
    none. One lane at a time, 128 entries a trip, spilled nothing and still lost (H200,
    lane_copy_ab_*: 0.99 → 1.11 ms), and so did copying only the entries the row's steps rewrite
    (the largest hub's 39, not 3 034; H100, rew_copy_ab_*: 1.00 → 1.01 ms). Stamped (H100,
    2026-12-06, docs/sparse_fusion_log.md), the copy does hold the hub chain: with it, hub row 1's
    block (2 585 entries) is done at 129 µs and hub rows 0–12 at 192 µs
    (stamps_powerlaw_fuse_h100_*); without it, at 58.5 µs, about 4.6 µs a hop
    (stamps_powerlaw_ilu_h100_*). The chain then goes on through blocks of walked hub rows, and the
    slots stay full of blocks waiting on it, which may be why the kernel was no faster."""
    start = tl.load(ENT_PTR + v, mask=ok, other=0)
    end = tl.load(ENT_PTR + v + 1, mask=ok, other=0)
    if DATA:
        r0 = tl.load(FAC_PTR + v, mask=ok, other=0)
        r1 = tl.load(FAC_PTR + v + 1, mask=ok, other=0)
    for s in range(0, tl.max(end - start, 0)):
        e = start + s
        m = ok & (e < end)
        p = tl.load(ENT_VAL + e, mask=m, other=0)
        aux = tl.load(ENT_AUX + e, mask=m, other=-1)
        u0 = tl.load(UPD_PTR + p, mask=m, other=0)
        u1 = tl.load(UPD_PTR + p + 1, mask=m, other=0)
        a_p = tl.load(OWN + p, mask=m, other=0.0, cache_modifier=".cg")
        if DATA:
            pivot = val_polled(VAL, aux, m & (aux >= 0), 1.0, SENT, NAP)
        else:
            pivot = tl.load(VAL + aux, mask=m & (aux >= 0), other=1.0, cache_modifier=".cg")
        if FACTOR == 1:
            lik = _div(a_p, pivot)
            tl.debug_barrier()         # every thread's copy of a_p read before it is overwritten
            tl.store(OWN + p, lik, mask=m)
            for c in range(0, tl.max(u1 - u0, 0), CHUNK):
                q = u0[:, None] + c + tl.arange(0, CHUNK)[None, :]
                mm = m[:, None] & (q < u1[:, None])
                tgt = tl.load(UPD_A + q, mask=mm, other=0)
                src = tl.load(UPD_B + q, mask=mm, other=0)
                a = tl.load(OWN + tgt, mask=mm, other=0.0, cache_modifier=".cg")     # row i's own
                if DATA:
                    b = val_polled(VAL, src, mm, 0.0, SENT, NAP)                       # row k's
                else:
                    b = tl.load(VAL + src, mask=mm, other=0.0, cache_modifier=".cg")
                tl.debug_barrier()
                tl.store(OWN + tgt, a - lik[:, None] * b, mask=mm)
        else:
            acc = tl.zeros_like(a_p)
            for c in range(0, tl.max(u1 - u0, 0), CHUNK):
                q = u0[:, None] + c + tl.arange(0, CHUNK)[None, :]
                mm = m[:, None] & (q < u1[:, None])
                qa = tl.load(UPD_A + q, mask=mm, other=0)
                qb = tl.load(UPD_B + q, mask=mm, other=0)
                if DATA:      # l_ik is row i's own, l_jk row j's (row i's too on the diagonal)
                    a = _own_or_polled(OWN, VAL, qa, mm, r0, r1, SENT, NAP)
                    b = _own_or_polled(OWN, VAL, qb, mm, r0, r1, SENT, NAP)
                else:
                    a = tl.load(VAL + qa, mask=mm, other=0.0, cache_modifier=".cg")
                    b = tl.load(VAL + qb, mask=mm, other=0.0, cache_modifier=".cg")
                acc += tl.sum(a * b, 1)
            rest = a_p - acc
            # a non-positive pivot is stored as it is, for the wrapper to report after the run
            root = _sqrt(tl.where((aux < 0) & (rest > 0), rest, 1.0))
            tl.debug_barrier()
            tl.store(OWN + p, tl.where(aux >= 0, _div(rest, pivot), tl.where(rest > 0, root, rest)), mask=m)
        tl.debug_barrier()
    if DATA:                           # the finished rows, for the rows that wait on them
        for c in range(0, tl.max(r1 - r0, 0), CHUNK):
            q = r0[:, None] + c + tl.arange(0, CHUNK)[None, :]
            mq = ok[:, None] & (q < r1[:, None])
            tl.store(VAL + q, tl.load(OWN + q, mask=mq, other=0.0, cache_modifier=".cg"), mask=mq)
        tl.debug_barrier()


GRID_WORK = 8
"""Held rows whose shape does more than this much one-hot work a row (S · C · W) take their
pairs as a grid, the others as a list (held_fetch). Measured on an H200 (2026-11-29, float64,
natural order, A/B in one call against the list, 3 interleaved rounds, every output checked
first, figures/data/grid_ab_*), list → grid, sparse-fusion / wavefront schedule, ms: 27-point
64³ ILU(0) (8192) 5.43 → 3.44 / 5.20 → 3.22 on the flag executor, 3.12 / 3.58 on the dataflow
executor; IC(0) (4096) 4.97 → 3.49 / 6.60 → 3.20, 2.55 / 2.61 on the dataflow executor (cuSPARSE
3.44 / 3.47 in the same rounds). Compiled for sm_90 with Triton 3.6, the ILU(0) step loop went
from 408 instructions (107 shuffles) to 134 (22), IC(0)'s from 326 to 84. On the small shapes the
grid's loads, twice the list's, cost more than the one-hot work saved: power-law (1M nodes) ILU(0)
(8 · 4 · 2 = 64) 1.35 → 1.72, 2D IC(0) (32) 2.57 → 2.85, 3D ILU(0) (32) 1.11 → 1.18; 2D ILU(0) (16)
2.53 → 2.37, 3D IC(0) (64) 1.36 → 1.13, power-law IC(0) (64) 1.33 → 1.30. The bound was 1024 then.
Since the steps on a grid are unrolled (held_steps) and the grid is gathered with the steps in
each thread's registers ([W, R, S]: entries and rows across the threads; before, a block of 8
rows of 4 entries spread its steps across the threads too, and every step summed across them),
the small shapes take the grid as well. On an H200 (2026-12-02, float64 unless said, natural
order, sparse-fusion schedule, A/B in one process against aacb21b's list, 5 rotated rounds,
every output checked first, figures/data/ab_grid_b_*), list → grid, ms: 3D ILU(0) (4 · 4 · 2)
0.845 → 0.687, float32 0.68 → 0.60, IC(0) (4 · 4 · 4) 0.816 → 0.651; 2D ILU(0) (4 · 2 · 2) 2.52 →
2.05, IC(0) (4 · 4 · 2) 2.51 → 2.23; power-law IC(0) (4 · 4 · 4) 0.852 → 0.783; power-law ILU(0)
(8 · 4 · 2) 1.27 → 1.31, not staged (1.45 staged, may_stage in t3; figures/data/ab_grid_c_*). The
27-point grid's kernels are unchanged (the same SASS). Rows within 8 (one step of one pair over
two entries, an arrow's) keep the list: nothing that small was measured."""


def within_held_work(shape) -> tuple:
    """shape (W, S, C) if its step work S · C · W is within HELD_WORK, else (0, 0, 0): every row
    walks (RowTables.held_shape)."""
    W, S, C = shape
    return (W, S, C) if S * C * W <= HELD_WORK else (0, 0, 0)


@triton.constexpr_function
def _grid(W, S, C):
    """Whether held rows of shape (W, S, C) take their pairs as a grid (GRID_WORK): the one rule,
    which the kernels ask from their constexprs and the host through grid_layout."""
    return S * C * W > GRID_WORK


@triton.constexpr_function
def _across(W, S, C, FACTOR, APART):
    """Whether held IC(0) rows of shape (W, S, C) take their grid steps first and run right-looking
    (held_steps' ACROSS): a grid with W = S, not in one pass (APART); the host asks reads_across."""
    return _grid(W, S, C) and FACTOR == IC and not APART and W == S


def grid_layout(shape) -> bool:
    """_grid of a held shape (W, S, C), on the host."""
    return _grid(*shape)


def reads_across(shape, factor, apart=False) -> bool:
    """_across of a held shape (W, S, C), on the host."""
    return _across(*shape, factor, apart)


@triton.jit
def _ones(x, WIDE: tl.constexpr):
    """The set bits of each integer in x (int64 if WIDE, else int32), by pairs, nibbles and bytes:
    elementwise, so the [W, S, R] tensors keep the layout the steps want (a scan along W made
    Triton 3.6 spread S across threads, and every step's pick of its operands then went through
    shuffles)."""
    if WIDE:
        x = x - ((x >> 1) & 0x5555555555555555)
        x = (x & 0x3333333333333333) + ((x >> 2) & 0x3333333333333333)
        x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0F
        return ((x * 0x0101010101010101) >> 56).to(tl.int32)
    else:
        x = x - ((x >> 1) & 0x55555555)
        x = (x & 0x33333333) + ((x >> 2) & 0x33333333)
        x = (x + (x >> 4)) & 0x0F0F0F0F
        return (x * 0x01010101) >> 24


@triton.jit
def held_fetch(v, ok, FAC_PTR, HOLD_LEN, ENT_PTR, ENT_VAL, ENT_AUX, UPD_PTR, UPD_A, UPD_B, STEP_BITS,
               W: tl.constexpr, S: tl.constexpr, C: tl.constexpr, FACTOR: tl.constexpr = 0,
               APART: tl.constexpr = False, U0=None, lanes=None, first=None, last=None, held=None, SREC=None,
               base=None):
    """Which factor rows v[ok] are held, and the positions a held one works on, none of which
    another iteration writes: its first HOLD_LEN[v] entries (an [R, W] window from FAC_PTR[v],
    RowTables.hold_len), its steps ([R, S]: local index of the entry, pivot position) and the
    other operand of each of their update pairs. W, S, C: powers of two at least the held rows'
    most entries held, most steps and most pairs of one step (RowTables.held). A row is held when
    it holds entries or has no steps (it holds nothing and changes nothing, but a solve fused with
    it runs from the held path); the others walk in memory (factor_rows).

    The pairs come in one of two layouts (GRID_WORK):
      list  ([R, S, C] each: local index of the pair's entry in this row, −1 where a step has
            fewer pairs; position of the other operand): compact; a step finds its pairs' entries
            by one-hot masks over [C, W] (held_finish);
      grid  ([W, R, S]: for entry j and step s, the position of the operand step s pairs with
            entry j, −1 where none): a step's operands are its own slice. A step's pairs are
            listed in the order of their entries and STEP_BITS says which entries they are
            (RowTables.step_bits), so the pair of entry j is the one after as many pairs as the
            step has bits below j. Gathered entries, then rows, then steps: Triton 3.6 spreads a
            gather's leading dimensions across the threads, and the steps want each thread to hold
            one entry of one row and all its steps in registers (held_finish permutes it to [R, S,
            W]; [W, S, R] spread the steps of a block of 8 rows of 4 entries across the threads).
            IC(0)'s grid read across (ACROSS, reads_across; FACTOR and APART as held_finish takes
            them): steps first, [S, R, W], so that each thread holds one step's operands of every
            entry (permuted to [R, W, S]).

    Each round of these loads waits for the one before (seven rounds from a block's ticket took
    3.9 µs on the 27-point grid's critical path, stamped on an H200). With U0 (t3's
    fetches_short: each factor step's first pair, UPD_PTR[ENT_VAL[e]]) the pairs' positions load
    one round after the steps' instead of two, and the row's span loads for every lane with a
    row (`lanes`, factor row or not; HOLD_LEN covers every row on the device, device_tables)
    beside the read of its kind instead of after it. `first`, `last`, `held`: ENT_PTR[v],
    ENT_PTR[v + 1] and HOLD_LEN[v] already read for every lane with a row (a block's record,
    t3's BLK_REC), one round fewer again. SREC (grid layout, W ≤ 32): the block's step record,
    [4, R, S] — each lane's steps' ENT_VAL, ENT_AUX, U0 and STEP_BITS — read in the round of the
    block's record instead of after it (t3's STEP_REC); `base`, FAC_PTR[v] already read (t3's
    FUSE_REC)."""
    idx = ok if U0 is None else lanes
    if first is None:
        start = tl.load(ENT_PTR + v, mask=idx, other=0)
        end = tl.load(ENT_PTR + v + 1, mask=idx, other=0)
        span = tl.load(HOLD_LEN + v, mask=idx, other=0)
    else:
        start = tl.where(idx, first, 0)
        end = tl.where(idx, last, 0)
        span = tl.where(idx, held, 0)
    hold = ok & ((span > 0) | (end == start))
    if base is None:
        row0 = tl.load(FAC_PTR + v, mask=hold, other=0)
    else:
        row0 = tl.where(hold, base, 0)
    at = row0[:, None] + tl.arange(0, W)[None, :]
    inrow = hold[:, None] & (tl.arange(0, W)[None, :] < span[:, None])
    e = start[:, None] + tl.arange(0, S)[None, :]
    sm = hold[:, None] & (e < end[:, None])
    GRID: tl.constexpr = _grid(W, S, C)
    ACROSS: tl.constexpr = _across(W, S, C, FACTOR, APART)
    if SREC is None:
        p = tl.load(ENT_VAL + e, mask=sm, other=0)
        aux = tl.load(ENT_AUX + e, mask=sm, other=-1)
        if U0 is None:
            u0 = tl.load(UPD_PTR + p, mask=sm, other=0)
        else:
            u0 = tl.load(U0 + e, mask=sm, other=0)
        if GRID:
            bits2 = tl.load(STEP_BITS + e, mask=sm, other=0)
    else:
        tl.static_assert(GRID and W <= 32, "a step record holds the grid's bits in 32")
        RS: tl.constexpr = v.shape[0] * S
        rs = tl.arange(0, v.shape[0])[:, None] * S + tl.arange(0, S)[None, :]
        p = tl.load(SREC + rs, mask=sm, other=0)
        aux = tl.load(SREC + RS + rs, mask=sm, other=-1)
        u0 = tl.load(SREC + 2 * RS + rs, mask=sm, other=0)
        bits2 = tl.load(SREC + 3 * RS + rs, mask=sm, other=0)
    if GRID:
        if ACROSS:                     # the steps first, so that the threads spread them: [S, R, W]
            bits = tl.trans(bits2)[:, :, None]
            j = tl.arange(0, W)[None, None, :]
        else:
            bits = bits2[None, :, :]
            j = tl.arange(0, W)[:, None, None]
        if W <= 32:                    # the bits fit 32 (bit 31 the sign: shifts right are arithmetic, masked)
            bits = bits.to(tl.int32)
        else:
            j = j.to(tl.int64)
        pair = ((bits >> j) & 1) != 0                                   # [W, R, S] ([S, R, W] ACROSS)
        nth = _ones(bits & ((tl.full(j.shape, 1, j.dtype) << j) - 1), W > 32)   # the pair's place in its step's list
        if ACROSS:
            other = tl.load(UPD_B + tl.trans(u0)[:, :, None] + nth, mask=pair, other=-1)
        else:
            other = tl.load(UPD_B + u0[None, :, :] + nth, mask=pair, other=-1)
        mine = other                   # the grid says it by where each position lies
    else:
        u1 = tl.load(UPD_PTR + p + 1, mask=sm, other=0)
        t = u0[:, :, None] + tl.arange(0, C)[None, None, :]
        tm = sm[:, :, None] & (t < u1[:, :, None])
        mine = tl.where(tm, tl.load(UPD_A + t, mask=tm, other=0) - row0[:, None, None], -1)   # −1: no pair
        other = tl.load(UPD_B + t, mask=tm, other=-1)
    steps = tl.max(tl.where(hold, end - start, 0), 0)
    return hold, at, inrow, steps, sm, p - row0[:, None], aux, mine, other, row0


@triton.jit
def _pick(x, sel, axis: tl.constexpr):
    """x's slice along `axis` where the one-hot `sel` holds: indexing by a run-time position,
    which registers cannot do directly."""
    return tl.sum(tl.where(sel, x, tl.zeros_like(x)), axis)


@triton.jit
def _step_slice(x, s: tl.constexpr, S: tl.constexpr):
    """x[:, s, :] of a 3-D tensor whose middle axis is S long, at an s known when compiling: a
    _pick the compiler folds to the registers that hold it (its one-hot sum has nothing to add)."""
    return _pick(x, (tl.arange(0, S) == s)[None, :, None], 1)


@triton.jit
def _step_bits(pm, S: tl.constexpr):
    """[R] integers whose bit s says that step s of the row is live (pm, [R, S]): each unrolled
    step tests its bit instead of picking along the steps."""
    step = tl.arange(0, S)
    one = tl.full([1, S], 1, tl.int64 if S > 32 else tl.int32)
    return tl.sum(tl.where(pm, one << step[None, :].to(one.dtype), 0), 1)


@triton.jit
def held_steps(w, ext, piv, pm, loc, mine, lo, hi, FACTOR: tl.constexpr, W: tl.constexpr, S: tl.constexpr,
               C: tl.constexpr, RECIP: tl.constexpr, APART: tl.constexpr):
    """held_finish's steps lo ≤ s < hi of the held rows w ([R, W]) whose steps pm ([R, S]) holds,
    from the other operands of their pairs (ext: [R, S, W] as a grid, [R, W, S] as IC(0)'s grid
    read across, [R, S, C] as a list) and their pivots (piv, [R, S]: their reciprocals with
    RECIP), all read: returns w after them. Every step live here lies within lo ≤ s < hi."""
    GRID: tl.constexpr = _grid(W, S, C)
    ACROSS: tl.constexpr = _across(W, S, C, FACTOR, APART)
    cols = tl.arange(0, W)
    if APART:                          # IC(0) only: every off-diagonal step at once, then the diagonal
        tl.static_assert(FACTOR == 2 and RECIP, "held_finish: APART is IC(0)'s, from the reciprocals")
        at_step = pm[:, :, None] & (loc[:, :, None] == cols[None, None, :])              # [R, S, W]
        if GRID:                       # ext is 0 at each step's own entry: one sum gives a − Σ
            lik = tl.sum(tl.where(at_step, w[:, None, :], -w[:, None, :] * ext), 2) * piv
        else:
            a = tl.sum(tl.where(at_step, w[:, None, :], 0.0), 2)                          # [R, S]
            onto = mine[:, :, :, None] == cols[None, None, None, :]                       # [R, S, C, W]
            ops = tl.sum(tl.where(onto, w[:, None, None, :], 0.0), 3)                     # [R, S, C]
            lik = (a - tl.sum(ops * ext, 2)) * piv
        stepped = tl.max(at_step.to(tl.int32), 1) > 0
        w = tl.where(stepped, tl.sum(tl.where(at_step, lik[:, :, None], 0.0), 1), w)
    elif GRID and FACTOR == 1:         # ILU: step s is entry s of the row (its steps are its leading entries)
        # Unrolled, so that each step's slice of the grid is known when compiling and lies in the
        # registers that hold it: what stays on the chain of steps is w[s], one lane's value sent
        # to every lane (a gather along the row: one shuffle, where the loop below sums a one-hot
        # row across the warp in five). With reciprocals the grid is scaled by them once, the
        # pivot's own at the step's own entry (where b is 0), so a step reads no pivot:
        #   e[s, j] = b[s, j] / pivot_s,  e[s, s] = 1 / pivot_s;  w[s] ← w[s]·e[s, s],  w[j] −= w[s]·e[s, j]
        # (the product w[s]·b[s, j]/pivot_s rounded in another order than (w[s]/pivot_s)·b[s, j]).
        step = tl.arange(0, S)
        live_bits = _step_bits(pm, S)
        if RECIP:
            own = step[None, :, None] == cols[None, None, :]
            ext = tl.where(own, piv[:, :, None] + tl.zeros_like(ext), ext * piv[:, :, None])
        for s in tl.static_range(S):
            if (hi > s) & (lo <= s):
                live = ((live_bits >> s) & 1 != 0)[:, None]                         # [R, 1]
                hit = (cols[None, :] == s) & live
                e = _step_slice(ext, s, S)                                          # [R, W]
                a_s = tl.gather(w, tl.full(w.shape, s, tl.int32), 1)                # w[:, s] in every lane
                if RECIP:
                    w = tl.where(hit, a_s * e, tl.where(live, w - a_s * e, w))
                else:
                    lik = _div(a_s, _pick(piv, step[None, :] == s, 1)[:, None])
                    w = tl.where(hit, lik, tl.where(live, w - lik * e, w))
    elif ACROSS:                       # IC, right-looking: each step, once done, updates the steps after it
        # Unrolled as ILU's above. IC's own form, w[s] = (w[s] − Σ_{j<s} w[j]·b[s, j]) / pivot_s,
        # keeps a sum across the row on the chain of steps (unrolled so, the 27-point IC(0) was 9 %
        # slower: figures/data/ab_steps_*). Instead, once w[t] is done it is sent to every lane and
        # lane s takes its own term, w[s] −= w[t]·b[s, t]: the grid read across (bt[t, s] = b[s, t],
        # which lane s holds; held_fetch gathers it so), one shuffle and one multiply-add a step. A
        # step done in an earlier call (STAGED: not live here) still brings its terms to the steps
        # live here. The sums' order changes: each term is subtracted as its step ends.
        tl.static_assert(RECIP, "held_steps: IC's steps multiply by the pivots' reciprocals")
        bt = ext                       # [R, W, S]: bt[r, t, s] = b[s, t], the steps spread across the threads
        live_bits = _step_bits(pm, S)
        ahead = ((live_bits[:, None] >> cols[None, :].to(live_bits.dtype)) & 1) != 0    # [R, W]: entry s live here
        for t in tl.static_range(S):
            if hi > t:
                live = ((live_bits >> t) & 1 != 0)[:, None]                             # [R, 1]
                a_t = tl.gather(w, tl.full(w.shape, t, tl.int32), 1)                    # w[:, t] in every lane
                x = tl.where(live, a_t * tl.gather(piv, tl.full(piv.shape, t, tl.int32), 1), a_t)
                w = tl.where(live & (cols[None, :] == t), x,
                             tl.where(ahead & (cols[None, :] > t), w - x * _step_slice(bt, t, W), w))
    elif GRID:                         # IC whose grid is not read across (W ≠ S): step s is entry s
        for s in range(lo, hi):
            here = tl.arange(0, S)[None, :] == s
            live = tl.max((pm & here).to(tl.int32), 1) > 0                      # [R]
            hit = (cols[None, :] == s) & live[:, None]
            b = _pick(ext, here[:, :, None], 1)                                # [R, W]
            if FACTOR == 1:
                a_s = _pick(w, hit, 1)
                if RECIP:
                    lik = a_s * _pick(piv, here, 1)
                else:
                    lik = _div(a_s, _pick(piv, here, 1))
                w = tl.where(hit, lik[:, None], w - lik[:, None] * b)
            else:                      # b is 0 at the step's own entry: one sum gives w[s] − Σ_j w[j]·b[j]
                r = tl.sum(tl.where(hit, w, -w * b), 1)
                if RECIP:
                    r = r * _pick(piv, here, 1)
                else:
                    r = _div(r, _pick(piv, here, 1))
                w = tl.where(hit, r[:, None], w)
    else:
        for s in range(lo, hi):
            here = tl.arange(0, S)[None, :] == s
            h3 = here[:, :, None]
            live = tl.max((pm & here).to(tl.int32), 1) > 0                      # [R]
            hit = (cols[None, :] == _pick(loc, here, 1)[:, None]) & live[:, None]
            a_s = _pick(w, hit, 1)
            # the step's pairs: [R, C] local positions (−1: none), as one-hot rows over the W entries
            onto = _pick(mine, h3, 1)[:, :, None] == cols[None, None, :]          # [R, C, W]
            b = _pick(ext, h3, 1)
            if FACTOR == 1:
                if RECIP:
                    lik = a_s * _pick(piv, here, 1)
                else:
                    lik = _div(a_s, _pick(piv, here, 1))
                upd = tl.sum(tl.where(onto, b[:, :, None], 0.0), 1)
                hitn = tl.max(onto.to(tl.int32), 1) > 0
                w = tl.where(hit, lik[:, None], tl.where(hitn, w - lik[:, None] * upd, w))
            else:
                r = a_s - tl.sum(tl.sum(tl.where(onto, w[:, None, :], 0.0), 2) * b, 1)
                if RECIP:
                    r = r * _pick(piv, here, 1)
                else:
                    r = _div(r, _pick(piv, here, 1))
                w = tl.where(hit, r[:, None], w)
    return w


@triton.jit
def held_finish(at, inrow, steps, sm, loc, aux, mine, other, row0, VAL, FACTOR: tl.constexpr,
                W: tl.constexpr, S: tl.constexpr, C: tl.constexpr, OWN, DATA: tl.constexpr = False,
                SENT: tl.constexpr = 0, NAP: tl.constexpr = 0, APART: tl.constexpr = False, late=0,
                STAGED: tl.constexpr = False, x=0.0, VEC=None, x_at=0, N_IN=0, LOOK: tl.constexpr = False,
                LOOK_LATE: tl.constexpr = False):
    """factor_rows' steps on registers, for rows fetched by held_fetch whose dependences are done:
    one round of loads (the entries held, the pivots, the other operand of every pair: entries of
    finished rows), the steps, one store; returns the held entries as they end ([R, W]) and x. ILU:
    l = w[k] / pivot, then w[j] −= l · u_kj for the step's pairs. IC: w[j] = (w[j] − Σ w[k] ·
    l_jk) / pivot for j < i. With the pairs as a list a step picks them out of the row by one-hot
    masks over [C, W]; with the grid (GRID_WORK) the operands lie at their entries, b[s, j], so a
    step is one exchange across the row (ILU's pick of w[s], IC's sum) and elementwise work:
      ILU  l = w[s] / pivot;  w[j] −= l · b[s, j]          (b[s, j] = u_kj; 0 off the step's pairs)
      IC   w[s] = (w[s] − Σ_j w[j] · b[s, j]) / pivot      (b[s, j] = l_sj for the entries j < s)
    With the grid the steps are unrolled (held_steps): ILU's w[s] goes to every lane by one
    shuffle, and IC where W = S runs right-looking, each finished w[t] sent to every lane and taken
    off the steps after it (ACROSS), so no sum across the row lies on the chain of steps.
    The diagonal step, always the row's last, pairs every other entry of the row with itself,
    l_ii = √(a_ii − Σ_k w[k]²): a sum over the row, not a second one-hot gather of its pairs from
    registers (which every step paid for before: 27-point IC(0) then took 1.75× ILU(0)'s time),
    and it runs once, after the loop: a step of the loop neither sums the squares nor takes a
    square root. IC(0), and ILU(0) in DATA mode, take every pivot's reciprocal at once before the
    loop, so that a step multiplies and no division lies on the chain of steps (one rounding more
    than a / b). ILU(0) with flags divides in the step: on the 27-point grid, then the one default
    case of that path, the reciprocals made it 33 % slower, for reasons not found
    (figures/data/held_steps_ab_*). The loop runs the steps that have a pivot (pm): all of ILU(0)'s,
    all of IC(0)'s but the diagonal. DATA (factor_rows' DATA mode): the row from OWN, the pivots and
    the other operands polled from VAL, all issued before any is awaited. APART (IC(0) whose
    steps are apart, RowTables.steps_apart, as on the 5- and 7-point grids; t3's
    held_in_one_pass): the off-diagonal steps at once, one pass over [R, S, C, W] (list) or
    [R, S, W] (grid) instead of a loop. STAGED (DATA only, not APART; late: each lane's first late
    step, late_steps): the steps before a row's late step wait only for their own operands and
    run while the rows it reads last are still at work; the late step and those after it wait for
    the rest (held_steps). Returns (w, x): LOOK (with STAGED; t3's relooks) reads x's entries that
    still hold the sentinel (the solve's x_j, VEC[x_at]) once more after the late operands are
    in, without waiting; else x as given. LOOK_LATE (with STAGED; t3's looks_late): while the late
    pivots are polled, every poll also reads the late operands again, unchecked (vec_await_looking),
    so that their check after the pivots mostly passes without another round trip."""
    GRID: tl.constexpr = _grid(W, S, C)
    ACROSS: tl.constexpr = _across(W, S, C, FACTOR, APART)
    cols = tl.arange(0, W)
    pm = sm & (aux >= 0)
    if GRID:                           # IC(0)'s diagonal pairs lie in the row itself
        om = (other >= 0) & (other < row0[None, :, None])
    else:
        om = (other >= 0) & (other < row0[:, None, None])
    RECIP: tl.constexpr = FACTOR == 2 or DATA
    if DATA:
        w = tl.load(OWN + at, mask=inrow, other=0.0, cache_modifier=".cg")
        piv = tl.load(VAL + aux, mask=pm, other=1.0, volatile=True)
        ext = tl.load(VAL + other, mask=om, other=0.0, volatile=True)
    else:
        w = tl.load(VAL + at, mask=inrow, other=0.0, cache_modifier=".cg")
        piv = tl.load(VAL + aux, mask=pm, other=1.0, cache_modifier=".cg")
        ext = tl.load(VAL + other, mask=om, other=0.0, cache_modifier=".cg")
    looped = steps - 1 if FACTOR == 2 else steps            # IC: each row's last step is its diagonal
    if STAGED:
        tl.static_assert(DATA and not APART, "held_finish: STAGED waits on the values (DATA), step by step")
        first = tl.arange(0, S)[None, :] < late[:, None]                          # [R, S]
        if GRID:
            if ACROSS:
                first_x = tl.arange(0, S)[:, None, None] < late[None, :, None]       # as ext: [S, R, W]
            else:
                first_x = tl.arange(0, S)[None, None, :] < late[None, :, None]       # as ext: [W, R, S]
        else:
            first_x = first[:, :, None]
        busy = tl.max(pm.to(tl.int32), 1) > 0              # lanes with steps: the others' late is no bound
        piv = vec_await_entries(piv, VAL + aux, aux, pm & first, 0, SENT, NAP)
        ext = vec_await_entries(ext, VAL + other, other, om & first_x, 0, SENT, NAP)
        rp = _recip(piv)
        ext1 = ext
        if late.shape[0] > 1:          # what is not awaited yet as 0 and 1: a lane whose own step s
            ext1 = tl.where(first_x, ext, 0.0)   # comes later still meets s in the loop, and
            rp = tl.where(first, rp, 1.0)        # 0 · (the sentinel, a NaN) would be NaN
        if GRID:
            ext1 = tl.permute(ext1, (1, 2, 0))
        w = held_steps(w, ext1, rp, pm & first, loc, mine, 0,
                       tl.max(tl.where(busy, tl.minimum(late, looped), 0), 0), FACTOR, W, S, C, True, APART)
        if LOOK_LATE:                  # the late operands, as they stand after the first stage
            piv, ext = vec_await_looking(piv, VAL + aux, aux, pm, ext, VAL + other,
                                         _waiting(ext, other, om, 0, SENT), 0, SENT, NAP)
        else:
            piv = vec_await_entries(piv, VAL + aux, aux, pm, 0, SENT, NAP)
        ext = vec_await_entries(ext, VAL + other, other, om, 0, SENT, NAP)
        if LOOK:
            x = vec_relook(x, VEC, x_at, x_at >= 0, N_IN, SENT)
        if GRID:
            ext = tl.permute(ext, (1, 2, 0))
        w = held_steps(w, ext, _recip(piv), pm & ~first, loc, mine, tl.min(tl.where(busy, late, S), 0), looped,
                       FACTOR, W, S, C, True, APART)
    else:
        if DATA:
            piv = vec_await_entries(piv, VAL + aux, aux, pm, 0, SENT, NAP)
            ext = vec_await_entries(ext, VAL + other, other, om, 0, SENT, NAP)
        if GRID:
            ext = tl.permute(ext, (1, 2, 0))                   # [R, S, W]
        if RECIP:
            piv = _recip(piv)                                  # from here on, the pivots' reciprocals
        w = held_steps(w, ext, piv, pm, loc, mine, 0, looped, FACTOR, W, S, C, RECIP, APART)
    if FACTOR == 2:
        diag = sm & (aux < 0)
        at_diag = tl.sum(tl.where(diag, loc, 0), 1)
        hit = (cols[None, :] == at_diag[:, None]) & (tl.max(diag.to(tl.int32), 1) > 0)[:, None]
        rest = _pick(w, hit, 1) - tl.sum(tl.where(inrow & ~hit, w * w, 0.0), 1)
        w = tl.where(hit, ic_pivot(rest)[:, None], w)
    tl.debug_barrier()                 # every copy of the row read before it is overwritten (factor_rows)
    tl.store(VAL + at, w, mask=inrow)
    return w, x


@triton.jit
def held_divisor(w, d_loc, FACTOR: tl.constexpr, W: tl.constexpr):
    """1 / d_i for held_solve, from factor row i as held_finish left it on registers (w, [R, W]):
    IC(0)'s l_ii at local index d_loc (−1: none, 1), taken before the row's x_j are awaited so
    that no division lies on the chain of solved rows; ILU(0)'s diagonal is the unit one."""
    if FACTOR == 1:
        return tl.full(d_loc.shape, 1.0, w.dtype)
    return _recip(tl.where(d_loc >= 0, _pick(w, tl.arange(0, W)[None, :] == d_loc[:, None], 1), 1.0))


@triton.jit
def held_solve(w, x_at, x, b, rd):
    """Row i of the triangular solve that follows a factor, x_i = (b_i − Σ_{j<i} l_ij·x_j) / d_i,
    from factor row i as held_finish left it on registers (w, [R, W]): x holds x_j where x_at ≥ 0
    (the row's entries l_ij, RowTables.solve_x_at; every one is a step, so held), rd is 1 / d_i
    (held_divisor: one rounding more than a division, none for ILU(0))."""
    return (b - tl.sum(tl.where(x_at >= 0, w * x, 0.0), 1)) * rd


@triton.jit
def factor_iterations(v, ok, FAC_PTR, HOLD_LEN, STEP_BITS, ENT_PTR, ENT_VAL, ENT_AUX, UPD_PTR, UPD_A, UPD_B, VAL,
                      FACTOR: tl.constexpr, CHUNK: tl.constexpr, W: tl.constexpr, S: tl.constexpr, C: tl.constexpr,
                      WALK: tl.constexpr):
    """Factor rows v[ok]: the held ones on registers (W > 0), the others walked in memory
    (factor_rows), which WALK says some rows are (RowTables.walks)."""
    if W > 0:
        hold, at, inrow, steps, sm, loc, aux, mine, other, row0 = held_fetch(
            v, ok, FAC_PTR, HOLD_LEN, ENT_PTR, ENT_VAL, ENT_AUX, UPD_PTR, UPD_A, UPD_B, STEP_BITS, W, S, C, FACTOR)
        held_finish(at, inrow, steps, sm, loc, aux, mine, other, row0, VAL, FACTOR, W, S, C, VAL)
        if WALK:
            factor_rows(v, ok & ~hold, ENT_PTR, ENT_VAL, ENT_AUX, UPD_PTR, UPD_A, UPD_B, VAL, FACTOR, CHUNK, VAL,
                        FAC_PTR)
    else:
        factor_rows(v, ok, ENT_PTR, ENT_VAL, ENT_AUX, UPD_PTR, UPD_A, UPD_B, VAL, FACTOR, CHUNK, VAL, FAC_PTR)


@triton.jit
def iterations(v, ok, KIND, ENT_PTR, ENT_VAL, ENT_AUX, UPD_PTR, UPD_A, UPD_B, RHS, DIAG, SIGN, DST, FAC_PTR,
               HOLD_LEN, STEP_BITS, VAL, VEC, FACTOR: tl.constexpr, CHUNK: tl.constexpr,
               WIDE: tl.constexpr, W: tl.constexpr, S: tl.constexpr, C: tl.constexpr, WALK: tl.constexpr):
    """Iterations v[ok] of either kernel of a pair (KIND[v]: 0 affine, else a factor row); they
    must be independent of each other. FACTOR (0, ILU, IC) says which factor rows the pair has;
    without one, VAL never changes during the run. W, S, C: RowTables.held; WALK:
    RowTables.walks."""
    if FACTOR != 0:
        fac = tl.load(KIND + v, mask=ok, other=0) != 0
        factor_iterations(v, ok & fac, FAC_PTR, HOLD_LEN, STEP_BITS, ENT_PTR, ENT_VAL, ENT_AUX, UPD_PTR, UPD_A,
                          UPD_B, VAL, FACTOR, CHUNK, W, S, C, WALK)
        affine_rows(v, ok & (fac == 0), ENT_PTR, ENT_VAL, ENT_AUX, RHS, DIAG, SIGN, DST, VAL, VEC, False, CHUNK,
                    WIDE)
    else:
        affine_rows(v, ok, ENT_PTR, ENT_VAL, ENT_AUX, RHS, DIAG, SIGN, DST, VAL, VEC, True, CHUNK, WIDE)


# ---------------------------------------------------------------- the tables, built on the host

@dataclass(frozen=True, eq=False)
class RowTables:
    """Everything the kernels above need to run a pair's iterations, as int32 NumPy arrays
    indexed by joint iteration v (kernel 1's rows 0..n1−1, kernel 2's n1..n1+n2−1) or by
    entry. Built once per pair and sparsity pattern; values are not in here.

    VAL = the matrices' values one after another, in the order of `val_from` (for ILU(0)/IC(0)
    the factor, initialised with A's values or tril(A)'s); VEC = [input vector, output 1,
    output 2] (factor pairs: [b, x]), each n long."""
    pair: str
    n1: int
    n2: int
    factor: int                 # 0, ILU or IC: the kind of kernel 1's rows
    kind: np.ndarray            # [n] 0 affine, ILU or IC
    ent_ptr: np.ndarray         # [n+1] entries of iteration v: ent_ptr[v]..ent_ptr[v+1]
    ent_val: np.ndarray         # [E] position in VAL (affine: a_ij; factor: the entry p itself)
    ent_aux: np.ndarray         # [E] affine: position in VEC of x_j; factor: pivot position in VAL or −1
    upd_ptr: np.ndarray         # factor pairs: per VAL position p, its pairs upd_ptr[p]..upd_ptr[p+1]
    upd_a: np.ndarray
    upd_b: np.ndarray
    rhs: np.ndarray             # [n] position in VEC of the right-hand side, or −1
    diag: np.ndarray            # [n] position in VAL of the divisor, or −1 (divide by 1)
    sign: np.ndarray            # [n] +1 (SpMV) or −1 (solves)
    dst: np.ndarray             # [n] position in VEC of the result
    val_from: tuple             # (matrix index, positions taken from its values or None: all) per VAL part
    vec_len: int
    out_at: tuple               # VEC offsets of the vector results
    pivot_at: np.ndarray        # factor pairs: position in VAL of row i's pivot u_ii or l_ii
    factor_pattern: tuple       # factor pairs: (indptr, indices) of the factor, A's or tril(A)'s

    fac_ptr: np.ndarray         # factor pairs: [n1+1] VAL positions of each factor row (the pattern's indptr)
    hold_len: np.ndarray        # factor pairs: [n1] leading entries row v holds (held_spans; 0: none)
    hold_shape: tuple           # (W, S, C) the held rows need (held_spans), (0, 0, 0) without factor rows
    step_bits: np.ndarray       # grid-shaped factor pairs: [factor rows' entries] int64, bit j: pairs entry j
                                # (step_bits); one unread 0 where the held rows take a list (grid_layout)
    rewritten: np.ndarray       # factor pairs: VAL positions the steps rewrite, ascending (rewritten); else empty
    steps_apart: bool           # factor pairs: no step of a row reads what another writes (steps_apart)

    ARRAYS = ("kind", "ent_ptr", "ent_val", "ent_aux", "upd_ptr", "upd_a", "upd_b", "rhs", "diag", "sign", "dst",
              "fac_ptr", "hold_len", "step_bits")

    @functools.cached_property
    def longest(self) -> int:
        """Entries of the longest iteration."""
        return int(np.diff(self.ent_ptr).max(initial=0))

    def wide(self, chunk: int) -> bool:
        """The kernels' WIDE: some iteration has more than 4·chunk entries (tail_sum)."""
        return self.longest > 4 * chunk

    @functools.cached_property
    def held_shape(self) -> tuple:
        """(W, S, C) of held_fetch for this pair's held factor rows: powers of two at least their
        most entries held, most steps and most update pairs of a step (held_spans); (0, 0, 0)
        without factor rows, or when S · C · W passes HELD_WORK (then every row walks)."""
        return within_held_work(self.hold_shape)

    @functools.cached_property
    def walked(self) -> np.ndarray:
        """Per factor row, whether it walks in memory: a row with steps that holds nothing
        (held_spans), or every row with steps where the pattern holds none (held_shape)."""
        steps = np.diff(self.ent_ptr[:self.n1 + 1]) > 0
        return steps & (self.hold_len == 0) if self.factor and self.held_shape[0] else steps & bool(self.factor)

    @functools.cached_property
    def hold_len_every(self) -> np.ndarray:
        """hold_len over every iteration, 0 past the factor rows (the device's HOLD_LEN, which a
        kernel may read for a lane before knowing its kind; t3's block records)."""
        every = np.zeros(max(len(self.ent_ptr) - 1, len(self.hold_len)), dtype=np.int32)
        every[:len(self.hold_len)] = self.hold_len
        return every

    @functools.cached_property
    def walked_iterations(self) -> np.ndarray:
        """walked over the joint iterations (n1 + n2; kernel 2's rows never walk): the rows t3's
        plan gives blocks of their own (WALK_ALONE), by the iteration ids its blocks hold."""
        out = np.zeros(self.n1 + self.n2, dtype=bool)
        out[:self.n1] = self.walked
        return out

    @functools.cached_property
    def walked_entries(self) -> np.ndarray:
        """VAL positions of the walked rows' entries (walked), ascending, int64: all that a DATA
        call writes in OWN (factor_rows stores only in its own row there; held rows read OWN)."""
        at = np.flatnonzero(self.walked)
        return dags.expand_ranges(np.asarray(self.fac_ptr)[at], np.asarray(self.fac_ptr)[at + 1])[1]

    @functools.cached_property
    def walks(self) -> bool:
        """Whether some factor rows walk beside held ones (walked): the kernels' WALK."""
        return bool(self.held_shape[0]) and bool(self.walked.any())

    @functools.cached_property
    def most_lower(self) -> int:
        """Factor pairs: most entries below the diagonal in one row of the factor's pattern, what a
        lane of t3's lean rows holds (lean_plan's CH); 0 without a factor."""
        if not self.factor:
            return 0
        indptr, indices = (np.asarray(a, dtype=np.int64) for a in self.factor_pattern)
        owner = dags.row_ids(indptr)
        return int(np.bincount(owner[indices < owner], minlength=len(indptr) - 1).max(initial=0))

    @functools.cached_property
    def updates_only_diagonal(self) -> bool:
        """Factor pairs: whether every update of the factor lands on a diagonal entry (t3's lean
        rows run only then) — ILU(0), every update pair's target is a pivot; IC(0), no entry off
        the diagonal has a pair. On the 5- and 7-point grids in any order: an update of (i, j),
        i ≠ j, through row k needs i, j and k pairwise adjacent, and a grid's graph holds no
        triangle."""
        if not self.factor:
            return False
        pivot = np.zeros(len(self.factor_pattern[1]), dtype=bool)
        pivot[self.pivot_at] = True
        if self.factor == ILU:
            return bool(pivot[self.upd_a].all())
        return bool((np.diff(self.upd_ptr)[~pivot] == 0).all())

    @functools.cached_property
    def held_pairs(self) -> int:
        """Operand positions held_fetch prefetches per held row: S · W as a grid, S · C as a list
        (GRID_WORK); 0 without held rows."""
        W, S, C = self.held_shape
        return S * W if grid_layout((W, S, C)) else S * C

    def held(self, lanes: int) -> tuple:
        """The kernels' (W, S, C) for programs of `lanes` rows: held_shape while the prefetched
        operand positions (lanes · held_pairs) stay within HELD_BUDGET, else (0, 0, 0): walk in
        memory."""
        W, S, C = self.held_shape
        return (W, S, C) if W and lanes * self.held_pairs <= HELD_BUDGET else (0, 0, 0)

    def held_lanes(self, most: int, step_work: int | None = None) -> int:
        """The most lanes, up to `most`, whose factor rows stay held (`most` when none can be),
        and with `step_work` at most as many as keep lanes · C · W (one step's pairs over the row,
        [R, C, W] in held_finish) within it, for held rows and for rows that HELD_WORK sends to
        the walk alike (their hold_shape): one warp does that work element by element. The lane
        cap of the executors that pick their lanes (t2, t3's levels executor; t3's flag executor
        with its FACTOR_STEP_WORK, measured with the list and kept for the grid, whose step reads
        [R, S, W]: R = 2 was slower than R = 1 there too). Walked rows keep the cap because it
        measured so: on the 27-point grid after RCM, IC(0) walked took 29.6 ms at R = 1 against
        48.3 at R = 4 (figures/data/walk_vs_held_sparse_fusion_*)."""
        cap = most
        W, S, C = self.held_shape
        if W:
            cap = min(cap, HELD_BUDGET // self.held_pairs)
        W, S, C = self.hold_shape
        if W and step_work is not None:
            cap = min(cap, step_work // (C * W))
        return max(1, cap)

    @functools.cached_property
    def solve_x_at(self) -> np.ndarray:
        """Factor pairs: per VAL position of a factor entry that row i of the solve multiplies
        (l_ij, j < i), the VEC position of x_j; −1 elsewhere. With it a program that has just
        computed factor row i on registers solves row i from them (t3's fused rows). Every solve
        entry lies in its row of the factor: the solve reads the factor it follows."""
        at = np.full(len(self.upd_ptr) - 1, -1, dtype=np.int32)
        if not self.factor:
            return at
        first = int(self.ent_ptr[self.n1])
        e = np.arange(first, int(self.ent_ptr[-1]))
        row = dags.row_ids(self.ent_ptr[self.n1:].astype(np.int64) - first)
        p = self.ent_val[e]
        if ((p < self.fac_ptr[row]) | (p >= self.fac_ptr[row + 1])).any():
            raise AssertionError("a solve entry lies outside its row of the factor")
        at[p] = self.ent_aux[e]
        return at

    def values(self, matrices) -> np.ndarray:
        """VAL for one call, from the canonical CSR matrices the tables were built for."""
        parts = [matrices[i].data if at is None else matrices[i].data[at] for i, at in self.val_from]
        return np.concatenate(parts) if len(parts) > 1 else np.array(parts[0])


def _affine(M, mode, val_at, vec_in, vec_rhs, vec_out):
    """Affine rows of one kernel on canonical CSR M: "spmv" (all entries, σ = +1), "solve"
    (off-diagonal entries, σ = −1, divide by the stored diagonal) or "unit" (strictly lower
    entries, σ = −1, unit diagonal)."""
    n = M.shape[0]
    rows, cols = dags.row_ids(M.indptr), M.indices
    keep = {"spmv": np.ones(len(cols), bool), "solve": cols != rows, "unit": cols < rows}[mode]
    pos = np.flatnonzero(keep)
    i = np.arange(n, dtype=np.int64)
    return dict(
        kind=np.zeros(n, np.int64), count=np.bincount(rows[pos], minlength=n),
        ent_val=val_at + pos, ent_aux=vec_in + cols[pos],
        rhs=np.full(n, -1) if mode == "spmv" else vec_rhs + i,
        diag=val_at + dags.diag_positions(M.indptr, cols) if mode == "solve" else np.full(n, -1),
        sign=np.full(n, 1 if mode == "spmv" else -1), dst=vec_out + i)


def _factor(S, factor):
    """Factor rows from tiers/sparse_dags.py's ILU0Structure (steps: the strictly lower entries)
    or IC0Structure (steps: every entry of the row of tril(A), the diagonal last)."""
    n, ip, ix = S.n, S.indptr, S.indices
    rows = dags.row_ids(ip)
    pos = np.flatnonzero(ix < rows) if factor == ILU else np.arange(len(ix))
    piv = S.diag[ix[pos]]
    if factor == IC:
        piv = np.where(ix[pos] < rows[pos], piv, -1)
        ptr, a, b = S.pair_ptr, S.pair_left, S.pair_right
    else:
        ptr, a, b = S.upd_ptr, S.upd_target, S.upd_source
    none = np.full(n, -1)
    return dict(kind=np.full(n, factor), count=np.bincount(rows[pos], minlength=n), ent_val=pos, ent_aux=piv,
                rhs=none, diag=none, sign=np.zeros(n, np.int64), dst=np.zeros(n, np.int64)), (ptr, a, b)


class StepPairs(NamedTuple):
    """The factor rows' steps (entries e < ent_ptr[n1]) and where their pairs lie (step_pairs)."""
    p: np.ndarray          # [steps] each step's VAL position
    count: np.ndarray      # [steps] its pairs: upd_ptr[p]..upd_ptr[p + 1] − 1 index upd_a / upd_b
    first: np.ndarray      # [steps] upd_ptr[p]


def step_pairs(n1, ent_ptr, ent_val, upd_ptr) -> StepPairs:
    """The factor steps that rewritten, held_spans, step_bits and steps_apart share; pair_pieces
    lists their pairs a piece at a time."""
    p = ent_val[:int(ent_ptr[int(n1)])].astype(np.int64)
    first = upd_ptr[p].astype(np.int64)
    return StepPairs(p, upd_ptr[p + 1] - first, first)


def pair_pieces(pairs: StepPairs, fn):
    """fn(s0, s1, step, t) for pieces of whole steps s0..s1−1 of about dags.PIECE pairs, yielded in
    order, the pieces side by side on threads (dags.map_pieces): each pair of those steps, step
    after step, as its step's offset from s0 and its index t into upd_a / upd_b. The 27-point
    grid's ILU(0) has 25M pairs: expanded at once, as before, their two arrays took 400 MB and
    614 MB of fresh pages in all, which each consumer only ever read a piece at a time."""
    def piece(s0, s1):
        step, t = dags.expand_ranges(pairs.first[s0:s1], pairs.first[s0:s1] + pairs.count[s0:s1])
        return fn(s0, s1, step, t)
    return dags.map_pieces(piece, dags.whole_pieces(pairs.count, dags.PIECE))


def rewritten(n1, ent_ptr, ent_val, upd_ptr, upd_a, pairs=None) -> np.ndarray:
    """The VAL positions that the factor rows' steps rewrite, ascending: each step's own entry and
    the targets of its pairs. Every other factor entry keeps A's value. pairs: step_pairs' result,
    if the caller has it."""
    pairs = pairs if pairs is not None else step_pairs(n1, ent_ptr, ent_val, upd_ptr)
    mark = np.zeros(len(upd_ptr) - 1, dtype=bool)
    mark[pairs.p] = True

    def piece(s0, s1, step, t):          # threads may set one entry at once: both write True
        mark[upd_a[t]] = True

    dags.drain(pair_pieces(pairs, piece))
    return np.flatnonzero(mark)


def steps_apart(n1, ent_ptr, ent_val, ent_aux, upd_ptr, upd_a, pairs=None) -> bool:
    """Whether no pair of a factor row's steps (but IC(0)'s diagonal step, the one without a
    pivot) touches an entry that another of its steps writes: then no step reads what another
    wrote, and a held row could run all its steps at once (held_finish's APART, which IC(0)
    takes). True on the 5- and 7-point grids, whose lower neighbours are never neighbours of each
    other; False with a 27-point stencil (a row's 13 steps form chains 7 long) and on graphs with
    triangles."""
    pairs = pairs if pairs is not None else step_pairs(n1, ent_ptr, ent_val, upd_ptr)
    pivoted = ent_aux[:len(pairs.p)] >= 0
    mark = np.zeros(len(upd_ptr) - 1, dtype=bool)
    mark[pairs.p[pivoted]] = True
    return not any(pair_pieces(pairs, lambda s0, s1, step, t: mark[upd_a[t[pivoted[s0 + step]]]].any()))


def held_spans(n1, ent_ptr, ent_val, upd_ptr, upd_a, fac_ptr, pairs=None, touched=None):
    """(hold_len, (W, S, C)) of a factor pair's rows. A row's steps touch its step entries and the
    targets of their pairs (ILU(0): the entries below the diagonal and the u_ij they update;
    IC(0): its whole row of tril(A)); it holds its entries up to the last of them, a prefix of
    the row, so that a held entry's place is its offset in the row. Row v is held if that span,
    its steps and its most pairs of a step each lie within what HOLD_SHARE of the rows with steps
    need, and the span is at most HELD_WIDTH; (W, S, C) are those rows' largest, as powers of
    two (at least 2), and every row within them is held too. A row without steps holds nothing
    and does nothing; a row with steps and no span walks. pairs, touched: step_pairs' and
    rewritten's results, if the caller has them."""
    n1 = int(n1)
    pairs = pairs if pairs is not None else step_pairs(n1, ent_ptr, ent_val, upd_ptr)
    cnt = pairs.count
    steps = np.diff(ent_ptr[:n1 + 1]).astype(np.int64)
    if touched is None:                                      # ascending, so rows in order
        touched = rewritten(n1, ent_ptr, ent_val, upd_ptr, upd_a, pairs)
    row_of = np.searchsorted(fac_ptr, touched, side="right") - 1
    last = np.append(row_of[1:] != row_of[:-1], True)[:len(touched)]   # each row's last touched entry
    span = np.zeros(n1, np.int64)
    span[row_of[last]] = touched[last] - fac_ptr[row_of[last]] + 1
    most = dags.segment_reduce(np.maximum, cnt, steps, 0)   # each row's most pairs of a step (listed row by row)
    busy = steps > 0
    fits = busy & (span <= HELD_WIDTH)
    for x in (span, steps, most):
        xs = np.sort(x[busy])
        if len(xs):
            fits &= x <= xs[max(0, int(np.ceil(HOLD_SHARE * len(xs))) - 1)]
    shape = tuple(max(2, triton.next_power_of_2(int(x[fits].max(initial=1)))) for x in (span, steps, most))
    W, S, C = shape           # a row that fits the powers of two costs no more held than its peers
    fits = busy & (span <= min(W, HELD_WIDTH)) & (steps <= S) & (most <= C)
    return np.where(fits, span, 0), shape


def step_bits(n1, ent_ptr, ent_val, upd_ptr, upd_a, fac_ptr, pairs=None) -> np.ndarray:
    """Per factor step (entry e < ent_ptr[n1]), the entries of its row that its pairs pair with, as
    bits: bit j for entry j of the row (ILU: the u_ij it updates; IC: the l_ik it reads), the
    first 64 entries only, which every held row's are (HELD_WIDTH). held_fetch counts the set
    bits below j to find entry j's pair, so a step's pairs must be listed in the order of their
    entries (tiers/sparse_dags.py lists them so; checked here). pairs: step_pairs' result, if the
    caller has it. The steps go through in pieces of about dags.PIECE pairs (pair_pieces: whole
    steps, so that each piece's bits are reduced in it): over the 27-point grid's 25M pairs at
    once, the five temporaries of 200 MB took 0.55–1.4 s inside a first `row_tables`, where the
    pieces take 0.20–0.35 (all at once took 0.26 s when timed alone on warm pages; development
    machine's CPU, its transparent huge pages on madvise;
    figures/data/step_bits_pieces_cpu_2026-12-07.txt), and 0.12–0.15 on two threads
    (step_bits_threads_cpu_2026-12-07.txt)."""
    n1 = int(n1)
    pairs = pairs if pairs is not None else step_pairs(n1, ent_ptr, ent_val, upd_ptr)
    cnt = pairs.count
    base = fac_ptr[dags.row_ids(ent_ptr[:n1 + 1].astype(np.int64))].astype(np.int64)   # per step
    bits = np.zeros(len(cnt), dtype=np.int64)
    def piece(s0, s1, step, t):          # writes only bits[s0:s1]
        j = upd_a[t] - base[s0 + step]
        if ((step[1:] == step[:-1]) & (j[1:] <= j[:-1])).any():   # a pair after another of its step
            raise AssertionError("a factor step's pairs are not listed in the order of their entries")
        far = j >= 64
        one = np.left_shift(1, np.minimum(j, 63, out=j))
        one[far] = 0
        bits[s0:s1] = dags.segment_reduce(np.bitwise_or, one, cnt[s0:s1], 0)

    dags.drain(pair_pieces(pairs, piece))
    return bits


def late_steps(n1, ent_ptr, ent_val, factor_indices, level) -> np.ndarray:
    """Per factor row, its first *late* step: the first whose other row (the pivot row k of ILU(0)'s
    step (i, k), row j of IC(0)'s (i, j)) lies one level below row i in the factor's DAG (`level`:
    wavefront levels, of the joint DAG or the factor's own: the same for factor rows). Those rows
    finish last; the steps before the first of them read rows finished a level or more earlier,
    and held_finish's STAGED runs them while the late rows are still at work. A row without such
    a step (only a row with no step below the diagonal has none) gets its number of steps: all
    in the first stage. On the 27-point grid an interior row's 13 lower neighbours lie 1 to 7
    levels below it (level x + 2y + 4z in natural order), and its first late step is its 9th, the
    row at (+1, +1, −1); on the 5- and 7-point grids every lower neighbour lies one level below,
    so it is the first."""
    n1 = int(n1)
    srow = dags.row_ids(np.asarray(ent_ptr[:n1 + 1], dtype=np.int64))
    col = np.asarray(factor_indices)[ent_val[:len(srow)]].astype(np.int64)
    late = (col < srow) & (level[col] == level[srow] - 1)         # never the diagonal step
    first = np.diff(ent_ptr[:n1 + 1]).astype(np.int32)
    r, at = np.unique(srow[late], return_index=True)
    first[r] = (np.flatnonzero(late)[at] - ent_ptr[r]).astype(np.int32)
    return first


def row_tables(pair: str, *matrices) -> RowTables:
    """The tables of `pair` on canonical CSR `matrices` (tiers/sparse_dags.py: csr())."""
    dags.check_pair(pair)
    M = matrices
    n = M[0].shape[0]
    upd = (np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
    factor, pivot_at, pattern = 0, np.zeros(0, np.int64), (np.zeros(1, np.int64),)
    if pair == "sptrsv_spmv":          # VAL [L, A], VEC [b, x, y]
        k1 = _affine(M[0], "solve", 0, n, 0, n)
        k2 = _affine(M[1], "spmv", M[0].nnz, n, -1, 2 * n)
        val_from, out_at = ((0, None), (1, None)), (n, 2 * n)
    elif pair == "spmv_sptrsv":        # VAL [A, L], VEC [x, y, z]
        k1 = _affine(M[0], "spmv", 0, 0, -1, n)
        k2 = _affine(M[1], "solve", M[0].nnz, 2 * n, n, 2 * n)
        val_from, out_at = ((0, None), (1, None)), (n, 2 * n)
    elif pair == "sptrsv_sptrsv":      # VAL [L, U], VEC [b, y, x]
        k1 = _affine(M[0], "solve", 0, n, 0, n)
        k2 = _affine(M[1], "solve", M[0].nnz, 2 * n, n, 2 * n)
        val_from, out_at = ((0, None), (1, None)), (n, 2 * n)
    elif pair == "spilu0_sptrsv":      # VAL [LU], VEC [b, x]
        factor = ILU
        S = dags.ilu0_symbolic(M[0])
        k1, upd, pivot_at, pattern = *_factor(S, ILU), S.diag, (S.indptr, S.indices)
        k2 = _affine(M[0], "unit", 0, n, 0, n)
        val_from, out_at = ((0, None),), (n,)
    else:                              # spic0_sptrsv: VAL [Lc on tril(A)], VEC [b, x]
        factor = IC
        T = dags.lower_part(M[0])
        S = dags.ic0_symbolic(T)
        k1, upd, pivot_at, pattern = *_factor(S, IC), S.diag, (S.indptr, S.indices)
        k2 = _affine(T, "solve", 0, n, 0, n)
        val_from, out_at = ((0, np.flatnonzero(M[0].indices <= dags.row_ids(M[0].indptr))),), (n,)
    n2 = len(k2["dst"])
    ent_ptr = np.zeros(n + n2 + 1, np.int64)
    np.cumsum(np.concatenate([k1.pop("count"), k2.pop("count")]), out=ent_ptr[1:])
    # written as int32 in one pass, not concatenated as int64 and then cast (the power-law graph's
    # sptrsv_spmv: 11M entries a table)
    i32 = {k: np.concatenate([k1[k], k2[k]], dtype=np.int32, casting="unsafe") for k in k1}
    bits, touched, apart = np.zeros(1, np.int64), np.zeros(0, np.int64), False
    if factor:
        cat = {k: np.concatenate([k1[k], k2[k]]) for k in ("ent_val", "ent_aux")}   # what the steps read, int64
        ev = cat["ent_val"]
        pairs = step_pairs(n, ent_ptr, ev, upd[0])
        touched = rewritten(n, ent_ptr, ev, upd[0], upd[1], pairs)
        hold_len, shape = held_spans(n, ent_ptr, ev, upd[0], upd[1], pattern[0], pairs, touched)
        if grid_layout(within_held_work(shape)):                 # the bits only a grid reads
            bits = step_bits(n, ent_ptr, ev, upd[0], upd[1], pattern[0], pairs)
        apart = steps_apart(n, ent_ptr, ev, cat["ent_aux"], upd[0], upd[1], pairs)
        del pairs
    else:
        hold_len, shape = np.zeros(1), (0, 0, 0)
    return RowTables(pair, n, n2, factor, ent_ptr=ent_ptr.astype(np.int32),
                     upd_ptr=upd[0].astype(np.int32), upd_a=upd[1].astype(np.int32, copy=False),
                     upd_b=upd[2].astype(np.int32, copy=False), val_from=val_from,   # no copy below 2^31 entries
                     vec_len=n * (1 + len(out_at)), out_at=out_at, pivot_at=pivot_at,
                     factor_pattern=pattern if factor else (), fac_ptr=pattern[0].astype(np.int32),
                     hold_len=hold_len.astype(np.int32), hold_shape=shape, step_bits=bits,
                     rewritten=touched, steps_apart=apart, **i32)


# ---------------------------------------------------------------- what both Triton tiers do around a launch

_PATTERNS: dict = {}


def pattern_cached(problem, key, build, keep: int = 4):
    """What depends on the pair and sparsity pattern only (not on a schedule), built once per
    (pair, fingerprint, key); the last `keep` patterns are kept."""
    entry = (problem.pair, problem.fingerprint)
    if entry not in _PATTERNS:
        while len(_PATTERNS) >= keep:
            _PATTERNS.pop(next(iter(_PATTERNS)))
        _PATTERNS[entry] = {}
    store = _PATTERNS[entry]
    if key not in store:
        store[key] = build()
    return store[key]


def forget_patterns() -> None:
    """Drop what pattern_cached keeps, so that the next `prepare` builds it again (the benchmark
    does before each, so that every row's setup time counts the pattern's tables)."""
    _PATTERNS.clear()


def checked_values(problem, matrices, device) -> tuple:
    """A prepared runner's refresh(*matrices) checked (validation.validate_refresh, a triangular
    factor's diagonal read at diagonal_at): each matrix's new values as a tensor on `device`."""
    return validate_refresh(problem, matrices, device, lambda i: diagonal_at(problem, i, device))


def refreshed_values(problem, tables, values, dtype) -> torch.Tensor:
    """VAL from new values on the prepared patterns (validation.validate_refresh's tensors, one
    per matrix, on the runner's device): what RowTables.values makes on the host, gathered on the
    device, the positions it takes (val_from) uploaded once per pattern."""
    device = values[0].device
    at = pattern_cached(problem, ("val_from", str(device)),
                        lambda: [None if a is None else torch.from_numpy(np.asarray(a, np.int64)).to(device)
                                 for _, a in tables.val_from])
    parts = [values[i] if a is None else values[i][a] for (i, _), a in zip(tables.val_from, at)]
    return (torch.cat([p.to(dtype) for p in parts]) if len(parts) > 1 else parts[0].to(dtype)).contiguous()


def diagonal_at(problem, i, device) -> torch.Tensor:
    """Matrix i's diagonal positions among its stored values, on `device`, once per pattern (what
    validation.validate_refresh reads a new triangular factor's diagonal at)."""
    M = problem.matrices[i]
    return pattern_cached(problem, ("diagonal_at", i, str(device)),
                          lambda: torch.from_numpy(dags.diag_positions(M.indptr, M.indices)).to(device))


def to_device(arrays: dict, device) -> dict:
    return {k: torch.from_numpy(np.ascontiguousarray(v)).to(device) for k, v in arrays.items()}


def host_tables(problem) -> RowTables:
    """The pair's RowTables on the host, built once per pattern."""
    return pattern_cached(problem, "row_tables", lambda: row_tables(problem.pair, *problem.matrices))


def device_tables(problem, device) -> tuple:
    """(host RowTables, their arrays on `device`), built once per pattern and device. On the
    device hold_len covers every iteration, 0 past the factor rows, so that a kernel may read it
    for a lane before knowing the lane's kind (held_fetch's `lanes`)."""
    tables = host_tables(problem)

    def arrays():
        out = {**{k: getattr(tables, k) for k in RowTables.ARRAYS}, **_factor_index(tables)}
        out["hold_len"] = tables.hold_len_every
        return to_device(out, device)
    dev = pattern_cached(problem, ("row_tables", str(device)), arrays)
    return tables, dev


def table_args(dev) -> list:
    """The table tensors in the order the kernels take them (KIND … DST)."""
    return [dev[k] for k in RowTables.ARRAYS]


def check_vector(n, vector, dtype, device, tier):
    """A prepared runner takes vectors like the one it was prepared for: length n, its dtype and
    device; ValueError otherwise. Nor, as the registry says (validation.check_no_grad), one that
    autograd would follow in `tier` (t2, t3), which has no backward: its outputs, copies out of a
    buffer the input was copied into, would carry a gradient that is not the solve's. Its values
    are not checked: finiteness would cost a synchronisation a call (the pair functions check it)."""
    if not isinstance(vector, torch.Tensor):
        raise ValueError(f"the vector must be a torch.Tensor like the one this runner was prepared for, "
                         f"got {type(vector).__name__}")
    if vector.ndim != 1 or vector.shape[0] != n:
        raise ValueError(f"the vector must have shape ({n},), got {tuple(vector.shape)}")
    if vector.dtype != dtype or vector.device != torch.device(device):
        raise ValueError(f"the vector is {vector.dtype} on {vector.device}, but this runner was prepared for "
                         f"{dtype} on {device}")
    check_no_grad((("the vector", vector),), "sparse_fusion", tier)


def new_vector(tables, vector, values, tier, copy_in=True):
    """VEC for one call: the input vector (not copied without copy_in, for an executor that
    copies it elsewhere), then room for the outputs (NaN under TIERS_POISON), after
    check_vector."""
    from tiers.buffers import empty

    n = tables.n1
    check_vector(n, vector, values.dtype, values.device, tier)
    vec = empty((tables.vec_len,), dtype=vector.dtype, device=vector.device)
    if copy_in:
        vec[:n].copy_(vector)
    return vec


def _factor_index(tables) -> dict:
    """What results() indexes a factor pair's VAL with: its pivots' positions and the factor's CSR
    pattern (int64), uploaded with the tables, not looked up per call."""
    if not tables.factor:
        return {}
    return {k: np.asarray(a, dtype=np.int64) for k, a in
            zip(("pivot_at", "factor_indptr", "factor_indices"), (tables.pivot_at, *tables.factor_pattern))}


def pivot_kind(tables) -> str:
    """The factorisation whose pivots a breakdown names (factor_breakdown): "ilu0" or "ic0"."""
    return "ilu0" if tables.factor == ILU else "ic0"


@triton.jit
def _stops(p, FACTOR: tl.constexpr):
    """Whether pivot p stops the factorisation, as tiers/validation.py's unusable_pivots judges —
    ILU(0) (FACTOR 1): zero or not finite; IC(0): not positive or not finite (|p| < ∞ is false for
    ±∞ and NaN alike)."""
    finite = tl.abs(p) < float("inf")
    if FACTOR == 1:
        return ~(finite & (p != 0))
    else:
        return ~(finite & (p > 0))


@triton.jit
def _flag_breakdown(FLAG, VAL, PIVOT_AT, N, NNZ, FACTOR: tl.constexpr, BLOCK: tl.constexpr):
    """FLAG[0] (0 at launch) raised to NNZ − PIVOT_AT[i] for every row i whose pivot VAL[PIVOT_AT[i]]
    stops the factorisation (_stops): afterwards NNZ − FLAG[0] is the position of the lowest such
    row's pivot (pivots lie in row order)."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    at = tl.load(PIVOT_AT + i, mask=m, other=0)
    p = tl.load(VAL + at, mask=m, other=1.0)
    tl.atomic_max(FLAG + tl.zeros_like(i), (NNZ - at).to(tl.int32), mask=m & _stops(p, FACTOR), sem="relaxed")


def breakdown_flag(tables, dev, val, flag=None):
    """check_factor_pivots' test of VAL's pivots as one kernel that leaves its answer on the device
    (_flag_breakdown), for results to read back (raise_flagged): done with torch's operations, a
    gather and eight small kernels, it took 44 µs a call on the 3D grid (H200, 2026-12-01,
    figures/data/prof_call_graph_*). t3's graph replays test the pivots as they copy the factor
    out (factor_out), and those that do not prepare ahead at their end too (EARLY_FLAG). `flag`:
    an int32 tensor [1] holding 0, else a new one."""
    flag = torch.zeros(1, dtype=torch.int32, device=val.device) if flag is None else flag
    n, BLOCK = tables.n1, 1024
    _flag_breakdown[(triton.cdiv(n, BLOCK),)](flag, val, dev["pivot_at"], n, val.shape[0],
                                              FACTOR=tables.factor, BLOCK=BLOCK)
    return flag


SENTINEL = {torch.float64: 0x7FF00000DEADBEEF, torch.float32: 0x7F80BEEF}
"""Bit patterns of what the values-as-flags kernels still await (VEC's outputs, a factor's rewritten
entries in VAL) before it is written: signalling NaNs, which no arithmetic produces (a NaN result
is quiet) and which the validated, finite inputs never hold."""


SENTINEL_BITS = {torch.float64: torch.int64, torch.float32: torch.int32}
"""The integer view through which a buffer of that dtype is written or compared bit for bit."""


REWRITTEN, PIVOT = 1, 2
"""The bits of entry_marks: a step rewrites the entry; the entry is a row's pivot."""


def entry_marks(tables, device, rewritten: bool = True) -> torch.Tensor:
    """Per entry of the factor's VAL, REWRITTEN | PIVOT as they apply (uint8): what factor_out
    reads beside the values (a pattern's; t3 keeps one per pattern and device: pattern_cached).
    rewritten=False marks the pivots alone, for a kernel that reads no entry a step rewrites (t3's
    lean rows): factor_out then puts no sentinel back."""
    marks = np.zeros(len(tables.factor_pattern[1]), np.uint8)
    if rewritten:
        marks[tables.rewritten] |= REWRITTEN
    marks[tables.pivot_at] |= PIVOT
    return torch.from_numpy(marks).to(device)


@triton.jit
def _sentinel_where(VAL_BITS, e, m, mark, SENT, BLOCK: tl.constexpr, REWRITE_BIT: tl.constexpr):
    """VAL[e] = the sentinel (as bits) over m wherever `mark`, e's entry_marks, has REWRITE_BIT."""
    tl.store(VAL_BITS + e, tl.full((BLOCK,), SENT, VAL_BITS.dtype.element_ty), mask=m & ((mark & REWRITE_BIT) != 0))


@triton.jit
def _factor_out(OUT, VAL, VAL_BITS, MARKS, FLAG, NNZ, SENT, X_OUT, X_IN, N_X, FACTOR_PROGRAMS,
                FACTOR: tl.constexpr, BLOCK: tl.constexpr, REWRITE_BIT: tl.constexpr, PIVOT_BIT: tl.constexpr,
                RESET: tl.constexpr = True):
    """One pass over a finished factor VAL (NNZ entries; VAL_BITS the same memory as integers):
    OUT[e] = VAL[e]; with RESET VAL[e] = the sentinel wherever a step rewrites it (MARKS has
    REWRITE_BIT), so that VAL is ready for the next run (else _sentinel_back does it later);
    FLAG[0] (0 at launch) raised to NNZ − e for every pivot (PIVOT_BIT) that stops the
    factorisation (_stops), as _flag_breakdown does. The programs past the first
    FACTOR_PROGRAMS copy the vector result: X_OUT[i] = X_IN[i] for i < N_X."""
    pid = tl.program_id(0)
    if pid < FACTOR_PROGRAMS:
        e = pid * BLOCK + tl.arange(0, BLOCK)
        m = e < NNZ
        v = tl.load(VAL + e, mask=m, other=1.0)
        mark = tl.load(MARKS + e, mask=m, other=0)
        tl.store(OUT + e, v, mask=m)
        if RESET:
            _sentinel_where(VAL_BITS, e, m, mark, SENT, BLOCK, REWRITE_BIT)
        stops = m & ((mark & PIVOT_BIT) != 0) & _stops(v, FACTOR)
        tl.atomic_max(FLAG + tl.zeros_like(e), (NNZ - e).to(tl.int32), mask=stops, sem="relaxed")
    else:
        i = (pid - FACTOR_PROGRAMS) * BLOCK + tl.arange(0, BLOCK)
        tl.store(X_OUT + i, tl.load(X_IN + i, mask=i < N_X), mask=i < N_X)


FACTOR_OUT_SHAPE = (1024, 8)
"""_factor_out's (BLOCK, num_warps). Timed alone on the H200 (2026-12-03, dev/sparse_fusion/
call_parts.py, figures/data/call_parts_*; do_bench medians of 5 rotated rounds, µs) against the
earlier (2048, 4): 3D ILU(0) 48.9 against 67.5, IC(0) 30.6 against 39.5, float32 ILU(0) 26.5
against 33.8, 2D ILU(0) 37.7 against 49.4; (1024, 4) 0–15 % slower than (1024, 8), 4096 and 8192 slower.
Again on an H100 (2026-12-06 16:34 UTC, with the call's reset, figures/data/call_parts_powerlaw_h100_2026-12-06.*),
the power-law ILU(0) / IC(0): (1024, 8) 68.2 / 30.5 µs, the fastest of the 8 shapes ((1024, 4) 71.9 / 32.1,
(8192, 4) 102.9 / 51.2), against a plain copy of VAL, 45.2 / 29.5; the ILU(0)'s pass also reads the marks and
writes the sentinel into its 4M rewritten entries."""


def factor_out(tables, val, marks, vec=None, flag=None, reset=True, test=True):
    """(a copy of the factor VAL, breakdown flag, copies of the vector results) in one launch
    (_factor_out; `marks`: entry_marks) that also puts the sentinel (SENTINEL) back wherever a
    step rewrites VAL. It replaces four passes after a replay of t3's graph: the copy returned,
    the pivot test (breakdown_flag), the reset of the rewritten entries before the next run and,
    with VEC, the clone of its vector result (vector_outs; a factor pair has one). `flag`: an
    int32 tensor [1] holding 0 (t3's graph zeroes its own), else a new one. reset=False leaves
    the sentinel to sentinel_back, launched later (t3's PREP_AHEAD); test=False leaves the pivots
    untested and `flag` untouched (t3's graphs that test them themselves, EARLY_FLAG)."""
    outs = vector_outs(tables, vec) if vec is not None else ()
    if len(outs) > 1:
        raise ValueError(f"factor_out copies one vector result, this pair has {len(outs)}")
    out = buffers.empty(val.shape, dtype=val.dtype, device=val.device)
    x = tuple(buffers.empty(y.shape, dtype=y.dtype, device=y.device) for y in outs)
    flag = torch.zeros(1, dtype=torch.int32, device=val.device) if flag is None else flag
    (BLOCK, warps), nnz = FACTOR_OUT_SHAPE, val.shape[0]
    nx = outs[0].shape[0] if outs else 0
    programs = triton.cdiv(nnz, BLOCK)
    _factor_out[(programs + triton.cdiv(nx, BLOCK),)](
        out, val, val.view(SENTINEL_BITS[val.dtype]), marks, flag, nnz, SENTINEL[val.dtype],
        x[0] if x else out, outs[0] if outs else val, nx, programs, FACTOR=tables.factor, BLOCK=BLOCK,
        REWRITE_BIT=REWRITTEN, PIVOT_BIT=PIVOT if test else 0, RESET=reset, num_warps=warps)
    return out, flag, x


@triton.jit
def _sentinel_back(VAL_BITS, MARKS, NNZ, SENT, BLOCK: tl.constexpr, REWRITE_BIT: tl.constexpr):
    """VAL[e] = the sentinel wherever a step rewrites it (MARKS has REWRITE_BIT), e < NNZ, as bits."""
    e = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = e < NNZ
    _sentinel_where(VAL_BITS, e, m, tl.load(MARKS + e, mask=m, other=0), SENT, BLOCK, REWRITE_BIT)


def sentinel_back(val, marks):
    """Put the sentinel back in VAL wherever a step rewrites it (entry_marks' REWRITTEN): what
    factor_out does with reset=True, as a launch of its own."""
    (BLOCK, warps), nnz = FACTOR_OUT_SHAPE, val.shape[0]
    _sentinel_back[(triton.cdiv(nnz, BLOCK),)](val.view(SENTINEL_BITS[val.dtype]), marks, nnz, SENTINEL[val.dtype],
                                               BLOCK=BLOCK, REWRITE_BIT=REWRITTEN, num_warps=warps)


def raise_flagged(tables, val, flag):
    """Raise factor_breakdown for the lowest row whose pivot breakdown_flag or factor_out flagged
    (one device-to-host read), the row t0 stops at; nothing if none. The flag names the pivot's
    position in VAL, whose row is found among the pivots' positions (ascending)."""
    flagged = int(flag[0])
    if flagged:
        at = val.shape[0] - flagged
        i = int(np.searchsorted(tables.pivot_at, at))
        raise factor_breakdown(pivot_kind(tables), i, float(val[at]))


def vector_outs(tables, vec) -> tuple:
    """The pair's vector results, as views of VEC (RowTables.out_at): what results() returns after
    the factor, or a caller copies first when VEC is rewritten by the next call (t3's graphs)."""
    return tuple(vec[at:at + tables.n1] for at in tables.out_at)


def results(tables, dev, val, outs, flag=None, ready=None):
    """The pair's results from VAL and its vector results `outs` (vector_outs; `dev`:
    device_tables' tensors). For ILU(0)/IC(0) the factor comes first, as a torch sparse CSR tensor
    with A's (tril(A)'s) pattern like t1's, and its pivots are checked (breakdown_flag, then one
    device-to-host read, after the outputs are made): a kernel cannot raise, so a breakdown is
    reported here, for the lowest row where it happened — the row t0 stops at (later bad pivots
    descend from it). `flag`: breakdown_flag's or factor_out's result where the caller has it
    already; `ready`: where `flag` is a host copy still under way (t3's graphs that prepare
    ahead), the event it waits for, once the outputs are made."""
    n = tables.n1
    if not tables.factor:
        return outs
    if flag is None:
        flag = breakdown_flag(tables, dev, val)
    factor = buffers.sparse_csr(dev["factor_indptr"], dev["factor_indices"], val, (n, n))
    if ready is not None:
        ready.synchronize()
    raise_flagged(tables, val, flag)
    return (factor,) + outs
