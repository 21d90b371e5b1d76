"""Sparse fusion, fused: the two kernels of a pair run as one schedule of joint iterations
(tiers/fusion_schedules.py), by one of five executors.

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
    comes earlier — by wavefront level of the joint DAG, ties in the schedule's order — and cut
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
    otherwise a striding program reads a block's record only as wide as its longest row (WIDTH),
    and the right-hand side rides in the entry slots (folds_rhs: one gather, not two).
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
  (over records; over flat records nothing, _flat).
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

Tried, not kept (2026-11-26, figures/data/chain_bundles_probe_sparse_fusion_*, docs/sparse_fusion_log.md): one
program walking K chains side by side, level by level, with the last steps' outputs in registers
(tl.gather) so that a dependence inside the bundle is a shuffle, not an L2 round trip. Right, but
a bundle step cost about 1.1 µs on the H100 whatever K, even in bundles that wait on nothing
(figures/data/chain_bundles_clock_sparse_fusion_*), and 2D Poisson sptrsv_spmv took 2.73 ms
against the dataflow executor's 1.46 (3D spmv_sptrsv the one win, 0.654 vs 0.723).

The pair functions keep the signature every tier shares and let executor_rule (LEVELS_UP_TO)
choose; `prepare(..., executor=...)` chooses explicitly. `prepare` does the per-matrix work once —
validation, tables, the upload of the matrices' values — and returns a callable that only
launches kernels: what a solver calls at each step, and what a benchmark should time.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from tiers import buffers
from tiers import sparse_dags as dags
from tiers.fusion_schedules import JOINT_DAG, JOINT_LEVELS, default_schedule
from tiers.kernels import sparse_rows as rows
from tiers.kernels.sparse_rows import (affine_fetch, affine_finish, affine_link, affine_step, factor_rows,
                                       held_fetch, held_finish, held_solve, iterations, nap, tail_sum,
                                       vec_await_at, vec_await_entries, vec_look_at)
from tiers.validation import interpreting, validate_sparse_fusion

EXECUTORS = ("levels", "syncfree", "dataflow", "chains", "segments")
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
CHUNK = 8                # non-zeros of a row loaded per trip (a 5-point row fits in one)
DEPS = 8                 # flags polled at once by a waiting program
NUM_WARPS = 1            # a block is small: one warp keeps a dependence hop short
NAP_NS = 0
"""ns a waiting program of a sync-free executor sleeps between polls (dataflow: module docstring).
The flag executor takes it too since 2026-11-27; on the factor pairs (H100, float64, package CLI,
figures/data/flag_nap_*) 150 ns against none, ILU(0) / IC(0), wavefront schedule: 27-point 5.48 /
6.81 against 5.05 / 7.49 ms, 3D 1.69 / 1.61 against 1.67 / 1.75, 2D 5.87 / 7.02 against 5.80 /
7.17; sparse-fusion schedule: 27-point 5.43 / 7.44 against 5.46 / 7.54, 3D 1.61 / 1.75 against
1.60 / 1.75, 2D 5.92 / 7.58 against 5.83 / 7.21. No setting wins; none is kept."""
CHAIN_STEPS = {"chains": 16, "segments": 16}   # links per chain block (piece) at most (module docstring)
SEG_CHUNK = 16           # segments: a link's predecessor must be among its row's first SEG_CHUNK entries
SEG_MAX = 128            # segments: links per piece at most (the lanes of one program)
RECORD_CHUNK = 32        # dataflow: entry slots per lane of a record at most (record_chunk)
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
STRIDING = ("syncfree", "dataflow")
"""Executors whose persistent programs may stride over the blocks (CLAIMS); the others take tickets."""
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
warp's instructions waiting on L1TEX loads), not by the tickets."""
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
(fuses_rows)."""


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
    walked rows make fusing lose there was not profiled."""
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
    by_matrix = executor == "dataflow" or (executor == "syncfree" and pair in dags.FACTOR_PAIRS)
    programs = _default_programs(executor)
    every = {"block_rows": None if by_matrix else BLOCK_ROWS.get(executor, 1), "nap_ns": NAP_NS,
             "chain_steps": CHAIN_STEPS.get(executor),
             "programs_per_sm": programs, "tickets": TICKET_ORDER.get(executor),
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


def looks_early(schedule, mats, tables) -> bool:
    """Whether striding dataflow programs run as a software pipeline (_dataflow's EARLY,
    _pipelined), reading the next blocks' records and entries before their block waits: where
    EARLY_LOOK and the blocks hold 8 rows (dataflow_shape: the joint DAG's levels hold at least
    WIDE_LEVELS iterations on average, and no row is longer than CHUNK). On such levels the
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
        programs an SM 0.313 / 0.265 / 0.466."""
    return EARLY_LOOK and _eight_rows(schedule, mats, tables)


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
    return LONG_PROGRAMS_PER_SM if shape["CHUNK"] > CHUNK else PROGRAMS_PER_SM


def executors_for(pair: str) -> tuple:
    """The executors that can run `pair`: "chains" and "segments" only where every iteration
    writes one vector entry once (no factor rows); "dataflow" runs a factor pair by the flag
    executor's kernel with the values as flags (kernel_of)."""
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


# ---------------------------------------------------------------- executor (a): one launch per level

@triton.jit
def _level(P0, NPART, PART_PTR, ORDER, KIND, ENT_PTR, ENT_VAL, ENT_AUX, UPD_PTR, UPD_A, UPD_B, RHS, DIAG,
           SIGN, DST, FAC_PTR, HOLD_LEN, STEP_BITS, VAL, VEC, FACTOR: tl.constexpr, LANES: tl.constexpr,
           CHUNK: tl.constexpr, WIDE: tl.constexpr, W: tl.constexpr, S: tl.constexpr, C: tl.constexpr,
           WALK: tl.constexpr):
    """Partitions P0 + pid·LANES … of one level, walked in lockstep."""
    p = P0 + tl.program_id(0) * LANES + tl.arange(0, LANES)
    ok = p < P0 + NPART
    first = tl.load(PART_PTR + p, mask=ok, other=0)
    last = tl.load(PART_PTR + p + 1, mask=ok, other=0)
    for k in range(0, tl.max(last - first, 0)):
        step = ok & (first + k < last)
        v = tl.load(ORDER + first + k, mask=step, other=0)
        iterations(v, step, KIND, ENT_PTR, ENT_VAL, ENT_AUX, UPD_PTR, UPD_A, UPD_B, RHS, DIAG, SIGN, DST,
                   FAC_PTR, HOLD_LEN, STEP_BITS, VAL, VEC, FACTOR, CHUNK, WIDE, W, S, C, WALK)
        tl.debug_barrier()


def _lanes(partitions: int, device, most: int = 32) -> int:
    """Partitions per program, at most `most`: on a GPU at least ~256 programs per level while
    lanes ≤ 32 (a level of a few hundred rows still spreads over every SM); in the interpreter,
    which pays per program, as few programs as possible."""
    if device.type != "cuda":
        return min(most, triton.next_power_of_2(partitions))
    lanes = 1
    while lanes < most and partitions >= 512 * lanes:
        lanes *= 2
    return lanes


def _level_plan(schedule, tables, device):
    """Per level: (first partition, partitions, lanes, programs), and the schedule on the device.
    Held factor rows (sparse_rows.RowTables.held) take at most as many lanes as stay held."""
    lp = schedule.level_ptr
    most = tables.held_lanes(32)
    launches = []
    for s in range(schedule.levels()):
        P = int(lp[s + 1] - lp[s])
        if P:
            lanes = _lanes(P, device, most)
            launches.append((int(lp[s]), P, lanes, triton.cdiv(P, lanes)))
    dev = rows.to_device({"part_ptr": schedule.part_ptr.astype(np.int32), "order": schedule.order.astype(np.int32)},
                         device)
    return launches, dev


def _run_levels(run, val, vec):
    launches, sdev = run.plan
    args = rows.table_args(run.dev)
    for p0, P, lanes, grid in launches:
        W, S, C = run.tables.held(lanes)
        _level[(grid,)](p0, P, sdev["part_ptr"], sdev["order"], *args, val, vec, FACTOR=run.tables.factor,
                        LANES=lanes, CHUNK=CHUNK, WIDE=run.tables.wide(CHUNK), W=W, S=S, C=C,
                        WALK=run.tables.walks, num_warps=run.num_warps)


# ---------------------------------------------------------------- executor (b): one sync-free launch

def _joint(schedule, mats):
    """(joint DAG, its wavefront levels) of the schedule's pair, built once per schedule and
    shared by every plan the sync-free executors make from it."""
    dag = schedule.cached(JOINT_DAG, lambda: dags.joint_dag(schedule.pair, *mats))
    return dag, schedule.cached(JOINT_LEVELS, lambda: dags.wavefront_levels(dag))


def _latest_levels(schedule, mats, merged=False):
    """As-late-as-possible level of every iteration of the joint DAG, or of the merged one
    (_ticket_graph): depth − 1 − the longest path from it to a sink (the wavefront levels of the
    reversed DAG), cached per schedule."""
    def build():
        dag, level = _ticket_graph(schedule, mats, merged)[:2]
        return int(level.max(initial=0)) - dags.wavefront_levels(dag.reversed(), reverse=dag)
    return schedule.cached(("latest_levels", merged), build)


# tickets="mid": an iteration whose row stores more entries than this starts as early as it can
HEAVY = 4 * CHUNK


def _mid_levels(schedule, mats, merged=False):
    """Keys of tickets="mid" (in half levels) on the joint or the merged DAG (_ticket_graph):
    as-soon- plus as-late-as-possible level, halfway, except for heavy iterations (rows of more
    than HEAVY entries, HEAVY / CHUNK trips or more): they keep twice their as-soon-as-possible
    level, and what they depend on moves earlier with them, key(u) = min(key(u), key(v) − 1)
    over u → v. Late is cheap for a short row; a long row started late is the critical path (a
    power-law hub's SpMV row, read by most of the solve). Every dependence still rises by at
    least one.

    Only a key that fell can pull another: for u → v, asap and alap each rise by at least one, so
    key(u) ≤ key(v) − 2 while neither key moved. So the keys settle by walking back from the heavy
    rows, each round from the rows whose keys just fell to what they depend on, until none falls
    (at most the DAG's depth in rounds). Settling every edge level by level from the last down,
    as before 2026-11-29, gives the same keys (checked on the power-law graph's three vector
    pairs), after ordering all 10M edges of that graph's sptrsv_spmv by level for its 11 321
    heavy rows: these keys with the latest levels took 1.58–1.68 s that way and 0.96–1.11 s now
    (development machine's CPU, 3 alternating rounds in one process)."""
    def build():
        dag, asap, cost, _ = _ticket_graph(schedule, mats, merged)
        key = asap + _latest_levels(schedule, mats, merged)
        heavy = cost > HEAVY
        if not heavy.any():
            return key
        key = np.where(heavy, 2 * asap, key)
        fell = np.flatnonzero(heavy)
        while fell.size:
            owner, at = dags.expand_ranges(dag.ptr[fell], dag.ptr[fell + 1])
            u = dag.idx[at]
            before = key[u]
            np.minimum.at(key, u, key[fell[owner]] - 1)
            fell = dags.distinct(u[key[u] < before])
        return key
    return schedule.cached(("mid_levels", merged), build)


@triton.jit
def _next_ticket(TICKET, N_BLK, LOOP: tl.constexpr):
    """The ticket after a finished block: a fresh one when programs are persistent (LOOP), else
    N_BLK, which ends the program's loop after its one block."""
    if LOOP:
        return tl.atomic_add(TICKET, 1, sem="relaxed")
    else:
        return N_BLK


@triton.jit
def _syncfree(SYNC, N_BLK, BLK_PTR, BLK_ITER, DEP_PTR, DEP_BLK, KIND, ENT_PTR, ENT_VAL, ENT_AUX, UPD_PTR, UPD_A,
              UPD_B, RHS, DIAG, SIGN, DST, FAC_PTR, HOLD_LEN, STEP_BITS, VAL, VEC, FUSE, X_AT, OWN, LATE, N_IN,
              FACTOR: tl.constexpr, R: tl.constexpr, CHUNK: tl.constexpr, DEPS: tl.constexpr, WIDE: tl.constexpr,
              W: tl.constexpr, S: tl.constexpr, C: tl.constexpr, WALK: tl.constexpr, FUSED: tl.constexpr,
              LOOP: tl.constexpr, STRIDE: tl.constexpr, NAP: tl.constexpr, DATA: tl.constexpr, SENT: tl.constexpr,
              APART: tl.constexpr, STAGED: tl.constexpr):
    """SYNC[0] is the ticket counter, SYNC[1 + t] the flag of block t (all zero at launch). LOOP:
    persistent programs, each running blocks until none is left; STRIDE (CLAIMS): program p runs
    blocks p, p + P, … of the P launched together instead of taking tickets; NAP: ns a waiting
    program sleeps between polls. W > 0: factor rows with held entries are held (held_fetch), and
    with WALK the others walk in memory beside them; W = 0: every factor row walks. FUSED
    (fused_rows): a factor row v with FUSE[v] ≥ 0 also solves that row, x_i = (b_i − Σ_{j<i}
    l_ij·x_j) / d_i — held rows from the registers the factor row ends in (X_AT:
    RowTables.solve_x_at), walked rows from memory.

    DATA (a factor pair only): no flags, the values are the flags. VAL is the factor as the other
    rows see it — each entry that a step rewrites holds the sentinel SENT until its row stores
    it, the others hold A's values from the start — and VEC's outputs (past N_IN) start as SENT
    too. A row works on its own entries from OWN (A's values) and polls what it reads of other
    rows, the factor's entries and x, until none holds the sentinel (factor_rows, held_finish).
    STAGED (DATA only; stages_steps): a held row runs its steps before LATE[v] (late_steps) as soon
    as what they read is there, and waits for the rest after them (held_finish)."""
    if STRIDE:
        t = tl.program_id(0)
    else:
        t = tl.atomic_add(SYNC, 1, sem="relaxed")
    while t < N_BLK:
        first = tl.load(BLK_PTR + t)
        lane = first + tl.arange(0, R)
        ok = lane < tl.load(BLK_PTR + t + 1)
        v = tl.load(BLK_ITER + lane, mask=ok, other=0)
        if FACTOR != 0:
            fac = tl.load(KIND + v, mask=ok, other=0) != 0
        else:
            fac = ok & False
        aff = ok & ~fac
        # what no other block writes is read before waiting: after the wait, one round of loads
        start, end, m, pv, px, a, rhs_at, diag_at, d, sign, dst = affine_fetch(
            v, aff, ENT_PTR, ENT_VAL, ENT_AUX, RHS, DIAG, SIGN, DST, VAL, FACTOR == 0, CHUNK)
        if W > 0:    # held factor rows: their positions too, dependent loads off the critical path
            hold, w_at, inrow, steps, sm, loc, aux, mine, other, row0 = held_fetch(
                v, fac, FAC_PTR, HOLD_LEN, ENT_PTR, ENT_VAL, ENT_AUX, UPD_PTR, UPD_A, UPD_B, STEP_BITS, W, S, C)
            walk = fac & ~hold
            late = tl.load(LATE + v, mask=hold, other=0) if STAGED else 0
        else:
            walk = fac
        if FUSED:    # the solve row each factor row carries, and (held) where its x_j are
            v2 = tl.load(FUSE + v, mask=fac, other=-1)
            two = fac & (v2 >= 0)
            if W > 0:
                two_held = two & hold
                x_at = tl.load(X_AT + w_at, mask=inrow & two[:, None], other=-1)
                b2 = tl.load(VEC + tl.load(RHS + v2, mask=two_held, other=0), mask=two_held, other=0.0)
                d_at = tl.load(DIAG + v2, mask=two_held, other=-1)
                d_loc = tl.where(d_at >= 0, d_at - row0, -1)
                dst2 = tl.load(DST + v2, mask=two_held, other=0)
            if W == 0 or WALK:    # walked rows solve from memory: their tables now, off the critical path
                start2, end2, m2, pv2, px2, a2, rhs2, diag2, d2, sign2, dst2w = affine_fetch(
                    v2, two & walk, ENT_PTR, ENT_VAL, ENT_AUX, RHS, DIAG, SIGN, DST, VAL, False, CHUNK)
        if not DATA:
            dep_end = tl.load(DEP_PTR + t + 1)
            for q in range(tl.load(DEP_PTR + t), dep_end, DEPS):
                at = q + tl.arange(0, DEPS)
                need = at < dep_end
                flag = SYNC + 1 + tl.load(DEP_BLK + at, mask=need, other=0)
                # the loop carries a scalar (a vector loop-carried value crashes Triton 3.6's compiler)
                ready = tl.min(tl.where(need, tl.atomic_add(flag, 0, mask=need, sem="acquire"), 1), 0)
                while ready == 0:
                    if NAP > 0:
                        nap(tl.full([], NAP, tl.int32))
                    ready = tl.min(tl.where(need, tl.atomic_add(flag, 0, mask=need, sem="acquire"), 1), 0)
            tl.debug_barrier()             # the flags were read by some threads, the rows are read by all
        if W > 0:
            if FUSED:
                if DATA:                   # in flight while the factor row waits and works
                    x_j = tl.load(VEC + x_at, mask=x_at >= 0, other=0.0, volatile=True)
                else:
                    x_j = tl.load(VEC + x_at, mask=x_at >= 0, other=0.0, cache_modifier=".cg")
            w = held_finish(w_at, inrow, steps, sm, loc, aux, mine, other, row0, VAL, FACTOR, W, S, C, OWN, DATA,
                            SENT, NAP, APART, late, STAGED)
            if FUSED:
                if DATA:
                    x_j = vec_await_entries(x_j, VEC + x_at, x_at, x_at >= 0, N_IN, SENT, NAP)
                tl.store(VEC + dst2, held_solve(w, x_at, x_j, b2, d_loc, W), mask=two_held)
        if FACTOR != 0 and (W == 0 or WALK):
            factor_rows(v, walk, ENT_PTR, ENT_VAL, ENT_AUX, UPD_PTR, UPD_A, UPD_B, VAL, FACTOR, CHUNK, OWN, FAC_PTR,
                        DATA, SENT, NAP)
            if FUSED:                      # factor_rows ends at a barrier: the row is there for all
                affine_finish(two & walk, start2, end2, m2, pv2, px2, a2, rhs2, diag2, d2, sign2, dst2w, ENT_VAL,
                              ENT_AUX, VAL, VEC, False, CHUNK, N_IN, DATA, SENT, NAP, WIDE)
        affine_finish(aff, start, end, m, pv, px, a, rhs_at, diag_at, d, sign, dst, ENT_VAL, ENT_AUX, VAL, VEC,
                      FACTOR == 0, CHUNK, N_IN, DATA, SENT, NAP, WIDE, DATA)
        if not DATA:
            tl.debug_barrier()             # every thread's stores issued before the flag goes up
            tl.atomic_xchg(SYNC + 1 + t, 1, sem="release")
        if STRIDE:
            t += tl.num_programs(0)
        else:
            t = _next_ticket(SYNC, N_BLK, LOOP)


TICKETS = ("dag", "alap", "mid", "schedule")
# the default ticket order by executor. Measured on the H100 (2026-11-25, float64, 1M-row grids
# and graph, sptrsv_spmv / spmv_sptrsv / sptrsv_sptrsv, one call, data
# figures/data/tickets_heavy_sparse_fusion_*): for the dataflow executor "mid" against "dag", with
# the sparse-fusion schedule, 2D 1.51 / 1.50 / 2.90 vs 1.61 / 1.76 / 2.90 ms, 27-point 0.63 / 0.64 /
# 1.39 vs 0.72 / 0.73 / 1.48, 3D 3–6 % faster or even, the power-law graph within 1.3 % either way
# (geometric mean 0.95); with the wavefront schedule 0.98, its worst case the power-law
# sptrsv_spmv (1.52 vs 1.33 ms). The flag executor's factor pairs were not measured with "mid".
TICKET_ORDER = {"syncfree": "dag", "dataflow": "mid"}


def fused_rows(schedule, mats):
    """The rows the flag executor runs fused: for a factor pair, fuse[i] = n1 + i where the
    schedule puts solve row i in the partition of factor row i (one worker runs both, the
    factor row first), else −1; None for the other pairs. One program then computes factor row
    i on registers and solves row i from them (_syncfree): no hop between the two, no reload of
    the row, half the blocks. The sparse-fusion inspector packs nearly every solve row with its
    factor row (interleaved packing); a wavefront schedule never can (solve row i lies a level
    below factor row i), LBC seldom does.

    Why the two may run as one iteration, whatever else the schedule holds: solve row i reads
    factor row i and x_j for the j < i of row i's lower pattern, and factor row i reads the
    factor rows of that same pattern (ILU(0): the pivot rows k with a_ik ≠ 0; IC(0): the rows j
    with l_ij ≠ 0). So the fused iteration waits for fused iterations j < i only, and nothing
    that factor row i feeds reaches solve row i but factor row i itself: merging the two
    leaves the DAG acyclic, the DAG of the factor rows.

    Tried, not kept (2026-11-27, figures/data/dataflow_fused_rows_*): the same for spmv_sptrsv in
    the dataflow executor, whose SpMV row i reads only the input and feeds only solve row i. A
    lane carried SpMV row i in a second part of its record, computed y_i before its wait, stored
    it and took it as the solve's right-hand side: half the blocks, no y hop. Right, but on the
    H100 (float64, package CLI, medians of 3 interleaved rounds) no faster: sparse-fusion
    schedule, fused against apart, 2D 1.263 against 1.273 ms, 3D 0.345 against 0.347, 27-point
    0.438 against 0.443 (wavefront 1.205 / 0.338 / 0.428), and LBC, which fuses a tenth of the
    rows, 0.409 against 0.346 on the 3D grid. The SpMV rows ran beside the solve for free before:
    its chain of hops, not their work, sets the time."""
    if schedule.pair not in dags.FACTOR_PAIRS:
        return None

    def build():
        n1, n = schedule.n1, schedule.n1 + schedule.n2
        part = schedule.partition_of()
        i = np.arange(n1)
        fuse = np.full(n, -1, dtype=np.int64)
        together = i[part[i] == part[n1 + i]]
        fuse[together] = n1 + together
        return fuse
    return schedule.cached("fused_rows", build)


def _ticket_graph(schedule, mats, merged=False):
    """(DAG, wavefront levels, costs, listed) that the tickets are keyed on, cached per schedule:
    the joint DAG, or with `merged` the joint DAG with each solve row that fused_rows fuses
    merged into its factor row — a merged solve row is not listed and keeps no edge, a fused row
    costs both rows. Without fused rows the two are the same."""
    fuse = fused_rows(schedule, mats) if merged else None
    if merged and (fuse is None or not (fuse >= 0).any()):
        return _ticket_graph(schedule, mats)

    def build():
        dag, level = _joint(schedule, mats)
        cost = schedule.cost if schedule.cost is not None else dags.joint_cost(schedule.pair, *mats)
        if not merged:
            return dag, level, cost, np.ones(dag.n, dtype=bool)
        rep = np.arange(dag.n)
        heads = np.flatnonzero(fuse >= 0)
        rep[fuse[heads]] = heads
        u, v = (rep[x] for x in dag.sources())
        keep = u != v
        fused_dag = dags.dag_from_edges(u[keep], v[keep], dag.n1, dag.n2)
        cost = cost.copy()
        cost[heads] += cost[fuse[heads]]
        return fused_dag, dags.wavefront_levels(fused_dag), cost, rep == np.arange(dag.n)
    return schedule.cached(("ticket_graph", merged), build)


TIES = ("schedule", "ids")


def ticket_order(schedule, mats, tickets: str = "dag", fuse_rows: bool = False, ties: str = "schedule"):
    """(seq, group): the iterations in ticket order and each one's group key, ascending — the
    order and the groups that ticket_blocks cuts into blocks (its docstring says how each
    `tickets` keys them); with fuse_rows the merged solve rows are not listed. `ties`: the
    order within a group of "dag", "alap" or "mid" — the schedule's ("schedule"), or id order
    ("ids": rows in order, kernel 1's first, whatever the schedule), which the dataflow
    executor's records take (_dataflow_plan): a block then holds rows that lie together. With
    the schedule's order the sparse-fusion schedule ran the grids' vector pairs 2–7 % slower than
    wavefront, whose order within a level is the rows'. Measured on an H200 (2026-11-29, float64,
    dataflow executor, A/B in one call, 3 interleaved rounds, every output checked first,
    figures/data/ties_ab_*), sparse-fusion schedule, schedule's order → ids, ms: 2D sptrsv_sptrsv
    1.987 → 1.855; 3D sptrsv_spmv / spmv_sptrsv / sptrsv_sptrsv 0.241 → 0.242, 0.231 → 0.225,
    0.390 → 0.373; 27-point 0.320 → 0.312, 0.314 → 0.305, 0.555 → 0.516; the wavefront schedule
    within 1 % either way (cuSPARSE 9.50 / 0.906, 0.905, 1.679 / 1.115, 1.121, 2.123 ms in the same
    rounds); the package CLI afterwards (figures/data/ties_cli_*) gave the two schedules the same
    times on the grids' vector pairs. The other plans keep the schedule's order: with ids
    everywhere that call also measured the power-law graph's flat records (flat_plan) at 0.272 /
    0.247 ms on spmv_sptrsv / sptrsv_sptrsv against 0.171 / 0.244 with the schedule's order
    (figures/data/table_h200_*, the same day), and the factor pairs' fused rows (_syncfree_plan)
    even within the rounds' spread (3D ILU(0) in the A/B 0.844 → 0.839; 3D IC(0) at R = 8 in the
    CLI 1.085 against 0.905, its rounds 0.90–1.11)."""
    if ties not in TIES:
        raise ValueError(f"ties must be one of {', '.join(TIES)}, got {ties!r}")
    n = schedule.n1 + schedule.n2
    pos = np.empty(n, dtype=np.int64)
    pos[schedule.order] = np.arange(n)
    sizes = np.diff(schedule.part_ptr)
    if fuse_rows and tickets == "schedule":
        raise ValueError("fused rows take their tickets from the merged DAG's levels, not the schedule's steps; "
                         "use tickets 'dag', 'alap' or 'mid' with them")
    _, level, _, listed = _ticket_graph(schedule, mats, fuse_rows)
    keys = {"dag": lambda: level, "alap": lambda: _latest_levels(schedule, mats, fuse_rows),
            "mid": lambda: _mid_levels(schedule, mats, fuse_rows)}
    if tickets in ("dag", "alap", "mid"):
        group = keys[tickets]()
        seq = dags.stable_order(group) if ties == "ids" else np.lexsort((pos, group))
    elif tickets == "schedule":
        step = np.empty(n, np.int64)
        step[schedule.order] = np.arange(n) - np.repeat(schedule.part_ptr[:-1], sizes)
        group = schedule.partition_level()[schedule.partition_of()] * (int(sizes.max(initial=0)) + 1) + step
        seq = np.lexsort((pos, group))                      # within a (level, step): partition order
    else:
        raise ValueError(f"tickets must be one of {', '.join(TICKETS)}, got {tickets!r}")
    seq = seq[listed[seq]]
    return seq, group[seq]


def ticket_blocks(schedule, mats, R: int, tickets: str = "dag", fuse_rows: bool = False, alone=None,
                  ties: str = "schedule"):
    """The sync-free executor's blocks in ticket order, as (blk_ptr, blk_iter, dep_ptr, dep_blk):
    block t runs iterations blk_iter[blk_ptr[t]:blk_ptr[t+1]] and waits for the blocks
    dep_blk[dep_ptr[t]:dep_ptr[t+1]]. With fuse_rows, an iteration i with fused_rows(...)[i] ≥ 0
    also runs that iteration, which is listed in no block: the blocks are those of the joint
    DAG with each such pair merged into one iteration (_ticket_graph), keyed by that DAG's levels, so
    not with tickets="schedule" (ValueError): a merged row would straddle two of the schedule's
    (level, step) groups, and rows between them may need it or be needed by it.

    tickets="dag": iterations sorted by (wavefront level of the joint DAG, position in the
    schedule, or id with ties="ids": ticket_order), each level cut into blocks of at most R — the
    shortest chains of waits, whatever the schedule; the schedule only decides which iterations
    of a level share a block, and with ties="ids" not even that.
    tickets="alap": by as-late-as-possible level (_latest_levels) instead — iterations off the
    critical path wait until just before they are needed (spmv_sptrsv: each SpMV row right before
    the solve row that reads it, not all of them first). tickets="mid": by the sum of both levels,
    halfway, but rows of more than HEAVY entries as early as they can be (_mid_levels). A
    dependence u → v raises every one of these keys, so every order keeps it in an earlier group.
    tickets="schedule": sorted by (schedule level, step within the partition, partition), each
    (level, step) cut into blocks of at most R — the schedule's own grouping, with the chains
    inside its partitions. Either way the iterations of a block are independent of each other
    and every dependence lies in an earlier block. `alone` (a mask over the iterations): each
    of these gets a block of its own."""
    n = schedule.n1 + schedule.n2
    seq, g = ticket_order(schedule, mats, tickets, fuse_rows, ties)
    dag = _ticket_graph(schedule, mats, fuse_rows)[0]
    m = len(seq)
    start = np.ones(m, dtype=bool)
    start[1:] = g[1:] != g[:-1]
    if alone is not None:
        single = alone[seq]
        start |= single
        start[1:] |= single[:-1]
    run_start = np.maximum.accumulate(np.where(start, np.arange(m), 0))
    start |= (np.arange(m) - run_start) % R == 0            # a new block every R within a group
    blk_ptr = np.append(np.flatnonzero(start), m).astype(np.int64)
    B = len(blk_ptr) - 1
    block_of = np.empty(n, dtype=np.int64)
    block_of[seq] = np.cumsum(start) - 1
    u, v = dag.sources()
    if (block_of[u] >= block_of[v]).any():      # what the sync-free argument rests on
        raise AssertionError(f"tickets={tickets!r}: a block would wait for itself or a later block")
    waits = dags.distinct(block_of[v] * max(B, 1) + block_of[u])      # (waiting block, awaited block), once
    dep_ptr = np.zeros(B + 1, dtype=np.int64)
    np.cumsum(np.bincount(waits // max(B, 1), minlength=B), out=dep_ptr[1:])
    return blk_ptr, seq, dep_ptr, waits % max(B, 1)


def _syncfree_plan(schedule, mats, tables, R, tickets, fuse_rows, device):
    """(blocks, the block tables on the device, fused rows, whether held rows take their steps in
    two stages): ticket_blocks, with the rows the schedule fuses (fused_rows) merged when
    fuse_rows, unless the tickets follow the schedule's own steps (ticket_blocks); and for a
    factor pair each row's first late step (sparse_rows.late_steps, stages_steps)."""
    fuse = fused_rows(schedule, mats) if fuse_rows and tickets != "schedule" else None
    fused = fuse is not None and bool((fuse >= 0).any())
    blk_ptr, seq, dep_ptr, dep_blk = ticket_blocks(schedule, mats, R, tickets, fused)
    late, staged = np.zeros(1, dtype=np.int32), False
    W = tables.held(R)[0]
    if held_grid(tables, W) and not held_in_one_pass(tables, W):
        n1 = tables.n1
        late = rows.late_steps(n1, tables.ent_ptr, tables.ent_val, tables.factor_pattern[1], _joint(schedule, mats)[1])
        # a row with a late step after its first (IC(0)'s diagonal step is never late)
        staged = bool(((tables.hold_len > 0) & (late > 0) & (late < np.diff(tables.ent_ptr[:n1 + 1]))).any())
    host = {"blk_ptr": blk_ptr.astype(np.int32), "blk_iter": seq.astype(np.int32),
            "dep_ptr": dep_ptr.astype(np.int32), "dep_blk": dep_blk.astype(np.int32),
            "fuse": (fuse if fused else np.full(1, -1)).astype(np.int32),
            "x_at": tables.solve_x_at if fused else np.full(1, -1, dtype=np.int32),
            "late": late if staged else np.zeros(1, dtype=np.int32)}
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
that divided in the late stage's steps, staged_ab_try2_*); so only rows that take a grid stage
their steps. The tries before the kept kernel are in the same files (try1–try3): the late stage
dividing instead of taking reciprocals made the 27-point ILU(0) 3.17 against 3.23 ms in one
process, and zeroing what the first stage does not await in a one-row block made float32
ILU(0) 2.83 ms against the kept kernel's 2.21 in a fresh process of each."""


def stages_steps(run, W) -> bool:
    """_syncfree's STAGED: a factor pair's held rows on the dataflow executor (DATA) take the
    steps before their first late one (sparse_rows.late_steps) as soon as what those read is
    there, not after every row they read. A row's critical path then holds the steps from its
    late one on, not all of them: on the 27-point grid 5 of an interior row's 13. Where the plan
    says so (_syncfree_plan): held rows that take their pairs as a grid (STAGED_STEPS), not
    held_in_one_pass's, whose steps run at once, and some with steps on both sides of their
    late one; only then does it compute and upload the late steps."""
    return STAGED_STEPS and run.data and bool(W) and run.plan[3]


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


GRID_REGISTERS = {rows.ILU: 128, rows.IC: 96}
"""Registers a thread of the dataflow executor's factor kernel may hold (ptxas' maxnreg, by factor)
where held rows take their pairs as a grid (register_cap: the 27-point grid's). There one program
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
store to its own."""


def register_cap(tables, W, data) -> int:
    """GRID_REGISTERS' cap for a factor pair run by the dataflow executor (`data`, _syncfree's DATA)
    whose held rows (W > 0) take their pairs as a grid; else 0, ptxas' own choice."""
    if not data or not held_grid(tables, W):
        return 0
    return GRID_REGISTERS.get(tables.factor, 0)


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
    return ((sync, blocks, sdev["blk_ptr"], sdev["blk_iter"], sdev["dep_ptr"], sdev["dep_blk"],
             *rows.table_args(run.dev), val, vec, sdev["fuse"], sdev["x_at"], own if data else val,
             sdev["late"], run.tables.n1),
            dict(FACTOR=run.tables.factor, R=run.block_rows, CHUNK=CHUNK, DEPS=DEPS,
                 WIDE=run.tables.wide(CHUNK), W=W, S=S, C=C, WALK=run.tables.walks, FUSED=fused > 0,
                 DATA=data, SENT=SENTINEL[val.dtype] if data else 0, APART=held_in_one_pass(run.tables, W),
                 STAGED=stages_steps(run, W), num_warps=run.num_warps, **_cap(run.tables, W, data)))


def _cap(tables, W, data) -> dict:
    """register_cap as a launch option; none in the interpreter, which compiles nothing."""
    cap = 0 if interpreting() else register_cap(tables, W, data)
    return {"maxnreg": cap} if cap else {}


def _data_buffers(run, vector):
    """(VAL, OWN, VEC) for the flag executor's DATA mode (_syncfree): VAL is A's values with the
    sentinel where a step rewrites them (made once per runner, cloned per call), OWN A's values,
    copied only where rows walk (they work in it), VEC the input and then the sentinel in every
    output, written by one kernel (_slots_from)."""
    bits = SENTINEL_BITS[vector.dtype]
    if run.data_template is None:
        t = run.values.clone()
        run.rewritten_at = torch.from_numpy(run.tables.rewritten.astype(np.int64)).to(t.device)
        t.view(bits)[run.rewritten_at] = SENTINEL[t.dtype]
        run.data_template = t
    own = run.values.clone() if _works_in_own(run) else run.values
    return run.data_template.clone(), own, _slots_from(vector, run.tables.vec_len)


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
pivot test after it. Replayed, a call is one copy of the input, the graph, one read and the
outputs' clones, which the host queues while the graph runs. Measured on the H200 (2026-12-01, A/B
in one process, three runners on one plan — the graph, eager, eager again — 5 rotated rounds,
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
2.639 / 2.652, 2D IC(0) 2.580 against 2.519 / 2.517): more registers, a pick per row."""


def replays_graph(run) -> bool:
    """Whether this Prepared's calls after its first replay a CUDA graph (GRAPHS): a factor pair on
    the dataflow executor, on a CUDA device, one program per block (a cooperative launch, which
    striding programs take, is not captured)."""
    return (GRAPHS and run.data and run.values.device.type == "cuda" and not interpreting()
            and run.programs_per_sm == 0)


class _Graph(NamedTuple):
    graph: object              # torch.cuda.CUDAGraph
    vector: torch.Tensor       # the input it reads: each call copies its vector here
    val: torch.Tensor          # the factor it writes
    vec: torch.Tensor          # the vectors it writes
    flag: torch.Tensor         # the lowest row whose pivot stops the factorisation (rows.breakdown_flag)


def _graphed(run, vector):
    """A factor pair's call by replaying its graph, captured by the second call: the first runs
    eagerly, which builds the sentinel template and compiles the kernels (neither can be
    captured), and a pair function, which prepares for one call, captures nothing. The outputs
    are cloned from the graph's buffers, which the next call overwrites, and queued before the
    breakdown flag is read, so that the host's work for them overlaps the graph's."""
    if run.graph is None:
        run.graph = _capture(run, vector)
    g = run.graph
    g.vector.copy_(vector)
    g.graph.replay()
    return rows.results(run.tables, run.dev, g.val.clone(), g.vec.clone(), flag=g.flag)


def _capture(run, vector):
    """_Graph of one call's launches (none run here), reading a copy of `vector`. Its factor
    buffer starts as the sentinel template and keeps, from call to call, A's values wherever no
    step writes (every call leaves them as they were), so a call resets only the positions the
    steps rewrite (RowTables.rewritten) to the sentinel: 4M of the 3D grid's 7M entries, where a
    clone of the template would copy all 7M."""
    static = vector.clone()
    val = run.data_template.clone()
    torch.cuda.synchronize(vector.device)
    graph = torch.cuda.CUDAGraph()
    # unpoisoned whatever TIERS_POISON says: the graph is replayed by calls the benchmarks time, and
    # the slots a poison would fill hold the sentinel (a NaN) until the kernel writes them anyway
    with torch.cuda.graph(graph), buffers.poisoned(False):
        # run.rewritten_at lives as long as the runner: the graph reads it on every replay
        val.view(SENTINEL_BITS[val.dtype]).index_fill_(0, run.rewritten_at, SENTINEL[val.dtype])
        own = run.values.clone() if _works_in_own(run) else run.values
        vec = _slots_from(static, run.tables.vec_len)
        _run_syncfree(run, val, vec, own)
        flag = rows.breakdown_flag(run.tables, run.dev, val)
    return _Graph(graph, static, val, vec, flag)


# ---------------------------------------------------------------- executor (c): sync-free, the data as flags

SENTINEL = {torch.float64: 0x7FF00000DEADBEEF, torch.float32: 0x7F80BEEF}
"""Bit patterns of VEC's outputs before they are written: signalling NaNs, which no arithmetic
produces (a NaN result is quiet) and which the validated, finite inputs never hold."""
SENTINEL_BITS = {torch.float64: torch.int64, torch.float32: torch.int32}
"""The integer view through which a buffer of that dtype is written or compared bit for bit."""


@triton.jit
def _block_of(t, BLK_PTR, BLK_ITER, R: tl.constexpr):
    """Ticket t's block: (its first slot, the R slots, which hold an iteration, the iterations)."""
    first = tl.load(BLK_PTR + t)
    lane = first + tl.arange(0, R)
    ok = lane < tl.load(BLK_PTR + t + 1)
    return first, lane, ok, tl.load(BLK_ITER + lane, mask=ok, other=0)


@triton.jit
def _record_slots(t, w, N_BLK, R: tl.constexpr, CHUNK: tl.constexpr):
    """Where block t's record lies (_dataflow_plan): its lanes' slots t·R + j and which exist, and
    its entry slots (t·R + j)·CHUNK + k, [R, CHUNK], and which are used: below the width w."""
    slot = t * R + tl.arange(0, R)
    k = tl.arange(0, CHUNK)[None, :]
    return slot, slot < N_BLK * R, slot[:, None] * CHUNK + k, k < w


@triton.jit
def _records(t, w, N_BLK, PX, PA, RHS, START, END, SIGN, D, DINV, DST, R: tl.constexpr, CHUNK: tl.constexpr,
             TAIL: tl.constexpr, DIRECT: tl.constexpr, FOLD: tl.constexpr):
    """Block t's record (_dataflow_plan), read without indirection: its positions (_positions)
    and the rest (_record_rest)."""
    px = _positions(t, w, N_BLK, PX, R, CHUNK)
    a, rhs_at, start, end, sign, d, dinv, dst = _record_rest(t, w, N_BLK, PA, RHS, START, END, SIGN, D, DINV, DST,
                                                             R, CHUNK, TAIL, DIRECT, FOLD)
    return px, a, rhs_at, start, end, sign, d, dinv, dst


@triton.jit
def _positions(t, w, N_BLK, PX, R: tl.constexpr, CHUNK: tl.constexpr):
    """Per lane of block t and entry slot k < w (the block's width, WIDTH) the VEC position read
    (−1: none); the padding past the slots the block's rows use is not read."""
    slot, here, e, used = _record_slots(t, w, N_BLK, R, CHUNK)
    return tl.load(PX + e, mask=here[:, None] & used, other=-1)


@triton.jit
def _record_rest(t, w, N_BLK, PA, RHS, START, END, SIGN, D, DINV, DST, R: tl.constexpr, CHUNK: tl.constexpr,
                 TAIL: tl.constexpr, DIRECT: tl.constexpr, FOLD: tl.constexpr):
    """Block t's record but its positions: per lane and entry slot k < w the value, signed; per
    lane its right-hand side (−1: none), divisor and its reciprocal, with TAIL its entries
    start..end and sign, with DIRECT where its result goes in row order (−1: nowhere). An empty
    lane reads nothing. With FOLD the right-hand side is an entry slot (coefficient 1) and no
    lane has one of its own."""
    slot, here, e, used = _record_slots(t, w, N_BLK, R, CHUNK)
    a = tl.load(PA + e, mask=here[:, None] & used, other=0.0)
    if FOLD:
        rhs_at = tl.full([R], -1, tl.int32)
    else:
        rhs_at = tl.load(RHS + slot, mask=here, other=-1)
    d = tl.load(D + slot, mask=here, other=1.0)
    dinv = tl.load(DINV + slot, mask=here, other=1.0)
    if TAIL:
        start = tl.load(START + slot, mask=here, other=0)
        end = tl.load(END + slot, mask=here, other=0)
        sign = tl.load(SIGN + slot, mask=here, other=0.0)
    else:
        start = tl.zeros([R], tl.int32)
        end = start
        sign = tl.zeros([R], d.dtype)
    if DIRECT:
        dst = tl.load(DST + slot, mask=here, other=-1)
    else:
        dst = tl.full([R], -1, tl.int32)
    return a, rhs_at, start, end, sign, d, dinv, dst


@triton.jit
def _ticket_later(TICKET, PTX: tl.constexpr):
    """The next ticket, as 32 values (one per lane of the program's one warp) whose maximum it
    is, without waiting for it: Triton's scalar atomic is shared with the warp (a shuffle) right
    after it is issued, which waits for its round trip there. With PTX, lane 0 alone adds, in
    inline assembly the compiler leaves alone, and the other values are 0; the maximum, taken
    after the block, is where the wait falls. (With fewer values than lanes, lanes holding a
    copy of value 0 would take their own copy's maximum, 0: hence 32.)"""
    if PTX:
        return tl.inline_asm_elementwise(
            "{ .reg .pred p; .reg .u32 l; mov.u32 l, %laneid; mov.u32 $0, 0; setp.eq.u32 p, l, 0; "
            "setp.eq.and.u32 p, $2, 0, p; @p atom.global.relaxed.gpu.add.u32 $0, [$1], 1; }",
            "=r,l,r", [TICKET + tl.zeros([32], tl.int32), tl.arange(0, 32)], dtype=tl.int32, is_pure=False, pack=1)
    else:
        return tl.zeros([32], tl.int32) + tl.atomic_add(TICKET, 1, sem="relaxed")


@triton.jit
def _prefetch(t, w, N_BLK, PX, PA, RHS, START, END, SIGN, D, DINV, DST, R: tl.constexpr, CHUNK: tl.constexpr,
              TAIL: tl.constexpr, DIRECT: tl.constexpr, FOLD: tl.constexpr):
    """Ask L1 for what _records will read of block t (its first w entry slots, the tables TAIL and
    DIRECT use) without waiting for it: PTX prefetch, no register to fill, so nothing waits on it
    until the record is loaded. A slot past w asks again for its lane's first, already asked
    for: no memory traffic for the padding."""
    slot, _, e, used = _record_slots(tl.where(t < N_BLK, t, 0), w, N_BLK, R, CHUNK)
    e = tl.where(used, e, slot[:, None] * CHUNK)
    for P in tl.static_range(9):
        if P < 2:
            _ask_l1((PX if P == 0 else PA) + e)
        elif P < 5:
            if P > 2 or not FOLD:
                _ask_l1((RHS if P == 2 else D if P == 3 else DINV) + slot)
        elif P < 8:
            if TAIL:
                _ask_l1((START if P == 5 else END if P == 6 else SIGN) + slot)
        elif DIRECT:
            _ask_l1(DST + slot)


@triton.jit
def _ask_l1(at):
    """PTX prefetch of the addresses `at` into L1."""
    tl.inline_asm_elementwise("prefetch.global.L1 [$1]; mov.u32 $0, 0;", "=r,l", [at], dtype=tl.int32,
                              is_pure=False, pack=1)


@triton.jit
def _dataflow(TICKET, N_BLK, WIDTH, PX, PA, RHS, START, END, SIGN, D, DINV, DST, ENT_VAL, ENT_VEC, VAL, VEC, OUT,
              N_IN, IN, R: tl.constexpr, CHUNK: tl.constexpr, SENT: tl.constexpr, NAP: tl.constexpr, LOOP: tl.constexpr,
              WIDE: tl.constexpr, AHEAD: tl.constexpr, PTX: tl.constexpr, PENDING: tl.constexpr,
              TRIP_DIV: tl.constexpr, STRIDE: tl.constexpr, DIRECT: tl.constexpr, TAIL: tl.constexpr,
              FOLD: tl.constexpr, EARLY: tl.constexpr = False, PDL: tl.constexpr = False,
              SPLIT: tl.constexpr = False):
    """The sync-free executor without flags, for pairs of affine rows (SpMV, SpTRSV): each lane
    reads the vector entries its row needs as soon as they stop holding the sentinel, so a
    dependence costs one store and the loads that see it — no barrier, no fence, no flag. Lane
    j of block t writes VEC[N_IN + t·R + j]: _dataflow_plan numbers the outputs by slot, so a
    block's results are one contiguous store, and the store's address never comes from a table
    (Triton 3.6 failed to compile a store to an address loaded in an earlier loop iteration).
    A row's quotient r/d is r·(1/d) with one Markstein correction, which with 1/d rounded
    once (_dataflow_values) is r/d correctly rounded, without a division after the wait.
    AHEAD (persistent programs): 0, the next ticket is taken after the block; 1, the program
    already holds it while this block waits, and takes the one after; 2, it also asks L1 for
    that next block's record (with PTX). Holding tickets ahead keeps the tickets' argument (module
    docstring): a program's current block is the lowest it holds, so the lowest unfinished block
    is some running program's current one, and everything it waits for is finished. PENDING
    (polls_pending): a repeated poll reads only the entries still pending (vec_loads, tail_sum).
    TRIP_DIV: narrows tail_sum's wide trips (WIDE_TRIP_DIV). STRIDE (claim "stride", CLAIMS): no
    tickets; program p runs blocks p, p + P, … of the P launched together, and with AHEAD 2 asks L1
    for the next one's record. DIRECT: lane j also stores its result at OUT[dst], its place in row
    order (writes_row_order); else the caller gathers the slots back. WIDTH: the entry slots
    block t's rows use (_records reads no more); a striding program knows its next blocks, so it
    asks for the width of the one after next while this block runs, and reads no padding, in the
    record or its prefetch; a program taking tickets reads every slot, and so does every program
    where TAIL (measured: record_shape). TAIL: some row is longer than CHUNK, whose rest
    tail_sum reads; without it the record holds no entry range or sign. FOLD (record_shape): the
    right-hand side is read as one more entry slot, with the others (_dataflow_plan). EARLY
    (striding, looks_early): the loop runs as a software pipeline (_pipelined): the next blocks'
    records and entries are read before this block waits, and what still held the sentinel is
    polled when that block's turn comes (vec_await). PDL (launched as a programmatic dependent
    launch, _run_dataflow): the program starts while the kernel writing VEC's slots finishes,
    reads what that kernel does not write, and waits for it (gdc_wait) before its first look at
    VEC; after its last block it lets the kernel after it be launched. SPLIT (reads_input_apart):
    VEC holds no copy of the input, whose entries (positions below N_IN) are read from IN, the
    caller's vector (_at)."""
    w = CHUNK
    w1 = CHUNK
    if STRIDE:
        t = tl.program_id(0)
        n1 = t + tl.num_programs(0)
        if not TAIL:
            w = tl.load(WIDTH + t)
            w1 = tl.load(WIDTH + n1, mask=n1 < N_BLK, other=0)
    else:
        if PDL:                     # the ticket counter's zero comes from a fill kernel, just before
            gdc_wait()
        t = tl.atomic_add(TICKET, 1, sem="relaxed")
        n1 = N_BLK
        if LOOP and AHEAD > 0:
            n1 = tl.atomic_add(TICKET, 1, sem="relaxed")
    if EARLY and STRIDE:
        _pipelined(t, WIDTH, N_BLK, PX, PA, RHS, START, END, SIGN, D, DINV, DST, ENT_VAL, ENT_VEC, VAL, VEC, OUT, N_IN,
                   IN, R, CHUNK, SENT, NAP, WIDE, PTX, PENDING, TRIP_DIV, DIRECT, TAIL, FOLD, PDL, SPLIT)
    else:
        if PDL and STRIDE:
            gdc_wait()
        while t < N_BLK:
            if STRIDE:
                n2 = n1 + tl.num_programs(0)
                w2 = w1
                if not TAIL:
                    w2 = tl.load(WIDTH + n2, mask=n2 < N_BLK, other=0)
            px, a, rhs_at, start, end, sign, d, dinv, dst = _records(t, w, N_BLK, PX, PA, RHS, START, END, SIGN, D,
                                                                     DINV, DST, R, CHUNK, TAIL, DIRECT, FOLD)
            if LOOP and AHEAD > 0 and not STRIDE:
                n2 = _ticket_later(TICKET, PTX)
            if LOOP and AHEAD == 2 and PTX:        # n1, the next block, is known (striding) or held
                _prefetch(n1, w1, N_BLK, PX, PA, RHS, START, END, SIGN, D, DINV, DST, R, CHUNK, TAIL, DIRECT, FOLD)
            x, rhs = _look(VEC, IN, px, rhs_at, N_IN, SPLIT)
            _finish(t, px, a, rhs_at, start, end, sign, d, dinv, dst, x, rhs, N_BLK, ENT_VAL, ENT_VEC, VAL, VEC, OUT,
                    N_IN, IN, R, CHUNK, SENT, NAP, WIDE, PENDING, TRIP_DIV, DIRECT, TAIL, False, SPLIT)
            if STRIDE:
                t, n1, w, w1 = n1, n2, w1, w2
            elif LOOP and AHEAD > 0:
                t, n1 = n1, tl.max(n2, 0)
            else:
                t = _next_ticket(TICKET, N_BLK, LOOP)
    if PDL:
        gdc_launch_dependents()


@triton.jit
def _at(VEC, IN, p, N_IN, SPLIT: tl.constexpr):
    """The address of VEC position p; with SPLIT an input position (below N_IN) is in IN instead."""
    if SPLIT:
        at = tl.where(p < N_IN, IN + p, VEC + p)
    else:
        at = VEC + p
    return at


@triton.jit
def _look(VEC, IN, px, rhs_at, N_IN, SPLIT: tl.constexpr):
    """vec_look at positions px and rhs_at (_at)."""
    return vec_look_at(_at(VEC, IN, px, N_IN, SPLIT), px >= 0, _at(VEC, IN, rhs_at, N_IN, SPLIT), rhs_at >= 0)


@triton.jit
def _width(WIDTH, t, N_BLK, TAIL: tl.constexpr, CHUNK: tl.constexpr):
    """Block t's width (0 past the last block; every slot where TAIL, which reads no widths)."""
    if TAIL:
        return CHUNK
    else:
        return tl.load(WIDTH + t, mask=t < N_BLK, other=0)


@triton.jit
def _pipelined(t, WIDTH, N_BLK, PX, PA, RHS, START, END, SIGN, D, DINV, DST, ENT_VAL, ENT_VEC, VAL, VEC, OUT, N_IN,
               IN, R: tl.constexpr, CHUNK: tl.constexpr, SENT: tl.constexpr, NAP: tl.constexpr, WIDE: tl.constexpr,
               PTX: tl.constexpr, PENDING: tl.constexpr, TRIP_DIV: tl.constexpr, DIRECT: tl.constexpr,
               TAIL: tl.constexpr, FOLD: tl.constexpr, PDL: tl.constexpr, SPLIT: tl.constexpr):
    """_dataflow's striding loop as a software pipeline (EARLY, looks_early), block b of a program
    being followed by b + P: while block b waits, block b + P's record is loaded and its entries
    read once, the positions of block b + 2P are loaded into registers, and L1 is asked for the
    record of block b + 3P (_half). Blocks go in pairs, so that the loop's two halves take turns
    with two sets of registers: no copy from one to the other waits for a load. A block's width
    is read a block before it is first needed."""
    P = tl.num_programs(0)
    w = _width(WIDTH, t, N_BLK, TAIL, CHUNK)
    px, a, rhs_at, start, end, sign, d, dinv, dst = _records(t, w, N_BLK, PX, PA, RHS, START, END, SIGN, D, DINV, DST,
                                                             R, CHUNK, TAIL, DIRECT, FOLD)
    if PDL:
        gdc_wait()
    x, rhs = _look(VEC, IN, px, rhs_at, N_IN, SPLIT)
    wa = _width(WIDTH, t + P, N_BLK, TAIL, CHUNK)
    wb = _width(WIDTH, t + 2 * P, N_BLK, TAIL, CHUNK)
    wc = _width(WIDTH, t + 3 * P, N_BLK, TAIL, CHUNK)
    qa = _positions(t + P, wa, N_BLK, PX, R, CHUNK)
    while t < N_BLK:
        wd = _width(WIDTH, t + 4 * P, N_BLK, TAIL, CHUNK)
        qb, a1, rh1, s1, e1, sg1, d1, di1, ds1, x1, rhs1 = _half(
            t, P, wa, wb, wc, qa, px, a, rhs_at, start, end, sign, d, dinv, dst, x, rhs, N_BLK, PX, PA, RHS, START,
            END, SIGN, D, DINV, DST, ENT_VAL, ENT_VEC, VAL, VEC, OUT, N_IN, IN, R, CHUNK, SENT, NAP, WIDE, PTX, PENDING,
            TRIP_DIV, DIRECT, TAIL, FOLD, False, SPLIT)
        we = _width(WIDTH, t + 5 * P, N_BLK, TAIL, CHUNK)
        p1 = qa
        qa, a, rhs_at, start, end, sign, d, dinv, dst, x, rhs = _half(
            t + P, P, wb, wc, wd, qb, p1, a1, rh1, s1, e1, sg1, d1, di1, ds1, x1, rhs1, N_BLK, PX, PA, RHS, START,
            END, SIGN, D, DINV, DST, ENT_VAL, ENT_VEC, VAL, VEC, OUT, N_IN, IN, R, CHUNK, SENT, NAP, WIDE, PTX, PENDING,
            TRIP_DIV, DIRECT, TAIL, FOLD, True, SPLIT)
        px = qb
        wa, wb, wc = wc, wd, we
        t += 2 * P


@triton.jit
def _half(t, P, wa, wb, wc, qa, px, a, rhs_at, start, end, sign, d, dinv, dst, x, rhs, N_BLK, PX, PA, RHS, START, END,
          SIGN, D, DINV, DST, ENT_VAL, ENT_VEC, VAL, VEC, OUT, N_IN, IN,
          R: tl.constexpr, CHUNK: tl.constexpr, SENT: tl.constexpr, NAP: tl.constexpr, WIDE: tl.constexpr,
          PTX: tl.constexpr, PENDING: tl.constexpr, TRIP_DIV: tl.constexpr, DIRECT: tl.constexpr,
          TAIL: tl.constexpr, FOLD: tl.constexpr, PAST: tl.constexpr, SPLIT: tl.constexpr):
    """Half of _pipelined's loop: block t (with PAST it may lie past the last) is finished from its
    record and its entries' first look, after the loads of what comes next are issued — the
    positions of block t + 2P, the rest of block t + P's record (whose positions qa are loaded)
    and its first look, and a prefetch of block t + 3P's record (wa, wb, wc: the widths of blocks
    t + P, t + 2P, t + 3P). Returns block t + 2P's positions and block t + P's record and look."""
    qb = _positions(t + 2 * P, wb, N_BLK, PX, R, CHUNK)
    if PTX:
        _prefetch(t + 3 * P, wc, N_BLK, PX, PA, RHS, START, END, SIGN, D, DINV, DST, R, CHUNK, TAIL, DIRECT, FOLD)
    a1, rh1, s1, e1, sg1, d1, di1, ds1 = _record_rest(t + P, wa, N_BLK, PA, RHS, START, END, SIGN, D, DINV, DST, R,
                                                      CHUNK, TAIL, DIRECT, FOLD)
    x1, rhs1 = _look(VEC, IN, qa, rh1, N_IN, SPLIT)
    _finish(t, px, a, rhs_at, start, end, sign, d, dinv, dst, x, rhs, N_BLK, ENT_VAL, ENT_VEC, VAL, VEC, OUT, N_IN,
            IN, R, CHUNK, SENT, NAP, WIDE, PENDING, TRIP_DIV, DIRECT, TAIL, PAST, SPLIT)
    return qb, a1, rh1, s1, e1, sg1, d1, di1, ds1, x1, rhs1


@triton.jit
def _finish(t, px, a, rhs_at, start, end, sign, d, dinv, dst, x, rhs, N_BLK, ENT_VAL, ENT_VEC, VAL, VEC, OUT, N_IN,
            IN, R: tl.constexpr, CHUNK: tl.constexpr, SENT: tl.constexpr, NAP: tl.constexpr, WIDE: tl.constexpr,
            PENDING: tl.constexpr, TRIP_DIV: tl.constexpr, DIRECT: tl.constexpr, TAIL: tl.constexpr,
            PAST: tl.constexpr, SPLIT: tl.constexpr):
    """Block t's rows (with PAST, t may lie past N_BLK: then none) from its record and its entries
    x and right-hand sides rhs read once (vec_look): the polls until none holds the sentinel,
    the sums, the quotients and their stores."""
    x, rhs = vec_await_at(x, _at(VEC, IN, px, N_IN, SPLIT), px, px >= 0, rhs, _at(VEC, IN, rhs_at, N_IN, SPLIT),
                          rhs_at, rhs_at >= 0, N_IN, SENT, NAP, PENDING)
    r = rhs + tl.sum(a * x, 1)
    if TAIL:
        tl.static_assert(not SPLIT, "tail_sum reads the input from VEC")
        ok = start <= end                 # every lane: an empty one computes 0 for its unused slot
        r += sign * tail_sum(ok, start, end, rhs_at, ENT_VAL, ENT_VEC, VAL, VEC, CHUNK, N_IN, True, SENT, NAP,
                             WIDE, PENDING, TRIP_DIV)
    q = r * dinv                            # Markstein: with dinv = RN(1/d) this is RN(r / d)
    q = tl.fma(tl.fma(-q, d, r), dinv, q)
    lane = tl.arange(0, R)
    if PAST:
        tl.store(VEC + N_IN + t * R + lane, q, mask=lane * 0 + t < N_BLK)
    else:
        tl.store(VEC + N_IN + t * R + lane, q)     # lane j of block t: its slot (_dataflow_plan)
    if DIRECT:                              # and the result in row order, read by no block (writes_row_order)
        tl.store(OUT + dst, q, mask=dst >= 0)


def _programs(count, per_sm, device):
    """Programs to launch for `count` blocks: one per block, or with per_sm > 0 that many per SM
    (persistent programs that take tickets until none is left; per_sm in all on a CPU device,
    where the interpreter runs programs one after another and the first takes every ticket)."""
    if per_sm == 0:
        return count
    return min(count, per_sm * _sm_count(device))


@functools.lru_cache(maxsize=8)
def _props(device):
    """A CUDA device's properties, asked once, not at every launch (SMs, registers, compute
    capability: _sm_count, resident_per_sm, uses_pdl)."""
    return torch.cuda.get_device_properties(device)


def _sm_count(device):
    """Streaming multiprocessors of a CUDA device (1 for the CPU)."""
    return _props(device).multi_processor_count if device.type == "cuda" else 1


MAX_PROGRAMS_PER_SM = {(7, 5): 16, (8, 6): 16, (8, 7): 16, (8, 9): 24}
"""Resident thread blocks an SM holds at most, by compute capability where it is not 32 (CUDA
programming guide, compute capabilities table; 32 on sm_80 and sm_90)."""


def resident_per_sm(n_regs: int, shared: int, num_warps: int, props) -> int:
    """How many programs of a compiled kernel one SM holds at once (what a cooperative launch may
    ask for): the registers, the threads, the shared memory (1 KB reserved a program) and the
    blocks an SM takes (MAX_PROGRAMS_PER_SM) each bound it. Registers go 256 at a time to a
    warp, from one of the SM's four quarters, so a warp's registers must fit in a quarter's
    remainder: at 80 a thread an SM holds 4 · ⌊16 384 / 2 560⌋ = 24 one-warp programs, not
    65 536 / 2 560 = 25 (on the H100 a cooperative launch of 25 a SM was refused as too large,
    2026-11-27). `props`: the device's properties."""
    per_warp = -(-n_regs * 32 // 256) * 256
    quarter = getattr(props, "regs_per_multiprocessor", 65536) // 4
    by_regs = 4 * (quarter // max(per_warp, 1)) // num_warps
    by_threads = props.max_threads_per_multi_processor // (32 * num_warps)
    by_shared = props.shared_memory_per_multiprocessor // (shared + 1024)
    return min(MAX_PROGRAMS_PER_SM.get((props.major, props.minor), 32), by_regs, by_threads, by_shared)


def _launch_claimed(kernel, run, count, args, meta, pdl=False):
    """Launch `kernel` over `count` blocks as `run` says, adding to `meta` what every sync-free
    kernel takes from it: LOOP (persistent programs), NAP (the sleep between polls; none in the
    interpreter, which cannot sleep) and, for the executors that may stride (STRIDING), STRIDE.
    Every sync-free executor launches through here. One program per block, or
    run.programs_per_sm persistent programs per SM that take tickets or, with claim "stride",
    stride over the blocks. Striding programs must all run at once: the launch is cooperative (it
    fails rather than leave one out), and asks for no more programs per SM than the compiled
    kernel lets an SM hold (resident_per_sm, found once per Prepared). The interpreter runs
    programs one after another, so there a single striding program takes every block. pdl: a
    programmatic dependent launch (the kernel waits for the one before it with gdc_wait)."""
    stride = run.claim == "stride"
    meta = dict(meta, LOOP=run.programs_per_sm > 0, NAP=0 if interpreting() else run.nap_ns)
    if run.executor in STRIDING:
        meta["STRIDE"] = stride
    if stride and interpreting():
        kernel[(1,)](*args, **meta)
        return
    launch = {"launch_cooperative_grid": True} if stride else {}
    if pdl:
        launch["launch_pdl"] = True
    per_sm = run.programs_per_sm
    if stride:
        if run.resident is None:
            compiled = kernel.warmup(*args, grid=(1,), **meta, **launch)
            compiled._init_handles()     # the register count is known once the binary is loaded
            run.resident = resident_per_sm(compiled.n_regs, compiled.metadata.shared, run.num_warps,
                                           _props(args[0].device))
        per_sm = min(per_sm, run.resident)
    kernel[(_programs(count, per_sm, args[0].device),)](*args, **meta, **launch)


def _await_from(vec, n, claim="counter"):
    """Put the sentinel in VEC's outputs (every entry past the n inputs) and return a fresh ticket
    counter (_fresh_ticket): what every dataflow launch starts from."""
    bits = SENTINEL_BITS[vec.dtype]
    vec.view(bits)[n:] = SENTINEL[vec.dtype]
    return _fresh_ticket(vec.device, claim)


def _fresh_ticket(device, claim):
    """A ticket counter at 0; striding programs (claim "stride") take no tickets, so theirs is
    left unset, which costs no fill kernel per call."""
    return (torch.empty if claim == "stride" else torch.zeros)(1, dtype=torch.int32, device=device)


@triton.jit
def _input_then_sentinel(OUT, IN, N_IN, FIRST, TOTAL, AWAITED, SENT: tl.constexpr, R: tl.constexpr,
                         SOME: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr):
    """OUT[i] = IN[i] below N_IN and the sentinel past it, for FIRST ≤ i < TOTAL (both as bit
    patterns); with SOME only in the output slots of the blocks of R whose AWAITED flag is set
    (slot N_IN + t·R + j is block t's). PDL: the dataflow kernel after it may be launched at once
    (it waits for this one's stores)."""
    if PDL:
        gdc_launch_dependents()
    i = FIRST + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    keep = i < TOTAL
    if SOME:
        out = i >= N_IN
        keep &= ~out | (tl.load(AWAITED + (i - N_IN) // R, mask=keep & out, other=0) != 0)
    tl.store(OUT + i, tl.load(IN + i, mask=i < N_IN, other=SENT), mask=keep)


def _slots_from(vector, total, pdl=False, copy=True, awaited=None, R=1):
    """The dataflow executor's VEC for one call: the input (with copy; else its n entries are left
    unwritten, the kernel reading the caller's vector instead: reads_input_apart), then the
    sentinel in every output slot, or with `awaited` (per block of R slots) only in those of the
    blocks some row reads — written by one kernel (a copy and a fill were two, 8.7 and 5.0 µs on
    the 3D grid: figures/data/prof_early_*)."""
    bits = SENTINEL_BITS[vector.dtype]
    slots = buffers.empty((total,), dtype=vector.dtype, device=vector.device)   # NaN where a check poisons:
    n = vector.shape[0]                                    # a slot read but never reset then fails it
    first = 0 if copy else n
    BLOCK = 2048
    if total > first:
        _input_then_sentinel[(triton.cdiv(total - first, BLOCK),)](
            slots.view(bits), vector.contiguous().view(bits), n, first, total,
            slots if awaited is None else awaited,             # without SOME the kernel reads no AWAITED
            SENT=SENTINEL[vector.dtype], R=R, SOME=awaited is not None,
            BLOCK=BLOCK, PDL=pdl, num_warps=4)
    return slots


@triton.jit
def _gather_back(OUT, SLOTS, BACK, N, BLOCK: tl.constexpr, PDL: tl.constexpr):
    """OUT[i] = SLOTS[BACK[i]]: the results from the slot layout into row order. A kernel of its own
    rather than torch.index_select so that it can be a dependent launch that waits inside (PDL:
    launched while the dataflow kernel ends, its indices read before gdc_wait); 14.5 µs against
    index_select's 16.0 on the 3D grid (figures/data/pdl_ab_*)."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    at = tl.load(BACK + i, mask=i < N, other=0)
    if PDL:
        gdc_wait()
    tl.store(OUT + i, tl.load(SLOTS + at, mask=i < N), mask=i < N)


def _back(out, slots, back, pdl):
    """out = slots[back] (_gather_back), as a dependent launch with pdl."""
    BLOCK = 1024
    launch = {"launch_pdl": True} if pdl else {}
    _gather_back[(triton.cdiv(out.shape[0], BLOCK),)](out, slots, back, out.shape[0], BLOCK=BLOCK, PDL=pdl,
                                                      num_warps=4, **launch)


def _launch_dataflow(kernel, run, val, vec, *blocks, lanes=None, chunk=CHUNK):
    """Fill the outputs with the sentinel and launch the programs (_programs) for the blocks of
    `run.plan`, each of `lanes` lanes (default: run.block_rows)."""
    count, _ = run.plan
    if count == 0:
        return
    n = run.tables.n1
    ticket = _await_from(vec, n)
    tables = (run.dev[k] for k in ("ent_ptr", "ent_val", "ent_aux", "rhs", "diag", "sign", "dst"))
    _launch_claimed(kernel, run, count, (ticket, count, *blocks, *tables, val, vec, n),
                    dict(R=lanes or run.block_rows, CHUNK=chunk, SENT=SENTINEL[vec.dtype],
                         WIDE=run.tables.wide(chunk), num_warps=run.num_warps))


EARLY_LOOK = True
"""Whether striding dataflow programs may read the next blocks' records and entries early
(_dataflow's EARLY, _pipelined), where looks_early says so."""

FOLD_RHS = True
"""Whether the dataflow executor folds right-hand sides into its records' entry slots where they
fit (folds_rhs)."""


def record_chunk(tables) -> int:
    """Entry slots per lane of the dataflow records: where every row fits in RECORD_CHUNK, all
    entries of the longest (a power of two, at least CHUNK), so that a row waits once for all it
    reads; else CHUNK, the rest of a longer row read through tail_sum. Measured on the H100
    (2026-11-26, float64, wavefront schedule): 27-point grid (rows of 14 and 27) 0.58 / 0.57 /
    0.94 ms with 32 slots against 0.76 / 0.72 / 1.57 with 8; the power-law graph (a few rows of
    thousands, most of a few) 1.65 / 1.48 / 2.91 with 32 against 0.84 / 0.68 / 1.82 with 8."""
    widest = triton.next_power_of_2(max(tables.longest, 1))
    return max(CHUNK, widest) if widest <= RECORD_CHUNK else CHUNK


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


def _dataflow_plan(schedule, mats, tables, R, tickets, device, fold=False):
    """The dataflow executor's blocks (ticket_blocks) as records of R lanes (_records): lane
    s = t·R + j holds block t's j-th iteration, its first record_chunk entries padded, so a
    program reads its block's tables in one round trip instead of a chain of dependent loads
    (block → iteration → entries → values). Lane s writes VEC entry n + s, which the rows that
    read it poll (outputs are numbered by slot). The results reach row order either from the
    kernel, which also stores lane s's at VEC entry dst (writes_row_order), or by a gather after
    the launch (`back`). Each block also has its width, the entry slots its rows use, past which
    a striding program reads nothing (_records, _prefetch): a level's blocks mostly hold rows of
    one kernel, so on the 3D grid the sptrsv_spmv blocks use 10.0M of the 16.0M slots, on the
    2D grid 7.0M of 16.0M. `awaited` (only where some block's outputs are read by no row, as
    sptrsv_spmv's y): whether some row reads block t's outputs; the slots of the others need no
    sentinel (_slots_from). With `fold`
    (folds_rhs) a lane's right-hand side takes the slot after its entries, of value index −2
    (coefficient 1), and the lane has none of its own. A row longer than its record reads its
    entries in the order they are written (in_ready_order; the plan then holds its own `ent_val`),
    and a row of the wide stage has a block of its own (HUBS_ALONE). The values go in per call of
    `prepare` (_dataflow_values); this part depends on the pattern only."""
    C = record_chunk(tables)
    lens = np.diff(tables.ent_ptr)
    alone = lens > 4 * C if HUBS_ALONE and tables.wide(C) else None
    blk_ptr, seq = ticket_blocks(schedule, mats, R, tickets, alone=alone, ties="ids")[:2]
    B, sizes, n = len(blk_ptr) - 1, np.diff(blk_ptr), tables.n1
    slot = np.repeat(np.arange(B) * R - blk_ptr[:-1], sizes) + np.arange(len(seq))
    S = B * R
    where = np.arange(tables.vec_len, dtype=np.int64)        # VEC position → its position in the slot layout
    where[tables.dst[seq]] = n + slot
    lane = {k: np.full(S, fill, dtype=np.int64) for k, fill in (("rhs", -1), ("start", 0), ("end", 0), ("sign", 0),
                                                                 ("diag", -1), ("dst", -1))}
    for k, col in (("rhs", tables.rhs), ("sign", tables.sign), ("diag", tables.diag),
                   ("start", tables.ent_ptr[:-1]), ("end", tables.ent_ptr[1:]), ("dst", tables.dst)):
        lane[k][slot] = col[seq]
    lane["rhs"] = np.where(lane["rhs"] >= 0, where[np.maximum(lane["rhs"], 0)], -1)
    ent_aux, ent_val = tables.ent_aux, tables.ent_val
    if READY_ORDER and tables.longest > C:
        order = in_ready_order(tables, where, C)
        ent_aux, ent_val = ent_aux[order], ent_val[order]
    e = lane["start"][:, None] + np.arange(C)[None, :]
    m = e < lane["end"][:, None]
    px, pv = np.full((S, C), -1, dtype=np.int64), np.full((S, C), -1, dtype=np.int64)
    px[m], pv[m] = where[ent_aux[e[m]]], ent_val[e[m]]
    if fold:
        own = np.flatnonzero(lane["rhs"] >= 0)
        at = m[own].sum(1)
        px[own, at], pv[own, at], m[own, at] = lane["rhs"][own], -2, True
        lane["rhs"][own] = -1
    width = m.sum(1).reshape(B, R).max(1, initial=0)
    read = np.zeros(tables.vec_len, dtype=bool)             # VEC positions some row reads
    read[tables.ent_aux] = True
    read[tables.rhs[tables.rhs >= 0]] = True
    awaited = ((lane["dst"] >= 0) & read[np.maximum(lane["dst"], 0)]).reshape(B, R).any(1)
    host = {k: v.astype(np.int32) for k, v in lane.items()}
    if not awaited.all():
        host["awaited"] = awaited.astype(np.int8)
    host.update(px=px.ravel().astype(np.int32), pv=pv.ravel().astype(np.int32), width=width.astype(np.int32),
                ent_vec=where[ent_aux].astype(np.int32), back=where[n:].astype(np.int32))
    if ent_val is not tables.ent_val:
        host["ent_val"] = ent_val.astype(np.int32)
    return B, rows.to_device(host, device)


HUBS_ALONE = True
"""Whether the dataflow plan gives every row of tail_sum's wide stage (more than 4 record chunks:
a power-law hub) a block of its own (ticket_blocks' `alone`). The wide stage takes a block's long
rows one after another, across the whole warp, and the block stores its results together, so the
R − 1 rows beside a hub waited for all of its trips, and what read them waited too; alone, a hub
delays nobody. Measured on the H100 (2026-11-28, power-law graph, float64, sparse-fusion schedule,
entries in ready order, 3 interleaved rounds, figures/data/hubs_ab_*, hubs_ab2_*), apart → alone
at 24 programs an SM: sptrsv_sptrsv 0.722 → 0.500 ms, sptrsv_spmv 0.442 → 0.438, spmv_sptrsv 0.486
→ 0.447; alone at 32 (WIDE_PROGRAMS_PER_SM; the kernel's registers let 28 run): 0.488 / 0.405 /
0.416. Alone at 16 an SM: 0.585 / 0.547; with wide trips of 256 entries (WIDE_TRIP_DIV 1): 0.599
/ 0.562."""

READY_ORDER = True
"""Whether the dataflow plan puts the entries of rows longer than their records in the order they
are written (in_ready_order)."""


def in_ready_order(tables, where, chunk):
    """A permutation of the entries that puts those of every row longer than `chunk` (read by
    tail_sum, trip after trip, each waiting until its own entries stop holding the sentinel) in
    the order of the slots they read (`where`: the input first, then the outputs by ticket), so
    in about the order they are written; shorter rows keep theirs. In CSR order a trip may wait
    for an entry written late while the trips after it hold entries long written, and each of
    those trips then costs its round trips after the wait instead of during it. The hubs of the
    upper solve are the case: row i's entries ascend in j, and a backward solve writes x_j last
    for the smallest j. On the power-law graph's sptrsv_sptrsv a model in which a trip costs one
    step once its latest entry is written puts the critical path at 410 steps in CSR order and 98
    in this one (the joint DAG has 110 levels). Measured on the H100 (2026-11-28, float64,
    sparse-fusion schedule, 3 interleaved rounds, every output checked first,
    figures/data/ready_ab_*): power-law sptrsv_sptrsv 1.121 → 0.710 ms; within 0.3 % the pairs
    whose long rows are SpMV rows — sptrsv_spmv's start once all they read is written (tickets
    "mid" start a heavy row at its earliest level), spmv_sptrsv's read only the input — 0.441 →
    0.442 and 0.487 → 0.488. The grids' rows fit in their records, which a lane reads at once."""
    lens = np.diff(tables.ent_ptr)
    row = np.repeat(np.arange(len(lens)), lens)
    key = np.where((lens > chunk)[row], where[tables.ent_aux], np.arange(len(row)))
    return np.lexsort((key, row))


def _dataflow_values(plan, values):
    """The value half of the dataflow records (_dataflow_plan) or flat records (flat_plan) for
    these matrices' values: each slot's value times its sign, one a lane or one a slot (exact),
    the divisor (1 without one) and its reciprocal, rounded once in the vector's dtype, so that
    the kernels' Markstein step rounds r/d as a division would."""
    dev = plan[1]
    sign = dev["sign"].to(values.dtype)
    pv = dev["pv"].long()
    a = torch.where(pv >= 0, values[pv.clamp(min=0)] * sign.repeat_interleave(pv.numel() // max(sign.numel(), 1)),
                    (pv == -2).to(values.dtype))       # −2: a folded right-hand side (_dataflow_plan)
    diag = dev["diag"].long()
    d = torch.where(diag >= 0, values[diag.clamp(min=0)], 1)
    return {"a": a, "d": d, "dinv": 1 / d, "sign": sign}


def _run_dataflow(run, val, vec, vector):
    """One call: the slots (the sentinel where a row waits, and the input unless the kernel reads
    it from the caller's vector: run.split, reads_input_apart; only in the blocks some row reads
    where not all are: run.awaited), the launch, and the outputs in row order in VEC: stored
    there by the kernel (run.direct, writes_row_order) or gathered from the slots after it
    (_gather_back). On a GPU that has them (PDL) the second and third kernels are programmatic
    dependent launches: each starts while the one before ends and waits for its stores inside
    (gdc_wait). The kernel is _dataflow over records, or _flat over flat records (run.flat,
    reads_flat); its shape (record slots, wide trips, pending polls) was derived from the pattern
    once, in Prepared (record_shape)."""
    count, sdev = run.plan
    if count == 0:
        return
    n = run.tables.n1
    pdl = uses_pdl(vec.device)
    split = run.split
    vector = vector.contiguous()
    slots = _slots_from(vector, n + count * run.block_rows, pdl, copy=not split, awaited=run.awaited,
                        R=run.block_rows)
    rv = run.record_values
    meta = dict(R=run.block_rows, SENT=SENTINEL[vec.dtype], num_warps=run.num_warps, DIRECT=run.direct, PDL=pdl)
    if run.flat:                                            # flat records (flat_plan): no tickets, no tables
        _launch_claimed(_flat, run, count, (sdev["px"], count, rv["a"], sdev["seg"], rv["d"], rv["dinv"],
                                            sdev["dst"], slots, vec, n, vector),
                        dict(meta, W=run.flat_width), pdl=pdl)
    else:
        ticket = _fresh_ticket(vec.device, run.claim)
        ent_val = sdev.get("ent_val", run.dev["ent_val"])      # the plan's own where it reordered the entries
        _launch_claimed(_dataflow, run, count,
                        (ticket, count, sdev["width"], sdev["px"], rv["a"], sdev["rhs"], sdev["start"], sdev["end"],
                         rv["sign"], rv["d"], rv["dinv"], sdev["dst"], ent_val, sdev["ent_vec"], val, slots,
                         vec, n, vector),
                        dict(meta, PTX=not interpreting(),
                             AHEAD=run.tickets_ahead if run.programs_per_sm > 0 else 0, EARLY=run.early,
                             SPLIT=split, **run.record_shape), pdl=pdl)
    if not run.direct:
        _back(vec[n:], slots, sdev["back"], pdl)


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


PDL = True
"""Whether the dataflow executor launches its kernel and the gather back as programmatic
dependent launches where the GPU has them (uses_pdl)."""


def uses_pdl(device) -> bool:
    """PDL on a CUDA device of compute capability 9.0 or later (Hopper; the interpreter has no
    launches to overlap)."""
    if not (PDL and device.type == "cuda" and not interpreting()):
        return False
    props = _props(device)
    return (props.major, props.minor) >= (9, 0)


# ---------------------------------------------------------------- dataflow, flat records

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


class HubTrees(NamedTuple):
    """Every hub's pieces (flat_plan), hub by hub, generation by generation; per piece its hub
    (index into the hubs), generation and size, for the first generation where its entries
    start in `entries` (each hub's entries in the order they are written), for the later ones
    the first piece of the generation before that it sums; per hub its generations and its last
    generation's first piece and count."""
    hub: np.ndarray
    gen: np.ndarray
    size: np.ndarray
    start: np.ndarray
    src_lo: np.ndarray
    entries: np.ndarray
    gens: np.ndarray
    last_lo: np.ndarray
    last_count: np.ndarray


def _hub_trees(tables, hubs, W, writer) -> HubTrees:
    """The hub rows' pieces (flat_plan): a hub's first generation sums its entries, in the order
    they are written (`writer`: ticket position of each VEC entry's writer), in ⌈L/W⌉ pieces as
    even as np.array_split makes them; each next generation sums W results of the one before,
    until the hub row's own W slots hold the last generation's results and its right-hand side."""
    lens = np.diff(tables.ent_ptr)[hubs]
    extra = (tables.rhs[hubs] >= 0).astype(np.int64)
    owner, e = dags.expand_ranges(tables.ent_ptr[hubs], tables.ent_ptr[hubs + 1])
    entries = e[np.lexsort((writer[tables.ent_aux[e]], owner))]
    counts = [-(-lens // W)]
    while (counts[-1] + extra > W).any():
        c = counts[-1]
        counts.append(np.where(c + extra > W, -(-c // W), 0))
    N = np.stack(counts, axis=1) if len(hubs) else np.zeros((0, 1), np.int64)
    gens = (N > 0).sum(axis=1)
    base = (np.cumsum(N.ravel()) - N.ravel()).reshape(N.shape)       # each (hub, generation)'s first piece
    cell, q = dags.expand_ranges(np.zeros(N.size, np.int64), N.ravel())
    hub, gen = np.divmod(cell, N.shape[1])
    even, more = np.divmod(lens, np.maximum(N[:, 0], 1))              # np.array_split: `more` pieces of even + 1
    size0 = even[hub] + (q < more[hub])
    start = (np.cumsum(lens) - lens)[hub] + q * even[hub] + np.minimum(q, more[hub])
    prev = np.where(gen > 0, N[hub, np.maximum(gen - 1, 0)], 0)
    size = np.where(gen == 0, size0, np.minimum(q * W + W, prev) - q * W)
    src_lo = np.where(gen > 0, base[hub, np.maximum(gen - 1, 0)] + q * W, -1)
    last = np.maximum(gens - 1, 0)
    rows_ = np.arange(len(hubs))
    return HubTrees(hub, gen, size, np.where(gen == 0, start, -1), src_lo, entries, gens,
                    base[rows_, last], N[rows_, last])


def _pack(key, cnt, order, R, W):
    """(block, lane, offset) of each virtual row (flat_plan), taken in `order`: a new block where
    the key changes, or R rows or W entries are full. The greedy cut is followed from block start
    to block start (the next start of every position found at once), not row by row."""
    K, C = key[order], cnt[order]
    V = len(order)
    q = np.arange(V)
    ends = np.append(np.flatnonzero(K[1:] != K[:-1]) + 1, V)
    run_end = ends[np.searchsorted(ends, q, side="right")]
    inc = np.cumsum(C)
    exc = inc - C
    nxt = np.maximum(q + 1, np.minimum(np.minimum(q + R, run_end), np.searchsorted(inc, exc + W, side="right")))
    starts, s, nx = [], 0, nxt.tolist()
    while s < V:
        starts.append(s)
        s = nx[s]
    starts = np.asarray(starts, dtype=np.int64)
    first = np.zeros(V, dtype=bool)
    first[starts] = True
    b = np.cumsum(first) - 1
    blk, lane, off = (np.empty(V, dtype=np.int64) for _ in range(3))
    blk[order], lane[order], off[order] = b, q - starts[b], exc - exc[starts[b]]
    return blk, lane, off


def reads_flat(shape, claim) -> bool:
    """Whether the dataflow executor reads flat records (flat_plan, _flat): where FLAT_RECORDS,
    some row is longer than CHUNK (`shape`, record_shape, has TAIL), and the programs stride
    (claim "stride"; _flat takes no tickets)."""
    return FLAT_RECORDS and shape["TAIL"] and claim == "stride"


def flat_plan(schedule, mats, tables, R, tickets, device, W):
    """The dataflow blocks as flat records (_flat). Block t's record is W entry slots t·W + k, one
    per thread: its rows' entries one after another, each row's right-hand side one more entry
    of coefficient 1, so a block of short rows takes one gather and no row takes a second trip.
    A block holds at most R rows (lane j of block t writes VEC entry n + t·R + j, as in
    _dataflow_plan) and W entries. A row of more than W entries (a power-law hub) is cut into
    pieces (_hub_trees): each piece is a row of its own, without divisor or place in row order,
    whose result only the next generation reads. Blocks follow ticket_order's groups in order,
    a row's pieces in blocks of their own just before its group, the first generation first, so
    every dependence still lies in an earlier block; a hub of 3000 entries becomes three hops of
    one gather each, where tail_sum took 24 trips of two dependent round trips. A new block
    starts where the group or the generation changes, or where R rows or W entries are full.
    Per entry slot: its VEC position in the slot layout (−1: none), its value index (−2:
    coefficient 1, −1: none), its row's sign, and seg = 4·j + 2·(first of its row) + (last of its
    row), which the segmented sum (_seg_add) and the stores read; per lane its divisor index
    (−1: none) and its place in row order (−1: none).

    Why: with no poll ever waiting (each call's slots left holding the last call's results) the
    records of _dataflow_plan took 0.349 / 0.352 / 0.342 ms on the power-law graph's sptrsv_spmv
    / spmv_sptrsv / sptrsv_sptrsv against 0.405 / 0.418 / 0.482 as they are (H100, 2026-11-28,
    float64, sparse-fusion schedule, figures/data/nowait_powerlaw_*): not the waits but a block's
    own cost set the time. Measured on the H100 (2026-11-28, same case, 3 interleaved rounds,
    every output checked first; ms as is, then with no poll waiting):
      flat_ab_*, divisors loaded after the gather: records 0.336 / 0.317 / 0.366 (0.280 / 0.282 /
        0.261); flat R = 4 0.283 / 0.241 / 0.331, R = 8 0.272 / 0.229 / 0.329 (0.190 / 0.188 /
        0.171), R = 16 0.263 / 0.237 / 0.319;
      flat_ab2_*, divisors loaded with the record (as now): records 0.308 / 0.319 / 0.371 (0.280 /
        0.289 / 0.260); W = 32: R = 8 0.239 / 0.218 / 0.275 (0.195 / 0.192 / 0.167), R = 16 0.253
        / 0.234 / 0.275; W = 64: R = 16 0.270 / 0.274 / 0.303 (0.173 / 0.177 / 0.151), R = 32
        0.283 / 0.231 / 0.294 — wider blocks cost less with no waiting and more as they are, a
        block waiting for all its rows' entries (FLAT_WIDTH, FLAT_BLOCK_ROWS).
    The three schedules stay within 2 % of each other (figures/data/flat_cli_powerlaw_*)."""
    n = tables.n1
    seq, group = ticket_order(schedule, mats, tickets)
    m = len(seq)
    gid = np.cumsum(np.r_[False, group[1:] != group[:-1]])                 # by ticket position, from 0
    lens = np.diff(tables.ent_ptr)
    has_rhs = tables.rhs >= 0
    items = lens + has_rhs
    writer = np.full(tables.vec_len, -1, dtype=np.int64)
    writer[tables.dst[seq]] = np.arange(m)
    cnt = np.maximum(items[seq], 1)                  # an empty row still stores its 0 (one empty slot)
    hp = np.flatnonzero(items[seq] > W)              # the hubs' ticket positions
    tree = _hub_trees(tables, seq[hp], W, writer)
    cnt[hp] = tree.last_count + has_rhs[seq[hp]]     # a hub row sums its last generation and b_i
    # virtual rows: the m rows, then every hub's pieces, hub by hub, generation by generation
    v_gid = np.concatenate([gid, gid[hp][tree.hub]])
    v_rank = np.concatenate([np.zeros(m, np.int64), tree.gen - tree.gens[tree.hub]])
    v_pos = np.concatenate([np.arange(m), hp[tree.hub]])
    v_cnt = np.concatenate([cnt, tree.size])
    order = np.lexsort((np.arange(len(v_pos)), v_pos, v_rank, v_gid))
    blk, lane, off = _pack(v_gid * 1024 + v_rank + 512, v_cnt, order, R, W)
    B = int(blk.max(initial=-1)) + 1
    slot = blk * R + lane                            # per virtual row
    where = np.arange(tables.vec_len, dtype=np.int64)
    where[tables.dst[seq]] = n + slot[:m]
    px = np.full(B * W, -1, dtype=np.int64)
    pv = np.full(B * W, -1, dtype=np.int64)
    sg = np.zeros(B * W, dtype=np.int8)
    seg = np.full(B * W, 2, dtype=np.int8)           # padding: a segment of its own, stored nowhere

    def put(v, c, k, x, val, sign):
        """Entry k of virtual row v, of c: VEC position x, value index val, sign."""
        at = blk[v] * W + off[v] + k
        px[at], pv[at], sg[at] = x, val, sign
        seg[at] = 4 * lane[v] + 2 * (k == 0) + (k == c - 1)

    # the rows that are not cut, all at once: their entries, then their right-hand sides, then the
    # one empty slot of a row with neither (its position and value index stay −1)
    plain = np.flatnonzero(items[seq] <= W)
    i, c = seq[plain], cnt[plain]
    row, e = dags.expand_ranges(tables.ent_ptr[i], tables.ent_ptr[i + 1])
    put(plain[row], c[row], e - tables.ent_ptr[i][row], where[tables.ent_aux[e]], tables.ent_val[e], tables.sign[i][row])
    rh = np.flatnonzero(has_rhs[i])
    put(plain[rh], c[rh], lens[i[rh]], where[tables.rhs[i[rh]]], -2, 1)
    none = np.flatnonzero(items[i] == 0)
    put(plain[none], 1, 0, -1, -1, 0)
    # the first generation's pieces: a hub's entries in the order they are written
    first = np.flatnonzero(tree.gen == 0)
    piece, k = dags.expand_ranges(np.zeros(len(first), np.int64), tree.size[first])
    e = tree.entries[tree.start[first][piece] + k]
    hub = seq[hp][tree.hub[first][piece]]
    put(m + first[piece], tree.size[first][piece], k, where[tables.ent_aux[e]], tables.ent_val[e], tables.sign[hub])
    # later pieces and the hub rows: results of pieces of the generation before, coefficient 1
    later = np.flatnonzero(tree.gen > 0)
    lo = np.concatenate([tree.src_lo[later], tree.last_lo])
    c = np.concatenate([tree.size[later], tree.last_count])
    owner, src = dags.expand_ranges(lo, lo + c)
    v = np.concatenate([m + later, hp])
    total = np.concatenate([tree.size[later], cnt[hp]])
    put(v[owner], total[owner], src - lo[owner], n + slot[m + src], -2, 1)
    hr = np.flatnonzero(has_rhs[seq[hp]])           # a hub row's right-hand side comes last
    put(hp[hr], cnt[hp][hr], tree.last_count[hr], where[tables.rhs[seq[hp][hr]]], -2, 1)
    diag = np.full(B * R, -1, dtype=np.int64)
    dst = np.full(B * R, -1, dtype=np.int64)
    diag[slot[:m]], dst[slot[:m]] = tables.diag[seq], tables.dst[seq]
    read = np.zeros(n + B * R, dtype=bool)
    read[px[px >= n]] = True
    awaited = read[n:].reshape(B, R).any(1)
    host = {"px": px.astype(np.int32), "pv": pv.astype(np.int32), "sign": sg, "seg": seg,
            "diag": diag.astype(np.int32), "dst": dst.astype(np.int32), "back": where[n:].astype(np.int32)}
    if not awaited.all():
        host["awaited"] = awaited.astype(np.int8)
    return B, rows.to_device(host, device)


@triton.jit
def _seg_add(a, fa, b, fb):
    """The segmented sum's step: a segment's first entry (flag fb) starts the sum anew."""
    return tl.where(fb != 0, b, a + b), fa | fb


@triton.jit
def _flat(PX, N_BLK, PA, SEG, D, DINV, DST, VEC, OUT, N_IN, IN, R: tl.constexpr, W: tl.constexpr,
          SENT: tl.constexpr, NAP: tl.constexpr, PDL: tl.constexpr, DIRECT: tl.constexpr,
          LOOP: tl.constexpr = True, STRIDE: tl.constexpr = True):
    """The dataflow executor over flat records (flat_plan): program p of P runs blocks p, p + P, …
    Thread k of block t reads entry slot t·W + k: position, signed value, seg. The entries are
    gathered at once (input positions, below N_IN, from IN), the ones still holding the sentinel
    polled again (vec_await_entries), and the products summed per row by a segmented scan across
    the warp (_seg_add), which leaves each row's sum r on its last slot's thread; that thread
    divides (r·(1/d) with one Markstein correction, as _finish), stores lane j's result at VEC
    entry N_IN + t·R + j and, with DIRECT, at OUT[dst], its place in row order. The divisors are
    loaded with the record, before the gather, so that no load waits after it. Nothing is
    prefetched: the kernel is bound by L2 throughput, not by waiting (Nsight Compute, H200,
    2026-11-28: L2 76–82 % busy, L1 hit rate 0), and asking L1 for the next block's record, as
    _dataflow does, only added L2 requests — without it sptrsv_spmv / spmv_sptrsv / sptrsv_sptrsv
    took 0.203 / 0.168 / 0.242 ms against 0.214 / 0.187 / 0.245 (figures/data/flat_prefetch_ab_*).
    PDL: as _dataflow's. LOOP and STRIDE are what _launch_claimed gives every sync-free kernel;
    _flat always strides (reads_flat)."""
    t = tl.program_id(0)
    P = tl.num_programs(0)
    k = tl.arange(0, W)
    if PDL:
        gdc_wait()
    while t < N_BLK:
        e = t * W + k
        px = tl.load(PX + e)
        a = tl.load(PA + e)
        seg = tl.load(SEG + e).to(tl.int32)
        last = (seg & 1) != 0
        lane = t * R + (seg >> 2)
        d = tl.load(D + lane, mask=last, other=1.0)
        dinv = tl.load(DINV + lane, mask=last, other=1.0)
        m = px >= 0
        xp = tl.where(px < N_IN, IN + px, VEC + px)
        x = tl.load(xp, mask=m, other=0.0, volatile=True)
        x = vec_await_entries(x, xp, px, m, N_IN, SENT, NAP)
        r, _ = tl.associative_scan((a * x, (seg >> 1) & 1), 0, _seg_add)
        q = r * dinv
        q = tl.fma(tl.fma(-q, d, r), dinv, q)
        tl.store(VEC + N_IN + lane, q, mask=last)
        if DIRECT:
            dst = tl.load(DST + lane, mask=last, other=-1)
            tl.store(OUT + dst, q, mask=last & (dst >= 0))
        t += P
    if PDL:
        gdc_launch_dependents()


# ---------------------------------------------------------------- executor (d): dataflow along chains

def _walk(head, parent):
    """(first iteration of the chain, position in it) for every iteration: chains follow the
    links parent[v] → v of the iterations that are not heads (pointer jumping, log₂ of the
    longest chain rounds)."""
    ids = np.arange(len(head))
    anc = np.where(head, ids, parent)
    dist = (~head).astype(np.int64)
    while True:
        up = anc[anc]
        if np.array_equal(up, anc):
            return anc, dist
        dist = dist + dist[anc]
        anc = up


def _links(schedule, mats):
    """(u, v, level, parent): the joint DAG's dependences u → v, its wavefront levels, and per
    iteration the one it waits for last in its own kernel (one level up, the largest id), or −1."""
    def build():
        n = schedule.n1 + schedule.n2
        dag, level = _joint(schedule, mats)
        u, v = dag.sources()
        same = (level[u] == level[v] - 1) & ((u < schedule.n1) == (v < schedule.n1))
        parent = np.full(n, -1, dtype=np.int64)
        np.maximum.at(parent, v[same], u[same])
        return u, v, level, parent
    return schedule.cached("chain_links", build)


def _chain_heads(schedule, mats, S, allowed=None):
    """The chains of chain_blocks: (head, top, pos, key) per iteration — whether it starts a
    chain, the chain's first iteration, its position in the chain, the chain's key. `allowed`:
    a mask of the iterations that may extend their parent's chain at all; with it, a chain is
    also cut wherever an iteration waits on another iteration of its own chain than its parent
    (what the segments executor needs)."""
    n = schedule.n1 + schedule.n2
    u, v, level, parent = _links(schedule, mats)
    if allowed is not None:
        parent = np.where(allowed, parent, -1)
    has = np.flatnonzero(parent >= 0)
    first = np.full(n, n, dtype=np.int64)
    np.minimum.at(first, parent[has], has)
    head = np.ones(n, dtype=bool)
    head[has] = first[parent[has]] != has
    while True:
        top, pos = _walk(head, parent)
        key = level[top]
        new = (pos % S == 0) & ~head
        new[v[(top[u] != top[v]) & (key[u] >= key[v])]] = True
        if allowed is not None:
            new[v[(top[u] == top[v]) & (parent[v] != u)]] = True
        new &= ~head
        if not new.any():
            return head, top, pos, key
        head |= new


def _block_heads(schedule, mats, head, top, key, R, by_level):
    """Chains, each a block; single iterations of one key in blocks of R. Returns (heads, block
    of each head, lane of each, chain length of each head), blocks numbered (ticketed) in key
    order, or with `by_level` by their level in the DAG of blocks (1 + the largest level of
    the blocks they wait for), ties in key order. Both are topological orders.

    Key order hands out tickets by the level of a chain's *first* link: a piece (r, s) of a 2D
    grid row, which could run after r + s hops, waits for its ticket behind every block of a
    smaller key. Measured on the H100 (2026-11-25, float64, 2D Poisson 1000², sptrsv_spmv):
    the segment executor at S = 64 took 9.37 ms in key order and 5.16 ms by level, so segments
    go by level; the chain executor took 12.0 ms by level at S = 16 (2.05–2.3 ms in key order
    the same day), so chains keep key order."""
    n = len(head)
    at = np.empty(n, dtype=np.int64)
    at[schedule.order] = np.arange(n)
    length = np.bincount(top, minlength=n)
    heads = np.flatnonzero(head)
    chain = length[heads] > 1
    heads = heads[np.lexsort((at[heads], chain, key[heads]))]
    chain = length[heads] > 1
    # a new block at every chain, at every change of key, and every R single iterations
    k = key[heads]
    start = chain | np.r_[True, k[1:] != k[:-1]]
    start[1:] |= chain[:-1]
    run = np.maximum.accumulate(np.where(start, np.arange(len(heads)), 0))
    start |= ~chain & ((np.arange(len(heads)) - run) % R == 0)
    block = np.cumsum(start) - 1
    lane = np.arange(len(heads)) - np.flatnonzero(start)[block]
    if not by_level:
        return heads, block, lane, length
    blocks = int(block[-1]) + 1 if len(heads) else 0
    of_head = np.empty(n, dtype=np.int64)
    of_head[heads] = block
    u, v = _links(schedule, mats)[:2]
    bu, bv = of_head[top[u]], of_head[top[v]]
    waits = dags.distinct(bv[bu != bv] * max(blocks, 1) + bu[bu != bv])
    level = dags.wavefront_levels(dags.dag_from_edges(waits % max(blocks, 1), waits // max(blocks, 1), blocks))
    rank = np.empty(blocks, dtype=np.int64)
    rank[np.lexsort((np.arange(blocks), level))] = np.arange(blocks)
    return heads, rank[block], lane, length


def chain_blocks(schedule, mats, R, S):
    """Blocks for executor="chains": (blk_ptr, blk_steps, blk_iter), block t owning slots
    blk_iter[blk_ptr[t] : blk_ptr[t] + R·blk_steps[t]], step-major (slot s·R + lane), −1 for none.

    A chain links each iteration to the iteration of the same kernel it waits for last (one
    wavefront level up; the largest such id, so a 2D stencil chains along its grid rows), when
    it is that iteration's first such successor. Chains are cut every S links, and cut again
    wherever an iteration waits on a chain whose key — the level of its first iteration — is
    not smaller than its own chain's (repeated until none does): then waits only point to
    smaller keys, and tickets in key order (_block_heads) keep the sync-free argument of
    ticket_blocks. A chain of two or more iterations gets a block of its own (lane 0, one step
    per link); single iterations of one key share blocks of R lanes. The schedule orders what
    the keys leave equal."""
    n = schedule.n1 + schedule.n2
    head, top, pos, key = _chain_heads(schedule, mats, S)
    heads, block, lane, length = _block_heads(schedule, mats, head, top, key, R, by_level=False)
    steps = np.zeros(block.max() + 1 if len(heads) else 0, dtype=np.int64)
    np.maximum.at(steps, block, length[heads])
    blk_ptr = np.zeros(len(steps) + 1, dtype=np.int64)
    np.cumsum(steps * R, out=blk_ptr[1:])
    block_of, lane_of = np.empty(n, np.int64), np.empty(n, np.int64)
    block_of[heads], lane_of[heads] = block, lane
    blk_iter = np.full(blk_ptr[-1], -1, dtype=np.int64)
    blk_iter[blk_ptr[block_of[top]] + pos * R + lane_of[top]] = np.arange(n)
    return blk_ptr, steps, blk_iter


def _scannable(tables, parent, chunk):
    """Iterations whose parent's output is read by one of the first `chunk` entries of their row."""
    n = len(parent)
    counts = np.diff(tables.ent_ptr.astype(np.int64))
    row = np.repeat(np.arange(n), counts)
    rel = np.arange(len(row)) - tables.ent_ptr[row]
    p = parent[row]
    hit = (p >= 0) & (rel < chunk)
    hit[hit] = tables.ent_aux[hit] == tables.dst[p[hit]]
    ok = np.zeros(n, dtype=bool)
    ok[row[hit]] = True
    return ok


def segment_blocks(schedule, mats, tables, R, S, chunk=SEG_CHUNK):
    """Blocks for executor="segments": (blk_ptr, blk_iter), block t running the iterations
    blk_iter[blk_ptr[t]:blk_ptr[t+1]] as its lanes, in block (ticket) order. The chains of
    chain_blocks, with two more cuts: a link's predecessor must be read by one of the first
    `chunk` entries of its row, and no link reads another link of its piece than the one before
    it. A piece of a chain (at most S links) is one block, its links in order; single
    iterations of one key share blocks of at most R."""
    n = schedule.n1 + schedule.n2
    parent = _links(schedule, mats)[3]
    head, top, pos, key = _chain_heads(schedule, mats, S, allowed=_scannable(tables, parent, chunk))
    heads, block, lane, length = _block_heads(schedule, mats, head, top, key, R, by_level=True)
    width = np.zeros(block.max() + 1 if len(heads) else 0, dtype=np.int64)
    np.maximum.at(width, block, np.maximum(length[heads], lane + 1))
    blk_ptr = np.zeros(len(width) + 1, dtype=np.int64)
    np.cumsum(width, out=blk_ptr[1:])
    block_of, lane_of = np.empty(n, np.int64), np.empty(n, np.int64)
    block_of[heads], lane_of[heads] = block, lane
    blk_iter = np.empty(blk_ptr[-1], dtype=np.int64)
    blk_iter[blk_ptr[block_of[top]] + lane_of[top] + pos] = np.arange(n)
    return blk_ptr, blk_iter


@triton.jit
def _chains(TICKET, N_BLK, BLK_PTR, BLK_STEPS, BLK_ITER, ENT_PTR, ENT_VAL, ENT_VEC, RHS, DIAG, SIGN, DST, VAL, VEC,
            N_IN, R: tl.constexpr, CHUNK: tl.constexpr, SENT: tl.constexpr, NAP: tl.constexpr, LOOP: tl.constexpr,
            WIDE: tl.constexpr):
    """The dataflow executor over chain blocks: step by step, each lane runs the next iteration
    of its chain, taking the entry its previous step wrote from a register."""
    t = tl.atomic_add(TICKET, 1, sem="relaxed")
    while t < N_BLK:
        base = tl.load(BLK_PTR + t)
        lane = tl.arange(0, R)
        prev_dst = tl.full([R], -1, tl.int32)
        prev_val = tl.zeros([R], dtype=VAL.dtype.element_ty)
        for step in range(0, tl.load(BLK_STEPS + t)):
            v = tl.load(BLK_ITER + base + step * R + lane)
            ok = v >= 0
            start, end, m, pv, px, a, rhs_at, diag_at, d, sign, dst = affine_fetch(
                v, ok, ENT_PTR, ENT_VAL, ENT_VEC, RHS, DIAG, SIGN, DST, VAL, True, CHUNK)
            val = affine_step(ok, start, end, m, px, a, rhs_at, d, sign, dst, prev_dst, prev_val, ENT_VAL, ENT_VEC,
                              VAL, VEC, CHUNK, N_IN, SENT, NAP, WIDE)
            prev_dst = tl.where(ok, dst, -1)
            prev_val = val
        t = _next_ticket(TICKET, N_BLK, LOOP)


def _chain_plan(schedule, mats, R, S, device):
    blk_ptr, steps, blk_iter = chain_blocks(schedule, mats, R, S)
    dev = rows.to_device({"blk_ptr": blk_ptr.astype(np.int32), "blk_steps": steps.astype(np.int32),
                          "blk_iter": blk_iter.astype(np.int32)}, device)
    return len(steps), dev


def _run_chains(run, val, vec):
    sdev = run.plan[1]
    _launch_dataflow(_chains, run, val, vec, sdev["blk_ptr"], sdev["blk_steps"], sdev["blk_iter"])


# ---------------------------------------------------------------- executor (e): chain pieces by a scan

@triton.jit
def _compose(b1, a1, b2, a2):
    """x ↦ a2 + b2·(a1 + b1·x): two consecutive links' affine maps, the earlier one first."""
    return b2 * b1, a2 + b2 * a1


@triton.jit
def _segments(TICKET, N_BLK, BLK_PTR, BLK_ITER, ENT_PTR, ENT_VAL, ENT_VEC, RHS, DIAG, SIGN, DST, VAL, VEC, N_IN,
              R: tl.constexpr, CHUNK: tl.constexpr, SENT: tl.constexpr, NAP: tl.constexpr, LOOP: tl.constexpr,
              WIDE: tl.constexpr):
    """The dataflow executor over segment blocks: every lane waits for the entries its row reads
    from outside the block, then one scan solves the piece's recurrence x_m = α_m + β_m·x_{m−1}
    (single iterations have β = 0 and come out as α)."""
    t = tl.atomic_add(TICKET, 1, sem="relaxed")
    while t < N_BLK:
        first, lane, ok, v = _block_of(t, BLK_PTR, BLK_ITER, R)
        start, end, m, pv, px, a, rhs_at, diag_at, d, sign, dst = affine_fetch(
            v, ok, ENT_PTR, ENT_VAL, ENT_VEC, RHS, DIAG, SIGN, DST, VAL, True, CHUNK)
        # the lane before writes what this lane reads last: not awaited, it becomes β
        before = tl.load(BLK_ITER + lane - 1, mask=ok & (lane > first), other=-1)
        prev_dst = tl.load(DST + before, mask=before >= 0, other=-1)
        alpha, beta = affine_link(ok, start, end, m, px, a, rhs_at, d, sign, prev_dst, ENT_VAL, ENT_VEC, VAL, VEC,
                                  CHUNK, N_IN, SENT, NAP, WIDE)
        _, x_out = tl.associative_scan((beta, alpha), 0, _compose)
        tl.store(VEC + dst, x_out, mask=ok)
        t = _next_ticket(TICKET, N_BLK, LOOP)


def _segment_plan(schedule, mats, tables, R, S, device):
    blk_ptr, blk_iter = segment_blocks(schedule, mats, tables, R, S)
    dev = rows.to_device({"blk_ptr": blk_ptr.astype(np.int32), "blk_iter": blk_iter.astype(np.int32)}, device)
    return len(blk_ptr) - 1, dev


def _run_segments(run, val, vec):
    sdev = run.plan[1]
    lanes = triton.next_power_of_2(max(run.chain_steps, run.block_rows))
    _launch_dataflow(_segments, run, val, vec, sdev["blk_ptr"], sdev["blk_iter"], lanes=lanes, chunk=SEG_CHUNK)


# ---------------------------------------------------------------- the pair functions

class Prepared:
    """A pair on fixed matrices, ready to run: `prepared(vector)` returns what the pair function
    returns, launching only the executor's kernels — the tables and the matrices' values are
    already on the device. Made by `prepare`."""

    def __init__(self, problem, schedule, executor, tickets, block_rows, num_warps, nap_ns, chain_steps,
                 programs_per_sm, tickets_ahead, device, dtype, claim, fuse_rows):
        self.problem, self.schedule, self.executor = problem, schedule, executor
        self.tickets, self.block_rows, self.num_warps, self.nap_ns = tickets, block_rows, num_warps, nap_ns
        self.chain_steps, self.programs_per_sm, self.tickets_ahead = chain_steps, programs_per_sm, tickets_ahead
        self.claim, self.resident = claim, None      # resident: programs an SM holds (_launch_claimed)
        self.fuse_rows = fuse_rows
        self.tables, self.dev = rows.device_tables(problem, device)
        self.values = torch.from_numpy(self.tables.values(problem.matrices)).to(device=device, dtype=dtype)
        if executor == "levels":
            self.plan = schedule.cached(("t3_levels", str(device)),
                                        lambda: _level_plan(schedule, self.tables, device))
        elif executor == "chains":
            self.plan = schedule.cached(("t3_chains", block_rows, chain_steps, str(device)),
                                        lambda: _chain_plan(schedule, problem.matrices, block_rows, chain_steps, device))
        elif executor == "segments":
            self.plan = schedule.cached(("t3_segments", block_rows, chain_steps, str(device)),
                                        lambda: _segment_plan(schedule, problem.matrices, self.tables, block_rows,
                                                              chain_steps, device))
        elif executor == "dataflow" and not self.tables.factor:
            self.record_shape = shape = record_shape(self.tables)
            self.flat = reads_flat(shape, claim)
            if self.flat:
                self.flat_width = W = FLAT_WIDTH
                self.block_rows = block_rows = min(block_rows, W, 32)       # FLAT_BLOCK_ROWS
                key = ("t3_flat", tickets, block_rows, W, str(device))
                self.plan = schedule.cached(key, lambda: flat_plan(schedule, problem.matrices, self.tables,
                                                                   block_rows, tickets, device, W))
            else:
                key = ("t3_dataflow", tickets, block_rows, shape["CHUNK"], shape["FOLD"], READY_ORDER, HUBS_ALONE,
                       str(device))
                self.plan = schedule.cached(key, lambda: _dataflow_plan(schedule, problem.matrices, self.tables,
                                                                        block_rows, tickets, device, shape["FOLD"]))
            self.record_values = _dataflow_values(self.plan, self.values)
            self.direct = writes_row_order(schedule, problem.matrices)
            self.early = claim == "stride" and not self.flat and looks_early(schedule, problem.matrices, self.tables)
            self.split = self.flat or reads_input_apart(shape)
            self.awaited = self.plan[1].get("awaited") if AWAITED_ONLY else None   # None: all (_slots_from)
        else:                   # the flag executor, or a factor pair's dataflow executor (kernel_of)
            self.data = executor == "dataflow"
            self.data_template = None           # VAL with the sentinel, made by the first call (_data_buffers)
            self.rewritten_at = None            # and the positions it holds the sentinel at, on the device
            self.graph = None                   # the call as a CUDA graph, captured by the second (_graphed)
            self.eager_calls = 0
            self.plan = schedule.cached(("t3_syncfree", tickets, block_rows, fuse_rows, str(device)),
                                        lambda: _syncfree_plan(schedule, problem.matrices, self.tables, block_rows,
                                                               tickets, fuse_rows, device))

    @property
    def fused(self) -> int:
        """Solve rows the plan runs inside their factor rows' blocks (the flag executor's)."""
        return self.plan[2] if kernel_of(self.executor, self.problem.pair) == "syncfree" else 0

    data = False        # the flag executor's kernel with the values as flags (a factor pair's dataflow)

    def __call__(self, vector):
        if self.data:
            rows.check_vector(self.tables, vector, self.values)
            if self.graph is not None or (self.eager_calls and replays_graph(self)):
                return _graphed(self, vector)
            self.eager_calls += 1
            val, own, vec = _data_buffers(self, vector)
            _run_syncfree(self, val, vec, own)
            return rows.results(self.tables, self.dev, val, vec)
        flow = self.executor == "dataflow"          # it copies the input into its slot layout itself
        vec = rows.new_vector(self.tables, vector, self.values, copy_in=not flow)
        val = self.values.clone() if self.tables.factor else self.values     # a factor is made in place
        if flow:
            _run_dataflow(self, val, vec, vector)
        else:
            RUNS[self.executor](self, val, vec)
        return rows.results(self.tables, self.dev, val, vec)


RUNS = {"levels": _run_levels, "syncfree": _run_syncfree, "chains": _run_chains, "segments": _run_segments}


def prepare(pair, *matrices, like, schedule=None, executor=None, tickets=None, block_rows=None,
            num_warps=NUM_WARPS, nap_ns=NAP_NS, chain_steps=None, programs_per_sm=None,
            tickets_ahead=None, claim=None, fuse_rows=None) -> Prepared:
    """Validate `matrices` for `pair` once and return a Prepared runner for vectors shaped,
    typed and placed like the tensor `like`. executor: one of EXECUTORS (executors_for(pair))
    or None (executor_rule). For the sync-free kernels: tickets, the block order (TICKETS,
    see ticket_blocks; None: TICKET_ORDER of the executor); block_rows, iterations per block (a
    power of two up to 128; None: tuning_defaults of the executor and pair, or for a factor pair
    on the flag executor factor_block_rows); num_warps of each program (1, 2, 4 or 8 for the flag
    and level executors; 1 for the ONE_WARP executors); nap_ns, the sync-free executors' sleep between polls
    (0 to 10000 ns); chain_steps, the chain executor's links per block (1 to 4096) or the segment
    executor's per piece (1 to SEG_MAX); None: CHAIN_STEPS of the executor; programs_per_sm, for
    the sync-free executors, 0 for one program per block or the number of persistent programs per
    SM that run blocks until none is left (1 to 64, striding ones at most what an SM holds,
    resident_per_sm; None: the dataflow executor's dataflow_programs, FLAG_PROGRAMS_PER_SM for the
    flag executor, PROGRAMS_PER_SM for the others); tickets_ahead,
    for the dataflow executor's persistent programs, 0 to take the next ticket after a block, 1
    to hold it while the block waits, 2 to also prefetch that block's record (_dataflow; None,
    like block_rows None: dataflow_shape; with claim "stride" 2); claim, how a persistent program
    of the flag or dataflow executor (STRIDING) finds its next block (CLAIMS; None: CLAIM, or
    "counter" with one program per block); fuse_rows, whether the flag executor, or the dataflow
    executor on a factor pair, runs a factor pair's solve row with its factor row where the
    schedule puts both in one partition (fused_rows; None: fuses_rows; not with tickets
    "schedule", which then runs them apart)."""
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
    if claim == "stride" and programs_per_sm == 0:
        raise ValueError("claim='stride' strides persistent programs over the blocks; it needs programs_per_sm > 0")
    if executor == "segments" and chain_steps is not None and chain_steps > SEG_MAX:
        raise ValueError(f"chain_steps of the segments executor must be at most {SEG_MAX} (the lanes of one "
                         f"program), got {chain_steps}")
    schedule = schedule if schedule is not None else default_schedule(pair, problem.matrices, problem.fingerprint)
    if executor is None:
        executor = executor_rule(like.device, schedule, rows.device_tables(problem, like.device)[0])
    kernel = kernel_of(executor, pair)
    if executor in ONE_WARP and num_warps != 1:
        raise ValueError(f"executor {executor!r} runs one warp per program (ONE_WARP), got num_warps={num_warps}")
    if programs_per_sm is None:
        programs_per_sm = _default_programs(kernel)
    if programs_per_sm is None:         # the dataflow executor: by the pattern
        programs_per_sm = dataflow_programs(rows.device_tables(problem, like.device)[0])
    if kernel not in STRIDING:
        claim = "counter"               # the other executors' persistent programs always take tickets
    claim = claim or default_claim(kernel, programs_per_sm)
    if kernel == "dataflow" and claim == "stride" and tickets_ahead is None:
        tickets_ahead = 2               # the next block is known: prefetching its record waits on nothing
    if kernel == "dataflow" and block_rows is None and reads_flat(record_shape(rows.device_tables(
            problem, like.device)[0]), claim):
        block_rows = FLAT_BLOCK_ROWS
    if kernel == "dataflow" and (block_rows is None or tickets_ahead is None):
        shape = dataflow_shape(schedule, problem.matrices, rows.device_tables(problem, like.device)[0])
        block_rows = shape[0] if block_rows is None else block_rows
        tickets_ahead = shape[1] if tickets_ahead is None else tickets_ahead
    if block_rows is None:
        block_rows = tuning_defaults(kernel, pair).get("block_rows", 1)
    if block_rows is None:              # a factor pair on the flag executor's kernel: by its rows' shape
        block_rows = factor_block_rows(rows.device_tables(problem, like.device)[0],
                                       wide=executor == "dataflow" and _wide(schedule, problem.matrices))
    if chain_steps is None:
        chain_steps = CHAIN_STEPS.get(executor, 1)
    if tickets is None:
        tickets = tuning_defaults(kernel).get("tickets") or "dag"
    if fuse_rows is None:
        fuse_rows = fuses_rows(executor, pair, rows.device_tables(problem, like.device)[0])
    return Prepared(problem, schedule, executor, tickets, block_rows, num_warps, nap_ns, chain_steps,
                    programs_per_sm, tickets_ahead or 0, like.device, like.dtype, claim, fuse_rows)


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
