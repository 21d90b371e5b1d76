"""t3's flag executor (executor="syncfree", and the factor pairs of executor="dataflow": the
values as flags), the kernel: tiers/t3_triton_fused/sparse_fusion.py plans and launches it."""

import triton
import triton.language as tl

from tiers.kernels.sparse_fusion_executors.launch import _next_ticket
from tiers.kernels.sparse_rows import (affine_fetch, affine_finish, factor_rows, held_divisor, held_fetch,
                                       held_finish, held_solve, nap, vec_await_entries)


@triton.jit
def _five_rows(at, R: tl.constexpr):
    """The five rows of R of a block's record (BLK_REC, FUSE_REC), `at` its first row's pointers:
    loads that wait for nothing but the ticket."""
    return tl.load(at), tl.load(at + R), tl.load(at + 2 * R), tl.load(at + 3 * R), tl.load(at + 4 * R)


@triton.jit
def _syncfree(SYNC, N_BLK, BLK_PTR, BLK_ITER, DEP_PTR, DEP_BLK, KIND, ENT_PTR, ENT_VAL, ENT_AUX, UPD_PTR, UPD_A,
              UPD_B, RHS, DIAG, SIGN, DST, FAC_PTR, HOLD_LEN, STEP_BITS, VAL, VEC, FUSE, X_AT, OWN, LATE, N_IN,
              FACTOR: tl.constexpr, R: tl.constexpr, CHUNK: tl.constexpr, DEPS: tl.constexpr, WIDE: tl.constexpr,
              W: tl.constexpr, S: tl.constexpr, C: tl.constexpr, WALK: tl.constexpr, FUSED: tl.constexpr,
              LOOP: tl.constexpr, STRIDE: tl.constexpr, NAP: tl.constexpr, DATA: tl.constexpr, SENT: tl.constexpr,
              APART: tl.constexpr, STAGED: tl.constexpr, RELOOK: tl.constexpr, LOOK_LATE: tl.constexpr = False,
              U0=None, ONE_ROW: tl.constexpr = False, BLK_PAD=None, BLK_REC: tl.constexpr = False, STEP_REC=None,
              FUSE_REC=None):
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
    as what they read is there, and waits for the rest after them (held_finish). RELOOK (STAGED and
    FUSED; relooks): the x_j a held row's solve still misses are read again once its late operands
    are in, the load in flight beside its last steps. LOOK_LATE (STAGED; looks_late): the late
    operands are read again at every poll of the late pivots (held_finish). Fewer rounds of
    dependent loads before a held row's operands (t3's fetches_short): ONE_ROW (every block one
    row) reads block t's row from BLK_ITER[t] without BLK_PTR, and BLK_PAD (blocks of up to R
    rows) reads block t's rows from BLK_PAD[t·R … t·R + R), −1 past its last, without it either;
    U0 (each factor step's first pair) goes to held_fetch, which then reads HOLD_LEN beside KIND.
    BLK_REC (with BLK_PAD): block t's record at BLK_PAD[5·R·t …], five rows of R — the rows, then
    their KIND, ENT_PTR, ENT_PTR + 1 and HOLD_LEN — read in one round, not two; and STEP_REC (with
    BLK_REC) block t's step record at STEP_REC[4·R·S·t …], which held_fetch reads in that round too;
    FUSE_REC (with BLK_REC, FUSED) block t's fused record at FUSE_REC[5·R·t …], five rows of R —
    each factor row's FAC_PTR, its solve row and that row's RHS, DIAG and DST — in that round too."""
    if STRIDE:
        t = tl.program_id(0)
    else:
        t = tl.atomic_add(SYNC, 1, sem="relaxed")
    while t < N_BLK:
        first = None        # what a block's records hold (BLK_REC, STEP_REC, FUSE_REC), else read below
        last = None
        held = None
        base = None
        srec = None
        if ONE_ROW:
            lane = t + tl.arange(0, R)
            ok = lane < N_BLK
            v = tl.load(BLK_ITER + lane, mask=ok, other=0)
        elif BLK_REC:
            v, kind, first, last, held = _five_rows(BLK_PAD + t * (5 * R) + tl.arange(0, R), R)
            ok = v >= 0
            v = tl.where(ok, v, 0)
            if FUSE_REC is not None:
                base, v2r, rhs2r, dat2r, dst2r = _five_rows(FUSE_REC + t * (5 * R) + tl.arange(0, R), R)
            if STEP_REC is not None:
                srec = STEP_REC + t * (4 * R * S)
        elif BLK_PAD is not None:
            v = tl.load(BLK_PAD + t * R + tl.arange(0, R))
            ok = v >= 0
            v = tl.where(ok, v, 0)
        else:
            lo = tl.load(BLK_PTR + t)
            lane = lo + tl.arange(0, R)
            ok = lane < tl.load(BLK_PTR + t + 1)
            v = tl.load(BLK_ITER + lane, mask=ok, other=0)
        if BLK_REC:
            fac = ok & (kind != 0)
        elif FACTOR != 0:
            fac = tl.load(KIND + v, mask=ok, other=0) != 0
        else:
            fac = ok & False
        aff = ok & ~fac
        # what no other block writes is read before waiting: after the wait, one round of loads
        start, end, m, pv, px, a, rhs_at, diag_at, d, sign, dst = affine_fetch(
            v, aff, ENT_PTR, ENT_VAL, ENT_AUX, RHS, DIAG, SIGN, DST, VAL, FACTOR == 0, CHUNK, first, last)
        if W > 0:    # held factor rows: their positions too, dependent loads off the critical path
            hold, w_at, inrow, steps, sm, loc, aux, mine, other, row0 = held_fetch(
                v, fac, FAC_PTR, HOLD_LEN, ENT_PTR, ENT_VAL, ENT_AUX, UPD_PTR, UPD_A, UPD_B, STEP_BITS, W, S, C,
                FACTOR, APART, U0, ok, first, last, held, srec, base)
            walk = fac & ~hold
            late = tl.load(LATE + v, mask=hold, other=0) if STAGED else 0
        else:
            walk = fac
        if FUSED:    # the solve row each factor row carries, and (held) where its x_j are
            if FUSE_REC is not None:
                v2 = tl.where(fac, v2r, -1)
            else:
                v2 = tl.load(FUSE + v, mask=fac, other=-1)
            two = fac & (v2 >= 0)
            if W > 0:
                two_held = two & hold
                x_at = tl.load(X_AT + w_at, mask=inrow & two[:, None], other=-1)
                if FUSE_REC is not None:
                    b2 = tl.load(VEC + rhs2r, mask=two_held, other=0.0)
                    d_at = tl.where(two_held, dat2r, -1)
                    dst2 = tl.where(two_held, dst2r, 0)
                else:
                    b2 = tl.load(VEC + tl.load(RHS + v2, mask=two_held, other=0), mask=two_held, other=0.0)
                    d_at = tl.load(DIAG + v2, mask=two_held, other=-1)
                    dst2 = tl.load(DST + v2, mask=two_held, other=0)
                d_loc = tl.where(d_at >= 0, d_at - row0, -1)
            if W == 0 or WALK:    # walked rows solve from memory: their tables now, off the critical path
                start2, end2, m2, pv2, px2, a2, rhs2, diag2, d2, sign2, dst2w = affine_fetch(
                    v2, two & walk, ENT_PTR, ENT_VAL, ENT_AUX, RHS, DIAG, SIGN, DST, VAL, False, CHUNK)
        else:
            x_at = -1                      # no solve rides along: held_finish's x is a placeholder
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
            x_j = 0.0
            if FUSED:
                if DATA:                   # in flight while the factor row waits and works
                    x_j = tl.load(VEC + x_at, mask=x_at >= 0, other=0.0, volatile=True)
                else:
                    x_j = tl.load(VEC + x_at, mask=x_at >= 0, other=0.0, cache_modifier=".cg")
            w, x_j = held_finish(w_at, inrow, steps, sm, loc, aux, mine, other, row0, VAL, FACTOR, W, S, C, OWN,
                                 DATA, SENT, NAP, APART, late, STAGED, x_j, VEC, x_at, N_IN, RELOOK, LOOK_LATE)
            if FUSED:
                rd = held_divisor(w, d_loc, FACTOR, W)
                if DATA:
                    x_j = vec_await_entries(x_j, VEC + x_at, x_at, x_at >= 0, N_IN, SENT, NAP)
                tl.store(VEC + dst2, held_solve(w, x_at, x_j, b2, rd), mask=two_held)
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
