"""Sparse fusion, fused: the two kernels of a pair run as one schedule of joint iterations
(tiers/fusion_schedules.py), by one of six executors.

A joint iteration is one row of one kernel — an SpMV or SpTRSV row, or an ILU(0)/IC(0) row —
computed by the building blocks of tiers/kernels/sparse_rows.py from index tables built once per
sparsity pattern. The executors only decide *when* each iteration runs.

executor="levels": one launch per level of the schedule (a level boundary is a
synchronisation). The partitions of a level are independent, so a program takes LANES of them
and walks them in lockstep: step k runs the k-th iteration of each, with a barrier between
steps because iteration k+1 of a partition may read what iteration k wrote. A wavefront
schedule (each partition one iteration) gives one step per level and as many launches as the
joint DAG is deep; LBC and sparse fusion give fewer launches and longer walks.

executor="syncfree": one launch for everything. No level waits for the slowest row of the one
before: each block of iterations waits only for the blocks it reads from.

  * Tickets. On the host the iterations are listed once in an order where every dependence
    comes earlier — by wavefront level of the joint DAG, ties in id order (PLAN_TIES) — and cut
    into blocks of at most R that never cross a level, so a block never holds an iteration
    together with one it needs (its R lanes run at the same time). A program does not run block
    program_id: it takes the next *ticket* from an atomic counter and runs that block. Tickets
    go, in increasing order, to programs that are already running, so every block a program
    waits for has a lower ticket, held by a program that is running or done — which by
    induction finishes. With program ids instead, the hardware could keep the waiting program
    resident while never scheduling the one it waits for: a deadlock.
  * Waiting. Block t's dependences are the blocks holding the iterations its rows read, listed
    once on the host without repeats. Before waiting the program loads everything nobody else
    writes (its rows' positions and, without a factor in the making, the matrix values); it
    then spins on the int32 flags of its dependences, read by atomics with acquire semantics,
    and reads the vector entries through L2 (`.cg`): another SM wrote them moments ago, and L1
    is not coherent across SMs.
  * Releasing. After computing its rows the program meets a barrier, so that every thread's
    stores are issued before one thread sets the block's flag with release semantics; raising
    it earlier could let a waiting program read a row not yet written.

  * Fused rows (fused_rows, the factor pairs, since 2026-11-27). Where the schedule puts solve
    row i in the partition of factor row i — the sparse-fusion inspector's interleaved packing
    does for nearly every row, a wavefront schedule never can — one lane runs both: it computes
    factor row i on registers and solves x_i from that row and the x_j it loaded with the row's
    other operands, so the solve costs no block, no flag and no reload. The fused rows wait for
    what the factor rows wait for (fused_rows says why that is all they need), so the DAG of the
    blocks is the factor's. It shortens no chain: solve row i already ran right behind factor
    row i, one hop later, so the depth stays what it was; it removes half the blocks and their
    work. Measured on the H100 (float64, sparse-fusion schedule, flag executor, A/B in 3
    interleaved rounds, figures/data/fused_ab_*), ILU(0) / IC(0), fused against apart: 3D 1.35 /
    1.75 ms against 1.62 / 2.01, 27-point 5.60 / 6.37 against 5.70 / 7.76, 2D 6.31 / 6.85
    against 6.11 / 7.22 — the 2D ILU(0) loses 3 %: its levels are narrow, so a hop's latency sets
    the time, and a fused hop also does the solve (FUSE_ROWS).

  Under TRITON_INTERPRET=1 programs run one after another in program-id order: the ticket is
  the program id, every dependence is already done, and the spins exit at once.

executor="dataflow": the same tickets and blocks, without flags — for the pairs whose every
iteration writes one vector entry, once (SpMV and SpTRSV rows; ILU(0)/IC(0), below, differ). The
outputs start out holding a sentinel bit pattern (a
signalling NaN: no arithmetic produces one, and the inputs are checked finite), and a row
re-reads the entries it needs until none holds it. A dependence hop is then a store and the
load that sees it: no barrier, no release fence, no flag. On the H100 this halves the time
of the flag executor (figures/data/sparse_fusion_*). Its tickets go by the middle of each
iteration's earliest and latest level, long rows as early as they can (tickets="mid",
TICKET_ORDER, _mid_levels): rows off the critical path run when they are needed.

  How a dataflow call is laid out. Each idea below is one function; its docstring holds the
  measurements that decided it, and docs/sparse_fusion_log.md the history.
  * Records (_dataflow_plan). Block t's tables are one record, read in one round trip instead of
    the chain ticket → block → iterations → entries → positions and values: lane by lane, the
    first record_chunk entries' positions and signed values, the right-hand side, the divisor and
    its reciprocal (r·(1/d) plus one Markstein correction rounds as r/d). Rows longer than the
    record keep an entry range and read the rest trip by trip (record_shape's TAIL, tail_sum);
    otherwise a striding program reads a block's record only as wide as its longest row (WIDTH;
    in the pipelined loop only on long records, reads_every_slot), and the right-hand side rides
    in the entry slots (folds_rhs: one gather, not two).
  * Slots. Lane j of block t writes VEC entry n + t·R + j, so a block's results are one
    contiguous store; the results reach row order by a second store from the kernel or a gather
    after it (writes_row_order). Only the slots some row reads get the sentinel, and the kernel
    reads the input from the caller's vector where every entry is in a record
    (reads_input_apart).
  * Shape from the pattern. R and how far ahead a program holds its tickets (dataflow_shape), the
    programs per SM (dataflow_programs), whether a program reads its next blocks' records and
    entries before its block waits (looks_early, _pipelined), and repeated polls that read only the
    entries still pending (polls_pending).
  * Hub rows. A row of thousands of entries takes wide trips across the whole warp (tail_sum's
    WIDE stage, WIDE_TRIP_DIV), reads its entries in the order they are written (in_ready_order)
    and has a block of its own (HUBS_ALONE).
  * Flat records (flat_plan, _flat; reads_flat). Where some row is longer than CHUNK and the
    programs stride, none of the above is read: a block is 32 entry slots, one per thread, its
    rows' entries one after another, summed per row by a segmented scan across the warp; a hub
    is cut into pieces that are rows of their own. No row takes a second trip; the power-law
    pairs run 22–32 % faster than with records (flat_plan).
  * Launches. A call is the slots kernel, this kernel and the gather; on Hopper the last two are
    programmatic dependent launches (uses_pdl) that start while the kernel before them ends.

  Factor pairs (since 2026-11-29). ILU(0)/IC(0) rows rewrite their entries step by step, so the
  dataflow executor runs them by the flag executor's kernel with the values as flags (_syncfree's
  DATA, kernel_of; the flag executor's blocks, tickets and options): every factor entry that a
  step rewrites (RowTables.rewritten) starts as the sentinel, as x does; a row works on its own
  entries in a copy of A's values, polls the pivots, operands and x_j it reads of other rows
  until none holds the sentinel, and stores its row. On an H200 this made the 2D pairs 1.5–1.9×
  faster and the 3D ones 1.1–1.3×, but not then the 27-point ones, whose rows' steps set the
  time; since those rows take their operands as a grid (sparse_rows.GRID_WORK) it does, and
  executor=None keeps flags only for held rows heavier still (DATA_HELD_WORK); where rows walk
  it does not fuse rows unless asked (fuses_rows). Such a row runs its steps in two stages
  (STAGED_STEPS, stages_steps): those before its first step that reads a row one level below
  it, as soon as what they read is there, then the rest.

  Lean rows (since 2026-12-03; runs_lean, prepare's `lean`). Where every update lands on a
  diagonal (the 5- and 7-point grids) a factor row reads two values of each row it depends on,
  its pivot and x_k, so one lane runs a row, fused with its solve row where the schedule fuses
  them, and each row stores its pivot and x side by side in one vector store, which its
  successors poll by one load a pair (kernels/sparse_fusion_executors/lean.py). On the 3D grid,
  whose levels are wide, this is 17–20 % faster than the values as flags; on the 2D grid, by 16
  lanes a block, 6–8 % on ILU(0) and, since IC(0)'s pairs hold 1/l_ii, 16–24 % on IC(0). Their
  calls replay a CUDA graph too (LEAN_GRAPHS). On narrow levels the pairs lie 64 bytes apart, so
  that rows on different SMs share no sector (lean_defaults, since 2026-12-04): 2–12 % on the
  2D grid; and 8 programs an SM run them, not 16: 10–14 % more on the 2D grid, 0–13 % on the
  3D grid.

  Persistent programs (dataflow, chains, segments; PROGRAMS_PER_SM). Instead of one program per
  block — 500 000 one-warp programs on a 1M-row grid, each started and retired by the hardware
  — PROGRAMS_PER_SM programs per SM each take tickets until none is left. The argument above
  is unchanged: a ticket is only ever taken by a running program. Measured on the H100
  (2026-11-25, float64, wavefront schedule, figures/data/persistent_*_sparse_fusion_*): 16 per
  SM against one per block, 2D Poisson 1000² 1.63 / 1.92 / 3.19 vs 1.74 / 1.95 / 3.41 ms
  (sptrsv_spmv / spmv_sptrsv / sptrsv_sptrsv), 27-point 0.67 / 0.76 / 1.36 vs 0.83 / 0.92 / 2.04,
  the power-law sptrsv_spmv 7 % slower; 8 and 32 per SM slower than 16. On the power-law
  graph alone 32 per SM was faster, sptrsv_spmv / spmv_sptrsv 1.08 / 0.83 against 1.20 / 0.95 ms
  (2026-11-26, figures/data/levels_probe_sparse_fusion_*); the default stays 16, which the grids
  were measured with. Without persistent
  programs a 100 ns nap between polls had paid; with them, polling without a nap is faster on
  2D (1.47 / 1.75 / 2.84 vs 1.63 / 1.92 / 3.18 ms, figures/data/nap_tickets_sparse_fusion_*),
  within 1 % on 3D and the power-law graph, 6 % slower on 27-point sptrsv_sptrsv.

  Striding programs (dataflow, since 2026-11-27; CLAIMS). The ticket counter serves one atomic
  every 0.75 ns on the H100, a floor of 0.38 ms under the power-law graph's 500 000 blocks. Now
  program p of P runs blocks p, p + P, … in ticket order, launched cooperatively so that every
  program runs (the argument then goes through without tickets), and prefetches its next record
  (over records; over flat records nothing, _flat). Since 2026-12-04 the pairs with an SpMV
  whose programs run as a pipeline (the 3D and 27-point grids) give the SpMV's blocks programs
  of their own: kernel 1's blocks come first, kernel 2's after them, and each stream is strided
  by its own programs — the deadlock argument holds for any split into streams that keeps the
  ticket order within each, since the lowest unfinished block is still the one its program runs
  (spmv_share).
  The flag executor can stride too (STRIDING, programs_per_sm > 0), but its default stays one
  program per block (FLAG_PROGRAMS_PER_SM). A cooperative launch asks an SM for no more programs
  than the compiled kernel lets it hold (resident_per_sm).

executor="chains": the dataflow executor over other blocks (chain_blocks): a program walks a
chain of iterations that each wait last on the one before, carrying each value to the next step
in a register. Measured on the H100 (2026-11-25, float64): a chain step costs about what a hop
between programs costs (an L2 round trip for the other entries), so chains win only where a
chain replaces several hops — 3D 7-point Poisson, 0.69 vs 0.79 ms; the power-law graph's two
solves, 3.74 vs 4.53 ms; 27-point about even; 2D Poisson 2.05–2.3 ms vs 1.71 (longer chains
slower) and the power-law sptrsv_spmv 1.35 vs 1.24 lose. Prefetching the next step's tables did
not help (2D 2.5 ms). executor=None never picks it.

executor="segments": the chains again, but a piece of a chain is solved at once instead of link
by link. When link m of a triangular solve reads, inside its piece, only the link before it,
its row is x_m = α_m + β_m·x_{m−1}, with α_m = (rhs + σ·Σ_{others} a·x)/d from entries outside
the piece and β_m = σ·a_{m,m−1}/d: a first-order linear recurrence. A program takes a piece of
up to S links as S lanes, waits (dataflow) for every lane's outside entries at once, and
composes the affine maps x ↦ α + β·x with a parallel scan (log₂ S steps) — a 2D grid row of
1000 unknowns becomes ⌈1000/S⌉ hops instead of 1000. Pieces are cut where a link would read
another link of its piece, or where its predecessor's entry lies past the first SEG_CHUNK of
its row (the scan must know it before the wait); single iterations share blocks of R lanes;
tickets follow the levels of the DAG of blocks (_block_heads). Measured on the H100
(2026-11-25, float64, wavefront schedule, figures/data/segments_*_sparse_fusion_*): not faster
than dataflow. 2D Poisson 1000², sptrsv_spmv / spmv_sptrsv / sptrsv_sptrsv: S = 16 1.80 / 2.49
/ 3.64 ms against dataflow 1.71 / 1.90 / 3.30, S = 64 5.2–11.3 ms; 3D 7-point 100³: S = 16 1.06
/ 1.20 / 0.95 against 0.78 / 0.77 / 0.99. Longer pieces run slower although they make the
block DAG shallower (1016 levels at S = 64 against the joint DAG's 2000). One likely cause, not
profiled: every program has next_pow2(max(S, R)) lanes, also the 250 000 blocks of four single
SpMV rows, so wider pieces leave fewer programs resident. executor=None never picks it.

executor="bands" (the vector pairs, since 2026-12-05): each kernel's rows cut into bands of
consecutive rows, one program a band walking the band's own levels with a barrier between
them, so that only the dependences between bands cross SMs (bands.py's docstring). It ignores
the schedule's order: the cut comes from the matrices' offsets. Measured on the H200
(2026-12-05, docs/sparse_fusion_log.md): a step inside a program cost 1.0–2.75 µs, more than a
hop, and the 27-point vector pairs took 3.6–4.3× the dataflow executor's time; executor=None
never picks it.

Tried, not kept (2026-11-26, figures/data/chain_bundles_probe_sparse_fusion_*, docs/sparse_fusion_log.md): one
program walking K chains side by side, level by level, with the last steps' outputs in registers
(tl.gather) so that a dependence inside the bundle is a shuffle, not an L2 round trip. Right, but
a bundle step cost about 1.1 µs on the H100 whatever K, even in bundles that wait on nothing
(figures/data/chain_bundles_clock_sparse_fusion_*), and 2D Poisson sptrsv_spmv took 2.73 ms
against the dataflow executor's 1.46 (3D spmv_sptrsv the one win, 0.654 vs 0.723).

The kernels, and what the sync-free ones share, are in tiers/kernels/sparse_fusion_executors/, a
module each: launch (programs per SM, claimed launches, the ticket counter, the sentinel's slots,
PDL), tickets (the orders and blocks), levels, syncfree (the flag executor's kernel, which also
runs the factor pairs with the values as flags), records (the dataflow kernel and its records),
flat (the flat records), chains (chains and segments) and bands. This module holds what chooses
between them — the executor, the shape of its blocks and records, measured per pattern — and
`prepare`, which builds their plans once and returns the call.

The pair functions keep the signature every tier shares and let executor_rule (LEVELS_UP_TO)
choose; `prepare(..., executor=...)` chooses explicitly. `prepare` does the per-matrix work once —
validation, tables, the upload of the matrices' values — and returns a callable that only
launches kernels: what a solver calls at each step, and what a benchmark should time.
"""
from __future__ import annotations

import contextlib
import gc
from typing import NamedTuple

import numpy as np
import torch

from tiers import buffers
from tiers import sparse_dags as dags
from tiers.fusion_schedules import default_schedule
from tiers.kernels import sparse_rows as rows
from tiers.kernels.sparse_fusion_executors.bands import (PREFETCH, RING, band_plan, band_warps, bands_take_values,
                                                         device_bands, pair_values, run_bands)
from tiers.kernels.sparse_fusion_executors.chains import _chain_plan, _run_chains, _run_segments, _segment_plan
from tiers.kernels.sparse_fusion_executors.flat import _flat, flat_plan
from tiers.kernels.sparse_fusion_executors.lean import launch_lean, lean_plan, lean_slots, pair_stride, run_lean
from tiers.kernels.sparse_fusion_executors.launch import (SENTINEL, SENTINEL_BITS, STRIDING, Bound,
                                                          _fresh_ticket, _gather_back, _input_then_sentinel,
                                                          _launch_claimed, _slots_from, back_launch, claimed,
                                                          copy_at, fill_args, fill_launch, jit_launch, new_slots,
                                                          uses_pdl)
from tiers.kernels.sparse_fusion_executors.levels import _level_plan, _run_levels
from tiers.kernels.sparse_fusion_executors.records import (HUBS_ALONE, READY_ORDER, _dataflow, _dataflow_plan,
                                                           _dataflow_values, record_chunk)
from tiers.kernels.sparse_fusion_executors.syncfree import _syncfree
from tiers.kernels.sparse_fusion_executors.tickets import TICKETS, _joint, fused_rows, ticket_blocks, ticket_cut
from tiers.kernels.sparse_rows import CHUNK
from tiers.validation import interpreting, validate_sparse_fusion


EXECUTORS = ("levels", "syncfree", "dataflow", "chains", "segments", "bands")
BLOCK_ROWS = {"syncfree": 16, "chains": 4, "segments": 4}
"""R, iterations per sync-free block (lanes of one program), per executor (the dataflow executor
takes dataflow_shape's since 2026-11-26, which was 4 before); swept on the H100
(1M-row 2D Poisson, sptrsv_spmv, float64, 2026-11-23): the flag executor changes little with R
(4.0–4.2 ms for R = 4 to 32; 16 kept); the dataflow executor is fastest at R = 4 (1.73 ms with
a 100 ns nap, 1.88 without — one program per block then; R = 2: 2.3, R = 8: 3.5–4.0; on 3D
Poisson and the power-law graph R = 16/64/128 were 1.3–3× slower than R = 4): a block finishes
when its last row is ready, and more spinning lanes keep L2 busy with polls. chains: R lanes for
the single iterations."""
FACTOR_BLOCK_ROWS = 4
FACTOR_STEP_WORK = 256
"""R of the flag executor on the factor pairs (factor_block_rows): at most FACTOR_BLOCK_ROWS, and
for held rows (sparse_rows.RowTables.held) at most what keeps a step's one-hot work, R · pairs ·
entries ([R, C, W] in held_finish), within FACTOR_STEP_WORK — one warp does it element by element,
on every row of the critical path. Measured on the H100 (float64, wavefront schedule, one warp):
2026-11-25 (figures/data/held_ab_*), ILU(0) on 2D Poisson 1000² 5.8 ms at R = 4 against 7.0 at
R = 16, IC(0) 7.3 against 8.7; 2026-11-26 (figures/data/block_rows_factor_*), R = 1 / 2 / 4:
27-point grid (C · W = 512) ILU(0) 4.96 / 7.24 / 11.2 ms, IC(0) 8.65 / 10.9 / 13.8; 3D Poisson
(C · W = 32) ILU(0) 3.11 / 2.00 / 1.50, IC(0) 3.75 / 2.30 / 1.82; 2D (C · W = 16) ILU(0) 4.87 /
5.24 / 5.83, IC(0) 7.35 / 7.99 / 7.01. 256 gives R = 1 to both 27-point pairs (IC(0)'s C · W is
256: with 512 it took R = 2, 10.9 ms) and keeps R = 4 on the 2D and 3D grids. With the grid
of operands (the 27-point rows, sparse_rows.GRID_WORK) R = 2 was slower than R = 1 too (H200,
2026-11-29, flag executor, sparse-fusion / wavefront schedule: ILU(0) 5.23 / 4.60 ms against
3.44 / 3.22, IC(0) 3.98 / 3.92 against 3.49 / 3.20; figures/data/grid_ab_27_3d_*)."""
WIDE_FACTOR_BLOCK_ROWS = 8
"""R of the dataflow executor on a factor pair whose joint DAG's levels hold at least WIDE_LEVELS
iterations on average (factor_block_rows' `wide`: the 3D grid, 1M rows in 299 levels; the
power-law graph, 56 levels); else FACTOR_BLOCK_ROWS, the step-work cap applying either way.
Measured on an H200 (2026-11-29, float64, package CLI, medians of 3 interleaved rounds, every
output checked first, cuSPARSE in the same call, figures/data/factor_rows_cli_*), ms at R = 2 / 4
/ 8 / 16, sparse-fusion schedule (wavefront):
  3D ILU(0) 1.29 / 0.941 / 0.873 / 1.15 (1.55 / 1.01 / 1.02 / 1.11), IC(0) 1.21 / 1.07 / 0.905 /
    1.11 (1.50 / 1.23 / 1.06 / 1.20); cuSPARSE 2.50 / 2.55;
  power-law ILU(0) 2.08 / 1.34 / 1.23 / 1.29 (2.11 / 1.32 / 1.17 / 1.16), IC(0) 1.53 / 1.23 /
    0.906 / 1.01 (1.65 / 1.18 / 0.917 / 0.893); cuSPARSE 2.62 / 1.49;
  2D (2 000 levels, narrow) ILU(0) 2.32 / 2.69 / 3.25 / 2.76 (2.70 / 2.80 / 3.47 / 3.76), IC(0)
    2.83 / 2.55 / 2.77 / 3.67 (3.00 / 2.88 / 3.50 / 3.87); cuSPARSE 11.3 / 11.9.
On wide levels a block of 8 puts more of the warp's 32 lanes to work (held rows of 4 entries
on the 3D grid, 8 on the graph) and halves the blocks; on the 2D grid, 500 rows a level, R = 8
was slower (why was not profiled). The 2D ILU(0) ran fastest at R = 2 under the sparse-fusion
schedule and its IC(0) at R = 4; no rule that tells them apart was tried. The flag executor keeps
FACTOR_BLOCK_ROWS (R = 8 not measured with it)."""
DEPS = 8                 # flags polled at once by a waiting program
NUM_WARPS = 1            # a block is small: one warp keeps a dependence hop short
NAP_NS = 0
"""ns a waiting program of a sync-free executor sleeps between polls (dataflow: module docstring).
The flag executor takes it too since 2026-11-27; on the factor pairs (H100, float64, package CLI,
figures/data/flag_nap_*) 150 ns against none, ILU(0) / IC(0), wavefront schedule: 27-point 5.48 /
6.81 against 5.05 / 7.49 ms, 3D 1.69 / 1.61 against 1.67 / 1.75, 2D 5.87 / 7.02 against 5.80 /
7.17; sparse-fusion schedule: 27-point 5.43 / 7.44 against 5.46 / 7.54, 3D 1.61 / 1.75 against
1.60 / 1.75, 2D 5.92 / 7.58 against 5.83 / 7.21. No setting wins; none is kept. On the dataflow
executor's factor kernel of 2026-12-05 (H100, A/B in one process, figures/data/nap_ab_h100_*), ms,
none / 100 / 400 ns: 27-point ILU(0) 1.462 / 1.486 / 1.556, IC(0) 1.341 / 1.363 / 1.421, power-law
ILU(0) 1.072 / 1.079 / 1.097."""
CHAIN_STEPS = {"chains": 16, "segments": 16}   # links per chain block (piece) at most (module docstring)
SEG_MAX = 128            # segments: links per piece at most (the lanes of one program)
WIDE_LEVELS = 2048       # dataflow: iterations per joint-DAG level from which blocks hold 8 (dataflow_shape)
BUSY_ENTRIES = 5000      # dataflow: entries per joint-DAG level from which tickets are held ahead (dataflow_shape)
PROGRAMS_PER_SM = 16     # dataflow, chains, segments: persistent programs per SM, 0 = one per block (docstring)
WIDE_PROGRAMS_PER_SM = 32  # dataflow: persistent programs per SM where rows take the wide stage (dataflow_programs)
LONG_PROGRAMS_PER_SM = 8   # dataflow: persistent programs per SM where records hold more than CHUNK slots (same)
WIDE_TRIP_DIV = 2
"""dataflow: tail_sum's wide trips over a row of more than 4·CHUNK entries take 32·CHUNK /
WIDE_TRIP_DIV of them. The wide stage's vectors set the kernel's registers (ncu on the power-law
sptrsv_spmv, H100: 122 registers a thread with trips of 256, 72 with 128). Measured on the H100
(2026-11-27, power-law graph, float64, wavefront schedule, figures/data/trip_*), sptrsv_spmv /
spmv_sptrsv / sptrsv_sptrsv at 16 programs per SM: TRIP_DIV 1 (122 registers) 0.800 / 0.666 /
1.672 ms, 2 (72) 0.757 / 0.656 / 1.329, 4 (64) 0.797 / 0.658 / 1.601. Why 2 is fastest is not
known: not more resident programs (24 or 32 per SM were no faster with any of them, though 72
registers allow 28), and capping the registers instead (maxnreg 64 / 72 / 80) spilled and lost
10–35 % (figures/data/regs_*). The grids never take the wide stage."""
CLAIMS = ("counter", "stride")
CLAIM = "stride"
"""The flag and dataflow executors (STRIDING): how a persistent program finds its next block (one
program per block, programs_per_sm = 0, always takes a ticket). "counter": the next ticket of one
atomic counter (the tickets' argument, module docstring). "stride": program p of P runs blocks p,
p + P, p + 2P, … in ticket order, no atomic. The lowest unfinished block is then the current
block of its program, whose earlier blocks are lower and done, and everything it waits for is
lower still and done — if every program runs: so the launch is cooperative (all P programs
resident at once, or the launch fails). The next block being known, the dataflow executor
prefetches its record (tickets_ahead 2), except over flat records (_flat).
Why: on the H100 one int32 counter serves a relaxed atomic every 0.75 ns however many programs
ask (2026-11-27, 1 056–4 224 one-warp programs, figures/data/ticket_batch_probe_*), so 500 000
tickets — the power-law graph's blocks of 4 — cost 0.38 ms, against cuSPARSE's 0.41 ms for the
whole sptrsv_spmv. Taking several blocks per ticket, run one after another, was slower everywhere
(2 a ticket: power-law 0.84 / 0.65 / 1.99 ms against 0.75 / 0.65 / 1.33, 2D 2.79 / 2.91 / 6.16
against 1.29 / 1.29 / 2.45; not kept). Striding, measured on the H100 (package CLI, float64,
wavefront schedule, sptrsv_spmv / spmv_sptrsv / sptrsv_sptrsv, figures/data/stride_*; the counter
in the A/B probe before it, stride_probe_*, 0.754 / 0.661 / 1.327 ms on the power-law graph):
power-law 0.507 / 0.496 / 1.110 ms (24 programs per SM, dataflow_programs), 3D 0.337 / 0.328 /
0.500 against the counter's 0.449 / 0.432 / 0.579, 27-point 0.429 / 0.424 / 0.693 against 0.468
/ 0.466 / 0.757, 2D 1.208 / 1.193 / 2.283 against 1.288 / 1.292 / 2.450."""
FLAG_PROGRAMS_PER_SM = 0
"""The flag executor's persistent programs per SM (0: one program per block, a ticket each).
Measured on the H100 (2026-11-27, float64, wavefront schedule, figures/data/flagstride_probe_*,
resident_check_*), ILU(0) / IC(0), one program per block (two runs) against striding programs:
27-point 5.25–5.38 / 6.75–7.07 ms against 5.62 at 16 per SM / 6.65 at 32 (capped at 8), 3D
1.63–1.65 / 1.62–1.77 against 1.53 / 1.55 at 32 (capped at 28 / 24) but 2.56 / 2.56 at 8, 2D 5.91–
5.98 / 7.25–7.27 against 5.64 / 6.79 at 8, power-law 3.86–4.00 / 2.08–2.16 against 3.27 / 2.02 at
16; taking tickets at 16 per SM was no faster than striding. No count wins everywhere, so one
program per block stays: these kernels are bound by their rows' work (ncu on the 27-point ILU(0),
figures/data/ncu_flag_ilu27_*: 113 registers, 16 programs an SM, 44 % of the cycles between a
warp's instructions waiting on L1TEX loads), not by the tickets. Checked again on an H200 for the
factor pairs the values-as-flags kernel runs (2026-12-04, dataflow executor, sparse-fusion
schedule, A/B in one process, 5 rotated rounds, outputs checked, figures/data/flag_stride_h200_ab_*;
ms, one program per block against striding at 4 / 8 / 16 an SM): 27-point ILU(0) 1.780 against
3.899 / 2.474 / 2.136, IC(0) 1.758 against 3.651 / 2.268 / 1.906; power-law ILU(0) 1.087 against
2.753 / 1.606 / 1.100, IC(0) 0.606 against 1.927 / 1.139 / 0.733. Striding calls are not replayed
as graphs (replays_graph); with replays_graph patched so that they are (a second process,
figures/data/flag_stride_graphed_ab_*, one program per block against 12 / 16 an SM): 27-point
ILU(0) 1.781 against 2.150 / 2.098, IC(0) 1.762 against 1.954 / 1.848, power-law ILU(0) 1.102
against 1.251 / 1.115, IC(0) 0.601 against 0.814 / 0.686. Again with walked rows in blocks of
their own (WALK_ALONE), whose stamps fill the SMs' slots (H100, 2026-12-06, A/B in one process,
figures/data/counter_ab_h100_*), power-law ILU(0) one program per block 0.866–0.877 ms against
persistent programs taking tickets from the counter at 12 / 21 an SM 1.173 / 0.995 (replays_graph
patched so that their calls replay graphs too) and 0.987 at 21 not replayed; float32 0.747–0.770
against 0.906 / 0.821 / 0.808; IC(0) 0.599–0.603 against 0.769 / 0.618 / 0.653. So launching a
program a block is not what bounds these kernels' rate."""
FUSE_ROWS = True
"""The flag executor's default for fuse_rows (fused_rows): run a factor pair's solve row in the
program of its factor row wherever the schedule puts the two in one partition. Measured on the
H100 (2026-11-27, float64, natural order; module docstring and figures/data/fused_*): with the
sparse-fusion schedule, fused against apart, the A/B probe's medians of 3 rounds gave 3D ILU(0) /
IC(0) −17 / −13 %, 27-point −2 / −18 %, 2D +3 / −5 %; the package CLI the same afternoon (one
run each) 3D 1.45 / 1.56 ms against 1.62 / 1.73, 27-point 5.52 / 6.30 against 5.41 / 7.58, 2D
6.52 / 6.94 against 6.12 / 7.53, power-law 4.18 / 1.75 against 4.15 / 2.19. On the power-law graph,
whose rows walk, the fused solve walked its tables after the factor row (A/B, 3 rounds: ILU(0)
3.16 against 2.96 apart); since it fetches them before the wait, 2.87 against 3.28
(figures/data/fused_ab_powerlaw_*). Where a factor row's
work dwarfs its solve (27-point ILU(0): 13 held steps over 27 entries) or a hop's latency bounds
the time (2D) it gains nothing or loses a few per cent; no rule was tried that would tell those
apart from the rest, so it stays on — except for the dataflow executor where rows walk
(fuses_rows). On the H200 with the held rows' grids (2026-12-03, dataflow executor, A/B in one
process, 5 rotated rounds, figures/data/ab_fuse_rows_*), fused against apart, ms: 3D ILU(0) / IC(0)
0.616 / 0.604 against 0.832 / 0.908, 27-point 1.786 / 1.761 against 2.543 / 1.840, 2D 1.995 /
2.130 against 2.758 / 3.059, power-law IC(0) 0.766 against 0.935; float32 3D ILU(0) 0.523 against
0.824, 27-point 1.494 against 2.065. Apart, a solve row is one more block a level, a hop after
its factor row (not stamped)."""


def fuses_rows(executor, pair, tables) -> bool:
    """fuse_rows when `prepare` is not given it: FUSE_ROWS, except on the dataflow executor (values
    as flags) for a factor pair some of whose rows walk in memory (RowTables.walks). Measured on
    an H200 (2026-11-29, float64, package CLI, medians of 3 rounds,
    figures/data/data_cli_powerlaw_*), the power-law ILU(0) (730 hub rows walk) with the
    sparse-fusion schedule took 2.29 ms fused against 1.63 apart (the flag executor in the A/B
    call the same morning: 2.44 fused, wavefront 2.51); its IC(0), where no row walks, 1.42
    against 1.44. Where no row walks, the dataflow executor's fused rows won or tied as the
    flag executor's did (3D ILU(0) / IC(0) 0.97 / 1.28 against 1.09 / 1.39 ms, 2D IC(0) 4.36 against
    4.78, 27-point IC(0) 6.60 against 7.62), 2D ILU(0) excepted (3.24 against 3.00). Why the
    walked rows make fusing lose there was not profiled. Again on 2026-12-03 (H200, A/B in one
    process, figures/data/ab_fuse_rows_*): power-law ILU(0) 1.681 ms fused against 1.254 apart.
    Tried, not kept (figures/data/ab_fuse_held_*, its .diff the code): fusing only the held rows,
    the walked hubs apart, with the walked rows' fused-solve code not compiled — 1.407 against
    1.295 apart, float32 1.166 against 1.073 (every row fused 1.743 / 1.427); so it is not the
    hubs' own fused solves that lose, and apart stays. Again on an H100 (2026-12-06, A/B in one
    process, figures/data/fuse_walked_ab_h100_*): 1.487 ms fused against 1.019-1.030 apart, float32
    1.200 against 0.863-0.899. Stamped the same day (figures/data/stamps_powerlaw_fuse_h100_*):
    apart, the first 2 113 blocks claimed wait on the hub rows and blocks start at the throughput
    phase's rate from about 190 µs; fused, the first 2 112 hold their slots until about 530-670 µs
    (49 critical-path hops, 36 of them through blocks with walked rows, whose walk, copy and solve
    take 15.6 µs at the median against 8.9 apart)."""
    if executor == "dataflow" and pair in dags.FACTOR_PAIRS and tables.walks:
        return False
    return FUSE_ROWS


ONE_WARP = ("dataflow", "chains", "segments")
"""Executors whose programs run one warp. Their waits repeat a block-wide reduction (is any entry
still the sentinel?) as a loop condition, inside persistent ticket loops. With more warps the
H100 hit an illegal memory access: the dataflow executor at R = 8 with 2 warps on the 27-point
spmv_sptrsv, alone in its process, and on the power-law spmv_sptrsv after other runs; the same
options on the power-law graph alone, and R = 4 with 2 warps, ran right (2026-11-26,
figures/data/warps_dataflow_sparse_fusion_*). The cause was not found; more warps were never
faster here (power-law sptrsv_spmv 1.37 ms with 2 warps at R = 8 against 1.20 with one at R = 4),
so these executors take one."""
TUNABLE = {"syncfree": ("block_rows", "nap_ns", "tickets", "programs_per_sm", "claim", "fuse_rows"),
           "dataflow": ("block_rows", "nap_ns", "programs_per_sm", "tickets", "tickets_ahead", "claim"),
           "chains": ("block_rows", "nap_ns", "chain_steps", "programs_per_sm"),
           "segments": ("block_rows", "nap_ns", "chain_steps", "programs_per_sm")}
"""The options of `prepare` each executor takes (the benchmark sweeps and records them)."""


# the default ticket order by executor. Measured on the H100 (2026-11-25, float64, 1M-row grids
# and graph, sptrsv_spmv / spmv_sptrsv / sptrsv_sptrsv, one call, data
# figures/data/tickets_heavy_sparse_fusion_*): for the dataflow executor "mid" against "dag", with
# the sparse-fusion schedule, 2D 1.51 / 1.50 / 2.90 vs 1.61 / 1.76 / 2.90 ms, 27-point 0.63 / 0.64 /
# 1.39 vs 0.72 / 0.73 / 1.48, 3D 3–6 % faster or even, the power-law graph within 1.3 % either way
# (geometric mean 0.95); with the wavefront schedule 0.98, its worst case the power-law
# sptrsv_spmv (1.52 vs 1.33 ms). The factor pairs take FACTOR_TICKETS instead.
TICKET_ORDER = {"syncfree": "dag", "dataflow": "mid"}

# the default ticket order of the factor pairs (on the flag executor's kernel, whichever executor
# runs them): as late as possible. Measured on an H200 (2026-12-03, sparse-fusion schedule, in one
# process, 5 rotated rounds of do_bench medians). Against "dag" twice and "mid", float64
# (figures/data/factor_tickets_*): power-law IC(0) 0.630 ms against 0.712 / 0.712 (every round
# faster), "mid" 0.722; the grids within the rounds' spread (3D ILU(0) 0.638 against 0.633 /
# 0.635, IC(0) 0.606 against 0.608; 2D ILU(0) 1.919 against 1.922; 27-point ILU(0) 1.795 against
# 1.787 / 1.791). Against the code before ("dag", twice; figures/data/ab_factor_alap_*): power-law
# IC(0) 0.600 against 0.677 / 0.678, float32 0.480 against 0.560 / 0.560, ILU(0), whose rows run
# apart, 1.102 against 1.185 / 1.190, float32 0.929 against 1.033 / 1.018; 2D IC(0), 3D IC(0) and
# float32 ILU(0), 27-point IC(0) and float32 ILU(0) within 0.5 % either way.
FACTOR_TICKETS = "alap"


def kernel_of(executor, pair=None) -> str:
    """The executor whose kernel runs `executor` on `pair`: the dataflow executor runs a factor
    pair by the flag executor's kernel with the values as flags (_syncfree's DATA), taking that
    executor's options and defaults; otherwise the executor itself."""
    return "syncfree" if executor == "dataflow" and pair in dags.FACTOR_PAIRS else executor


def tunable(executor, pair=None) -> tuple:
    """The options of `prepare` that `executor` takes on `pair` (TUNABLE of its kernel_of)."""
    return TUNABLE.get(kernel_of(executor, pair), ())


def tuning_defaults(executor, pair=None) -> dict:
    """What `prepare` uses for each of `executor`'s options (tunable) when it is not given (for
    `pair`, where the default depends on it); None where it depends on the matrices too: R of the
    flag executor on the factor pairs (factor_block_rows), R and tickets ahead of the dataflow
    executor (dataflow_shape), fuse_rows of the dataflow executor on a factor pair (fuses_rows)."""
    data = kernel_of(executor, pair) != executor
    executor = kernel_of(executor, pair)
    factor = executor == "syncfree" and pair in dags.FACTOR_PAIRS
    by_matrix = executor == "dataflow" or factor
    programs = _default_programs(executor)
    every = {"block_rows": None if by_matrix else BLOCK_ROWS.get(executor, 1), "nap_ns": NAP_NS,
             "chain_steps": CHAIN_STEPS.get(executor),
             "programs_per_sm": programs,
             "tickets": FACTOR_TICKETS if factor else TICKET_ORDER.get(executor),
             "tickets_ahead": None, "claim": default_claim(executor, programs),
             "fuse_rows": None if data else FUSE_ROWS}
    return {k: every[k] for k in TUNABLE.get(executor, ())}


def _default_programs(executor):
    """Persistent programs per SM when not given: None for the dataflow executor (dataflow_programs,
    by the pattern), FLAG_PROGRAMS_PER_SM for the flag executor, else PROGRAMS_PER_SM."""
    return None if executor == "dataflow" else FLAG_PROGRAMS_PER_SM if executor == "syncfree" else PROGRAMS_PER_SM


def default_claim(executor, programs_per_sm) -> str:
    """How `executor`'s programs find their blocks when `claim` is not given: CLAIM for the
    persistent programs of the STRIDING executors (programs_per_sm None: by the pattern, always
    persistent), else "counter" (one program per block, or an executor that only takes tickets)."""
    return CLAIM if executor in STRIDING and programs_per_sm != 0 else "counter"


LEVELS_UP_TO = {"cuda": 0, "cpu": 1 << 62}
"""executor=None takes "levels" for a schedule of at most this many levels on this device type,
otherwise a sync-free executor: "dataflow" where the pair allows it, else "syncfree". Measured
on an H100 (figures/data/sparse_fusion_*): the flag executor was 5–14× faster than one launch
per level on every pair, schedule and matrix run (1M-row 2D and 3D Poisson; 299 to 3998
levels), and the dataflow executor 1.9–2.2× faster than the flag executor on the 2D Poisson
pairs it can run. On the shallowest DAG measured, the power-law graph's 56 levels (2026-11-26,
figures/data/levels_probe_sparse_fusion_*), one launch per level took 1.97 / 2.43 ms on sptrsv_spmv /
spmv_sptrsv against the dataflow executor's 1.20 / 0.95: the launches are host-bound. Captured in a
CUDA graph (which `prepare` does not do) they took 1.37 / 0.78 ms: spmv_sptrsv's 1M independent
SpMV rows go faster as one wide launch, the solve does not. In the interpreter the level
executor runs fewer, larger programs, which the interpreter executes faster."""


def factor_block_rows(tables, wide: bool = False) -> int:
    """The default R for a factor pair with these RowTables on the flag executor's kernel: the
    held lanes within FACTOR_BLOCK_ROWS (WIDE_FACTOR_BLOCK_ROWS if `wide`: the dataflow
    executor on wide levels, _wide) and FACTOR_STEP_WORK, down to a power of two."""
    R = tables.held_lanes(WIDE_FACTOR_BLOCK_ROWS if wide else FACTOR_BLOCK_ROWS, FACTOR_STEP_WORK)
    return 1 << (R.bit_length() - 1)


def dataflow_shape(schedule, mats, tables) -> tuple:
    """(R, tickets_ahead) of the dataflow executor for this pair and pattern, from the joint DAG's
    average level (tickets_ahead as the ticket counter takes it; striding programs, CLAIMS, take
    2). A level of at least BUSY_ENTRIES entries keeps the programs busy: throughput, not the
    chain of waits, bounds it, so a program holds its next ticket (and prefetches its
    record) while its block waits (2); a lighter one takes it after (0). At least WIDE_LEVELS
    iterations a level, and no row longer than CHUNK: blocks of 8 halve the tickets; else 4.
    Swept on the H100 (2026-11-26, float64, wavefront schedule, figures/data/records_sweep_*,
    records_sweep27_* and pps_records_*), ms for sptrsv_spmv / spmv_sptrsv / sptrsv_sptrsv at
    (R, ahead), with each pair's iterations and entries a level:
      3D Poisson (6 700 and 33 000; the two solves 3 400 and 10 000): (8, 2) 0.46 / 0.44 / 0.59,
        (8, 0) 0.47 / 0.46 / 0.70, (4, 0) 0.64 / 0.62 / 0.74;
      2D Poisson (1 000 and 3 500; 500 and 1 000): (4, 0) 1.29 / 1.29 / 2.45, (4, 2) 1.34 / 1.38 /
        2.50, (8, 2) 1.39 / 1.45 / 2.60;
      27-point (1 200 and 23 000; 600 and 7 500; 32 slots): (4, 0) 0.58 / 0.56 / 0.94, (4, 2) 0.59
        / 0.57 / 0.80, (8, 0) 0.77 / 0.76 / 1.22;
      power-law graph (36 000 and 180 000; 18 000 and 55 000; rows of thousands): (4, 2) 0.84 /
        0.68 / 1.82, (4, 0) 0.89 / 0.71 / 1.76, (8, 2) 0.85 / 0.62 / 2.46.
    BUSY_ENTRIES lies between the 2D grid's 3 500 (holding tickets cost 2–7 %) and the 27-point
    solves' 7 500 (it saved 15 %); the 27-point grid's other pairs lose 2 % with it. The rule
    misses the power-law spmv_sptrsv by 9 % (it wants R = 8, which costs its two solves 35 %); a
    rule per pair was not tried. Measured with the rule, the 27-point grid's three pairs took
    0.584 / 0.567 / 0.812 ms (records_busy27_*). 24 and 32 programs per SM instead of 16 were
    slower on every grid and no faster on the power-law graph (pps_records_*), whose kernel's
    registers then let an SM hold only 16 — and with fewer since, 24 were still no faster
    (WIDE_TRIP_DIV)."""
    depth = _depth(schedule, mats)
    busy = int(tables.ent_ptr[-1]) >= BUSY_ENTRIES * depth
    return (8 if _eight_rows(schedule, mats, tables) else 4), (2 if busy else 0)


def _eight_rows(schedule, mats, tables) -> bool:
    """dataflow_shape's blocks of 8: the joint DAG's levels hold at least WIDE_LEVELS iterations on
    average and no row is longer than CHUNK (the rule looks_early follows too)."""
    return _wide(schedule, mats) and tables.longest <= CHUNK


def _depth(schedule, mats) -> int:
    """Levels of the pair's joint DAG (at least 1)."""
    return max(int(_joint(schedule, mats)[1].max(initial=-1)) + 1, 1)


def _wide(schedule, mats) -> bool:
    """Whether the joint DAG's levels hold at least WIDE_LEVELS iterations on average."""
    return schedule.n1 + schedule.n2 >= WIDE_LEVELS * _depth(schedule, mats)


def writes_row_order(schedule, mats) -> bool:
    """Whether the dataflow kernel also stores each result at its place in row order (DIRECT,
    _dataflow) instead of a gather putting the slots back after the launch: where the joint DAG's
    levels hold fewer than WIDE_LEVELS iterations on average. Before 2026-11-27 the gather went
    through a temporary and a copy: on the 3D grid 20 µs of gather and 11 of copy beside a kernel
    of 280 (torch.profiler, figures/data/prof_df_*). Measured on the H100 (float64, wavefront
    schedule, medians of 3 interleaved rounds, figures/data/out_ab_*), sptrsv_spmv / spmv_sptrsv /
    sptrsv_sptrsv in ms:
      direct stores against the old gather and copy: 2D 1.182 / 1.166 / 2.255 against 1.217 /
        1.203 / 2.295, 27-point 0.423 / 0.416 / 0.685 against 0.432 / 0.427 / 0.696 (the kernel as
        fast as before); 3D 0.357 / 0.347 / 0.514 against 0.345 / 0.337 / 0.510 (the kernel 45 µs
        slower: its wide levels keep the memory system busy, and the scattered stores add to it);
      the gather straight into the outputs (index_select), direct stores and the old way, in a
        later call: 3D 0.336 / 0.325 / 0.500, 0.360 / 0.346 / 0.518 and 0.349 / 0.340 / 0.514;
        power-law graph 0.507 / 0.499 / 1.096, 0.515 / 0.501 / 1.096 and 0.518 / 0.511 / 1.110.
    The 2D and 27-point grids' direct stores were not timed against the gather without the copy;
    the copy alone took 11 µs on the 2D grid and the direct stores saved 35."""
    return not _wide(schedule, mats)


SECTOR_SLOTS = True
"""Whether a dataflow block's output slots start a 32-byte sector of their own (slot_stride)."""


def slot_stride(R, dtype) -> int:
    """How far apart in VEC the dataflow plan puts consecutive blocks' slots (_dataflow's RS): R,
    or with SECTOR_SLOTS at least a 32-byte sector's worth, so that no two blocks' results share
    the sector their readers poll (4 float32 lanes fill half of one; the rest of it is left
    unused). Measured on an H200 (2026-12-03, A/B in one process against a7e7fbc, old twice, 5
    rotated rounds, every output checked first; figures/data/sector_slots_ab_*), 27-point grid,
    float32, blocks of 4: sptrsv_spmv / spmv_sptrsv / sptrsv_sptrsv 0.264 / 0.264 / 0.467 ms
    against 0.301 / 0.297 / 0.523 — the float32 rows had been slower than float64's (0.297 /
    0.293 / 0.514), whose blocks of 4 fill a sector each. A 128-byte line per block instead
    (float64 slots 16 apart) was slower: 27-point sptrsv_spmv 0.301 against 0.295, 3D (blocks of
    8) 0.231 against 0.227 (figures/data/line_slots_ab_*). The sector is aligned where N_IN (the
    vector's length) is a multiple of a sector's entries, as on every benchmark matrix; else
    each block's sector straddles two."""
    if not SECTOR_SLOTS:
        return R
    return max(R, 32 // dtype.itemsize)


def looks_early(schedule, mats, tables) -> bool:
    """Whether striding dataflow programs run as a software pipeline (_dataflow's EARLY,
    _pipelined), reading the next blocks' records and entries before their block waits: where
    EARLY_LOOK and either the blocks hold 8 rows (dataflow_shape: the joint DAG's levels hold at
    least WIDE_LEVELS iterations on average, and no row is longer than CHUNK) or the records are
    long (_long_records: the 27-point grid, since 2026-12-02). On wide levels the
    blocks a program takes next were mostly written long before, so the early reads find them
    and the round trips of two blocks overlap; on narrow levels the early reads mostly find the
    sentinel and poll again, and the power-law graph's hub rows (tail_sum) lose too. Measured on
    the H100 (2026-11-27, float64, one prepared run each, interleaved rounds, every output checked
    first), sptrsv_spmv / spmv_sptrsv / sptrsv_sptrsv in ms, "1" a first version that loaded a
    block's positions with the rest of its record (one block ahead, not two):
      wavefront schedule, as before → 1 (figures/data/early_look_ab_*): 3D grid 0.292 / 0.274 /
        0.430 → 0.269 / 0.258 / 0.415 (with no poll waiting 0.200 / 0.203 / 0.213 → 0.187 /
        0.196 / 0.190); 27-point grid even (0.333 / 0.323 / 0.542 → 0.335 / 0.325 / 0.548); 2D
        grid 0.981 / 0.959 / 1.870 → 1.015 / 1.000 / 1.943; power-law graph 0.475 / 0.476 / 1.076
        → 0.524 / 0.512 / 1.481;
      sparse-fusion schedule, 3D grid (figures/data/early_look2_ab_*): as before 0.295 / 0.281 /
        0.447, "1" 0.274 / 0.263 / 0.435, this pipeline 0.274 / 0.259 / 0.421, and it at 24
        programs an SM 0.313 / 0.265 / 0.466;
      on an H200 (2026-12-02, sparse-fusion schedule, same plans, 5 rotated rounds,
        figures/data/early_27pt_*, early_2d_*), without → with the pipeline: 27-point grid at 8
        programs an SM (LONG_PROGRAMS_PER_SM) 0.312 / 0.306 / 0.517 → 0.296 / 0.293 / 0.511 (at 12
        and 16: 0.306 / 0.300 / 0.522 and 0.316 / 0.310 / 0.540; at 6 and 7, later,
        figures/data/pps_f64_27pt_*: 0.299 / 0.293 / 0.505 and 0.296 / 0.290 / 0.509), its
        records of 32 slots a lane being a round trip the pipeline hides; in float32 even at 8
        (0.302 / 0.297 / 0.524 against 0.300 / 0.295 / 0.523, figures/data/pps_f32_27pt_*); 2D
        grid at 16 0.966 / 0.950 / 1.857 → 0.965 / 0.955 / 1.864, not taken."""
    return EARLY_LOOK and (_eight_rows(schedule, mats, tables) or _long_records(record_shape(tables)))


def reads_every_slot(shape) -> bool:
    """Whether the pipelined loop (looks_early) reads every entry slot of a record instead of each
    block's width first (_dataflow's EVERY): where EVERY_SLOT and the records hold CHUNK slots a
    lane (not _long_records). A half of the pipelined loop issues the next blocks' loads from
    values loaded a half before (positions, widths); where a program's blocks wait little that
    issue waited about a round trip, 0.45 µs (stamps TA to TB of flow_stamps.py, H200,
    2026-12-02, figures/data/flow_stamps_half_*: 27-point 0.448, 3D 0.416 µs median). Without
    the widths, measured on an H200 (2026-12-02, sparse-fusion schedule, one process a variant,
    every output checked first), ms: a screen with every width CHUNK (float64, two processes of
    each, figures/data/ab_width_*): 3D sptrsv_spmv 0.2335 / 0.2336 → 0.2280 / 0.2286; 27-point
    sptrsv_spmv / spmv_sptrsv 0.2950 / 0.2915 → 0.3063 / 0.3030, its 32-slot records' padding
    (rows of 14 and 27) costing more than the wait; this rule against none (figures/data/
    ab_every_*), 3D sptrsv_spmv / spmv_sptrsv / sptrsv_sptrsv 0.2322 / 0.2258 / 0.3746 → 0.2280 /
    0.2214 / 0.3720, float32 sptrsv_spmv 0.2153 → 0.2117."""
    return EVERY_SLOT and not _long_records(shape)


def _long_records(shape) -> bool:
    """Whether the dataflow records of this shape (record_shape) hold more than CHUNK entry slots
    a lane and every row fits in them (record_chunk; the 27-point grid's 32): looks_early's second
    case. Without the pipeline
    most of a program's gap between blocks there was the next record's round trip (flow_stamps:
    0.38 µs of 0.54 on the 27-point grid), which the pipeline issues while the block before
    waits."""
    return shape["CHUNK"] > CHUNK and not shape["TAIL"]


def dataflow_programs(tables) -> int:
    """Persistent programs per SM of the dataflow executor for this pattern: WIDE_PROGRAMS_PER_SM
    where its kernel takes the wide stage (rows longer than 4·record_chunk entries: the hubs of a
    power-law graph), LONG_PROGRAMS_PER_SM where its records hold more than CHUNK slots a lane
    (record_chunk: rows of 9 to RECORD_CHUNK entries, the 27-point grid's), else PROGRAMS_PER_SM.
    A program whose block waits polls all its rows' pending entries, up to R·record_chunk loads a
    poll, and the programs that run ahead of the critical path mostly poll; with long rows fewer
    of them leave the L2 to the ones that can finish. Measured on the H100 (2026-11-27, float64,
    sparse-fusion schedule, one prepared run each, 2 interleaved rounds,
    figures/data/programs_ab_*), sptrsv_spmv / spmv_sptrsv / sptrsv_sptrsv in ms at 16 / 12 / 10
    / 8 programs an SM: 27-point grid (32 and 16 slots) 0.349 / 0.335 / 0.331 / 0.328, 0.340 /
    0.330 / 0.328 / 0.325, 0.602 / 0.584 / 0.578 / 0.568; 2D grid (8 slots) 1.029 / 1.036 / 1.045
    / 1.066, 1.021 / 1.028 / 1.039 / 1.055, 1.997 / 2.000 / 2.016 / 2.033; 3D grid (8 slots)
    0.274 / 0.279 / 0.293 / 0.316, 0.258 / 0.275 / 0.290 / 0.312, 0.419 / 0.414 / 0.419 / 0.440.
    Later the same evening (same data), 8 / 6 / 4 on the 27-point grid: 0.332 / 0.346 / 0.379,
    0.326 / 0.338 / 0.372, 0.571 / 0.559 / 0.559 — the two solves 2 % faster below 8, the other
    pairs slower. Earlier, with striding programs (2026-11-27,
    float64, package CLI, figures/data/stride_*), sptrsv_spmv / spmv_sptrsv / sptrsv_sptrsv,
    wavefront schedule: power-law graph 0.507 / 0.496 / 1.110 ms at 24 against 0.615 / 0.597 /
    1.195 at 16; in the probe before it (stride_probe_*) the grids were mixed at 24 (3D 0.340 /
    0.312 / 0.523 against 0.341 / 0.329 / 0.503, 27-point 0.458 / 0.445 / 0.722 against 0.429 /
    0.423 / 0.694, 2D within 1 %). With the ticket counter 24 had been no faster (dataflow_shape):
    the counter's atomics, one per block, were the floor then (CLAIMS). Since hubs run in blocks
    of their own (HUBS_ALONE, 2026-11-28) the power-law graph is faster at 32 than at 24 (0.488 /
    0.405 / 0.416 against 0.500 / 0.438 / 0.447 ms in the order above, sparse-fusion schedule); the
    launch asks for no more than an SM holds (resident_per_sm: 28 of this kernel on the H100)."""
    shape = record_shape(tables)
    if shape["WIDE"]:
        return WIDE_PROGRAMS_PER_SM
    return LONG_PROGRAMS_PER_SM if _long_records(shape) else PROGRAMS_PER_SM


def executors_for(pair: str) -> tuple:
    """The executors that can run `pair`: "chains", "segments" and "bands" only where every
    iteration writes one vector entry once (no factor rows); "dataflow" runs a factor pair by the
    flag executor's kernel with the values as flags (kernel_of)."""
    return EXECUTORS[:3] if pair in dags.FACTOR_PAIRS else EXECUTORS


DATA_HELD_WORK = 8192
"""executor=None runs a factor pair whose held rows do more than this much step work (S · C · W,
RowTables.held_shape) on the flag executor, the others on the dataflow executor (values as
flags) — also a pair whose rows all walk (past HELD_WORK), which the flag executor used to take:
on the 27-point grid after RCM (IC(0), 32 · 32 · 32) the dataflow executor took 4.06 / 4.59 ms
against 32.2 / 21.9 on flags (sparse-fusion / wavefront schedule; cuSPARSE 4.57; H200,
2026-11-29, package CLI, figures/data/grid_cli_rcm27_*). Measured on
an H200 (2026-11-29, float64, A/B in one call, same plans, 3 interleaved rounds,
figures/data/data_flags_ab_*), flags → values as flags, sparse-fusion / wavefront
schedule, ms: 2D ILU(0) 5.97 → 3.44 / 5.55 → 3.08, IC(0) 7.11 → 4.70 / 6.93 → 4.77; 3D ILU(0)
1.24 → 0.95 / 1.39 → 1.03, IC(0) 1.48 → 1.34 / 1.65 → 1.37; power-law ILU(0) 2.44 → 2.15 / 2.51
→ 1.38 — a dependence hop is a store and the load that sees it, with no barrier, release fence
or flag between. The 27-point grid's rows (S · C · W = 8192 and 4096) did not gain then, when
a held step picked its pairs by one-hot masks and that work set the time (ILU(0) 5.45 → 5.43 /
5.10 → 5.64, IC(0) 5.86 → 6.63 / 6.88 → 7.09), and the bound was 1024. Since the steps read
their operands from a grid gathered before them (sparse_rows.held_fetch), the values as flags
win there too (H200, 2026-11-29, figures/data/grid_ab_*, flags → values as flags, 27-point
64³, sparse-fusion / wavefront schedule, ms): ILU(0) 3.44 → 3.12 / 3.22 → 3.58, IC(0) 3.49 →
2.55 / 3.20 → 2.61. Past 8192, on the 27-point grid's ILU(0) after RCM (16384, a grid), flags
stay ahead: 6.90 / 6.63 ms against 7.18 / 7.90 (cuSPARSE 4.50; grid_cli_rcm27_*)."""


def executor_rule(device, schedule, tables=None) -> str:
    """The executor that executor=None picks for this schedule on this device (LEVELS_UP_TO), and
    for a factor pair with these RowTables (DATA_HELD_WORK)."""
    limit = LEVELS_UP_TO.get(device.type, LEVELS_UP_TO["cuda"])
    if schedule.levels() <= limit:
        return "levels"
    if tables is not None and tables.factor and int(np.prod(tables.held_shape)) > DATA_HELD_WORK:
        return "syncfree"
    return "dataflow"


LEAN_ROWS = True
"""Whether executor=None (and executor="dataflow") runs a factor pair by the lean rows where
runs_lean says so (tiers/kernels/sparse_fusion_executors/lean.py). Measured on an H200
(2026-12-03, A/B in one process, 5 rotated rounds of do_bench medians, every output checked
first; figures/data/ab_lean_*), 3D grid 100³, sparse-fusion schedule, lean (twice) against the
flag executor's kernel with the values as flags, ms: ILU(0) 0.502 / 0.500 against 0.603, float32
0.421 / 0.421 against 0.513; IC(0) 0.495 / 0.495 against 0.596 / 0.594 (a first call's rounds
were bimodal, 0.49 and 0.61 for both kernels), float32 0.412 / 0.411 against 0.514; R = 4 lanes a
block instead of 8 slower (0.552, float32 0.433 / 0.433). Wavefront schedule: ILU(0) 0.614
against 0.779, IC(0) 0.600 against 0.785. Package CLI, the same call (table_h200_ac_*): ILU(0)
0.500 ms, 4.99× cuSPARSE (was 4.05×), IC(0) 0.493, 5.16× (was 4.23×), float32 5.94× / 5.88×."""
LEAN_BLOCK_ROWS = 8          # the lean rows' lanes a block on wide levels, when block_rows is not given
NARROW_LEAN_BLOCK_ROWS = 16  # and on narrow levels (lean_defaults)
LEAN_PAIR_BYTES = 8          # bytes from one lean row's pair to the next's on wide levels (the pair at least)
NARROW_LEAN_PAIR_BYTES = 64  # and on narrow levels (lean_defaults)
LEAN_PROGRAMS_PER_SM = 8     # the lean rows' persistent programs an SM, on narrow and wide levels (lean_defaults)


def runs_lean(tables) -> bool:
    """Whether the dataflow executor runs this factor pair by the lean rows (LEAN_ROWS) instead of
    the flag executor's kernel with the values as flags: where every update lands on a diagonal
    (RowTables.updates_only_diagonal: the 5- and 7-point grids, in any order, but also a star's
    hub) and no row has more than CHUNK entries below its diagonal (RowTables.most_lower: a lane
    holds them, lean_plan's CH). Narrow levels take 16 lanes a block (lean_defaults). Measured on
    an H200 (2026-12-03, A/B in one process, 5 rotated rounds, sparse-fusion schedule, every
    output checked first), ms:
      2D grid 1000², ILU(0) by 16 lanes against the values as flags, three calls: 1.881 against
        1.943, 1.796 against 1.930 / 1.926 (figures/data/ab_lean_2d_shapes_*, ab_lean_wide_blocks_*,
        the lean rows launched as they came), and, replaying their graph (LEAN_GRAPHS), 1.796
        against 1.962 (lean_graph_ab_*); float32 1.620 against 1.732, wavefront 1.928 against
        2.595, LBC 1.979 against 2.658 (ab_lean_rule2d_*). By 8 lanes 1.954 and 1.989 graphed; 4
        lanes, 8 or 24 programs an SM and 32 lanes slower (2.19, 2.04, 2.15, 4.84) — all with
        the pairs side by side; since they lie 64 bytes apart 8 programs an SM are faster
        than 16 (lean_defaults);
      2D grid, IC(0): by 16 lanes it lost while its pair held l_ii (2.210 against 2.090, 2.166
        against 2.081; by 8 lanes 2.470 against 2.047): its square root and two divisions sat on
        each level's critical path, which on this grid's 2 000 levels of 500 rows is a level's
        work, 0.54 µs of a level's 0.93 as dev/sparse_fusion/diag_probe.py's copy of the lean rows
        stamped it (3D: 0.32 of 1.38; figures/data/packed_pivots_stamps_*). With 1/l_ii in the pair
        (lean.py's docstring) it wins: 1.611 against 2.117, float32 1.622 against 1.926
        (ic_rsqrt_ab_*);
      3D grid: 16 lanes slower than 8 (ILU(0) 0.810 against 0.560, IC(0) 0.812 against 0.564;
        0.785 against 0.544 graphed)."""
    return LEAN_ROWS and bool(tables.factor) and tables.updates_only_diagonal and tables.most_lower <= CHUNK


def lean_defaults(schedule, mats) -> tuple[int, int, int]:
    """The lean rows' shape where prepare is not given one: (lanes a block, persistent programs per
    SM, bytes from one row's pair to the next's, lean.pair_stride) — LEAN_BLOCK_ROWS and
    LEAN_PAIR_BYTES (the pairs side by side) on wide levels (_wide), the NARROW_ ones on narrow
    levels, and LEAN_PROGRAMS_PER_SM on both. Lanes: measured in runs_lean. Pairs: on the 2D
    grid's 2 000 narrow levels a hop of the chain is the time, and pairs side by side put two
    rows' pairs (float32: four) in a 32-byte sector, stored and polled by different SMs.
    Programs: a 2D level holds about 500 rows, 32 blocks of 16, so most of the 132 × 16 programs
    of the rule before only polled, and once the pairs lay 64 bytes apart fewer polling programs
    left the L2 to the few that work. Measured on an H200
    (2026-12-04, A/B in one process, 5 rotated rounds, every output checked first), ms:
      the gap (figures/data/pair_stride_ab_*, pair_stride_ab2_*), 2D grid 1000², 64 bytes against
        side by side: ILU(0) 1.698 against 1.737 (a first run 1.688 against 1.757), IC(0) 1.469
        against 1.557 (1.472 against 1.566), float32 1.505 against 1.608 and 1.371 against 1.551;
        wavefront ILU(0) 1.816 against 1.937, LBC IC(0) 1.618 against 1.748; 32 bytes between, 128
        and 256 within 2 % of 64. On the 3D grid (wide levels, 7 500 rows a level) gaps cost:
        ILU(0) 0.540 / 0.558 against 0.521 by 32 / 64 bytes, IC(0) 0.437 / 0.455 against 0.418,
        float32 IC(0) by 16 bytes 0.379 against 0.374;
      the programs (lean_shape_2d_ab_*, lean_programs_2d_ab_*), 2D grid, sparse-fusion schedule,
        pairs 64 bytes apart, at 16 / 12 / 10 / 8 programs an SM: ILU(0) 1.693 / 1.552 (a second
        process 1.692 / 1.559 / 1.535 / 1.508), IC(0) 1.505 / 1.352 (1.461 / 1.306 / 1.294 /
        1.261), float32 IC(0) 1.350 / 1.190; 24 slower (1.8–2.1). 8 lanes a block at 12 programs:
        ILU(0) 1.953, IC(0) 1.307. The package CLI then ran 12 (table_h200_am_*); against 8 and 6
        on every schedule and both dtypes (lean_programs_narrow_ab_*, 12 / 8 / 6): sparse fusion
        ILU(0) 1.580 / 1.559 / 1.576, float32 1.368 / 1.328 / 1.331, IC(0) 1.315 / 1.280 / 1.283,
        float32 1.205 / 1.169 / 1.178; wavefront ILU(0) 1.670 / 1.669 / 1.702, IC(0) 1.471 /
        1.455 / 1.482; LBC ILU(0) 1.669 / 1.646 / 1.695, IC(0) 1.473 / 1.458 / 1.485. 8 wins or
        ties all eight, by 0–3 %, and is the rule;
      the programs on wide levels (lean_programs_3d_ab_*), 3D grid 100³, at 16 (PROGRAMS_PER_SM, the
        rule before) / 12 / 20 / 8: sparse fusion ILU(0) 0.492 / 0.484 / 0.512 / 0.491, float32
        0.427 / 0.413 / 0.473 / 0.418, IC(0) 0.415 / 0.399 / 0.431 / 0.404, float32 0.394 / 0.374 /
        0.423 / 0.345 (rounds bimodal, 0.34–0.42, in every runner); wavefront ILU(0) 0.647 / 0.636
        / 0.664 / 0.639, IC(0) 0.532 / 0.519 / 0.560 / 0.508. 8 and 12 both beat 16 (by 0–13 %),
        12 ahead of 8 in four cases of six by 0.5–1.4 %, 8 ahead in two (2 and 8 %) and in the sum;
        so one count, 8, for every level."""
    if _wide(schedule, mats):
        return LEAN_BLOCK_ROWS, LEAN_PROGRAMS_PER_SM, LEAN_PAIR_BYTES
    return NARROW_LEAN_BLOCK_ROWS, LEAN_PROGRAMS_PER_SM, NARROW_LEAN_PAIR_BYTES


# ---------------------------------------------------------------- the flag executor: plan, launch, graphs

PLAN_TIES = "ids"
"""How the flag executor's plan (which the factor pairs take on the dataflow executor too) orders
the iterations of one ticket group before cutting it into blocks (ticket_blocks' `ties`): by id,
so a block holds rows that lie together, as the dataflow executor's records do (ticket_order).
The schedule still decides which rows are fused, and so the DAG the groups come from; where no
row is fused every schedule gives the wavefront schedule's blocks. Measured on an H200
(2026-12-03, float64 unless said, A/B in one process against the schedule's order at 079810b,
5 rotated rounds, every output checked first, figures/data/ab_plan_ties_*; ms, ids / the
schedule's order twice): power-law graph, 1M nodes, IC(0) 0.677 / 0.753, 0.758, float32 0.562
/ 0.637, 0.633, ILU(0) (its rows walk and run apart) 1.246 / 1.288, 1.303; 2D grid ILU(0) 1.918
/ 2.033, 2.043, IC(0) 2.059 / 2.134, 2.117; 27-point ILU(0) 1.774 / 1.798, 1.806, IC(0) 1.805 /
1.816, 1.809; 3D grid even in both dtypes (ILU(0) 0.615 / 0.618, 0.612). A first A/B
(figures/data/ab_ties_powerlaw_*) put the wavefront schedule beside it: power-law IC(0) 0.874.
The vector pairs on the flag executor, which executor=None never picks, take it too, unmeasured."""


WALK_ALONE = True
"""Whether _syncfree_plan gives each walked factor row (RowTables.walked) a block of its own where
blocks hold several rows. A block's walked rows start only once its held rows' operands are in
(held_finish runs first): on the power-law ILU(0) (1M nodes, blocks of 8) 478 of the 492 blocks
holding walked rows held held rows too, and stamps put a hop of about 10 µs between blocks of
walked hub rows on the DAG's levels 13-25 (figures/data/stamps_powerlaw_ilu_h100_2026-12-06.*).
Alone, a walked row waits only for what its own steps read; the plan has 250 969 blocks instead
of 250 027. Among the benchmark's factor pairs only that ILU(0) walks. Measured on an H100
(2026-12-06, A/B in one process, 5 rotated rounds, outputs checked; ms, without / with, three
calls): float64 1.044 / 0.903, 1.069-1.081 / 0.903, 1.012-1.023 / 0.870; float32 0.905-0.952 /
0.831, 0.878-0.909 / 0.778, 0.873-0.883 / 0.745 (figures/data/walk_alone_ab_h100_*,
alone_both_ab_h100_*, walk_alone_r_ab_h100_*; R = 4 and 16 slower with it, striding programs
too). With the copy of only a walked row's rewritten entries beside it: float64 / float32 0.893 /
0.818 in the first call, 0.902 / 0.755 in the second, within the runs' spread; not kept
(walk_alone_ab_h100_2026-12-06_rew_copy.diff)."""


def _syncfree_plan(schedule, mats, tables, R, tickets, fuse_rows, device, waits=True, short=False):
    """(blocks, the block tables on the device, fused rows, whether held rows take their steps in
    two stages): ticket_blocks with ties PLAN_TIES, with the rows the schedule fuses (fused_rows)
    merged when fuse_rows, unless the tickets follow the schedule's own steps (ticket_blocks); and
    for a factor pair each row's first late step (sparse_rows.late_steps, stages_steps); with
    `short` (FETCH_SHORT) and held rows, the table of fetches_short: `u0`, each factor step's
    first pair (HOLD_LEN, which it also reads earlier, covers every row on the device anyway:
    sparse_rows.device_tables), and for blocks of more than one row `blk_pad` (padded_blocks; with
    BLK_REC, block_records) and, with STEP_REC where held rows take a grid, `step_rec` (step_records),
    with FUSE_REC where rows are fused, `fuse_rec` (fused_records).
    Without `waits` (the values as flags, _syncfree's DATA, which polls entries and never reads
    a block's waits) the blocks come from ticket_cut, with no waits to dedupe, and the waits'
    tables are placeholders: on the development machine's CPU the dedupe was a sort of 0.5 s of
    the 27-point grid's ILU(0) prepare."""
    fuse = fused_rows(schedule, mats) if fuse_rows and tickets != "schedule" else None
    fused = fuse is not None and bool((fuse >= 0).any())
    alone = tables.walked_iterations if WALK_ALONE and tables.walks and R > 1 else None
    if waits:
        blk_ptr, seq, dep_ptr, dep_blk = ticket_blocks(schedule, mats, R, tickets, fused, alone, ties=PLAN_TIES)
    else:
        blk_ptr, seq = ticket_cut(schedule, mats, R, tickets, fused, alone, ties=PLAN_TIES)
        dep_ptr = dep_blk = np.zeros(1, dtype=np.int64)     # never read: nothing to upload but a stand-in
    late, staged = np.zeros(1, dtype=np.int32), False
    W = tables.held(R)[0]
    if may_stage(tables, W):
        n1 = tables.n1
        late = rows.late_steps(n1, tables.ent_ptr, tables.ent_val, tables.factor_pattern[1], _joint(schedule, mats)[1])
        # a row with a late step after its first (IC(0)'s diagonal step is never late)
        staged = bool(((tables.hold_len > 0) & (late > 0) & (late < np.diff(tables.ent_ptr[:n1 + 1]))).any())
    host = {"blk_ptr": blk_ptr.astype(np.int32), "blk_iter": seq.astype(np.int32),
            "dep_ptr": dep_ptr.astype(np.int32), "dep_blk": dep_blk.astype(np.int32),
            "fuse": (fuse if fused else np.full(1, -1)).astype(np.int32),
            "x_at": tables.solve_x_at if fused else np.full(1, -1, dtype=np.int32),
            "late": late if staged else np.zeros(1, dtype=np.int32)}
    if short and W:
        ne = int(tables.ent_ptr[tables.n1])
        host["u0"] = np.asarray(tables.upd_ptr, dtype=np.int32)[tables.ent_val[:ne]] if ne else np.zeros(1, np.int32)
        if R > 1 and (len(blk_ptr) - 1) * R * 5 < 2 ** 31:
            pad = padded_blocks(blk_ptr, seq, R)
            host["blk_pad"] = block_records(tables, pad, R) if BLK_REC else pad
            S = tables.held(R)[1]
            if BLK_REC and STEP_REC and rows.grid_layout(tables.held_shape) and W <= 32 \
                    and len(pad) * S * 4 < 2 ** 31:
                host["step_rec"] = step_records(tables, pad, R, S, host["u0"])
            if BLK_REC and FUSE_REC and fused:
                host["fuse_rec"] = fused_records(tables, pad, R, fuse)
    return len(blk_ptr) - 1, rows.to_device(host, device), int((fuse >= 0).sum()) if fused else 0, staged


STAGED_STEPS = True
"""Held factor rows take their steps in two stages (stages_steps). Measured on an H200 (2026-11-29,
A/B in one process per dtype, 3 interleaved rounds, every output checked against float64 first,
figures/data/staged_ab_*), 27-point 64³, two stages against one, ms, sparse-fusion / wavefront
schedule: float64 ILU(0) 2.63 / 3.42 against 3.01 / 3.44, IC(0) 1.95 / 2.33 against 2.44 / 2.49
(cuSPARSE 3.43 / 3.47); float32 ILU(0) 2.21 / 2.93 against 2.24 / 2.68 — the wavefront schedule's
float32 ILU(0) is 9 % slower — IC(0) 1.86 / 2.28 against 2.18 / 2.27. On the power-law graph (1M
nodes), whose rows take their pairs as a list and have 3 steps at the median, two stages were
slower: ILU(0) 1.65 / 1.53 against 1.41 / 1.29, IC(0) 1.21 / 1.29 against 1.06 / 1.06 (a version
that divided in the late stage's steps, staged_ab_try2_*); so only rows that took a grid staged
their steps (since every held row takes a grid, 2026-12-02, may_stage says which). The tries
before the kept kernel are in the same files (try1–try3): the late stage dividing instead of
taking reciprocals made the 27-point ILU(0) 3.17 against 3.23 ms in one process, and zeroing what
the first stage does not await in a one-row block made float32 ILU(0) 2.83 ms against the kept
kernel's 2.21 in a fresh process of each. Waiting only in the steps that the late rows' results
reach (on the 27-point grid 3 of the 13, not 5), with the steps no row runs skipped by a branch,
lost on an H100 (2026-12-05, figures/data/late_reach_ab_h100_*: ILU(0) 1.454 → 1.714 ms, IC(0)
1.332 → 2.156; docs/sparse_fusion_log.md) and was not kept."""
STAGED_ILU_STEPS = 8
"""ILU(0) rows stage their steps only where the held rows have room for this many (may_stage)."""


def may_stage(tables, W) -> bool:
    """Whether a factor pair's held rows (W > 0) may take their steps in two stages (stages_steps;
    _syncfree_plan then asks whether some row has a late step after its first): rows that take a
    grid (held_grid), not in one pass (held_in_one_pass), and IC(0)'s or ILU(0)'s of at least
    STAGED_ILU_STEPS steps. Since every held row takes a grid (sparse_rows.GRID_WORK, 2026-12-02)
    the power-law graph's take one too, and staged, its ILU(0) (4 steps) lost: on an H200
    (2026-12-02, float64, A/B in one process, 5 rotated rounds, figures/data/ab_grid_c_*) 1.45 ms
    staged against 1.31 not and 1.29 as a list at aacb21b (its IC(0), staged, 0.78 ms against 0.85
    as a list: ab_grid_b_*). The 27-point grid's rows (13 steps) gain from the stages (STAGED_STEPS);
    the 2D and 3D grids' rows have no late step after their first."""
    return (held_grid(tables, W) and not held_in_one_pass(tables, W)
            and (tables.factor == rows.IC or tables.held_shape[1] >= STAGED_ILU_STEPS))


def stages_steps(run, W) -> bool:
    """_syncfree's STAGED: a factor pair's held rows on the dataflow executor (DATA) take the
    steps before their first late one (sparse_rows.late_steps) as soon as what those read is
    there, not after every row they read. A row's critical path then holds the steps from its
    late one on, not all of them: on the 27-point grid 5 of an interior row's 13. Where the plan
    says so (_syncfree_plan): held rows that take their pairs as a grid (STAGED_STEPS), not
    held_in_one_pass's, whose steps run at once, and some with steps on both sides of their
    late one; only then does it compute and upload the late steps."""
    return bool(STAGED_STEPS and run.data and W and run.plan[3])


def relooks(run, W, dtype) -> bool:
    """_syncfree's RELOOK: a staged held row (stages_steps) that carries its solve (FUSED) reads
    the x_j still missing once more as soon as its late operands are in, so that the load runs
    beside the steps after them and the solve, after the row's store, finds them there sooner than
    by polling from then on. Only where it was measured to gain: ILU(0) in float64. On an H200
    (2026-12-02, A/B in one process against b896f67, 5 rotated rounds, every output checked first,
    figures/data/ab_relook_*), the 27-point grid's ILU(0), sparse-fusion schedule: 1.83 / 1.82 ms
    against 1.91 / 1.92 and 1.89 / 1.89, in two calls (the package CLI: 1.87 against 1.96 before,
    table_h200_w_* / table_h200_t_*). The other staged rows, A/B'd the same way (2026-12-03,
    ab_relook_c_*; relook everywhere against never, the latter three times): 27-point IC(0) 1.876
    ms against 1.773–1.775 (6 % slower), 27-point ILU(0) in float32 1.619 against 1.573–1.589
    (2 % slower, its rounds spread 1.51–1.63), power-law IC(0) 0.795 against 0.792–0.810 (no
    difference). Unstaged rows (the 2D and 3D grids') lost with it: 3D ILU(0) 0.72–0.74 ms against
    0.65, most likely because a select after the load (vec_relook's, then) made the row wait for
    it before its store. With the load taking x as its `other` instead (ab_relook_d_*, the relook
    after an unstaged row's awaits against none): 3D ILU(0) 0.650 ms against 0.642–0.644, IC(0) 0.636
    against 0.633–0.638, 2D ILU(0) 2.015 against 2.023–2.029, power-law ILU(0) 1.320 against
    1.276–1.318, 27-point IC(0) 1.969 against 1.877–1.879: no gain anywhere, so no unstaged
    relook. Per-block stamps (figures/data/clk_probe_relook_*) put the 3D rows' x_j in memory
    1.4 µs before the row's store anyway, the hop of the factor's own operands being what sets
    their rate. Again after LATE_LOOKS and FETCH_SHORT (H100, 2026-12-05,
    figures/data/relook_ab_h100_*): 27-point ILU(0) 1.491 ms against 1.518 without. The runner's
    own `relook`, where set, decides instead (dev/sparse_fusion/ab_options.py sets it)."""
    rule = run.fused > 0 and run.tables.factor == rows.ILU and dtype == torch.float64
    return stages_steps(run, W) and (rule if run.relook is None else bool(run.relook))


LATE_LOOKS = True
"""Whether staged held rows read their late operands again at every poll of their late pivots
(looks_late; held_finish's LOOK_LATE). Without it a row, once its late pivots are in, checks its
late operands by a poll loop of its own (about 270 sm_90 instructions a thread in the 27-point
ILU(0) kernel: 16 masked float64 loads, their sentinel compares and selects) whose first pass
starts another round trip, although a row's operands come in the same store as its pivot;
stamped on 2026-12-01, those operands were in 1.9 µs (median) after the row's first stage and
its latest predecessor's store (figures/data/clk_probe_*, await2_from_max_T2_pred). On since the
A/B of 2026-12-05 (NVIDIA H200, figures/data/ab_late_sets_*, median of 5 rounds, off → on):
27-point ILU(0) float64 1.801 → 1.598 ms, IC(0) 1.784 → 1.476, ILU(0) float32 1.504 → 1.386;
power-law IC(0) 0.604 → 0.611 (rounds 0.59–0.65 on both sides: no difference). Its companion in
that A/B, LATE_SETS (a row's second stage holding its late steps alone, 3 of a 27-point row's 13
instead of 5, run at once; sparse_rows.late_sets, held_steps' ATONCE), lost alone and beside it:
ILU(0) float64 2.011 ms alone, 1.872 with LATE_LOOKS; IC(0) 1.706 alone (of 1.784), 1.503 with
it (of 1.476); float32 ILU(0) 1.519 and 1.427; power-law IC(0) 0.624 and 0.614. It was removed
on 2026-12-05 (its code: commit 1b428bf). LATE_AHEAD, tried the same day, read the late pivots and
operands once more as soon as the first stage's were in (held_finish's AHEAD, the load beside the
first steps), since stamps put 67 % of the 27-point ILU(0)'s rows past their latest factor
predecessor's store before their first stage's operands were in (figures/data/hop_split_*). At
the register caps it spilled (ILU(0) 40 bytes of stack, IC(0) 48) and lost in float64 on an H100
(ILU(0) 1.460 → 1.511 ms, figures/data/ahead_ab_h100_*); float32 ILU(0) 1.241 → 1.212 and 1.247 →
1.242, IC(0) 0.958 → 0.949 (ahead_f32_ab*): not kept (its code: commit 77af6d1)."""


FETCH_SHORT = True
"""Whether the dataflow executor's factor kernel reads a held row's positions in fewer rounds of
dependent loads (fetches_short). Stamped on 2026-12-05 on an H200
(figures/data/stamps_h200_2026-12-05_ab9ca09.*), a 27-point ILU(0) row on the critical path
took 3.9 µs to read its tables (T0 → T1: seven rounds, BLK_PTR, BLK_ITER, KIND, ENT_PTR and
HOLD_LEN, ENT_VAL, UPD_PTR, UPD_B, each waiting for the one before), started 6.0 µs before its
latest predecessor was done (one program a block: a program starts when another ends), and had
its late operands 2.1 µs after that predecessor was done;
rows whose predecessor stored while few others were polling took 3.4–3.6 µs from that store to
their late operands, against 1.6 where many were, and 12 % started after it. So the row itself
is often late to the wait. Three of the seven rounds can go: BLK_PTR (every block one row),
KIND before ENT_PTR (HOLD_LEN over every row) and UPD_PTR (each step's first pair as a table),
for 4 bytes a factor step and a row more on the device. On since its A/B of 2026-12-05 (NVIDIA
H100 80GB HBM3, one process, 5 rotated rounds, medians, every output checked first,
figures/data/short_fetch_ab_h100_*, short_fetch_powerlaw_ab_h100_*; ms, off → on): 27-point
ILU(0) float64 1.602 → 1.463, IC(0) 1.465 → 1.352, ILU(0) float32 1.388 → 1.260; power-law
IC(0) 0.641 → 0.594, ILU(0) (blocks of 8 rows: no ONE_ROW) 1.134 → 1.093. sm_90 (Triton 3.6)
at the caps: 27-point ILU(0) 4 640 → 4 472 SASS instructions, IC(0) 5 504 → 5 384, none
spilled. One round more can go where blocks hold several rows (the power-law graph's 8): BLK_PTR,
by a table of R rows a block. Tried on an H100 (2026-12-06, figures/data/blk_pad_ab_h100_*.diff,
walk_prefetch_ab_h100_*; ms against the package twice): power-law ILU(0) 1.059 against 1.062 /
1.083, float32 0.922 against 0.922 / 0.898, IC(0) 0.617 against 0.623 / 0.625: within the
package's own spread, not kept. That was before WALK_ALONE, when the ILU(0) waited on its hub
chain; since, both power-law factor pairs are bound by how long a block holds its slot, and the
same diff, timed again, won there and is on (BLK_PAD, padded_blocks; H100, 2026-12-06, one process,
5 rotated rounds, figures/data/slot_time_ab_h100_*, blk_pad_grids_ab_h100_*; ms, package three
times against padded): power-law ILU(0) float64 0.878 / 0.880 / 0.880 → 0.850, IC(0) 0.601 /
0.602 / 0.598 → 0.589; within the spread on the power-law float32 ILU(0) 0.780 / 0.752 / 0.754 →
0.754 and IC(0) 0.498 / 0.500 / 0.505 → 0.497, and on the grids' factor pairs, whose blocks hold
several rows too (3D ILU(0) 0.532 / 0.535 / 0.535 → 0.531, IC(0) 0.436 / 0.435 / 0.439 → 0.436,
ILU(0) float32 0.436 / 0.438 / 0.433 → 0.434; 2D ILU(0) 1.543 / 1.540 / 1.541 → 1.545, IC(0)
1.298 / 1.295 / 1.293 → 1.297). sm_90 (Triton 3.6) at 1M nodes: the power-law ILU(0) needs 91
registers instead of 96, none spilled. The table costs 4 · R bytes a block."""


def padded_blocks(blk_ptr, seq, R) -> np.ndarray:
    """The blocks' rows R to a block, block t's at [t·R, t·R + R), −1 past its last (_syncfree's
    BLK_PAD: one dependent load fewer than BLK_PTR then BLK_ITER)."""
    width = np.diff(blk_ptr)
    pad = np.full(len(width) * R, -1, dtype=np.int32)
    pad[np.repeat(np.arange(len(width)) * R - blk_ptr[:-1], width) + np.arange(len(seq))] = seq
    return pad


BLK_REC = True
"""Blocks of several rows read a record (block_records) instead of BLK_PAD's rows alone: with
each row its KIND, ENT_PTR, ENT_PTR + 1 and HOLD_LEN, so that what held_fetch and affine_fetch
read first comes with the rows, one round of dependent loads fewer again (a table of 20 · R
bytes a block instead of 4 · R). Measured on an H100 (2026-12-06, one process, 5 rotated rounds,
every output checked first, figures/data/blk_rec_ab_h100_*; ms, BLK_PAD's package twice → records):
power-law ILU(0) 0.840 / 0.836 → 0.776, float32 0.741 / 0.741 → 0.693, IC(0) 0.580 / 0.583 →
0.557, float32 0.491 / 0.484 → 0.465; the grids the same (3D ILU(0) 0.530 / 0.528 → 0.530, IC(0)
0.432 / 0.433 → 0.434, 2D ILU(0) 1.533 / 1.531 → 1.533). sm_90 (Triton 3.6) at 1M nodes: the
power-law ILU(0) 91 registers at its cap of 112, IC(0) 95 at 96, none spilled."""


def block_records(tables, pad, R) -> np.ndarray:
    """padded_blocks' rows as records of five rows of R a block (_syncfree's BLK_REC): the rows
    (−1 past a block's last), their kind, first and end entry, and held length (0 where none)."""
    at = np.maximum(pad, 0)
    ent_ptr = np.asarray(tables.ent_ptr)
    return _per_block([pad, np.asarray(tables.kind)[at], ent_ptr[at], ent_ptr[at + 1], tables.hold_len_every[at]], R)


def _per_block(rows_, R) -> np.ndarray:
    """Rows of one value per padded slot (B · R each) as int32 records, block by block: block t's
    k-th row of R at [(t · len(rows_) + k) · R …] (block_records, fused_records)."""
    rec = np.stack(rows_).astype(np.int32)
    return np.ascontiguousarray(rec.reshape(len(rows_), -1, R).transpose(1, 0, 2)).ravel()


STEP_REC = True
"""With BLK_REC, where held rows take their pairs as a grid: each block's step record too
(step_records), so that held_fetch reads its steps' ENT_VAL, ENT_AUX, U0 and STEP_BITS in the
round of the block's record, not one round after it (16 · R · S bytes a block: 128 MB for the
power-law ILU(0)'s 250 000 blocks of R = 8, S = 4). On an H100 (2026-12-06, one-process A/B,
figures/data/step_rec_ab_h100_2026-12-06.*, medians of 5 rounds, ms): the power-law IC(0) 0.545–0.547
→ 0.500, float32 0.457–0.459 → 0.410; ILU(0) 0.791–0.793 → 0.783, float32 0.690–0.695 → 0.668; the
grids' factor pairs within the spread (rec_grids_ab_h100_*). Compiled for sm_90
(Triton 3.6) at 1M nodes: the power-law ILU(0) 91 registers at its cap of 112 (2 656 SASS
instructions against 2 696 without it), float32 86, IC(0) 95 at 96, none spilled; under the
interpreter the sparse-fusion tests pass with it on and off. Host cost, on the development
machine's CPU (figures/data/host_records_cpu_2026-12-06.txt; prepare with the row tables built,
the power-law ILU(0)): 0.73 s without records, 0.76–0.78 with BLK_REC, 1.13–1.19 with STEP_REC too."""


def step_records(tables, pad, R, S, u0) -> np.ndarray:
    """Per block of padded_blocks' rows, [4, R, S]: for lane r's row v (a factor row) and step s
    < S with e = ENT_PTR[v] + s inside the row, ENT_VAL[e], ENT_AUX[e], u0[e] and STEP_BITS[e]
    (cast to int32, bits kept: the grid's W ≤ 32; only the grid layout has STEP_BITS for every
    factor entry); 0 elsewhere, where _syncfree never reads (_syncfree's STEP_REC). Written a
    piece of blocks at a time, the pieces on threads (dags.map_pieces): the power-law ILU(0)'s
    128 MB of records took 0.37 s in one pass of 64 MB temporaries, each mapped afresh
    (development machine's CPU, figures/data/step_records_pieces_cpu_2026-12-07.txt)."""
    ent_ptr = np.asarray(tables.ent_ptr)
    fields = [np.asarray(f) for f in (tables.ent_val, tables.ent_aux, u0, tables.step_bits)]
    out = np.empty((len(pad) // R, 4, R, S), dtype=np.int32)

    def piece(b0, b1):
        p = pad[b0 * R:b1 * R]
        at = np.maximum(p, 0)
        e = ent_ptr[at][:, None] + np.arange(S, dtype=ent_ptr.dtype)[None, :]
        ok = ((p >= 0) & (at < tables.n1))[:, None] & (e < ent_ptr[at + 1][:, None])
        e = np.where(ok, e, 0)
        for k, field in enumerate(fields):          # int32 on assignment, bits kept
            out[b0:b1, k] = np.where(ok, field[e], 0).reshape(-1, R, S)

    dags.drain(dags.map_pieces(piece, dags.whole_pieces(np.full(len(out), R * S), dags.PIECE)))
    return out.ravel()


FUSE_REC = True
"""With BLK_REC, where rows are fused (fused_rows): each block's fused record too (fused_records),
so that a held factor row's FAC_PTR and its solve row's index, RHS, DIAG and DST come in the
round of the block's record, not one and two rounds after it (20 · R bytes a block). Aimed at the
power-law IC(0), whose blocks spent 3.4 µs of their slot on tables against the ILU(0)'s 2.6
(stamps_powerlaw_ic_h100_*). On an H100 beside STEP_REC (same A/B): the power-law IC(0) 0.500 →
0.476, float32 0.410 → 0.388; ILU(0) and the grids unchanged. Compiled for sm_90 (Triton
3.6) at 1M nodes, the power-law IC(0): 95 registers at its cap of 96, 2 624 SASS instructions
against 2 616 without it, none spilled; under the interpreter the sparse-fusion tests pass with
it on and off."""


def fused_records(tables, pad, R, fuse) -> np.ndarray:
    """Per block of padded_blocks' rows, [5, R]: for lane r's factor row v, FAC_PTR[v] and its
    fused solve row v2 = fuse[v] (−1: none), and where v2 ≥ 0, RHS[v2], DIAG[v2] and DST[v2];
    0 (DIAG −1, v2 −1) elsewhere (_syncfree's FUSE_REC)."""
    at = np.maximum(pad, 0)
    fac = (pad >= 0) & (at < tables.n1)
    base = np.where(fac, np.asarray(tables.fac_ptr)[np.minimum(at, len(tables.fac_ptr) - 1)], 0)
    v2 = np.where(fac, np.asarray(fuse)[np.minimum(at, len(fuse) - 1)], -1)
    two, c = v2 >= 0, np.maximum(v2, 0)
    return _per_block([base, v2, np.where(two, tables.rhs[c], 0), np.where(two, tables.diag[c], -1),
                       np.where(two, tables.dst[c], 0)], R)


def fetches_short(run) -> bool:
    """_syncfree's short fetch (ONE_ROW, U0) for held rows on the dataflow executor, where
    prepare built its table (FETCH_SHORT; _syncfree_plan builds it only for those)."""
    return "u0" in run.plan[1]


def looks_late(run, W) -> bool:
    """_syncfree's LOOK_LATE for a staged held row (stages_steps): the runner's own `late_look`
    where set (dev/sparse_fusion/ab_options.py sets it), else LATE_LOOKS."""
    own = run.late_look
    return stages_steps(run, W) and (LATE_LOOKS if own is None else bool(own))


def held_grid(tables, W) -> bool:
    """Whether a factor pair's held rows (W > 0) take their pairs as a grid (sparse_rows.grid_layout):
    what the two-stage steps (_syncfree_plan) and the register caps (register_cap) start from."""
    return bool(tables.factor) and bool(W) and rows.grid_layout(tables.held_shape)


def held_in_one_pass(tables, W) -> bool:
    """_syncfree's APART: held IC(0) rows whose steps are apart (RowTables.steps_apart: on the 5-
    and 7-point grids) take their off-diagonal steps in one pass (held_finish) instead of a loop.
    Measured on an H200 (2026-11-29, float64, A/B in one call, 3 interleaved rounds, dataflow
    executor, every output checked first; figures/data/held_apart_ab_*), one pass against the
    loop, sparse-fusion / wavefront schedule: 2D IC(0) 2.76 / 3.16 ms against 3.42 / 3.35 (cuSPARSE
    11.91), 3D IC(0) 1.04 / 1.20 against 1.10 / 1.15; ILU(0), whose pass also sums every step's
    updates over [R, S, C, W], was slower or even: 2D 2.93 / 3.07 against 2.71 / 3.09, 3D 0.90 /
    1.02 against 0.87 / 1.00. So ILU(0) keeps the loop. The flag executor takes the pass too
    (executor="syncfree"; tested, not timed)."""
    return bool(W) and tables.factor == rows.IC and tables.steps_apart


GRID_REGISTERS = {(rows.ILU, True): 128, (rows.ILU, False): 112, (rows.IC, True): 96, (rows.IC, False): 96}
"""Registers a thread of the dataflow executor's factor kernel may hold (ptxas' maxnreg, by factor
and whether its held rows may stage their steps, may_stage) where held rows take their pairs as a
grid (register_cap; the staged caps are the 27-point grid's). There one program
runs each one-row block, and on the wide middle levels the SM's slots bound the rate: a block
holds its slot about 12 µs (its tables' six dependent loads 4 µs, the awaits and steps 7, the
fused solve 1) while a level takes 8 µs (1 000 rows a level, 1 584 slots at 145 registers: 12
one-warp programs an SM) — per-block %globaltimer stamps on the H200, 2026-12-01,
figures/data/clk_probe_*. The caps are the fewest registers that let an SM hold more programs
(16 at 128, 20 at 96) with nothing spilled when Triton 3.6 compiles these kernels for sm_90
(ILU(0) spills from 112 down, IC(0) not at 96). Measured on an H200 (2026-12-01, A/B in one
process, caps rotated through 5 rounds with the uncapped kernel twice, every output checked
first, figures/data/maxnreg_rot_ab_*), 27-point 64³, medians in ms, uncapped (twice) → 128 → 96:
float64 sparse-fusion schedule ILU(0) 2.98 / 2.99 → 2.98 → 3.39, IC(0) 2.01 / 2.02 → 1.99 → 1.93;
wavefront ILU(0) 3.63 / 3.64 → 3.35 → 3.86, IC(0) 2.55 / 2.61 → 2.60 → 2.39; float32
sparse-fusion ILU(0) 2.43 / 2.31 → 2.18 → 2.22, IC(0) 1.75 / 1.77 → 1.79 → 1.64 (80: 1.57, not
taken: 1.97 / 2.43 ms against 96's 1.93 / 2.39 in float64). The 3D and 2D grids' kernels (rows
as lists) move within the run-to-run spread (3D ILU(0) 1.11 → 1.05, IC(0) 1.16 → 1.14, 2D IC(0)
2.70 → 2.56 at 128, with rounds 0.83–1.13 ms on the 3D ILU(0)), so they keep ptxas' choice.
The slots do not explain everything: the sparse-fusion ILU(0) holds 16 programs an SM at 128 and
is no faster. Stamped with the caps (figures/data/clk_probe_capped_*), its rows no longer start
after their operands are written (1.4 % of them against 20 %), but a row's waits and steps take
longer (first-stage steps and late wait 5.7 µs against 3.3, tables 4.6 against 4.0), and a level
still takes 6.0 µs on average: what is left is the hop of 4–5 µs from a row's latest predecessor's
store to its own. Since the grid's steps were unrolled (2026-12-02, rows.held_steps) the kernels
at these caps still spill nothing (146 and 126 registers uncapped), but the caps were not
measured again. Since every held row takes a grid (rows.GRID_WORK, 2026-12-02) the caps apply to
the 2D, 3D and power-law grids' kernels too, and the A/B that made them grids ran them capped
(figures/data/ab_grid_b_*; the 3D ILU(0) kernel, compiled for sm_90 on the CPU: 91 registers at
the cap, none spilled, where ptxas alone chose 72 and spilled 8 bytes); the caps themselves were
not measured against ptxas' choice there.

Measured again on an H100 (2026-12-05, A/B in one process, 5 rotated rounds, every output checked
first, figures/data/caps_ab_h100_*), the caps three times against none and against ILU(0) 112 /
IC(0) 80, ms: power-law ILU(0) 1.074–1.102 / 1.100 / 1.029, IC(0) 0.597–0.601 / 0.640 / 0.630,
27-point IC(0) 1.389–1.398 / 1.370 / 1.534; the power-law ILU(0) at 112 against 128 once more
(caps2_ab_h100_*): float64 0.986 / 0.999 against 1.079, float32 0.891 / 0.839 against 0.917. So
the cap is keyed by whether the held rows may stage their steps (may_stage) too: an ILU(0) kernel
that does not (the power-law graph's; the 2D and 3D grids' where they run the values as flags, not
the lean rows) holds one copy of the unrolled steps, not a stage's two, and fits in 112 registers
without spilling (compiled for sm_90 on the CPU: the power-law kernel 108 at 112, 110 at 128; the
3D grid's 91 at 128), while the staged 27-point kernel spills at 112 (24 bytes) and keeps 128. The
power-law kernel holds 18 programs an SM at either cap, so what it gains there is not occupancy.
Nor does more occupancy help it: at 88 (87 registers, none spilled, 23 programs an SM; H100,
2026-12-06, figures/data/walk_prefetch_ab_h100_*, against the package twice) it took 1.088 ms
against 1.062 / 1.083 in float64, 0.942 against 0.922 / 0.898 in float32. Its stamps of that day
(figures/data/stamps_powerlaw_fuse_h100_*, the package's case) put 1 717–2 095 programs in flight
at a time, 13–16 an SM of the 18 that fit: with one program a block a slot may stand empty
between one program's end and the next one's start, and a cap does not change that. With walked
rows in blocks of their own (WALK_ALONE) its stamps put 2 192–2 529 programs in flight, about 17–19
an SM (figures/data/stamps_walk_alone_h100_*), and the caps were timed again (H100, 2026-12-06,
figures/data/cap_walk_ab_h100_*; compiled that day at 1M nodes, float64 96 registers at 112 — 21
programs an SM, not the 18 of the code first compiled above — 87 at 88, 80 at 80 with 40 bytes
spilled): float64 0.863–0.868 ms at 112 against 0.894 at 88 and 0.878 at 80, float32 0.739–0.786
against 0.744 / 0.751. 112 stays."""


def register_cap(tables, W, data) -> int:
    """GRID_REGISTERS' cap for a factor pair run by the dataflow executor (`data`, _syncfree's DATA)
    whose held rows (W > 0) take their pairs as a grid, by factor and may_stage; else 0, ptxas'
    own choice."""
    if not data or not held_grid(tables, W):
        return 0
    return GRID_REGISTERS.get((tables.factor, may_stage(tables, W)), 0)


def _run_syncfree(run, val, vec, own=None):
    """The flag executor's launch; with `own` (a factor pair's DATA mode, _syncfree) VAL and VEC's
    outputs hold the sentinel where they are still to be written, and `own` A's values."""
    if run.plan[0] == 0:
        return
    _launch_claimed(_syncfree, run, run.plan[0], *syncfree_launch(run, val, vec, own))


def syncfree_launch(run, val, vec, own=None) -> tuple:
    """(arguments, constexprs) of one _syncfree launch for `run` (_run_syncfree's; the probes in
    dev/sparse_fusion/ launch a stamped copy of the kernel with the same)."""
    blocks, sdev, fused, _ = run.plan
    data = own is not None       # no flags: only the ticket counter
    sync = _fresh_ticket(val.device, run.claim) if data else torch.zeros(1 + blocks, dtype=torch.int32,
                                                                          device=val.device)
    W, S, C = run.tables.held(run.block_rows)
    short = fetches_short(run)
    tables = {"U0": sdev["u0"]} if short else {}
    one_row = short and run.block_rows == 1 and blocks == sdev["blk_iter"].numel()
    if short and not one_row and "blk_pad" in sdev:
        tables["BLK_PAD"] = sdev["blk_pad"]
        tables["BLK_REC"] = sdev["blk_pad"].numel() == 5 * blocks * run.block_rows     # block_records'
        if "step_rec" in sdev and tables["BLK_REC"]:
            tables["STEP_REC"] = sdev["step_rec"]
        if "fuse_rec" in sdev and tables["BLK_REC"] and fused > 0:
            tables["FUSE_REC"] = sdev["fuse_rec"]
    return ((sync, blocks, sdev["blk_ptr"], sdev["blk_iter"], sdev["dep_ptr"], sdev["dep_blk"],
             *rows.table_args(run.dev), val, vec, sdev["fuse"], sdev["x_at"], own if data else val,
             sdev["late"], run.tables.n1),
            dict(FACTOR=run.tables.factor, R=run.block_rows, CHUNK=CHUNK, DEPS=DEPS,
                 WIDE=run.tables.wide(CHUNK), W=W, S=S, C=C, WALK=run.tables.walks, FUSED=fused > 0,
                 DATA=data, SENT=SENTINEL[val.dtype] if data else 0, APART=held_in_one_pass(run.tables, W),
                 STAGED=stages_steps(run, W), RELOOK=relooks(run, W, val.dtype), LOOK_LATE=looks_late(run, W),
                 ONE_ROW=one_row, **tables,
                 num_warps=run.num_warps,
                 **_cap(run.tables, W, data)))


def _cap(tables, W, data) -> dict:
    """register_cap as a launch option; none in the interpreter, which compiles nothing."""
    cap = 0 if interpreting() else register_cap(tables, W, data)
    return {"maxnreg": cap} if cap else {}


def _data_buffers(run, vector):
    """(VAL, OWN, VEC) for the flag executor's DATA mode (_syncfree): VAL is A's values with the
    sentinel where a step rewrites them (made once per runner, cloned per call), OWN A's values,
    copied only where rows walk (they work in it), VEC the input and then the sentinel in every
    output, written by one kernel (_slots_from)."""
    if run.data_template is None:
        run.data_template = _sentinel_template(run, run.values.clone())
    own = run.values.clone() if _works_in_own(run) else run.values
    return run.data_template.clone(), own, _slots_from(vector, run.tables.vec_len)


def _sentinel_template(run, t):
    """t (A's values, as run.values holds them) with the sentinel wherever a step rewrites; the
    positions' upload (the power-law ILU(0)'s 4M) is kept per pattern, for a refresh's template."""
    at = rows.pattern_cached(run.problem, ("rewritten_at", str(t.device)),
                             lambda: torch.from_numpy(run.tables.rewritten.astype(np.int64)).to(t.device))
    t.view(SENTINEL_BITS[t.dtype])[at] = SENTINEL[t.dtype]
    return t


def _works_in_own(run) -> bool:
    """Whether some factor rows walk, working in OWN, which then must be a fresh copy of A's
    values each call (_data_buffers)."""
    return run.tables.held(run.block_rows)[0] == 0 or run.tables.walks


GRAPHS = True
"""A factor pair's call on the dataflow executor replays a CUDA graph of its launches (replays_graph,
_graphed). Such a call must read its pivots back before it returns (a breakdown raises there), so
the host's work before the next call's kernel cannot overlap the GPU's: per call, the buffers'
clone and fill, two Triton launches and the pivot test's eight small kernels. On the H200
(2026-12-01, torch.profiler, figures/data/prof_call_*) the 3D grid's ILU(0) call took 1.06 ms
around a 0.68 ms kernel: 0.23 ms from the pivots' read to the next kernel's start, 0.06 ms of
pivot test after it. Replayed, a call is the graph, one pass over its results (rows.factor_out,
below) and one read, which the host queues while the graph runs. Measured on the H200 (2026-12-01,
A/B in one process, three runners on one plan — the graph, eager, eager again — 5 rotated rounds,
every output checked first, figures/data/graph_ab_*), ms: 3D ILU(0) 0.917 against 0.934 / 0.936,
IC(0) 0.920 against 1.090 / 1.097; 27-point ILU(0) 2.69 against 2.87 / 2.87; 2D IC(0) 2.56
against 2.87 / 2.83; power-law ILU(0) 1.30 against 1.33 / 1.31. Profiled then (prof_call_graph_*), a
3D ILU(0) call still spent 0.17 ms beside its 0.68 ms kernel: 93 µs copying (the template's clone
inside the graph alone 46 µs), 44 µs of pivot test. Since, a replay resets only the positions the
steps rewrite (_capture) and tests the pivots with one kernel (rows.breakdown_flag); A/B in one
process (ab_pivots_*, 5 rotated rounds, the earlier code twice), ms: 3D ILU(0) 0.840 against
0.862 / 0.861, IC(0) 0.839 against 0.938 / 0.939; 27-point 2.728 against 2.836 / 2.836 and 1.852
against 1.960 / 1.970; 2D IC(0) 2.521 against 2.626 / 2.633; power-law ILU(0) 1.257 against
1.294 / 1.269. Testing each pivot inside the factor kernel instead (ab_pivots_in_kernel_*) made
that kernel slower where its blocks hold their slots longest (27-point ILU(0) 2.729 against
2.639 / 2.652, 2D IC(0) 2.580 against 2.519 / 2.517): more registers, a pick per row. Profiled on
2026-12-02 (prof_call_grid_*), a 3D ILU(0) call spent 0.16 ms beside its 0.51 ms kernel: the reset
45 µs, the pivot kernel 20 µs, copies 46 µs (the factor's 7M entries the largest). One pass after
the replay now does all three (rows.factor_out): A/B in one process (ab_factor_out_*, 5 rotated
rounds, the earlier code twice), ms: 3D ILU(0) 0.634 against 0.678 / 0.677, IC(0) 0.620 against
0.645 / 0.641, float32 ILU(0) 0.547 against 0.575 / 0.573. Parts left out of a call one at a time
(2026-12-03, dev/sparse_fusion/call_parts.py, figures/data/call_parts_*): the input's copy into the
graph's buffer cost 8–12 µs of a 3D call, x's clone after factor_out 10–15, factor_out's blocks of
2048 with 4 warps 7–19 more than 1024 with 8 (FACTOR_OUT_SHAPE). Since, the replay reads the
caller's vector at an address each call stores in pinned host memory, factor_out copies x in its
own launch and the graph zeroes the breakdown flag; A/B in one process (ab_graph_address_*, 5
rotated rounds, the earlier code twice), ms: 3D ILU(0) 0.611 against 0.622 / 0.620, IC(0) 0.620
against 0.634 / 0.630, float32 0.525 / 0.542 against 0.535–0.536 / 0.557–0.562; 2D ILU(0) 1.993
against 2.028 / 2.008; 27-point and power-law ILU(0) even (1.798 against 1.804 / 1.801, 1.306
against 1.310 / 1.325)."""


def replays_graph(run) -> bool:
    """Whether this Prepared's calls after its first replay a CUDA graph (GRAPHS): a factor pair on
    the dataflow executor, on a CUDA device, by the lean rows (LEAN_GRAPHS) or by the values as
    flags with one program per block."""
    if not GRAPHS or run.values.device.type != "cuda" or interpreting():
        return False
    return LEAN_GRAPHS if run.lean else run.data and run.programs_per_sm == 0


LEAN_GRAPHS = True
"""The lean rows' calls replay a graph too (replays_graph, _capture): their striding programs'
cooperative launch is captured like any other, after the launch that fills [b | x | the pairs]
(lean_slots); each replay is followed by rows.factor_out as for the values as flags, its marks
those of the pivots alone (the lean rows rewrite every entry a step rewrites on each call and read
none of them, so no sentinel is put back). Before, a call cloned A's
values and launched the kernels as it came, and the host's work sat between one call's pivot
read and the next call's kernel. Measured on an H200 (2026-12-03, A/B in one process, the same
plan graphed and launched as it comes, beside the values as flags, 5 rotated rounds, every
output checked first; figures/data/lean_graph_ab_*), ms, graphed / as it came / values as flags:
3D ILU(0) 0.544 / 0.723 / 0.649, IC(0) 0.524 / 0.670 / 0.628, float32 ILU(0) 0.451 / 0.576 /
0.530, wavefront IC(0) 0.609 / 0.702 / 0.785; 2D ILU(0) by 16 lanes 1.796 / 1.900 / 1.962; in a
second process on a fresh machine (lean_graph_ab2_*) 3D ILU(0) 0.515 / 0.509 / 0.609, IC(0)
0.529 / 0.555 / 0.620. The rounds launched as they came spread widely (3D ILU(0) 0.66–0.75 in the
first process, 0.51–0.68 in the second), the graph's little (0.51–0.55): the graph is as fast as
the eager call's best rounds, and the host's share of a call, which a process and the host's
load move, is out of it."""


OWN_WALKED = True
"""Whether t3's graph keeps OWN from call to call where walked rows work beside held ones, copying
back from A's values only the walked rows' entries before each kernel (_graph_own), instead of a
fresh copy of every entry (the power-law ILU(0): 7M entries a call, 112 MB of traffic, for its 730
walked hub rows' entries). Measured on an H100 (2026-12-06, A/B in one process against the files of
38061d7 twice, 5 rotated rounds, every output checked, figures/data/own_walked_ab_h100_2026-12-06.*),
the power-law ILU(0) 0.765 / 0.772 → 0.727 ms, float32 0.707 / 0.707 → 0.695. Its first form let the
allocator reuse OWN and the positions after the capture (nothing held them): wrong factors and
device-side asserts on the GPU (own_walked_ab_h100_2026-12-06_freed.*), which the interpreter,
running no graph, cannot show; _Graph.kept holds them since."""


def _graph_own(run):
    """(OWN, positions) for _capture: where walked rows work beside held ones (OWN_WALKED), a copy
    of A's values made once and the walked rows' entries (RowTables.walked_entries) on the device,
    which each replay copies back from A's values — the only entries a kernel writes in OWN;
    (run.values, None) where no row walks; otherwise — every row walks, or OWN_WALKED is off — a
    copy and None, all of it rewritten each call (_own_back)."""
    t = run.tables
    if not _works_in_own(run):
        return run.values, None
    if not (OWN_WALKED and t.walks and t.held(run.block_rows)[0]):
        return run.values.clone(), None
    return run.values.clone(), torch.from_numpy(t.walked_entries).to(run.values.device)


PREP_AHEAD = True
"""Whether t3's graph of a factor pair (values as flags) may leave the next call's preparation to a
second graph (_prep_ahead), replayed right after the breakdown flag's read is queued, so that it
runs while the host takes the flag and returns: VAL's sentinel put back (rows.sentinel_back,
out of rows.factor_out), VEC's output slots' sentinel, OWN's walked entries copied back. The
call's own graph keeps the input's copy and the kernel. Where, prepares_ahead says. Profiled on
an H100 (2026-12-06, figures/data/prof_call_powerlaw_h100_2026-12-06.*), the power-law ILU(0)'s
call spent 13 µs copying OWN's walked entries back and 13 filling the slots before its kernel,
`factor_out` 64 (IC(0) 46), and 30–40 µs of host between the flag's read and the next replay."""


def prepares_ahead(run) -> bool:
    """Whether `run`'s graph prepares the next call ahead (PREP_AHEAD, _prep_ahead): the values as
    flags where every entry of the factor is one a step rewrites (IC(0), tril(A)'s every entry),
    so that putting the sentinel back is a plain fill. Measured on an H100 (A/Bs in one process,
    5 rotated rounds, every output checked), ms:
      2026-12-06 12:42 UTC, the files of c93824e twice against PREP_AHEAD for every factor graph
        (figures/data/prep_ahead_ab_h100_2026-12-06.*): power-law IC(0) 0.478 / 0.478 → 0.465,
        ILU(0) (4M rewritten entries among 7M) 0.731 / 0.722 → 0.744;
      13:56 UTC, the package (c47ad0e, three times) against PREP_AHEAD off and against ILU(0)
        prepared ahead with the sentinel's reset left in rows.factor_out
        (figures/data/prep_partial_ab_h100_2026-12-06.*): IC(0) power-law 0.472 / 0.472 / 0.474
        against 0.486 off, 27-point grid 1.334 / 1.336 / 1.338 against 1.346 off; ILU(0)
        power-law 0.747 / 0.747 / 0.751 against 0.789, 27-point 1.475 / 1.489 / 1.493 against
        1.538 — so ILU(0) loses without the separate reset too, and the sentinel's pass is not
        what costs there (why it does was not profiled). do_bench clears L2 before each call it
        times, after the preparation ran; the same A/B's host times (20 calls back to back, no
        clearing, the device's time inside since each call waits for its flag) put the power-law
        ILU(0)'s loss at 17 µs (0.740 against 0.757), not 42, and the 27-point's at 55 (1.480
        against 1.534), not 49: L2 explains part of the one and nothing of the other."""
    return PREP_AHEAD and not run.lean and resets_ahead(run)


def resets_ahead(run) -> bool:
    """Whether every entry of the factor is one a step rewrites, so that the next call's
    preparation (_prep_ahead) puts VAL's sentinel back with a plain fill, not rows.factor_out."""
    return len(run.tables.rewritten) == run.values.numel()


def _main_launches(run, val, slots, own, address, flag):
    """What a PREP_AHEAD call's graph launches: the input into its slots (read where `address`
    says; the output slots hold the sentinel already, _prep_ahead), the flag zeroed, the kernel."""
    n = run.tables.n1
    _slots_from(slots[:n], n, address=address, into=slots)
    flag.zero_()
    _run_syncfree(run, val, slots, own)


def _prep_ahead(run, val, marks, slots, own, walked):
    """The next call's preparation (PREP_AHEAD; rows.factor_out ran with reset=False): the sentinel
    back in VAL wherever a step rewrites it; the sentinel in every output slot of VEC, and OWN
    (where rows walk) A's values again — only the walked rows' entries (`walked`, _graph_own), or
    every entry where `walked` is None. The output slots' fill moved back into the call's own, right
    before the kernel (in case slots written ahead were cold in L2 by then), made no difference on an
    H100 (2026-12-06 16:29 UTC, A/B in one process, the package three times against it, 5 rotated
    rounds, every output checked, figures/data/slots_ahead_ab_h100_2026-12-06.*), IC(0) ms:
    power-law 0.476 / 0.486 / 0.473 against 0.479, float32 0.394 / 0.399 / 0.379 against 0.399,
    27-point grid 1.366 / 1.346 / 1.345 against 1.354; that option (SLOTS_AHEAD) was removed."""
    rows.sentinel_back(val, marks)
    _slots_from(slots[:run.tables.n1], slots.shape[0], copy=False, into=slots)
    _own_back(run, own, walked)


def _own_back(run, own, walked):
    """OWN (a graph's, kept from call to call) A's values again where a call may have written it:
    the walked rows' entries (`walked`, _graph_own), every entry where `walked` is None, nothing
    where OWN is A's values themselves (no row walks)."""
    if own is run.values:
        return
    if walked is None:
        own.copy_(run.values)
    elif OWN_COPY_AT:
        copy_at(own, run.values, walked)
    else:
        own.index_copy_(0, walked, run.values.index_select(0, walked))


OWN_COPY_AT = True
"""Whether _own_back copies the walked rows' entries back with one Triton launch (launch.copy_at)
rather than torch's index_select and index_copy_: on an H100 (2026-12-06,
figures/data/prof_call_powerlaw_h100_2026-12-06.*) those took 9.5 and 3.7 µs for the power-law
ILU(0)'s 128 145 entries, on its call's path (its graph does not prepare ahead). Measured on an
H100 (2026-12-06 16:32 and 16:36 UTC, the package three times against on, A/Bs in one process,
5 rotated rounds, every output checked, figures/data/own_copy_ab_h100_2026-12-06_{a,b}.*), the
power-law ILU(0), ms: 0.726 / 0.732 / 0.728 against 0.719, then 0.722 / 0.726 / 0.726 against
0.716 — under the package's fastest run both times, by 6–7 µs; float32 0.669 / 0.664 / 0.637
against 0.668, then 0.660 / 0.656 / 0.629 against 0.657, inside a spread of 30 µs. On since."""


EARLY_FLAG = True
"""Whether a factor graph with the values as flags that does not prepare ahead (prepares_ahead:
the ILU(0)'s) tests its pivots itself, at its end (rows.breakdown_flag into the graph's flag), and
_replay reads that flag into pinned memory on a stream of its own (_beside) while rows.factor_out
copies the factor out on the call's: the host waits only for the kernel and the test, then makes
the sparse factor and returns while factor_out (about 64 µs on the power-law ILU(0), call_parts)
still runs. Measured on an H100 (2026-12-06, A/Bs in one process against the package twice, 5
rotated rounds, every output checked), do_bench medians, ms:
  20:17 UTC, every factor graph testing its pivots and the read queued on the call's stream
    before factor_out (figures/data/early_flag_ab_h100_2026-12-06.*, the diff beside it):
    power-law ILU(0) 0.711 / 0.710 against 0.713 (float32 0.652 / 0.631 against 0.644), IC(0)
    0.463 / 0.465 against 0.483, 27-point ILU(0) 1.459 / 1.459 against 1.451, IC(0) 1.325 / 1.321
    against 1.331 — the IC(0)'s preparation ahead no longer overlapped the host, and the read
    held factor_out back on the call's stream;
  20:59 UTC, as now (figures/data/side_flag_ab_h100_2026-12-06.*): power-law ILU(0) 0.711 /
    0.708 against 0.699, 27-point ILU(0) 1.463 / 1.462 against 1.440; host times (20 calls back
    to back) 0.704 / 0.701 against 0.696 and 1.454 / 1.454 against 1.435. The package CLI right
    after gave the power-law ILU(0) 0.702 ms, 3.90× cuSPARSE (figures/data/cli_side_flag_*). That
    form's factor_out tested the pivots again; since, it leaves them and the flag alone there
    (test=False: no second writer of the flag the side stream reads; its pass reads the marks and
    values either way);
  23:43 UTC, the IC(0)'s graphs too, which prepare ahead: the graph testing its pivots, the read
    beside factor_out, then the preparation (figures/data/early_ahead_ab_h100_2026-12-06.*, the diff
    beside it): power-law IC(0) 0.4623 / 0.4629 against 0.4667, host times 0.4584 / 0.4595 against
    0.4634 — not kept."""


class _Pinned(NamedTuple):
    """What a factor graph whose breakdown flag the host reads into pinned memory holds besides the
    call's own: one that prepares the next call ahead (prepares_ahead; `prep`, its flag read after
    rows.factor_out) or one that tests its pivots itself (EARLY_FLAG; `side`, its flag read beside
    factor_out)."""
    prep: object               # the graph of _prep_ahead, replayed after the flag's read; or None
    flag_host: torch.Tensor    # [1] int32 in pinned host memory, the flag as read
    read: object               # torch.cuda.Event after that read
    side: object = None        # where prep is None, the torch.cuda.Stream the read is queued on


class _Graph(NamedTuple):
    graph: object              # torch.cuda.CUDAGraph
    address: np.ndarray        # [1] int64 in pinned host memory: the input's address, read by the replay
    val: torch.Tensor          # the factor it writes, holding the sentinel wherever a step writes when it starts
    vec: torch.Tensor          # the vectors it writes
    marks: torch.Tensor        # rows.entry_marks: what rows.factor_out puts back in val and tests
    flag: torch.Tensor         # [1] int32 the replay zeroes, for rows.factor_out's breakdown flag
    kept: tuple                # what the replay reads that was made outside it (_graph_own's): held here,
                               # or the allocator hands its memory to the next tensor
    pinned: _Pinned | None = None  # where prepares_ahead or EARLY_FLAG

    @property
    def tests_pivots(self) -> bool:
        """Whether the graph tests its pivots itself (EARLY_FLAG): no preparation ahead, a pinned read."""
        return self.pinned is not None and self.pinned.prep is None

    @property
    def resets(self) -> bool:
        """Whether rows.factor_out puts the sentinel back after a replay: no preparation ahead does."""
        return self.pinned is None or self.pinned.prep is None


def _graphed(run, vector):
    """A factor pair's call by replaying its graph, captured by the second call: the first runs
    eagerly, which builds the sentinel template and compiles the kernels (neither can be
    captured), and a pair function, which prepares for one call, captures nothing. The replay
    reads the caller's vector where `address` says, a store on the host instead of a copy into a
    buffer of the graph's (the call's vector lives until its flag is read, after the graph is
    done). The graph's buffers are rewritten by the next call, so the results are copies:
    rows.factor_out copies the factor and x, tests the pivots and puts the sentinel back where
    the steps write, in one launch queued right after the replay (so every replay starts from
    the template, whatever the host does next), before the breakdown flag is read, so that the
    host's work for them overlaps the graph's. Where prepares_ahead the sentinel goes back later:
    the flag's read is queued, then the graph that prepares the next call, and the host waits for
    the read once it has made the sparse factor; where EARLY_FLAG the graph tests its pivots
    itself and the flag is read beside factor_out (_replay)."""
    if run.graph is None:
        run.graph = _capture(run, vector)
    val, flag, outs, ready = _replay(run, vector.contiguous())
    return rows.results(run.tables, run.dev, val, outs, flag=flag, ready=ready)


REFRESH_KEEPS_GRAPH = True
"""Whether Prepared.refresh keeps a factor pair's CUDA graph, its buffers rewritten with the new
values (_graph_takes_values), and its sentinel template, rebuilt in place. Off: both dropped, so
the next call runs eagerly (building the template) and the one after captures again. On an H100
(2026-12-07 07:55 UTC, refresh_cost_keep_h100_2026-12-07.*) the first two calls after a refresh
cost 0.80 + 0.76 ms kept against 1.32 + 3.22 dropped on the power-law ILU(0) (0.71 a call; IC(0)
0.53 + 0.48 against 0.88 + 2.15; the 27-point pairs 1.5 + 1.4 against 1.9–2.0 + 3.5–3.9), its
results equal to a runner's prepared afresh on the new values; the refresh tests pass on CUDA
both ways. The interpreter captures no graph, so CI tests the eager path only
(dev/sparse_fusion/gpu_next.sh refresh runs both)."""


def _graph_takes_values(run):
    """run.graph's buffers as a capture on run.values (refreshed) would make them, once no replay
    runs: its factor buffer A's values (the lean rows') or the sentinel template (the values as
    flags; a replay leaves it so, rows.factor_out or the preparation ahead putting the sentinel
    back), and its OWN, where a copy, A's values — a replay copies back only the walked rows'
    entries. The rest of what it reads is A's values themselves (VAL, OWN where no row walks),
    the patterns' tables or the vectors' slots. What keeping the graph saves: REFRESH_KEEPS_GRAPH."""
    g = run.graph
    g.val.copy_(run.values if run.lean else run.data_template)
    own = g.kept[0]
    if own is not None and own is not run.values:
        own.copy_(run.values)


def _replay(run, vector):
    """(factor, breakdown flag, vector results, ready) of one replay of run.graph on the contiguous
    `vector`, as _graphed says. Where the graph prepares ahead (prepares_ahead) the flag's read into
    pinned host memory is queued after rows.factor_out, an event after it, then the preparation;
    where the graph tests its pivots itself (EARLY_FLAG) the read and its event go on a stream of
    their own (_beside) right after the replay, and factor_out on the call's stream beside them.
    Either way the flag returned is that copy, still in flight, and `ready` the read's event,
    which rows.results waits for only once it has made the sparse factor. Without either, the
    flag is the device's, which rows.results reads with a synchronous copy, and `ready` is None.
    Waiting last (measured on an H100, 2026-12-06 18:46 UTC, figures/data/wait_last_ab_h100_2026-12-06.*:
    the package three times against every factor graph reading into pinned memory and waiting
    last; do_bench medians, ms): IC(0), prepared ahead, which then waited before making the factor
    (call_parts put that at 11 µs): power-law 0.476 / 0.470 / 0.469 against 0.465, 27-point grid
    1.345 / 1.343 / 1.339 against 1.327; ILU(0), the flag then read after factor_out: power-law
    0.734 / 0.737 / 0.741 against 0.734, 27-point 1.491 / 1.487 / 1.486 against 1.489 — nothing
    there until the read moved beside factor_out (EARLY_FLAG)."""
    g, p = run.graph, run.graph.pinned
    g.address[0] = vector.data_ptr()
    g.graph.replay()
    if g.tests_pivots:                  # the read goes beside factor_out, which leaves the flag alone
        _read_pinned(p, g.flag)
    val, flag, outs = rows.factor_out(run.tables, g.val, g.marks, g.vec, g.flag, reset=g.resets,
                                      test=not g.tests_pivots)
    if p is None:
        return val, flag, outs, None
    if not g.tests_pivots:
        _read_pinned(p, flag)
        p.prep.replay()                 # the next call's preparation runs while the host makes the factor
    return val, p.flag_host, outs, p.read


def _read_pinned(p, flag):
    """Queue the device flag's copy into p.flag_host and p.read's record after it, on p.side (_beside)."""
    with _beside(p.side):
        p.flag_host.copy_(flag, non_blocking=True)
        p.read.record()


@contextlib.contextmanager
def _beside(side):
    """Queue what follows on the stream `side` once the current stream's work so far is done, so
    that the current stream goes on without waiting for it; None: on the current stream."""
    if side is None:
        yield
        return
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        yield


@contextlib.contextmanager
def _captured(graph):
    """torch.cuda.graph(graph) with Python's cyclic collector paused, then left as it was: a
    collection inside a capture may destroy a CUDA graph that an earlier call left in a reference
    cycle (a Prepared held by a raised breakdown's traceback), and destroying a graph invalidates
    the capture under way — on an H100 (2026-12-06, figures/data/gpu_tests_h100_2026-12-06_c47ad0e.log)
    a lean IC(0) graph's capture failed so, CUDA warning "operation not permitted when stream is
    capturing (function reset)"; without the pause test_capture_outlasts_dead_cycles failed 4 of 4
    there, with it none (figures/data/capture_cycle_h100_2026-12-06.log). torch.cuda.graph collects
    before it captures only with torch.compiler.config.force_cudagraph_gc."""
    was = gc.isenabled()
    gc.disable()
    try:
        with torch.cuda.graph(graph):
            yield
    finally:
        if was:
            gc.enable()


def _capture(run, vector):
    """_Graph of one call's launches (none run here), reading the vector at the address that each
    call stores in pinned host memory. The lean rows' graph (LEAN_GRAPHS) holds lean_slots' fill
    and their launch, its factor buffer starting as A's values. Otherwise its factor buffer
    starts as the sentinel template. Either keeps, from call to call, A's values wherever no step
    writes (every call leaves them as they were); after each replay rows.factor_out copies the
    factor out and, for the values as flags, puts the sentinel back where the steps write
    (RowTables.rewritten: 4M of the 3D grid's 7M entries), which the lean rows write again on
    every call and never read. OWN, where rows walk, as _graph_own says. Where prepares_ahead,
    the call's graph holds _main_launches and a second graph _prep_ahead, which runs here once,
    eagerly, for the first replay; elsewhere, with EARLY_FLAG, the values-as-flags graph ends with
    the pivots' test (rows.breakdown_flag, compiled by the eager first call's rows.results)."""
    address = torch.zeros(1, dtype=torch.int64, pin_memory=True)
    val = run.values.clone() if run.lean else run.data_template.clone()
    flag = torch.zeros(1, dtype=torch.int32, device=val.device)
    reset = not run.lean                 # the lean rows read no entry a step rewrites: nothing to reset
    marks = rows.pattern_cached(run.problem, ("entry_marks", str(val.device), reset),
                                lambda: rows.entry_marks(run.tables, val.device, rewritten=reset))
    own, walked = (None, None) if run.lean else _graph_own(run)
    ahead = prepares_ahead(run)
    early = EARLY_FLAG and not run.lean and not ahead
    if ahead:
        slots = new_slots(vector, run.tables.vec_len)
        _prep_ahead(run, val, marks, slots, own, walked)     # the first replay's preparation, eagerly
    torch.cuda.synchronize(vector.device)
    graph = torch.cuda.CUDAGraph()
    # unpoisoned whatever TIERS_POISON says: the graph is replayed by calls the benchmarks time, and
    # the slots a poison would fill hold the sentinel (a NaN) until the kernel writes them anyway
    with _captured(graph), buffers.poisoned(False):
        if run.lean:
            vec = lean_slots(vector, run.pair_stride, address=address)
            flag.zero_()
            launch_lean(run, val, vec)
        elif ahead:
            vec = slots
            _main_launches(run, val, slots, own, address, flag)
        else:
            _own_back(run, own, walked)
            vec = _slots_from(vector, run.tables.vec_len, address=address)
            flag.zero_()
            _run_syncfree(run, val, vec, own)
            if early:
                rows.breakdown_flag(run.tables, run.dev, val, flag)
    pinned = None
    if ahead:
        prep = torch.cuda.CUDAGraph()
        with _captured(prep):
            _prep_ahead(run, val, marks, slots, own, walked)
        pinned = _Pinned(prep, torch.zeros(1, dtype=torch.int32, pin_memory=True), torch.cuda.Event())
    elif early:
        pinned = _Pinned(None, torch.zeros(1, dtype=torch.int32, pin_memory=True), torch.cuda.Event(),
                         torch.cuda.Stream(vector.device))
    return _Graph(graph, address.numpy(), val, vec, marks, flag, (own, walked), pinned)


# ---------------------------------------------------------------- the dataflow executor: the records' shape, the call

EARLY_LOOK = True
"""Whether striding dataflow programs may read the next blocks' records and entries early
(_dataflow's EARLY, _pipelined), where looks_early says so."""

EVERY_SLOT = True
"""Whether the pipelined loop may read every slot of a record without its width (reads_every_slot)."""

FOLD_RHS = True
"""Whether the dataflow executor folds right-hand sides into its records' entry slots where they
fit (folds_rhs)."""


def polls_pending(tables) -> bool:
    """Whether the dataflow executor's repeated polls read only the entries still pending
    (vec_loads' PENDING), in the records and in tail_sum's trips: where some row is longer than
    CHUNK. Measured on the H100 (2026-11-26, float64, wavefront schedule), sptrsv_spmv /
    spmv_sptrsv / sptrsv_sptrsv, pending polls against re-reading every entry:
      27-point grid (rows of 14 and 27, 32-slot records; A/B/B/A in one call,
        figures/data/pending_ab_*): 0.476 / 0.469 / 0.761 ms against 0.583 / 0.565 / 0.822;
      power-law graph (hubs of thousands, their entries read by tail_sum's wide trips; one call,
        the rule's cells first and last, figures/data/pending_powerlaw_*): records and trips
        0.777 / 0.669 / 1.475 ms, trips alone 0.804 / 0.673 / 1.515, records alone 0.825 / 0.676
        / 1.774, neither 0.835–0.845 / 0.674–0.677 / 1.800–1.806; the package CLI, later, measured
        less: 0.810 / 0.680 / 1.68 against 0.856 / 0.683 / 1.83 before (records_pending_powerlaw_*);
      2D and 3D grids (rows of at most 5 and 7): slower with it, 2D 1.338 / 1.347 / 2.550 against
        1.297 / 1.301 / 2.459, 3D 0.468 / 0.453 / 0.609 against 0.461 / 0.444 / 0.589
        (pending_ab_*): a few instructions more per poll cost more than the loads they save."""
    return tables.longest > CHUNK


def record_shape(tables) -> dict:
    """The dataflow kernel's shape for a pattern, derived once (Prepared.record_shape): entry
    slots per lane (record_chunk), whether some row is longer (TAIL) and whether one takes the
    wide stage (WIDE), pending polls (polls_pending), the wide trips' divisor (WIDE_TRIP_DIV) and
    whether the right-hand sides ride in the entry slots (FOLD, folds_rhs). Where TAIL the
    programs read every slot of a record, without the blocks' widths: on the power-law graph
    (H100, 2026-11-27, figures/data/compact_tail_ab_*) widths made sptrsv_spmv / spmv_sptrsv
    0.549 / 0.539 ms against 0.492 / 0.485 without (the kernel then took 64 registers a thread
    against 72; why they cost was not profiled)."""
    chunk = record_chunk(tables)
    return {"CHUNK": chunk, "TAIL": tables.longest > chunk, "WIDE": tables.wide(chunk),
            "PENDING": polls_pending(tables), "TRIP_DIV": WIDE_TRIP_DIV, "FOLD": folds_rhs(tables, chunk)}


def folds_rhs(tables, chunk) -> bool:
    """Whether the dataflow records carry each right-hand side as one more entry slot, of
    coefficient 1 (FOLD, _dataflow_plan), instead of a table of their own: where FOLD_RHS and every
    row's entries and right-hand side fit in `chunk` slots. A block then reads its vector entries
    in one gather, not a gather and a load that the compiler issued after the gather had returned
    (ncu on the 3D grid, figures/data/src_ncu_*: the two waits took 23 and 15 % of the stall
    samples, one after the other)."""
    fits = np.diff(tables.ent_ptr) + (tables.rhs >= 0)
    return FOLD_RHS and int(fits.max(initial=0)) <= chunk


BOUND = True
"""Whether a prepared dataflow call keeps its launches (launch.Bound) from call to call, their
compiled kernels' runners taking every call after the first, or launches through the JIT at
each call. Measured on an H200 (2026-12-04): before it (b597be6, figures/data/host_parts_*) the
3D grid's sptrsv_spmv call took 0.17–0.19 ms of host time against 0.219 on the device, its
three launches 17, 36 and 21 µs through the JIT against 9, 18 and 8 through the runners, and
do_bench's rounds were slow (1.2–1.8×) where the host fell behind (slow_rounds_next_*). A/B in
one process (kept_ab_*, 5 rotated rounds, outputs checked), host ms a call kept / JIT:
0.07–0.15 / 0.12–0.31; device ms, medians: 3D sptrsv_spmv 0.2180 / 0.2182, spmv_sptrsv 0.2173 /
0.2145 (the JIT's rounds 0.214–0.281), float32 spmv_sptrsv 0.1937 / 0.1950 (0.194–0.334),
27-point spmv_sptrsv 0.2910 / 0.2909, power-law spmv_sptrsv 0.1676 / 0.1677: 3 of the JIT's 15
rounds on the 3D grid slow, none of the kept launches'."""


def _run_dataflow(run, val, vec, vector):
    """One call: the slots (the sentinel where a row waits, and the input unless the kernel reads
    it from the caller's vector: run.split, reads_input_apart; only in the blocks some row reads
    where not all are: run.awaited), the launch, and the outputs in row order in VEC: stored
    there by the kernel (run.direct, writes_row_order) or gathered from the slots after it
    (_gather_back). On a GPU that has them (PDL) the second and third kernels are programmatic
    dependent launches: each starts while the one before ends and waits for its stores inside
    (gdc_wait). The kernel is _dataflow over records, or _flat over flat records (run.flat,
    reads_flat); its shape (record slots, wide trips, pending polls) was derived from the pattern
    once, in Prepared (record_shape). Each call's arguments are made here; the launches' grids
    and keyword arguments once, by the first call (_dataflow_launches), kept with their compiled
    kernels (launch.Bound) where run.binds."""
    count, sdev = run.plan
    if count == 0:
        return
    n = run.tables.n1
    vector = vector.contiguous()
    slots = new_slots(vector, _slot_total(run))
    fill = fill_args(slots, vector, n, _slots_first(run), run.awaited)
    rv = run.record_values
    if run.flat:                                            # flat records (flat_plan): no tickets, no tables
        ticket = None
        flow = (sdev["px"], count, rv["a"], sdev["seg"], rv["d"], rv["dinv"], sdev["dst"], slots, vec, n, vector)
    else:
        ticket = _fresh_ticket(vec.device, run.claim)
        flow = (ticket, count, sdev["width"], sdev["px"], rv["a"], sdev["rhs"],
                sdev["start"], sdev["end"], rv["sign"], rv["d"], rv["dinv"], sdev["dst"],
                sdev.get("ent_val", run.dev["ent_val"]),          # the plan's own where it reordered the entries
                sdev["ent_vec"], val, slots, vec, n, vector)
    back = None if run.direct else (vec[n:], slots, sdev["back"], run.tables.vec_len - n)
    launches = run.launches or _dataflow_launches(run, flow, (ticket, val, slots, vec, vector), vec.dtype,
                                                  vec.device)
    for go, args in zip(launches, (fill, flow, back)):
        if args is not None:
            go(*args)


def _slot_total(run) -> int:
    """VEC's length for a dataflow call: the n inputs, then every block's slots (slot_stride)."""
    return run.tables.n1 + run.plan[0] * run.slot_stride


def _slots_first(run) -> int:
    """The first VEC entry a call's fill writes: past the inputs where the kernel reads them from
    the caller's vector (run.split), else 0."""
    return run.tables.n1 if run.split else 0


def _dataflow_launches(run, flow, per_call, dtype, device) -> list:
    """_run_dataflow's three launches (the slots' fill, the kernel over its `flow` arguments, the
    gather back; None where the kernel stores in row order), each called with its positional
    arguments: where run.binds (BOUND) launch.Bound, kept in run.launches, else launches through
    the JIT, made afresh each call. The kernel's launch keys only the arguments among `per_call`,
    the objects the call made (Bound's `varying`); the others are the runner's own tables."""
    count, sdev = run.plan
    n, pdl = run.tables.n1, uses_pdl(device)
    meta = dict(R=run.block_rows, SENT=SENTINEL[dtype], num_warps=run.num_warps, DIRECT=run.direct, PDL=pdl)
    if run.flat:
        kernel, meta = _flat, dict(meta, W=run.flat_width)
    else:
        kernel = _dataflow
        meta = dict(meta, **run.streams, PTX=not interpreting(),
                    AHEAD=run.tickets_ahead if run.programs_per_sm > 0 else 0, EARLY=run.early,
                    EVERY=run.whole_records, SPLIT=run.split, RS=run.slot_stride, **run.record_shape,
                    SUMS=run.sums)
    make = Bound if run.binds else jit_launch
    varying = [i for i, a in enumerate(flow) if any(a is p for p in per_call)]
    launches = [make(_input_then_sentinel, *fill_launch(_slot_total(run) - _slots_first(run), dtype, pdl,
                                                        run.awaited is not None, run.slot_stride, False)),
                make(kernel, *claimed(kernel, run, count, flow, meta, pdl), varying=varying),
                None if run.direct else make(_gather_back, *back_launch(run.tables.vec_len - n, pdl))]
    if run.binds:
        run.launches = launches
    return launches


SPMV_SHARE = {"sptrsv_spmv": 64, "spmv_sptrsv": 80}
"""Of every 256 striding programs of the dataflow records, how many run only the SpMV's blocks
where they run apart (spmv_share), by pair; 0 or no entry: never apart."""


def spmv_share(pair, early) -> int:
    """The share (of 256) of the striding programs that run the SpMV's blocks apart from the
    solve's (SPMV_SHARE; 0: every program strides over every block): for the pairs with an SpMV
    where the programs run as a software pipeline (`early`, looks_early: wide levels or long
    records), in both dtypes. The blocks are then two streams, each in ticket order, kernel 1's
    first (_dataflow_plan's `apart`; _dataflow's STREAMS), so a solve program never sits in an
    SpMV block while the block its chain needs next is ready, and the solve's own programs
    stride over fewer blocks.

    Measured on an H200 (2026-12-04, sparse-fusion schedule, A/B in one process, 5 rotated
    rounds, every output checked first, figures/data/spmv_apart_ab_*), ms, all programs
    together → a share of 64 / 80 (others):
      3D grid, float64: sptrsv_spmv 0.2299 → 0.2220 (32: 0.3073, 128: 0.2372) and, in a second
        process, 0.2360 → 0.2174 / 0.2212 (48: 0.2286); spmv_sptrsv 0.2262 → 0.2248, 0.2198 →
        0.2235 / 0.2135 and 0.2293 → 0.2245 / 0.2159 (96: 0.2173);
      3D grid, float32: sptrsv_spmv 0.2126 → 0.2078 and 0.2110 → 0.2086 / 0.2144; spmv_sptrsv
        0.2017 → 0.2045 / 0.1939;
      27-point grid, float64: sptrsv_spmv 0.3066 → 0.2932 and 0.3056 → 0.2912 / 0.2945;
        spmv_sptrsv 0.3026 → 0.2899 and 0.3024 → 0.2896 / 0.2917;
      27-point grid, float32: sptrsv_spmv 0.2650 → 0.2701 / 0.2740 and 0.2657 → 0.2713 / 0.2750;
        spmv_sptrsv 0.2649 → 0.2684 / 0.2676: slower then, with one record width for both streams.
        With each stream's own width (STREAM_CHUNKS) it gains there too (dev/sparse_fusion/
        spmv_cost.py widths, figures/data/widths_ab_h200_2026-12-05.*, widths_ab2_*, together → 64 / 80 apart):
        2026-12-05, first run, spmv_sptrsv 0.2580 → 0.2445; second run, sptrsv_spmv 0.2595 →
        0.2534, spmv_sptrsv 0.2589 → 0.2460. So float32 runs apart since then.
    With 32 the SpMV's programs fall behind. Programs added for the SpMV instead of taken from
    the solve (20 an SM on the 3D grid with 51 of 256 apart, or 24 with 85; 10 or 12 on the
    27-point grid) were slower than 64 of the usual 16 or 8, but for the 3D spmv_sptrsv at 24
    (0.2241 against 0.2248). In the package CLI (figures/data/spmv_apart64_cli_*, 64 apart for
    both pairs and dtypes) the 3D sptrsv_spmv took 0.219 ms (0.230 together, the run before),
    the 27-point pairs 0.292 / 0.290 (0.296 / 0.292). On the 2D grid, whose levels are narrow
    (no pipeline), 64 made sptrsv_spmv slower, 0.9673 → 0.9901 (32: 0.9659), so it runs
    together there."""
    return SPMV_SHARE.get(pair, 0) if early else 0


def stream_args(pair, share, plan_dev) -> dict:
    """_dataflow's arguments for a plan whose SpMV runs apart (share > 0, spmv_share), else none:
    STREAMS, where kernel 2's blocks start (the plan's split_at) and the first stream's share of
    256 — the SpMV's where it is the pair's kernel 1 (sparse_dags.PAIRS), the rest where it is
    kernel 2. Derived once per Prepared, not per call."""
    if not share:
        return {}
    spmv_first = dags.check_pair(pair).kernels[0] == "spmv"
    chunks = plan_dev.get("chunks") or (0, 0)            # each stream's record width (stream_chunks)
    return dict(STREAMS=True, SPLIT_AT=plan_dev["split_at"], SHARE0=share if spmv_first else 256 - share,
                CHUNK0=chunks[0], CHUNK1=chunks[1])


STREAM_CHUNKS = True
"""Whether the dataflow records of two streams (spmv_share) are each as wide as their own rows
(records.stream_chunks, _dataflow's CHUNK0 and CHUNK1). On the 27-point grid the solve's
blocks then read 16-slot records and the SpMV's 32. Measured on an H200 (2026-12-05, float64,
sparse-fusion schedule, one process, 5 rotated rounds, every output checked first,
figures/data/widths_ab_*), ms, one width → each its own: sptrsv_spmv 0.2864 → 0.2646,
spmv_sptrsv 0.2909 → 0.2743 (half of sptrsv_sptrsv, on its own 16-slot records: 0.2448); in
the package CLI right after, 0.266 / 0.274 ms, 4.19× / 4.08× cuSPARSE (table_h200_bh). The
kernel holds both loops: 111 registers in sm_90 against 96. In float32 the 27-point streams run
together (spmv_share); apart with their own widths spmv_sptrsv took 0.2445 against 0.2580
together, sptrsv_spmv 0.2639 against 0.2589 (one A/B; the rule not changed on it)."""


SUMS_EACH_POLL = True
"""Whether the dataflow records' blocks may take their sums at every poll (sums_each_poll)."""


def sums_each_poll(pair, share, long_records) -> int:
    """_dataflow's SUMS: which blocks take their sums at every poll instead of once after the last
    (vec_await_dot). A row's sum is three rounds of shuffles across the lanes that hold its
    entries; taken after the wait they lie on the chain from the last value's arrival to the
    result's store, at every hop of the critical path; taken at every poll they run beside the
    check for what is still pending, and a poll that still finds something pending costs their
    time before the next. Every block where the pair's blocks run together (1); where the
    SpMV's blocks run apart (share, spmv_share), the solve's stream alone (2 when it comes
    first, sptrsv_spmv; 3 when second, spmv_sptrsv), since the SpMV's programs, which mostly
    wait, only lost by it; and on long records (the 27-point grid) the spmv_sptrsv not at all.

    Measured on an H200 (2026-12-04, sparse-fusion schedule, A/B in one process, 5 rotated
    rounds, every output checked first, figures/data/sums_ab_*), ms, once after the wait →
    every block / the solve's stream:
      2D grid: sptrsv_spmv 0.9644 → 0.9039, spmv_sptrsv 0.9495 → 0.9119, sptrsv_sptrsv 1.854 →
        1.7645 (every block: no streams there);
      3D grid, float64: sptrsv_spmv 0.2181 → 0.2041 and 0.2234 → 0.2053 / 0.2041; spmv_sptrsv
        0.2137 → 0.2092 / 0.2097; float32 sptrsv_spmv 0.2090 → 0.1886 / 0.1865;
      27-point grid, float64: sptrsv_spmv 0.2913 → 0.3000 and 0.2918 → 0.3006 / 0.2871 (the
        SpMV's stream alone: 0.3066), 0.2928 → 0.2879; spmv_sptrsv 0.2919 → 0.3016 and 0.2927 →
        0.3024 / 0.3058 (the SpMV's alone 0.2956), 0.2917 → 0.3047; with the SpMV's blocks
        together again, every block 0.3056 / 0.3030 against 0.3066 / 0.3028 without;
        sptrsv_sptrsv 0.5068 → 0.4900;
      27-point grid, float32 (no streams): sptrsv_spmv 0.2649 → 0.2590, spmv_sptrsv 0.2653 →
        0.2591."""
    if not SUMS_EACH_POLL:
        return 0
    if not share:
        return 1
    spmv_first = dags.check_pair(pair).kernels[0] == "spmv"
    if spmv_first and long_records:
        return 0
    return 3 if spmv_first else 2


AWAITED_ONLY = True
"""Whether a call puts the sentinel only in the slots some row reads (_slots_from's `awaited`)."""

INPUT_APART = True
"""Whether the dataflow kernel may read the input from the caller's vector (reads_input_apart)."""


def reads_input_apart(shape) -> bool:
    """Whether the dataflow kernel reads the input entries from the caller's vector instead of a
    copy in its slots (_dataflow's SPLIT), which leaves the slots kernel only the sentinel to
    write: where every entry a row reads is in its record (`shape`, record_shape, has no TAIL;
    tail_sum reads VEC)."""
    return INPUT_APART and not shape["TAIL"]


# ---------------------------------------------------------------- the dataflow executor over flat records

FLAT_RECORDS = True
"""Whether striding dataflow programs read flat records (flat_plan, _flat) where some row is
longer than its record would be (record_shape's TAIL: the power-law graph; reads_flat)."""

FLAT_WIDTH = 32
"""Entry slots of a flat record (a power of two; 32: one per thread of the program's one warp).
Records of 64 (two slots a thread) waited longer than they saved (flat_plan)."""

FLAT_BLOCK_ROWS = 8
"""Rows of a flat block at most, where `prepare` is not given block_rows (flat_plan). A block
holds at most FLAT_WIDTH rows, and seg (an int8) numbers at most 32, so a larger block_rows is
taken as min(block_rows, FLAT_WIDTH, 32)."""


def reads_flat(shape, claim) -> bool:
    """Whether the dataflow executor reads flat records (flat_plan, _flat): where FLAT_RECORDS,
    some row is longer than CHUNK (`shape`, record_shape, has TAIL), and the programs stride
    (claim "stride"; _flat takes no tickets)."""
    return FLAT_RECORDS and shape["TAIL"] and claim == "stride"


# ---------------------------------------------------------------- the pair functions

class Prepared:
    """A pair on fixed matrices, ready to run: `prepared(vector)` returns what the pair function
    returns, launching only the executor's kernels — the tables and the matrices' values are
    already on the device. Made by `prepare`."""

    def __init__(self, problem, schedule, executor, tickets, block_rows, num_warps, nap_ns, chain_steps,
                 programs_per_sm, tickets_ahead, device, dtype, claim, fuse_rows, lean=False):
        self.problem, self.schedule, self.executor = problem, schedule, executor
        self.tickets, self.block_rows, self.num_warps, self.nap_ns = tickets, block_rows, num_warps, nap_ns
        self.chain_steps, self.programs_per_sm, self.tickets_ahead = chain_steps, programs_per_sm, tickets_ahead
        self.claim, self.resident = claim, None      # resident: programs an SM holds (_launch_claimed)
        self.fuse_rows, self.lean, self.device, self.dtype = fuse_rows, lean, device, dtype
        if executor == "bands":   # its own tables and values (device_bands): no row tables
            self.tables = self.dev = self.values = None
        else:
            self.tables, self.dev = rows.device_tables(problem, device)
            self.values = torch.from_numpy(self.tables.values(problem.matrices)).to(device=device, dtype=dtype)
        self.graph, self.eager_calls = None, 0      # a factor pair's graph, captured by its second call (_graphed)
        if lean:
            self.pair_stride = pair_stride(lean_defaults(schedule, problem.matrices)[2], dtype)
            self.plan = schedule.cached(("t3_lean", tickets, block_rows, fuse_rows, str(device)),
                                        lambda: lean_plan(schedule, problem.matrices, self.tables, block_rows, tickets,
                                                          PLAN_TIES, fuse_rows, device))
        elif executor == "levels":
            self.plan = schedule.cached(("t3_levels", str(device)),
                                        lambda: _level_plan(schedule, self.tables, device))
        elif executor == "chains":
            self.plan = schedule.cached(("t3_chains", block_rows, chain_steps, str(device)),
                                        lambda: _chain_plan(schedule, problem.matrices, block_rows, chain_steps,
                                                            device))
        elif executor == "segments":
            self.plan = schedule.cached(("t3_segments", block_rows, chain_steps, str(device)),
                                        lambda: _segment_plan(schedule, problem.matrices, self.tables, block_rows,
                                                              chain_steps, device))
        elif executor == "bands":     # its own cut of the matrices, the schedule's order unused
            self.plan = schedule.cached(("t3_bands", RING), lambda: band_plan(problem.pair, problem.matrices, RING))
            self.bands = device_bands(self.plan, pair_values(problem.matrices, dtype, device), PREFETCH)
            self.claim, self.num_warps = "stride", band_warps(self.plan.lanes)    # what launch.claimed reads
        elif executor == "dataflow" and not self.tables.factor:
            self.record_shape = shape = record_shape(self.tables)
            self.flat = reads_flat(shape, claim)
            if self.flat:
                self.early = False
                self.flat_width = W = FLAT_WIDTH
                self.block_rows = self.slot_stride = block_rows = min(block_rows, W, 32)   # FLAT_BLOCK_ROWS
                key = ("t3_flat", tickets, block_rows, W, str(device))
                self.plan = schedule.cached(key, lambda: flat_plan(schedule, problem.matrices, self.tables,
                                                                   block_rows, tickets, device, W))
            else:
                self.slot_stride = RS = slot_stride(block_rows, dtype)
                self.early = claim == "stride" and looks_early(schedule, problem.matrices, self.tables)
                self.spmv_share = spmv_share(problem.pair, self.early)
                apart = self.spmv_share > 0
                own = apart and STREAM_CHUNKS
                key = ("t3_dataflow", tickets, block_rows, shape["CHUNK"], shape["FOLD"], READY_ORDER, HUBS_ALONE,
                       RS, apart, own, str(device))
                self.plan = schedule.cached(key, lambda: _dataflow_plan(schedule, problem.matrices, self.tables,
                                                                        block_rows, tickets, device, shape["FOLD"],
                                                                        RS, apart, own))
            self.record_values = _dataflow_values(self.plan, self.values)
            self.streams = stream_args(problem.pair, self.spmv_share, self.plan[1])
            self.direct = writes_row_order(schedule, problem.matrices)
            self.split = self.flat or reads_input_apart(shape)
            self.awaited = self.plan[1].get("awaited") if AWAITED_ONLY else None   # None: all (_slots_from)
            self.binds, self.launches = BOUND, None           # _run_dataflow's launches, kept (_dataflow_launches)
            self.sums = sums_each_poll(problem.pair, self.spmv_share, _long_records(shape))
        else:                   # the flag executor, or a factor pair's dataflow executor (kernel_of)
            self.data = executor == "dataflow"
            self.data_template = None           # VAL with the sentinel, made by the first call (_data_buffers)
            short = FETCH_SHORT and self.data
            key = ("t3_syncfree", tickets, block_rows, fuse_rows, self.data, str(device), short, BLK_REC, STEP_REC,
                   FUSE_REC)
            self.plan = schedule.cached(key,
                                        lambda: _syncfree_plan(schedule, problem.matrices, self.tables, block_rows,
                                                               tickets, fuse_rows, device, waits=not self.data,
                                                               short=short))

    @property
    def every_slot(self) -> bool:
        """Whether the pipelined loop reads every slot of a record (the dataflow executor over
        records; reads_every_slot): only where the pipeline runs (early)."""
        return self.early and reads_every_slot(self.record_shape)

    @property
    def whole_records(self) -> bool:
        """Whether the dataflow kernel reads every slot of its records and no widths (_dataflow's
        EVERY): where rows pass their records (TAIL: measured, record_shape) or the pipelined loop
        reads every slot (every_slot)."""
        return self.record_shape["TAIL"] or self.every_slot

    @property
    def fused(self) -> int:
        """Solve rows the plan runs inside their factor rows' blocks (the flag executor's, or
        in their factor rows' lanes, the lean rows')."""
        if self.lean:
            return self.plan[3]
        return self.plan[2] if kernel_of(self.executor, self.problem.pair) == "syncfree" else 0

    data = False        # the flag executor's kernel with the values as flags (a factor pair's dataflow)
    spmv_share = 0      # the dataflow records' SpMV programs of their own (spmv_share)
    streams: dict = {}  # and the kernel's arguments for them (stream_args); read, never changed
    launches = None     # the dataflow call's launches, kept by its first call where binds (_dataflow_launches)
    late_look = None    # a staged factor row's late operands read at its pivots' polls: None, LATE_LOOKS's rule
    relook = None       # a staged row's missing x_j read again after its late operands: None, relooks' rule

    def check(self, vector):
        """rows.check_vector for the length, dtype and device this runner was prepared for."""
        rows.check_vector(self.problem.n, vector, self.dtype, self.device, "t3_triton_fused")

    def refresh(self, *matrices):
        """New values on the patterns this runner was prepared for, everything built from the
        patterns kept (schedule, tables, plan, compiled launches): a preconditioner refactored at
        every step of a nonlinear solve. Each matrix as SciPy sparse or as a 1-D tensor of its
        stored values in canonical CSR order on this runner's device (validation.validate_refresh);
        from tensors nothing crosses to the host but the checks' answers. The values are written
        in place into what the launches read (VAL, the dataflow records' values, the bands'
        tables), so launches kept from call to call stay valid. A factor pair's sentinel template
        and CUDA graph hold copies of the old values: with REFRESH_KEEPS_GRAPH they are rewritten
        in place (_graph_takes_values) and the next call replays the graph it had; without it
        they are dropped. self.problem keeps the patterns (and the values first prepared).
        Returns the runner."""
        new = rows.checked_values(self.problem, matrices, self.device)
        if self.executor == "bands":
            bands_take_values(self.bands, pair_values(new, self.dtype, self.device))
            return self
        self.values.copy_(rows.refreshed_values(self.problem, self.tables, new, self.dtype))
        if getattr(self, "record_values", None) is not None:
            _dataflow_values(self.plan, self.values, into=self.record_values)
        if self.graph is not None:
            torch.cuda.synchronize(self.device)      # its last replay or preparation ahead may still run
        if not REFRESH_KEEPS_GRAPH:
            self.graph, self.data_template, self.eager_calls = None, None, 0
        if getattr(self, "data_template", None) is not None:
            _sentinel_template(self, self.data_template.copy_(self.values))
        if self.graph is not None:
            _graph_takes_values(self)
        return self

    def __call__(self, vector):
        if self.data or self.lean:
            self.check(vector)
            if self.graph is not None or (self.eager_calls and replays_graph(self)):
                return _graphed(self, vector)
            self.eager_calls += 1
            if self.lean:
                return run_lean(self, vector)
            val, own, vec = _data_buffers(self, vector)
            _run_syncfree(self, val, vec, own)
            return rows.results(self.tables, self.dev, val, rows.vector_outs(self.tables, vec))
        if self.executor == "bands":
            self.check(vector)
            return run_bands(self, vector)
        flow = self.executor == "dataflow"          # it copies the input into its slot layout itself
        vec = rows.new_vector(self.tables, vector, self.values, "t3_triton_fused", copy_in=not flow)
        val = self.values.clone() if self.tables.factor else self.values     # a factor is made in place
        if flow:
            _run_dataflow(self, val, vec, vector)
        else:
            RUNS[self.executor](self, val, vec)
        return rows.results(self.tables, self.dev, val, rows.vector_outs(self.tables, vec))


RUNS = {"levels": _run_levels, "syncfree": _run_syncfree, "chains": _run_chains, "segments": _run_segments}


def prepare(pair, *matrices, like, schedule=None, executor=None, tickets=None, block_rows=None,
            num_warps=NUM_WARPS, nap_ns=NAP_NS, chain_steps=None, programs_per_sm=None,
            tickets_ahead=None, claim=None, fuse_rows=None, lean=None) -> Prepared:
    """Validate `matrices` for `pair` once and return a Prepared runner for vectors shaped, typed and
    placed like the tensor `like`. executor: one of EXECUTORS (executors_for(pair)) or None
    (executor_rule). For the sync-free kernels: tickets, the block order (TICKETS, see
    ticket_blocks; None: TICKET_ORDER of the executor, FACTOR_TICKETS for a factor pair);
    block_rows, iterations per block (a power of two up to 128; None: tuning_defaults of the
    executor and pair, or for a factor pair on the flag executor factor_block_rows); num_warps of
    each program (1, 2, 4 or 8 for the flag and level executors; 1 for the ONE_WARP executors);
    nap_ns, the sync-free executors' sleep between polls (0 to 10000 ns); chain_steps, the chain
    executor's links per block (1 to 4096) or the segment executor's per piece (1 to SEG_MAX); None:
    CHAIN_STEPS of the executor; programs_per_sm, for the sync-free executors, 0 for one program per
    block or the number of persistent programs per SM that run blocks until none is left (1 to 64,
    striding ones at most what an SM holds, resident_per_sm; None: the dataflow executor's
    dataflow_programs, FLAG_PROGRAMS_PER_SM for the flag executor, PROGRAMS_PER_SM for the others);
    tickets_ahead, for the dataflow executor's persistent programs, 0 to take the next ticket after
    a block, 1 to hold it while the block waits, 2 to also prefetch that block's record (_dataflow;
    None, like block_rows None: dataflow_shape; with claim "stride" 2); claim, how a persistent
    program of the flag or dataflow executor (STRIDING) finds its next block (CLAIMS; None: CLAIM,
    or "counter" with one program per block); fuse_rows, whether the flag executor, or the dataflow
    executor on a factor pair, runs a factor pair's solve row with its factor row where the schedule
    puts both in one partition (fused_rows; None: fuses_rows; not with tickets "schedule", which
    then runs them apart); lean, whether the dataflow executor runs a factor pair by the lean
    rows (tiers/kernels/sparse_fusion_executors/lean.py: only where every update lands on a
    diagonal; None: runs_lean), whose programs stride (programs_per_sm and block_rows None:
    lean_defaults'; the gap between its pairs too) and poll without a nap (nap_ns is not theirs)."""
    problem = validate_sparse_fusion(pair, matrices, like, schedule, tier="t3_triton_fused")
    if executor is not None and executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {', '.join(EXECUTORS)} or None, got {executor!r}")
    if executor is not None and executor not in executors_for(pair):
        raise ValueError(f"executor {executor!r} carries vector entries from row to row, but {pair} computes a "
                         f"factor in place (entries rewritten step by step); use one of "
                         f"{', '.join(executors_for(pair))}")
    if tickets is not None and tickets not in TICKETS:
        raise ValueError(f"tickets must be one of {', '.join(TICKETS)} or None, got {tickets!r}")
    if block_rows is not None and (isinstance(block_rows, bool) or block_rows not in (1, 2, 4, 8, 16, 32, 64, 128)):
        raise ValueError(f"block_rows must be a power of two from 1 to 128, got {block_rows!r}")
    if isinstance(num_warps, bool) or num_warps not in (1, 2, 4, 8):
        raise ValueError(f"num_warps must be 1, 2, 4 or 8, got {num_warps!r}")
    if isinstance(nap_ns, bool) or not isinstance(nap_ns, int) or not 0 <= nap_ns <= 10000:
        raise ValueError(f"nap_ns must be an int from 0 to 10000, got {nap_ns!r}")
    if chain_steps is not None and (isinstance(chain_steps, bool) or not isinstance(chain_steps, int)
                                    or not 1 <= chain_steps <= 4096):
        raise ValueError(f"chain_steps must be an int from 1 to 4096, got {chain_steps!r}")
    if programs_per_sm is not None and (isinstance(programs_per_sm, bool) or not isinstance(programs_per_sm, int)
                                        or not 0 <= programs_per_sm <= 64):
        raise ValueError(f"programs_per_sm must be an int from 0 to 64, got {programs_per_sm!r}")
    if tickets_ahead is not None and (isinstance(tickets_ahead, bool) or tickets_ahead not in (0, 1, 2)):
        raise ValueError(f"tickets_ahead must be 0, 1 or 2, got {tickets_ahead!r}")
    if claim is not None and claim not in CLAIMS:
        raise ValueError(f"claim must be one of {', '.join(CLAIMS)} or None, got {claim!r}")
    if fuse_rows is not None and not isinstance(fuse_rows, bool):
        raise ValueError(f"fuse_rows must be True, False or None, got {fuse_rows!r}")
    if lean is not None and not isinstance(lean, bool):
        raise ValueError(f"lean must be True, False or None, got {lean!r}")
    if claim == "stride" and programs_per_sm == 0:
        raise ValueError("claim='stride' strides persistent programs over the blocks; it needs programs_per_sm > 0")
    if executor == "bands" and programs_per_sm == 0:
        raise ValueError("the bands executor's programs stride over the bands; it needs programs_per_sm > 0")
    if executor == "segments" and chain_steps is not None and chain_steps > SEG_MAX:
        raise ValueError(f"chain_steps of the segments executor must be at most {SEG_MAX} (the lanes of one "
                         f"program), got {chain_steps}")
    schedule = schedule if schedule is not None else default_schedule(pair, problem.matrices, problem.fingerprint)
    if executor is None:
        executor = executor_rule(like.device, schedule, rows.host_tables(problem))
    kernel = kernel_of(executor, pair)
    lean = _lean_option(lean, executor, pair, problem, like, programs_per_sm, claim, tickets)
    if lean:
        R, P, _ = lean_defaults(schedule, problem.matrices)
        programs_per_sm = P if programs_per_sm is None else programs_per_sm
        claim = "stride"
        block_rows = R if block_rows is None else block_rows
    if executor in ONE_WARP and num_warps != 1:
        raise ValueError(f"executor {executor!r} runs one warp per program (ONE_WARP), got num_warps={num_warps}")
    if programs_per_sm is None:
        programs_per_sm = _default_programs(kernel)
    if programs_per_sm is None:         # the dataflow executor: by the pattern
        programs_per_sm = dataflow_programs(rows.host_tables(problem))
    if kernel not in STRIDING:
        claim = "counter"               # the other executors' persistent programs always take tickets
    claim = claim or default_claim(kernel, programs_per_sm)
    if kernel == "dataflow" and claim == "stride" and tickets_ahead is None:
        tickets_ahead = 2               # the next block is known: prefetching its record waits on nothing
    if kernel == "dataflow" and block_rows is None and reads_flat(record_shape(rows.host_tables(problem)), claim):
        block_rows = FLAT_BLOCK_ROWS
    if kernel == "dataflow" and (block_rows is None or tickets_ahead is None):
        shape = dataflow_shape(schedule, problem.matrices, rows.host_tables(problem))
        block_rows = shape[0] if block_rows is None else block_rows
        tickets_ahead = shape[1] if tickets_ahead is None else tickets_ahead
    if block_rows is None:
        block_rows = tuning_defaults(kernel, pair).get("block_rows", 1)
    if block_rows is None:              # a factor pair on the flag executor's kernel: by its rows' shape
        block_rows = factor_block_rows(rows.host_tables(problem),
                                       wide=executor == "dataflow" and _wide(schedule, problem.matrices))
    if chain_steps is None:
        chain_steps = CHAIN_STEPS.get(executor, 1)
    if tickets is None:
        tickets = tuning_defaults(kernel, pair).get("tickets") or "dag"
    if fuse_rows is None:
        fuse_rows = fuses_rows(executor, pair, rows.host_tables(problem))
    return Prepared(problem, schedule, executor, tickets, block_rows, num_warps, nap_ns, chain_steps,
                    programs_per_sm, tickets_ahead or 0, like.device, like.dtype, claim, fuse_rows, lean)


def _lean_option(lean, executor, pair, problem, like, programs_per_sm, claim, tickets) -> bool:
    """prepare's `lean`, decided (None: runs_lean on the dataflow executor) and checked against the
    other options: only the dataflow executor on a factor pair whose updates all land on a
    diagonal, with striding programs and tickets of the joint DAG."""
    if lean is False or (lean is None and (executor != "dataflow" or pair not in dags.FACTOR_PAIRS)):
        return False
    tables = rows.host_tables(problem)
    if programs_per_sm == 0 or claim == "counter":
        conflict = ("the lean rows' programs stride over the blocks; they take neither programs_per_sm=0 "
                    "nor claim='counter'")
    elif tickets == "schedule":
        conflict = "the lean rows' blocks follow the joint DAG; tickets='schedule' is not theirs"
    else:
        conflict = None
    if lean is None:         # options that only the other kernel takes keep it
        return conflict is None and runs_lean(tables)
    if executor != "dataflow" or pair not in dags.FACTOR_PAIRS:
        raise ValueError(f"lean=True runs a factor pair on the dataflow executor, got {pair} on {executor!r}")
    if not tables.updates_only_diagonal:
        raise ValueError("lean=True needs a factor whose updates all land on the diagonal (as on the 5- and "
                         "7-point grids); this pattern's do not")
    if conflict:
        raise ValueError(conflict)
    return True


def sptrsv_spmv(L, A, b, schedule=None):
    """(x, y): x = L⁻¹b (L lower triangular), y = A·x."""
    return prepare("sptrsv_spmv", L, A, like=b, schedule=schedule)(b)


def spmv_sptrsv(A, L, x, schedule=None):
    """(y, z): y = A·x, z = L⁻¹y."""
    return prepare("spmv_sptrsv", A, L, like=x, schedule=schedule)(x)


def sptrsv_sptrsv(L, U, b, schedule=None):
    """(y, x): y = L⁻¹b, x = U⁻¹y (U upper triangular)."""
    return prepare("sptrsv_sptrsv", L, U, like=b, schedule=schedule)(b)


def spilu0_sptrsv(A, b, schedule=None):
    """(LU, x): ILU(0) of A on A's pattern (unit L and U packed), x = L⁻¹b."""
    return prepare("spilu0_sptrsv", A, like=b, schedule=schedule)(b)


def spic0_sptrsv(A, b, schedule=None):
    """(Lc, x): IC(0) of A on tril(A)'s pattern, x = Lc⁻¹b."""
    return prepare("spic0_sptrsv", A, like=b, schedule=schedule)(b)
