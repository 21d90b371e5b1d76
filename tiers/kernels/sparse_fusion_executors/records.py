"""t3's dataflow executor over records (executor="dataflow", the vector pairs): the kernel, the
records it reads — each block's tables in one round trip — and their plan, built once per pattern
(tiers/t3_triton_fused/sparse_fusion.py chooses the records' shape and launches the kernel)."""

import numpy as np
import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from tiers import sparse_dags as dags
from tiers.kernels import sparse_rows as rows
from tiers.kernels.sparse_fusion_executors.launch import _next_ticket
from tiers.kernels.sparse_fusion_executors.tickets import ticket_cut
from tiers.kernels.sparse_rows import CHUNK, tail_sum, vec_await_at, vec_await_dot, vec_look_at


RECORD_CHUNK = 32        # dataflow: entry slots per lane of a record at most (record_chunk)


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


@triton.jit(do_not_specialize=["SPLIT_AT", "SHARE0"])
def _dataflow(TICKET, N_BLK, WIDTH, PX, PA, RHS, START, END, SIGN, D, DINV, DST, ENT_VAL, ENT_VEC, VAL, VEC, OUT,
              N_IN, IN, R: tl.constexpr, CHUNK: tl.constexpr, SENT: tl.constexpr, NAP: tl.constexpr, LOOP: tl.constexpr,
              WIDE: tl.constexpr, AHEAD: tl.constexpr, PTX: tl.constexpr, PENDING: tl.constexpr,
              TRIP_DIV: tl.constexpr, STRIDE: tl.constexpr, DIRECT: tl.constexpr, TAIL: tl.constexpr,
              FOLD: tl.constexpr, EARLY: tl.constexpr = False, PDL: tl.constexpr = False,
              SPLIT: tl.constexpr = False, EVERY: tl.constexpr = False, RS: tl.constexpr = 0,
              SPLIT_AT=0, SHARE0=0, STREAMS: tl.constexpr = False, SUMS: tl.constexpr = 0,
              CHUNK0: tl.constexpr = 0, CHUNK1: tl.constexpr = 0):
    """The sync-free executor without flags, for pairs of affine rows (SpMV, SpTRSV): each lane
    reads the vector entries its row needs as soon as they stop holding the sentinel, so a
    dependence costs one store and the loads that see it — no barrier, no fence, no flag. Lane
    j of block t writes VEC[N_IN + t·RS + j]: _dataflow_plan numbers the outputs by slot, so a
    block's results are one contiguous store, and the store's address never comes from a table
    (Triton 3.6 failed to compile a store to an address loaded in an earlier loop iteration).
    A row's quotient r/d is r·(1/d) with one Markstein correction, which with 1/d rounded
    once (_dataflow_values) is r/d correctly rounded, without a division after the wait.
    AHEAD (persistent programs): 0, the next ticket is taken after the block; 1, the program
    already holds it while this block waits, and takes the one after; 2, it also asks L1 for
    that next block's record (with PTX). Holding tickets ahead keeps the tickets' argument
    (sparse_fusion.py's docstring): a program's current block is the lowest it holds, so the
    lowest unfinished block is some running program's current one, and everything it waits for
    is finished. PENDING (polls_pending): a repeated poll reads only the entries still pending
    (vec_loads, tail_sum). TRIP_DIV: narrows tail_sum's wide trips (WIDE_TRIP_DIV). STRIDE (claim
    "stride", CLAIMS): no tickets; program p runs blocks p, p + P, … of the P launched together,
    and with AHEAD 2 asks L1 for the next one's record. DIRECT: lane j also stores its result at
    OUT[dst], its place in row order (writes_row_order); else the caller gathers the slots back.
    WIDTH: the entry slots block t's rows use (_records reads no more); a striding program knows
    its next blocks, so it asks for the width of the one after next while this block runs, and
    reads no padding, in the record or its prefetch; a program taking tickets reads every slot,
    and so does every program with EVERY. TAIL: some row is longer than CHUNK, whose rest
    tail_sum reads; without it the record holds no entry range or sign. FOLD (record_shape): the
    right-hand side is read as one more entry slot, with the others (_dataflow_plan). EARLY
    (striding, looks_early): the loop runs as a software pipeline (_pipelined): the next blocks'
    records and entries are read before this block waits, and what still held the sentinel is
    polled when that block's turn comes (vec_await). PDL (launched as a programmatic dependent
    launch, _run_dataflow): the program starts while the kernel writing VEC's slots finishes,
    reads what that kernel does not write, and waits for it (gdc_wait) before its first look at
    VEC; after its last block it lets the kernel after it be launched. SPLIT (reads_input_apart):
    VEC holds no copy of the input, whose entries (positions below N_IN) are read from IN, the
    caller's vector (_at). EVERY (Prepared.whole_records): no widths; every slot of a record is
    read — where TAIL (measured: record_shape) or the pipelined loop reads every slot
    (reads_every_slot). RS: how far apart consecutive blocks' slots lie (slot_stride; 0: R).
    STREAMS (striding, Prepared.spmv_share): the blocks are two streams, kernel 1's blocks
    0 … SPLIT_AT − 1 and kernel 2's after them (_dataflow_plan's `apart`); the first
    max(1, P·SHARE0 / 256) programs stride over the first stream, the others over the second,
    so a program of one kernel never sits in another kernel's block. SUMS (Prepared.sums,
    sums_each_poll): 0, a block's sums are taken once everything it reads is there; 1, at every
    poll (vec_await_dot), so that on the last poll the sums' shuffles run beside the check for
    what is still pending; 2 or 3, at every poll in the first or the second stream's blocks only.
    CHUNK0, CHUNK1 (STREAMS with the pipelined loop; 0: CHUNK): each stream's records have entry
    slots of their own number a lane (stream_chunks), the second's after the first's in PX and
    PA, so that a solve's blocks do not carry the width of the SpMV's rows.
    """
    SL: tl.constexpr = RS if RS > 0 else R
    tl.static_assert(CHUNK0 == 0 or (EARLY and STRIDE), "records of two widths are read by the pipelined loop only")
    w = CHUNK
    w1 = CHUNK
    P = tl.num_programs(0)
    spec = SUMS == 1                # whether this program's blocks take their sums at every poll
    if STRIDE:
        t = tl.program_id(0)
        if STREAMS:
            P0 = tl.minimum(tl.maximum((P * SHARE0) // 256, 1), P - 1)
            first = t < P0
            if SUMS > 1:                        # SUMS 2: the first stream's programs, 3: the second's
                spec = first == (SUMS == 2)
            N_BLK = tl.where(first, SPLIT_AT, N_BLK)
            t = tl.where(first, t, t - P0 + SPLIT_AT)
            P = tl.where(first, P0, P - P0)
        n1 = t + P
        if not EVERY:
            w = tl.load(WIDTH + t)
            w1 = tl.load(WIDTH + n1, mask=n1 < N_BLK, other=0)
    else:
        if PDL:                     # the ticket counter's zero comes from a fill kernel, just before
            gdc_wait()
        t = tl.atomic_add(TICKET, 1, sem="relaxed")
        n1 = N_BLK
        if LOOP and AHEAD > 0:
            n1 = tl.atomic_add(TICKET, 1, sem="relaxed")
    if EARLY and STRIDE and CHUNK0 > 0:
        tl.static_assert(STREAMS, "records of two widths are two streams'")
        if first:
            _pipelined(t, spec, P, WIDTH, N_BLK, PX, PA, RHS, START, END, SIGN, D, DINV, DST, ENT_VAL, ENT_VEC, VAL, VEC,
                       OUT, N_IN, IN, R, CHUNK0, SENT, NAP, WIDE, PTX, PENDING, TRIP_DIV, DIRECT, TAIL, FOLD, PDL, SPLIT,
                       EVERY, SL, SUMS)
        else:                               # the second stream's records follow the first's
            off = SPLIT_AT * (R * (CHUNK0 - CHUNK1))
            _pipelined(t, spec, P, WIDTH, N_BLK, PX + off, PA + off, RHS, START, END, SIGN, D, DINV, DST, ENT_VAL,
                       ENT_VEC, VAL, VEC, OUT, N_IN, IN, R, CHUNK1, SENT, NAP, WIDE, PTX, PENDING, TRIP_DIV, DIRECT, TAIL,
                       FOLD, PDL, SPLIT, EVERY, SL, SUMS)
    elif EARLY and STRIDE:
        _pipelined(t, spec, P, WIDTH, N_BLK, PX, PA, RHS, START, END, SIGN, D, DINV, DST, ENT_VAL, ENT_VEC, VAL, VEC, OUT, N_IN,
                   IN, R, CHUNK, SENT, NAP, WIDE, PTX, PENDING, TRIP_DIV, DIRECT, TAIL, FOLD, PDL, SPLIT, EVERY, SL, SUMS)
    else:
        if PDL and STRIDE:
            gdc_wait()
        while t < N_BLK:
            if STRIDE:
                n2 = n1 + P
                w2 = w1
                if not EVERY:
                    w2 = tl.load(WIDTH + n2, mask=n2 < N_BLK, other=0)
            px, a, rhs_at, start, end, sign, d, dinv, dst = _records(t, w, N_BLK, PX, PA, RHS, START, END, SIGN, D,
                                                                     DINV, DST, R, CHUNK, TAIL, DIRECT, FOLD)
            if LOOP and AHEAD > 0 and not STRIDE:
                n2 = _ticket_later(TICKET, PTX)
            if LOOP and AHEAD == 2 and PTX:        # n1, the next block, is known (striding) or held
                _prefetch(n1, w1, N_BLK, PX, PA, RHS, START, END, SIGN, D, DINV, DST, R, CHUNK, TAIL, DIRECT, FOLD)
            x, rhs = _look(VEC, IN, px, rhs_at, N_IN, SPLIT)
            _finish(t, spec, px, a, rhs_at, start, end, sign, d, dinv, dst, x, rhs, N_BLK, ENT_VAL, ENT_VEC, VAL, VEC, OUT,
                    N_IN, IN, R, CHUNK, SENT, NAP, WIDE, PENDING, TRIP_DIV, DIRECT, TAIL, False, SPLIT, SL, SUMS)
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
def _width(WIDTH, t, N_BLK, CHUNK: tl.constexpr, EVERY: tl.constexpr):
    """Block t's width (0 past the last block; every slot with EVERY)."""
    if EVERY:
        return CHUNK
    else:
        return tl.load(WIDTH + t, mask=t < N_BLK, other=0)


@triton.jit
def _pipelined(t, spec, P, WIDTH, N_BLK, PX, PA, RHS, START, END, SIGN, D, DINV, DST, ENT_VAL, ENT_VEC, VAL, VEC, OUT, N_IN,
               IN, R: tl.constexpr, CHUNK: tl.constexpr, SENT: tl.constexpr, NAP: tl.constexpr, WIDE: tl.constexpr,
               PTX: tl.constexpr, PENDING: tl.constexpr, TRIP_DIV: tl.constexpr, DIRECT: tl.constexpr,
               TAIL: tl.constexpr, FOLD: tl.constexpr, PDL: tl.constexpr, SPLIT: tl.constexpr,
               EVERY: tl.constexpr, SL: tl.constexpr, SUMS: tl.constexpr):
    """_dataflow's striding loop as a software pipeline (EARLY, looks_early), block b of a program
    being followed by b + P: while block b waits, block b + P's record is loaded and its entries
    read once, the positions of block b + 2P are loaded into registers, and L1 is asked for the
    record of block b + 3P (_half). Blocks go in pairs, so that the loop's two halves take turns
    with two sets of registers for the records: no copy from one to the other waits for a load.
    The positions are live for three halves: in sm_90 SASS those the pair's second half loads are
    copied at the loop's end, before that half's store. A loop over blocks in fours without the
    copies, its positions loaded a block earlier, was 8–9 % slower on the 3D grid (H200,
    2026-12-02, figures/data/deep_positions_*). A block's width is read a block before it is first
    needed, or with EVERY not at all: every slot is read (reads_every_slot). P: the programs
    striding over these blocks (_dataflow's STREAMS), N_BLK: the end of their stream."""
    w = _width(WIDTH, t, N_BLK, CHUNK, EVERY)
    px, a, rhs_at, start, end, sign, d, dinv, dst = _records(t, w, N_BLK, PX, PA, RHS, START, END, SIGN, D, DINV, DST,
                                                             R, CHUNK, TAIL, DIRECT, FOLD)
    if PDL:
        gdc_wait()
    x, rhs = _look(VEC, IN, px, rhs_at, N_IN, SPLIT)
    wa = _width(WIDTH, t + P, N_BLK, CHUNK, EVERY)
    wb = _width(WIDTH, t + 2 * P, N_BLK, CHUNK, EVERY)
    wc = _width(WIDTH, t + 3 * P, N_BLK, CHUNK, EVERY)
    qa = _positions(t + P, wa, N_BLK, PX, R, CHUNK)
    while t < N_BLK:
        wd = _width(WIDTH, t + 4 * P, N_BLK, CHUNK, EVERY)
        qb, a1, rh1, s1, e1, sg1, d1, di1, ds1, x1, rhs1 = _half(
            t, spec, P, wa, wb, wc, qa, px, a, rhs_at, start, end, sign, d, dinv, dst, x, rhs, N_BLK, PX, PA, RHS, START,
            END, SIGN, D, DINV, DST, ENT_VAL, ENT_VEC, VAL, VEC, OUT, N_IN, IN, R, CHUNK, SENT, NAP, WIDE, PTX, PENDING,
            TRIP_DIV, DIRECT, TAIL, FOLD, False, SPLIT, SL, SUMS)
        we = _width(WIDTH, t + 5 * P, N_BLK, CHUNK, EVERY)
        p1 = qa
        qa, a, rhs_at, start, end, sign, d, dinv, dst, x, rhs = _half(
            t + P, spec, P, wb, wc, wd, qb, p1, a1, rh1, s1, e1, sg1, d1, di1, ds1, x1, rhs1, N_BLK, PX, PA, RHS, START,
            END, SIGN, D, DINV, DST, ENT_VAL, ENT_VEC, VAL, VEC, OUT, N_IN, IN, R, CHUNK, SENT, NAP, WIDE, PTX, PENDING,
            TRIP_DIV, DIRECT, TAIL, FOLD, True, SPLIT, SL, SUMS)
        px = qb
        wa, wb, wc = wc, wd, we
        t += 2 * P


@triton.jit
def _half(t, spec, P, wa, wb, wc, qa, px, a, rhs_at, start, end, sign, d, dinv, dst, x, rhs, N_BLK, PX, PA, RHS, START, END,
          SIGN, D, DINV, DST, ENT_VAL, ENT_VEC, VAL, VEC, OUT, N_IN, IN,
          R: tl.constexpr, CHUNK: tl.constexpr, SENT: tl.constexpr, NAP: tl.constexpr, WIDE: tl.constexpr,
          PTX: tl.constexpr, PENDING: tl.constexpr, TRIP_DIV: tl.constexpr, DIRECT: tl.constexpr,
          TAIL: tl.constexpr, FOLD: tl.constexpr, PAST: tl.constexpr, SPLIT: tl.constexpr, SL: tl.constexpr,
          SUMS: tl.constexpr):
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
    _finish(t, spec, px, a, rhs_at, start, end, sign, d, dinv, dst, x, rhs, N_BLK, ENT_VAL, ENT_VEC, VAL, VEC, OUT, N_IN,
            IN, R, CHUNK, SENT, NAP, WIDE, PENDING, TRIP_DIV, DIRECT, TAIL, PAST, SPLIT, SL, SUMS)
    return qb, a1, rh1, s1, e1, sg1, d1, di1, ds1, x1, rhs1


@triton.jit
def _finish(t, spec, px, a, rhs_at, start, end, sign, d, dinv, dst, x, rhs, N_BLK, ENT_VAL, ENT_VEC, VAL, VEC, OUT, N_IN,
            IN, R: tl.constexpr, CHUNK: tl.constexpr, SENT: tl.constexpr, NAP: tl.constexpr, WIDE: tl.constexpr,
            PENDING: tl.constexpr, TRIP_DIV: tl.constexpr, DIRECT: tl.constexpr, TAIL: tl.constexpr,
            PAST: tl.constexpr, SPLIT: tl.constexpr, SL: tl.constexpr, SUMS: tl.constexpr):
    """Block t's rows (with PAST, t may lie past N_BLK: then none) from its record and its entries
    x and right-hand sides rhs read once (vec_look): the polls until none holds the sentinel,
    the sums (with `spec`, at every poll: vec_await_dot), the quotients and their stores."""
    xp, rp = _at(VEC, IN, px, N_IN, SPLIT), _at(VEC, IN, rhs_at, N_IN, SPLIT)
    if spec:                                # a constexpr but where the streams differ (_dataflow's SUMS)
        r = vec_await_dot(a, x, xp, px, px >= 0, rhs, rp, rhs_at, rhs_at >= 0, N_IN, SENT, NAP)
    else:
        x, rhs = vec_await_at(x, xp, px, px >= 0, rhs, rp, rhs_at, rhs_at >= 0, N_IN, SENT, NAP, PENDING)
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
        tl.store(VEC + N_IN + t * SL + lane, q, mask=lane * 0 + t < N_BLK)
    else:
        tl.store(VEC + N_IN + t * SL + lane, q)    # lane j of block t: its slot (_dataflow_plan)
    if DIRECT:                              # and the result in row order, read by no block (writes_row_order)
        tl.store(OUT + dst, q, mask=dst >= 0)


def record_chunk(tables) -> int:
    """Entry slots per lane of the dataflow records: where every row fits in RECORD_CHUNK, all
    entries of the longest (a power of two, at least CHUNK), so that a row waits once for all it
    reads; else CHUNK, the rest of a longer row read through tail_sum. Measured on the H100
    (2026-11-26, float64, wavefront schedule): 27-point grid (rows of 14 and 27) 0.58 / 0.57 /
    0.94 ms with 32 slots against 0.76 / 0.72 / 1.57 with 8; the power-law graph (a few rows of
    thousands, most of a few) 1.65 / 1.48 / 2.91 with 32 against 0.84 / 0.68 / 1.82 with 8."""
    widest = triton.next_power_of_2(max(tables.longest, 1))
    return max(CHUNK, widest) if widest <= RECORD_CHUNK else CHUNK


def _dataflow_plan(schedule, mats, tables, R, tickets, device, fold=False, RS=None, apart=False, own_widths=False):
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
    `prepare` (_dataflow_values); this part depends on the pattern only. With `apart`
    (ticket_cut's), kernel 1's blocks come first and the device tables also hold "split_at", a
    Python int: the first block of kernel 2 (_dataflow's STREAMS). With `own_widths` too, each
    stream's records are as wide as its own rows need (stream_chunks; "chunks" in the device
    tables, where the two differ)."""
    C = record_chunk(tables)
    lens = np.diff(tables.ent_ptr)
    alone = lens > 4 * C if HUBS_ALONE and tables.wide(C) else None
    blk_ptr, seq = ticket_cut(schedule, mats, R, tickets, alone=alone, ties="ids", apart=apart)
    B, sizes, n = len(blk_ptr) - 1, np.diff(blk_ptr), tables.n1
    slot = np.repeat(np.arange(B) * R - blk_ptr[:-1], sizes) + np.arange(len(seq))
    S = B * R
    where = np.arange(tables.vec_len, dtype=np.int64)        # VEC position → its position in the slot layout
    RS = RS or R                                             # a block's slots in VEC: RS apart (slot_stride)
    where[tables.dst[seq]] = n + slot + np.repeat(np.arange(B) * (RS - R), sizes)
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
    # a lane's record holds its row's first `used` entries: placed entry by entry, in int32 (the
    # kernels' type), not through [S, C] index and mask arrays of int64: prepare 1.1-1.7x faster
    # on the grids' vector pairs, the same tables (figures/data/prepare_records_cpu_2026-12-04.txt)
    used = np.clip(lane["end"] - lane["start"], 0, C)
    at_slot, e = dags.expand_ranges(lane["start"], lane["start"] + used)
    k = e - lane["start"][at_slot]
    px, pv = np.full((S, C), -1, dtype=np.int32), np.full((S, C), -1, dtype=np.int32)
    px[at_slot, k], pv[at_slot, k] = where[ent_aux[e]], ent_val[e]
    if fold:
        own = np.flatnonzero(lane["rhs"] >= 0)
        at = used[own]
        px[own, at], pv[own, at] = lane["rhs"][own], -2
        used[own] += 1
        lane["rhs"][own] = -1
    width = used.reshape(B, R).max(1, initial=0)
    read = np.zeros(tables.vec_len, dtype=bool)             # VEC positions some row reads
    read[tables.ent_aux] = True
    read[tables.rhs[tables.rhs >= 0]] = True
    awaited = ((lane["dst"] >= 0) & read[np.maximum(lane["dst"], 0)]).reshape(B, R).any(1)
    host = {k: v.astype(np.int32) for k, v in lane.items()}
    if not awaited.all():
        host["awaited"] = awaited.astype(np.int8)
    host.update(px=px.ravel(), pv=pv.ravel(), width=width.astype(np.int32),
                ent_vec=where[ent_aux].astype(np.int32), back=where[n:].astype(np.int32))
    if ent_val is not tables.ent_val:
        host["ent_val"] = ent_val.astype(np.int32)
    split_at = int((seq[blk_ptr[:-1]] < schedule.n1).sum()) if apart else 0
    chunks = stream_chunks(used, split_at * R, C) if apart and own_widths else None
    if chunks:
        for k in ("px", "pv"):
            full = host[k].reshape(S, C)
            host[k] = np.concatenate([full[a:a + m, :w].ravel() for a, m, w in record_lanes(S, C, split_at * R, chunks)])
    dev = rows.to_device(host, device)
    if apart:
        dev["split_at"] = split_at
    if chunks:
        dev["chunks"] = chunks
    return B, dev


def stream_chunks(used, lanes, C):
    """Entry slots a lane for each of the two streams' records (_dataflow's CHUNK0, CHUNK1): the
    slots its lanes use (`used`: the first `lanes` lanes are the first stream's), as a power of
    two, at least CHUNK; None where both would take C. On the 27-point grid the solve's rows use
    14 slots and the SpMV's 27: a solve block then reads records of 16 slots, not the 32 its
    SpMV needs. The solve was that much slower on 32-slot records (H200, 2026-12-05,
    figures/data/spmv_cost_*, float64): half of sptrsv_sptrsv on 32-slot records took 0.2827 ms,
    against 0.2465 on its own 16-slot records in the table, and sptrsv_spmv 0.2862, the solve on
    32-slot records and 3.5 µs more. With each stream's own width, 0.2646 (STREAM_CHUNKS)."""
    def width(u):
        return max(CHUNK, triton.next_power_of_2(int(u.max(initial=1))))

    chunks = (width(used[:lanes]), width(used[lanes:]))
    return None if chunks == (C, C) else chunks


def record_lanes(lanes, chunk, first_lanes=0, chunks=None):
    """The records' layout in PX and PA as runs of lanes, in the order they lie: ((first lane,
    lanes, entry slots a lane), ...) — every lane `chunk` slots wide, or with each stream's own
    width ("chunks", stream_chunks) the first stream's `first_lanes` lanes at chunks[0], then the
    others at chunks[1]. _dataflow_plan packs the records by it; _dataflow_values and record_reads
    read them by it."""
    if not chunks:
        return ((0, lanes, chunk),)
    return ((0, first_lanes, chunks[0]), (first_lanes, lanes - first_lanes, chunks[1]))


def record_reads(plan_dev, blocks, R, RS, n):
    """(block, lane, producer block, producer lane) for every record slot of a _dataflow_plan that
    reads another block's output: the slot's VEC position n + t·RS + j is lane j of block t. A
    record is R lanes of CHUNK slots a block, or where the streams' widths differ ("chunks",
    stream_chunks) the first split_at blocks' lanes of the first width, the others' of the second
    after them. A row longer than its record reads the rest through the plan's `ent_vec` (TAIL),
    which this does not list. What the probes (dev/sparse_fusion/flow_stamps.py) and the picture
    of the blocks (tiers.figures.draw_dataflow_blocks) read the plan by."""
    px = plan_dev["px"].cpu().numpy().astype(np.int64)
    lanes = blocks * R
    lane, at, start = [], [], 0
    for first, m, w in record_lanes(lanes, len(px) // max(lanes, 1), plan_dev.get("split_at", 0) * R,
                                    plan_dev.get("chunks")):
        rec = px[start:start + m * w].reshape(m, w)
        start += m * w
        s, k = np.nonzero(rec >= n)
        lane.append(s + first)
        at.append(rec[s, k] - n)
    lane, at = np.concatenate(lane), np.concatenate(at)
    return lane // R, lane % R, at // RS, at % RS


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


def _dataflow_values(plan, values, into=None):
    """The value half of the dataflow records (_dataflow_plan) or flat records (flat_plan) for
    these matrices' values: each slot's value times its sign, one a lane or one a slot (exact),
    the divisor (1 without one) and its reciprocal, rounded once in the vector's dtype, so that
    the kernels' Markstein step rounds r/d as a division would. `into`: an earlier result, written
    in place (a refresh, whose kept launches read those tensors). The int32 tables index as they
    are and each run of lanes repeats its sign by a Python int, so nothing waits for the device."""
    dev = plan[1]
    sign = dev["sign"].to(values.dtype)
    pv = dev["pv"]
    lanes = sign.numel()                               # each lane's sign over its record's slots
    runs = record_lanes(lanes, pv.numel() // max(lanes, 1), dev.get("split_at", 0) * (lanes // plan[0]),
                        dev.get("chunks"))
    parts = [sign[first:first + m] if w == 1 else sign[first:first + m].repeat_interleave(w) for first, m, w in runs]
    lane_sign = parts[0] if len(parts) == 1 else torch.cat(parts)
    out = into or {}
    a = torch.where(pv >= 0, values[pv.clamp(min=0)] * lane_sign,
                    (pv == -2).to(values.dtype), out=out.get("a"))  # −2: a folded right-hand side (_dataflow_plan)
    diag = dev["diag"]
    d = torch.where(diag >= 0, values[diag.clamp(min=0)], values.new_ones(()), out=out.get("d"))
    dinv = torch.reciprocal(d, out=out.get("dinv"))
    return into if into is not None else {"a": a, "d": d, "dinv": dinv, "sign": sign}
