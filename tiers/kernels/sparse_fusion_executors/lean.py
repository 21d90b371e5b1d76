"""t3's lean rows (the dataflow executor on a factor pair whose factor rewrites only its diagonal):
the kernel, its plan and its call; tiers/t3_triton_fused/sparse_fusion.py decides where they run
(runs_lean).

On the 5- and 7-point grids every ILU(0) or IC(0) update lands on a diagonal, in any order of
the rows: an update of (i, j), i ≠ j, through row k needs i, j and k pairwise adjacent, and a
grid's graph holds no triangle. Row i of spilu0_sptrsv is then

    l_ik = a_ik / u_kk  (k < i in row i),   u_ii = a_ii − Σ_k l_ik·a_ki,   x_i = b_i − Σ_k l_ik·x_k,

and of spic0_sptrsv l_ik = a_ik / l_kk, l_ii = √(a_ii − Σ_k l_ik²), x_i = (b_i − Σ_k l_ik·x_k) / l_ii:
a row reads two values of each row k it depends on, the pivot and x_k, and nothing else that is
being computed. So one lane runs a row, and each row stores its pivot and x side by side, PX[s·i]
and PX[s·i + 1], by one 8- or 16-byte store (st.global.v2 in inline PTX); a row polls the pairs of
its rows k until neither half holds the sentinel, each pair by one load. The pairs lie s entries
apart (pair_stride; t3 picks the bytes, lean_defaults): side by side where levels are wide,
a 64-byte gap apart where they are narrow and each hop of the chain counts. Stored apart (the pivot
in the factor, x in the vector), on an H200 the second value became visible about one L2 round
trip after the first, whatever order they were stored in: the 3D grid's hop on the critical path
was 1.25–1.31 µs, of which 0.45 µs after the pivots were in; packed, 0.93–0.96 µs
(dev/sparse_fusion/diag_probe.py --stamps, figures/data/lean_split_stamps_*, packed_pivots_stamps_*).

An IC(0) pair holds 1/l_ii instead of l_ii: a row takes l_ik = a_ik·(1/l_kk) and x_i = r·rsqrt(rest),
so one reciprocal square root lies on the chain of rows where a division, a square root and a
second division lay; l_ii itself (√rest, or a breakdown's non-positive rest) goes to the factor
after the pair's store. A/B in one process on an H200 (2026-12-03, 5 rotated rounds, every output
checked first; figures/data/ic_rsqrt_ab_*, ic_rsqrt_ab2_*), ms, against the pair holding l_ii: 3D
IC(0) 0.434 against 0.517 / 0.531, float32 0.406 against 0.455 / 0.454; 2D IC(0) by 16 lanes
1.611 against 2.212 (the values as flags 2.117), float32 1.622 against 1.951 (1.926). ILU(0)'s
pair keeps u_ii: 1/u_ii would move its division from the successors to the row, not off the chain.

A lane's row is a factor row, a solve row, or both: the blocks are ticket_blocks' with the rows
the schedule fuses merged (fused_rows), so the lean rows run the schedule's joint DAG as the
flag executor's kernel does. A solve row apart from its factor row reads the same pairs and
computes l_ik (and IC(0)'s l_ii) itself, storing only x; its factor row stores only the pivot
(and l_ik): the pair is complete when both have stored. Programs stride over the blocks (all
resident, a cooperative launch) and read block t + 2P's tables and block t + P's values while
block t waits."""

import numpy as np
import triton
import triton.language as tl

from tiers import sparse_dags as dags
from tiers.kernels import sparse_rows as rows
from tiers.kernels.sparse_fusion_executors.launch import _launch_claimed, _slots_from
from tiers.kernels.sparse_fusion_executors.tickets import fused_rows, ticket_cut
from tiers.kernels.sparse_rows import ILU, SENTINEL, _div, _pending, ic_pivot
from tiers.validation import interpreting

FAC, SOL = 1, 2             # a lane's parts: its factor row, its solve row


@triton.jit
def _tables(ROW, PART, DP, LP, LK, LQ, t, N_BLK, R: tl.constexpr, CH: tl.constexpr, FACTOR: tl.constexpr):
    """Block t's tables (padding: row −1, entry position −1; nothing past the last block): per lane
    its row, parts and pivot position, per lower entry its position, column k and (ILU(0)) the
    position of (k, i), −1 where A holds none."""
    s = t * R + tl.arange(0, R)
    live = (s * 0 + t) < N_BLK
    i = tl.load(ROW + s, mask=live, other=-1)
    part = tl.load(PART + s, mask=live, other=0)
    dp = tl.load(DP + s, mask=live, other=0)
    e = s[:, None] * CH + tl.arange(0, CH)[None, :]
    p = tl.load(LP + e, mask=live[:, None], other=-1)
    m = p >= 0
    k = tl.load(LK + e, mask=m, other=0)
    if FACTOR == 1:
        q = tl.load(LQ + e, mask=m, other=-1)
    else:
        q = p
    return i, part, dp, p, k, q


@triton.jit
def _values(VAL, B, i, dp, p, q, FACTOR: tl.constexpr):
    """What a block's rows read that no row writes: a_ik, (ILU(0)) a_ki, a_ii and b_i."""
    ok = i >= 0
    m = p >= 0
    a_ik = tl.load(VAL + p, mask=m, other=0.0)
    if FACTOR == 1:
        a_ki = tl.load(VAL + q, mask=m & (q >= 0), other=0.0)
    else:
        a_ki = a_ik
    a_ii = tl.load(VAL + dp, mask=ok, other=1.0)
    b = tl.load(B + i, mask=ok, other=0.0)
    return a_ik, a_ki, a_ii, b


@triton.constexpr_function
def _pair_asm(bits):
    """(PTX, constraints) of _store_pair for floats of `bits` bits: the pair by one st.global.v2
    where the lane runs both rows ($4 = 3), else its half alone."""
    t, c, off = ("f64", "d", 8) if bits == 64 else ("f32", "f", 4)
    return ("{ .reg .pred p, q, r; setp.eq.s32 p, $4, 3; setp.eq.s32 q, $4, 1; setp.eq.s32 r, $4, 2; "
            f"@p st.global.v2.{t} [$1], {{$2, $3}}; @q st.global.{t} [$1], $2; @r st.global.{t} [$1+{off}], $3; "
            "mov.u32 $0, 0; }", f"=r,l,{c},{c},r")


@triton.jit
def _store_pair(PX, i, piv, x, part, PS: tl.constexpr, PTX: tl.constexpr):
    """PX[PS·i] = piv (IC(0): 1/l_ii) where the lane runs the factor row, PX[PS·i + 1] = x where it runs the solve
    row: both by one st.global.v2 (a [R, 2] tl.store spreads over the warp's threads, not
    vectorized), else the one half. The interpreter takes tl.store."""
    if PTX:
        ASM: tl.constexpr = _pair_asm(piv.dtype.primitive_bitwidth)
        tl.inline_asm_elementwise(ASM[0], ASM[1], [(PX + PS * i).to(tl.int64, bitcast=True), piv, x, part],
                                  dtype=tl.int32, is_pure=False, pack=1)
    else:
        o = tl.arange(0, 2)[None, :]
        want = tl.where(o == 0, (part[:, None] & 1) != 0, (part[:, None] & 2) != 0)
        tl.store(PX + PS * i[:, None] + o, tl.where(o == 0, piv[:, None], x[:, None]), mask=want & (i[:, None] >= 0))


@triton.jit
def _row(LU, X, PX, i, part, dp, p, k, a_ik, a_ki, a_ii, b, SENT: tl.constexpr, FACTOR: tl.constexpr,
         PS: tl.constexpr, PTX: tl.constexpr):
    """A block's rows once their values are read: the pairs (pivot, x_k) of their rows k polled
    until neither half holds the sentinel (IC(0)'s pivot half holds 1/l_kk), the row computed, its
    parts stored (the pair first).
    A factor row apart from its solve row waits for the pivots only: x_k may come after it in the
    joint DAG (wavefront schedules put every solve row a level below its factor row), and it
    stores no x."""
    m = p >= 0
    o = tl.arange(0, 2)[None, None, :]
    at = PS * k[:, :, None] + o
    mm = m[:, :, None] & (o >= 0)         # both halves loaded, so that the load stays one v2
    need = mm & ((o == 0) | ((part & 2) != 0)[:, None, None])   # a factor row apart waits for no x_k
    ux = tl.load(PX + at, mask=mm, other=1.0, volatile=True)
    while _pending(ux, at, need, 0, SENT) != 0:
        ux = tl.load(PX + at, mask=mm, other=1.0, volatile=True)
    u, xk = tl.split(ux)
    xk = tl.where((part & 2)[:, None] != 0, xk, 0.0)   # a factor row apart may have read the sentinel
    if FACTOR == 1:
        l_ik = _div(a_ik, tl.where(m, u, 1.0))
    else:
        l_ik = a_ik * u                     # an IC(0) pair holds 1/l_kk
    r = b - tl.sum(tl.where(m, l_ik * xk, 0.0), 1)
    if FACTOR == 1:
        piv = a_ii - tl.sum(tl.where(m, l_ik * a_ki, 0.0), 1)
        x = r
        half = piv
    else:
        rest = a_ii - tl.sum(tl.where(m, l_ik * l_ik, 0.0), 1)
        half = tl.math.rsqrt(rest)          # NaN or ∞ past a breakdown, which LU's pivot reports
        x = r * half
    _store_pair(PX, i, half, x, part, PS, PTX)
    if FACTOR == 2:
        piv = ic_pivot(rest)                # after the pair's store: off the chain of rows
    fac = (part & 1) != 0
    tl.store(LU + p, l_ik, mask=m & fac[:, None])
    tl.store(LU + dp, piv, mask=fac)
    tl.store(X + i, x, mask=(part & 2) != 0)


@triton.jit
def _lean(ROW, PART, DP, LP, LK, LQ, VAL, B, LU, X, PX, N_BLK, R: tl.constexpr, CH: tl.constexpr,
          SENT: tl.constexpr, FACTOR: tl.constexpr, PS: tl.constexpr, PTX: tl.constexpr):
    """Program p of P runs blocks p, p + P, … of N_BLK: block t + 2P's tables and block t + P's values are
    loaded while block t waits and works. VAL: A's values (tril(A)'s for IC(0)); LU: the factor
    written; X: x; PX: the pairs, the sentinel until stored. The programs always stride and poll
    without a nap, so the kernel takes none of LOOP, NAP and STRIDE (_launch_claimed)."""
    P = tl.num_programs(0)
    t = tl.program_id(0)
    i0, pt0, dp0, p0, k0, q0 = _tables(ROW, PART, DP, LP, LK, LQ, t, N_BLK, R, CH, FACTOR)
    a_ik, a_ki, a_ii, b = _values(VAL, B, i0, dp0, p0, q0, FACTOR)
    i1, pt1, dp1, p1, k1, q1 = _tables(ROW, PART, DP, LP, LK, LQ, t + P, N_BLK, R, CH, FACTOR)
    for _ in range(0, tl.cdiv(N_BLK - t, P)):
        i2, pt2, dp2, p2, k2, q2 = _tables(ROW, PART, DP, LP, LK, LQ, t + 2 * P, N_BLK, R, CH, FACTOR)
        a_ik1, a_ki1, a_ii1, b1 = _values(VAL, B, i1, dp1, p1, q1, FACTOR)
        _row(LU, X, PX, i0, pt0, dp0, p0, k0, a_ik, a_ki, a_ii, b, SENT, FACTOR, PS, PTX)
        i0, pt0, dp0, p0, k0, q0 = i1, pt1, dp1, p1, k1, q1
        i1, pt1, dp1, p1, k1, q1 = i2, pt2, dp2, p2, k2, q2
        a_ik, a_ki, a_ii, b = a_ik1, a_ki1, a_ii1, b1
        t += P


def lean_plan(schedule, mats, tables, R, tickets, ties, fuse_rows, device):
    """(blocks, the tables on the device, CH, fused rows): ticket_blocks' blocks (ties `ties`) of
    the joint DAG, with fuse_rows the rows the schedule fuses merged (fused_rows), as lanes of R
    (ROW, PART: FAC | SOL, DP: the pivot's position) and CH lower entries a lane (LP, LK, LQ; −1
    padding), for a pattern whose updates all land on a diagonal (RowTables.updates_only_diagonal,
    which prepare checks). Depends on the pattern only."""
    n1 = tables.n1
    blk_ptr, seq = ticket_cut(schedule, mats, R, tickets, fuse_rows, ties=ties)
    fuse = fused_rows(schedule, mats) if fuse_rows else np.full(n1, -1)
    B = len(blk_ptr) - 1
    slot = np.repeat(np.arange(B) * R - blk_ptr[:-1], np.diff(blk_ptr)) + np.arange(len(seq))
    row = np.where(seq < n1, seq, seq - n1)
    part = np.where(seq < n1, FAC | np.where(fuse[np.minimum(seq, n1 - 1)] >= 0, SOL, 0), SOL)
    # each row's lower entries, which come first in its sorted row: position, column and (ILU(0))
    # the position of (k, i), which the step's one update pair reads (its target is (i, i))
    indptr, indices = (np.asarray(a, dtype=np.int64) for a in tables.factor_pattern)
    owner = dags.row_ids(indptr)
    low = np.flatnonzero(indices < owner)
    r, c = owner[low], low - indptr[owner[low]]
    CH = max(1, triton.next_power_of_2(tables.most_lower))
    by_row = {name: np.full((n1, CH), -1, np.int64) for name in ("lp", "lk", "lq")}
    by_row["lp"][r, c], by_row["lk"][r, c] = low, indices[low]
    if tables.factor == ILU:
        up = tables.upd_ptr.astype(np.int64)
        paired = up[low + 1] > up[low]
        by_row["lq"][r[paired], c[paired]] = tables.upd_b[up[low[paired]]]
    S = B * R
    host = {"row": np.full(S, -1, np.int64), "part": np.zeros(S, np.int64), "dp": np.zeros(S, np.int64)}
    host["row"][slot], host["part"][slot], host["dp"][slot] = row, part, tables.pivot_at[row]
    for name, t in by_row.items():           # a row apart from its solve row has two lanes
        host[name] = np.full((S, CH), -1, np.int64)
        host[name][slot] = t[row]
    dev = rows.to_device({k: v.ravel().astype(np.int32) for k, v in host.items()}, device)
    return B, dev, CH, int((part == FAC | SOL).sum())


def pair_stride(nbytes, dtype) -> int:
    """Entries from one row's pair to the next's in PX for pairs `nbytes` apart (a power of two,
    which keeps each pair aligned for its v2 store): the pair at least."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 1 or nbytes & (nbytes - 1):
        raise ValueError(f"the bytes between lean pairs must be a power of two, got {nbytes!r}")
    return max(2, nbytes // dtype.itemsize)


def lean_slots(vector, stride, address=None):
    """One call's VEC of the lean rows, [b | x | the pairs, `stride` entries apart] ((2 + stride)·n
    entries; x where RowTables.out_at puts a factor pair's vector result): the input, then the
    sentinel, written by one kernel (_slots_from; with `address`, the input read where it says, as
    t3's graph replays do)."""
    return _slots_from(vector, (2 + stride) * vector.shape[0], address=address)


def launch_lean(run, lu, vec):
    """The lean rows' launch (run: a Prepared with a lean plan) on LU (A's values wherever no row
    writes) and VEC (lean_slots)."""
    B, dev, CH, _ = run.plan
    n = run.tables.n1
    if B:
        _launch_claimed(_lean, run, B,
                        (dev["row"], dev["part"], dev["dp"], dev["lp"], dev["lk"], dev["lq"], run.values,
                         vec[:n], lu, vec[n:2 * n], vec[2 * n:], B),
                        dict(R=run.block_rows, CH=CH, SENT=SENTINEL[vec.dtype], FACTOR=run.tables.factor,
                             PS=run.pair_stride, PTX=not interpreting(), num_warps=1))


def run_lean(run, vector):
    """One call of the lean rows, launched as it comes (t3 replays a graph of it after the first,
    replays_graph): the factor (A's values where no row writes), x and the pairs, then the results
    and their pivots' test (rows.results)."""
    lu = run.values.clone()
    vec = lean_slots(vector.contiguous(), run.pair_stride)
    launch_lean(run, lu, vec)
    return rows.results(run.tables, run.dev, lu, rows.vector_outs(run.tables, vec))
