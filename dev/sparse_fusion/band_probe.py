"""Bands: a triangular solve (and a vector pair) whose rows are cut into bands of consecutive
rows, one program a band, the band's own dependences kept inside the program. A probe, not
package code.

Why. t3's dataflow executor pays one dependence hop — a store, then a poll on another SM that
sees it — for every level of the joint DAG: 0.5–0.6 µs, so the 27-point grid's 443 levels take
0.29 ms and its vector pairs stay 2–4 % short of 4× cuSPARSE (docs/sparse_fusion_log.md). In
natural order a grid's rows that depend on each other mostly lie in one band of consecutive
rows (a plane of the 3D grids, a strip of lines of the 2D one). If one program runs a band, it
walks the band's own levels (its *steps*) in order with a barrier between them, and only the
edges between bands go through L2 as hops. The critical path then costs about

    (levels) · c_step + (band crossings on it) · (hop + prefetch slack),

and that beats levels · hop only if a step inside a program, c_step, is well below a hop. A
step's work is short (one row a lane, a dot product of at most 13 entries on the 27-point grid,
a quotient); what can make it long is any round trip to L2 on its chain. So:

  * the band's own x_j are read after the barrier by a plain load (INTRA 0: the SM's L1 may hold
    them, since this program stored them), by `.cg` (1) or volatile (2) loads, to measure which;
  * the x_j written by other bands are read K steps ahead by volatile loads (a ring of K
    register buffers, unrolled), and polled again at their step only where they still hold the
    sentinel;
  * the step tables are read-only: with PF > 0 a `prefetch.global.L1` brings step s + PF's
    lines into L1 at step s (GPU only), so a step's own table loads hit L1.

Every operand, the band's own included, is checked against the sentinel (a signalling NaN that
no arithmetic produces) and polled through L2 until it is not: the result is right whatever the
caches do, and a stale L1 line costs time, not correctness. A band depends only on bands before
it (the matrix is lower triangular and bands are ranges of rows), and program g of G runs bands
g, g + G, … in order, all G resident: the lowest unfinished band never waits on anything
unfinished, so the programs finish.

A vector pair runs both kernels in one launch (pair_plans, _pair_bands): one program a band,
kernel 1's bands first, an SpMV's bands shorter (its rows wait on nothing of their own band),
an upper solve's bands numbered from the bottom up.

    PYTHONPATH=$PWD python dev/sparse_fusion/band_probe.py check          # interpreter, small grids
    PYTHONPATH=$PWD python dev/sparse_fusion/band_probe.py model          # modelled times, CPU
    PYTHONPATH=$PWD python dev/sparse_fusion/band_probe.py bench OUT.json [solve|pairs]
                                                            # GPU: variants (or pairs), t3, cuSPARSE
    PYTHONPATH=$PWD python dev/sparse_fusion/band_probe.py sass OUT [K INTRA PF LANES C WARPS DEADLINE TREE]
                                                            # Triton 3.6, CPU: sm_90 SASS, PTX, TTGIR
"""
import json
import os
import sys
import time

import numpy as np
import scipy.sparse as sp
import torch
import triton
import triton.language as tl

from tiers import sparse_dags as dags
from tiers import validation
from tiers.bench.sparse_fusion import make_matrix
from tiers.kernels.sparse_fusion_executors.bands import (APART, BAND_NAP, KIND_SHIFT, OWN, _APART, _OWN, _await,
                                                         _band_span, _clock, _divided, _look_apart, _record)
from tiers.kernels.sparse_fusion_executors.launch import SENTINEL
from tiers.kernels.sparse_fusion_executors.records import _ask_l1
from tiers.kernels.sparse_fusion_executors.tickets import cut_blocks

SENT = SENTINEL[torch.float64]   # t3's float64 sentinel bits: every output starts as it


# --------------------------------------------------------------------------------------------- plan



class Plan:
    """One kernel's bands, steps and records. Its rows write X[out_at + r] and read X at their
    entries' positions (an output of either kernel, or an input past every output). Steps of
    every band, lane by lane: a record of C slots a row, POS / VAL / KIND stored [S, C, LANES]
    (a slot of every lane side by side) — the entries (position, coefficient; OWN: a row of the
    same band, or an input, read by a plain load; APART: a row of another band or of the other
    kernel, read ahead) — and per lane ROW (−1: no row; else the X position written), D and RD
    (the divisor, its reciprocal) [S, LANES]. SP [P + 1]: band p's steps SP[p]:SP[p+1], a
    multiple of K. `band`: each row's band; a band's rows may depend only on bands of lower
    number (of this kernel) and on the other kernel's rows."""

    def __init__(self, indptr, pos, coef, d, out_at, n_out, band, lanes, K):
        n = len(indptr) - 1
        if max(n_out, int(pos.max(initial=0)) + 1) > 1 << KIND_SHIFT:
            raise ValueError("a position must fit in KIND_SHIFT bits")
        v = dags.row_ids(indptr)
        pos = pos.astype(np.int64)
        mine = (pos >= out_at) & (pos < out_at + n)
        own = mine & (band[np.where(mine, pos - out_at, 0)] == band[v])
        apart = (pos < n_out) & ~own
        u = pos[own] - out_at
        step_level = dags.wavefront_levels(dags.dag_from_edges(u, v[own], n))
        depth = int(step_level.max()) + 1
        order = np.lexsort((np.arange(n), step_level, band))
        # a step per LANES rows of one band's level, as the package cuts a level into blocks
        step_in_all, lane = cut_blocks(band[order] * depth + step_level[order], lanes)   # before padding
        new_step = lane == 0
        P = int(band.max()) + 1
        steps = np.bincount(band[order][new_step], minlength=P)
        K1 = max(K, 1)
        padded = -(-steps // K1) * K1
        SP = np.zeros(P + 1, dtype=np.int64)
        np.cumsum(padded, out=SP[1:])
        unpadded = np.zeros(P + 1, dtype=np.int64)
        np.cumsum(steps, out=unpadded[1:])
        step = step_in_all - unpadded[band[order]] + SP[band[order]]
        S = int(SP[-1])
        self.n, self.P, self.S, self.lanes, self.K, self.depth = n, P, S, lanes, K, depth
        self.steps_real = int(steps.sum())
        self.ROW = np.full((S, lanes), -1, dtype=np.int32)
        self.ROW[step, lane] = out_at + order
        counts = np.diff(indptr)
        C = 1 << (int(counts.max()) - 1).bit_length()
        self.C = C
        at = np.empty(n, dtype=np.int64)
        at[order] = step * lanes + lane                          # a row's (step, lane) slot
        k = np.arange(len(pos)) - np.repeat(indptr[:-1], counts)
        slot = at[v] * C + k
        self.POS = np.zeros(S * lanes * C, dtype=np.int32)
        self.VAL = np.zeros(S * lanes * C)
        self.KIND = np.zeros(S * lanes * C, dtype=np.int8)
        self.POS[slot] = pos
        self.VAL[slot] = coef
        self.KIND[slot] = np.where(apart, APART, OWN)
        self.D = np.ones((S, lanes))
        self.D[step, lane] = d[order]
        self.RD = 1.0 / self.D
        # stored [S, C, LANES]: a slot of the lanes' records side by side, so that the tables'
        # loads are contiguous along the lanes, as the gathers' layout is (one thread a row)
        lanes_last = lambda a: np.ascontiguousarray(a.reshape(S, lanes, C).transpose(0, 2, 1)).reshape(-1)
        self.POS, self.VAL, self.KIND = lanes_last(self.POS), lanes_last(self.VAL), lanes_last(self.KIND)
        self.SP = SP
        self.edges_own, self.edges_apart = int(own.sum()), int(apart.sum())

    @classmethod
    def solve(cls, L, band_rows, lanes, K):
        """x = L⁻¹b, L lower triangular: X = [x (n) | b (n)], a row's entries −L_ij x_j and 1·b_i."""
        L = sp.csr_matrix(L)
        L.sort_indices()
        n = L.shape[0]
        return cls(*_solve_rows(L, out_at=0, rhs_at=n, lower=True), out_at=0, n_out=n,
                   band=np.arange(n) // band_rows, lanes=lanes, K=K)

    def model_us(self, c_step, hop):
        """The critical path if a step costs c_step µs after its band's previous step and an
        operand of another band arrives `hop` µs after its step ends (prefetch assumed deep
        enough): the time the last step ends."""
        return model_us([self], c_step, hop)

    def stats(self):
        return {"n": self.n, "bands": self.P, "steps": self.S, "steps_unpadded": self.steps_real,
                "band_levels_max": self.depth, "lanes": self.lanes, "C": self.C, "K": self.K,
                "edges_own": self.edges_own, "edges_apart": self.edges_apart}


def _solve_rows(T, out_at, rhs_at, lower):
    """(indptr, positions, coefficients, divisors) of x = T⁻¹ r, T triangular CSR with sorted
    indices, x_i written at out_at + i, r_i read at rhs_at + i: entries −T_ij x_j, then 1·r_i."""
    n = T.shape[0]
    validation.check_triangle("T", T, lower)
    validation.check_diagonal("T", T, nonzero=True)
    rows, cols = dags.row_ids(T.indptr), T.indices.astype(np.int64)
    diag = cols == rows
    d = np.zeros(n)
    d[rows[diag]] = T.data[diag]
    off = ~diag
    counts = np.bincount(rows[off], minlength=n) + 1
    indptr = np.r_[0, np.cumsum(counts)]
    pos = np.empty(indptr[-1], dtype=np.int64)
    coef = np.empty(indptr[-1])
    last = indptr[1:] - 1
    keep = np.ones(indptr[-1], dtype=bool)
    keep[last] = False
    pos[keep], coef[keep] = out_at + cols[off], -T.data[off]
    pos[last], coef[last] = rhs_at + np.arange(n), 1.0
    return indptr, pos, coef, d


def _spmv_rows(A, in_at):
    """(indptr, positions, coefficients, divisors) of y = A·v, v_j read at in_at + j."""
    return A.indptr.astype(np.int64), in_at + A.indices.astype(np.int64), A.data.astype(np.float64), \
        np.ones(A.shape[0])


def pair_plans(pair, mats, band_rows, lanes, K, spmv_split=8):
    """The two kernels of a vector pair as bands over X = [kernel 1's outputs (n) | kernel 2's
    (n) | the input (n)]: (plan 1, plan 2). An upper solve's bands are numbered from the bottom
    up, so that a band depends only on bands of lower number. An SpMV's rows wait on nothing of
    their own band, so its bands are spmv_split times shorter (more programs, shorter walks)."""
    n = mats[0].shape[0]
    out2, inp = n, 2 * n
    bands = np.arange(n) // band_rows
    up = bands.max() - bands
    short = np.arange(n) // max(lanes, band_rows // spmv_split)
    csr = [sp.csr_matrix(M) for M in mats]
    for M in csr:
        M.sort_indices()
    if pair == "sptrsv_spmv":
        first = _solve_rows(csr[0], 0, inp, True), bands
        second = _spmv_rows(csr[1], 0), short
    elif pair == "spmv_sptrsv":
        first = _spmv_rows(csr[0], inp), short
        second = _solve_rows(csr[1], out2, 0, True), bands
    elif pair == "sptrsv_sptrsv":
        first = _solve_rows(csr[0], 0, inp, True), bands
        second = _solve_rows(csr[1], out2, 0, False), up
    else:
        raise ValueError(f"not a vector pair: {pair}")
    return (Plan(*first[0], out_at=0, n_out=2 * n, band=first[1], lanes=lanes, K=K),
            Plan(*second[0], out_at=out2, n_out=2 * n, band=second[1], lanes=lanes, K=K))


def model_us(plans, c_step, hop):
    """Plan.model_us over the bands of several plans that share X, each plan's bands depending
    only on its own of lower number and on the plans before it."""
    top = max(int(p.ROW.max()) for p in plans) + 1
    size = max(top, max(int(p.POS.max()) for p in plans) + 1)
    done = np.zeros(size)
    end = 0.0
    for plan in plans:
        ROW, POS, KIND = plan.ROW, plan.POS.reshape(plan.S, -1), plan.KIND.reshape(plan.S, -1)   # a step's slots
        for p in range(plan.P):
            t = 0.0
            for s in range(plan.SP[p], plan.SP[p + 1]):
                apart = POS[s][KIND[s] == APART]
                t = max(t, done[apart].max() + hop - c_step if apart.size else 0.0) + c_step
                r = ROW[s]
                done[r[r >= 0]] = t
            end = max(end, t)
    return end


# ------------------------------------------------------------------------------------------- kernel

@triton.jit
def _prefetch_step(POS, VAL, s, LANES: tl.constexpr, C: tl.constexpr):
    """Step s's tables into L1, one prefetch per 128-byte line (GPU only)."""
    _ask_l1(POS + s * C * LANES + tl.arange(0, C * LANES // 32) * 32)
    _ask_l1(VAL + s * C * LANES + tl.arange(0, C * LANES // 16) * 16)


@triton.jit
def _step(X, POS, VAL, ROW, D, RD, STAMP, s, lane, c, xa, t0, LANES: tl.constexpr, C: tl.constexpr,
          INTRA: tl.constexpr, BARRIER: tl.constexpr, STAMPS: tl.constexpr, SENT: tl.constexpr,
          DEADLINE_NS: tl.constexpr, TREE: tl.constexpr, NAP: tl.constexpr):
    """One step: every lane's row from its record, its other bands' operands xa read earlier."""
    pos, kind, a, row, d, rd = _record(POS, VAL, ROW, D, RD, s, lane, c, LANES, C)
    one = tl.arange(0, LANES)
    own = kind == _OWN
    if INTRA == 0:
        xo = tl.load(X + pos, mask=own, other=0)
    elif INTRA == 1:
        xo = tl.load(X + pos, mask=own, other=0, cache_modifier=".cg")
    else:
        xo = tl.load(X + pos, mask=own, other=0, volatile=True)
    xb = _await(tl.where(own, xo, xa), X, pos, own | (kind == _APART), SENT, NAP, t0, DEADLINE_NS)
    xb = xb.to(tl.float64, bitcast=True)
    if TREE and C >= 8:
        # the row's products summed as 4 interleaved chains, then across them: a shorter chain
        # of dependent DFMAs than one running sum over C slots
        r = tl.sum(tl.sum(tl.reshape(a * xb, [LANES, 4, C // 4]), 2), 1)
    else:
        r = tl.sum(a * xb, 1)
    q = _divided(r, d, rd)
    tl.store(X + row, q.to(tl.int64, bitcast=True), mask=row >= 0)
    if BARRIER:
        tl.debug_barrier()
    if STAMPS:
        tl.store(STAMP + s + one, _clock() + one * 0, mask=one == 0)


@triton.jit
def _walk_band(X, POS, VAL, ROW, D, RD, SP, STAMP, p, t0, LANES: tl.constexpr, C: tl.constexpr, K: tl.constexpr,
               PF: tl.constexpr, INTRA: tl.constexpr, BARRIER: tl.constexpr, STAMPS: tl.constexpr,
               SENT: tl.constexpr, DEADLINE_NS: tl.constexpr, TREE: tl.constexpr, NAP: tl.constexpr):
    """Band p's steps in order, the other bands' operands of step s + K read at step s (K = 0:
    at step s)."""
    lane, c, s0, s1 = _band_span(SP, p, LANES, C)
    if K == 0:
        for s in range(s0, s1):
            if PF > 0:
                _prefetch_step(POS, VAL, s + PF, LANES, C)
            xa = _look_apart(X, POS, s, lane, c, LANES, C)
            _step(X, POS, VAL, ROW, D, RD, STAMP, s, lane, c, xa, t0, LANES, C, INTRA, BARRIER, STAMPS, SENT,
                  DEADLINE_NS, TREE, NAP)
    else:
        ring = ()
        for j in tl.static_range(K):
            ring = ring + (_look_apart(X, POS, s0 + j, lane, c, LANES, C),)
        for s in range(s0, s1, K):
            for j in tl.static_range(K):
                if PF > 0:
                    _prefetch_step(POS, VAL, s + j + PF, LANES, C)
                _step(X, POS, VAL, ROW, D, RD, STAMP, s + j, lane, c, ring[j], t0, LANES, C, INTRA, BARRIER,
                      STAMPS, SENT, DEADLINE_NS, TREE, NAP)
                # read after the step has used ring[j], so that the load can land in ring[j]'s
                # registers: issued before, it would need its own, and the loop's back edge
                # would copy it there, waiting for it (seen in the sm_90 SASS)
                nxt = tl.minimum(s + j + K, s1 - 1)       # past the band's end: read its last step again
                ring = ring[:j] + (_look_apart(X, POS, nxt, lane, c, LANES, C),) + ring[j + 1:]


@triton.jit
def _start(DEADLINE_NS: tl.constexpr):
    t0 = 0
    if DEADLINE_NS > 0:
        t0 = tl.max(_clock() + tl.zeros([32], tl.int64), 0)
    return t0


@triton.jit
def _bands(X, POS, VAL, ROW, D, RD, SP, STAMP, P, G,
           LANES: tl.constexpr, C: tl.constexpr, K: tl.constexpr, PF: tl.constexpr, INTRA: tl.constexpr,
           BARRIER: tl.constexpr, STAMPS: tl.constexpr, SENT: tl.constexpr, DEADLINE_NS: tl.constexpr = 0,
           TREE: tl.constexpr = 0, NAP: tl.constexpr = 0):
    """One kernel's bands: program g runs bands g, g + G, … (all G resident)."""
    t0 = _start(DEADLINE_NS)
    for p in range(tl.program_id(0), P, G):
        _walk_band(X, POS, VAL, ROW, D, RD, SP, STAMP, p, t0, LANES, C, K, PF, INTRA, BARRIER, STAMPS, SENT,
                   DEADLINE_NS, TREE, NAP)


@triton.jit
def _pair_bands(X, POS1, VAL1, ROW1, D1, RD1, SP1, POS2, VAL2, ROW2, D2, RD2, SP2, STAMP, P1,
                LANES: tl.constexpr, C1: tl.constexpr, K1: tl.constexpr, C2: tl.constexpr, K2: tl.constexpr,
                PF: tl.constexpr, INTRA: tl.constexpr, BARRIER: tl.constexpr, SENT: tl.constexpr,
                DEADLINE_NS: tl.constexpr = 0, TREE: tl.constexpr = 0, NAP: tl.constexpr = 0):
    """Both kernels of a pair in one launch, one program a band, all resident: programs below P1
    run kernel 1's bands, the others kernel 2's (each kernel with its own record width and ring)."""
    t0 = _start(DEADLINE_NS)
    g = tl.program_id(0)
    if g < P1:
        _walk_band(X, POS1, VAL1, ROW1, D1, RD1, SP1, STAMP, g, t0, LANES, C1, K1, PF, INTRA, BARRIER, False,
                   SENT, DEADLINE_NS, TREE, NAP)
    else:
        _walk_band(X, POS2, VAL2, ROW2, D2, RD2, SP2, STAMP, g - P1, t0, LANES, C2, K2, PF, INTRA, BARRIER, False,
                   SENT, DEADLINE_NS, TREE, NAP)


class Runner:
    """The plans' tables on a device and a launch over X = [outputs | input]: one plan (a solve,
    strided programs) or a pair's two (one program a band). Calling it with the input returns
    the outputs (n each)."""

    def __init__(self, plans, device, K=None, PF=0, INTRA=0, BARRIER=1, programs=None, stamps=False, warps=None,
                 deadline_ns=0, tree=0, nap=0):
        t = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(device)
        self.plans, self.device = plans, device
        self.tables = []
        for plan in plans:
            pad = (PF + 1) * plan.lanes * plan.C                  # prefetches past the last step stay in bounds
            word = plan.POS | (plan.KIND.astype(np.int32) << KIND_SHIFT)
            self.tables.append((t(np.r_[word, np.zeros(pad, np.int32)]), t(np.r_[plan.VAL, np.zeros(pad)]),
                                t(plan.ROW), t(plan.D), t(plan.RD), t(plan.SP)))
        self.n_out = sum(plan.n for plan in plans)
        self.n_in = plans[0].n
        self.X = torch.empty(self.n_out + self.n_in, dtype=torch.int64, device=device)
        self.STAMP = torch.zeros(plans[0].S + 1, dtype=torch.int64, device=device)
        Ks = [plan.K if K is None else K for plan in plans]
        for plan, k in zip(plans, Ks):
            assert k == 0 or plan.K % k == 0
        lanes = plans[0].lanes
        common = dict(PF=PF, INTRA=INTRA, BARRIER=BARRIER, SENT=SENT, DEADLINE_NS=deadline_ns, TREE=tree, NAP=nap,
                      num_warps=warps or max(1, lanes // 32))
        if len(plans) == 1:
            self.G = min(plans[0].P, programs or plans[0].P)
            self.meta = dict(LANES=lanes, C=plans[0].C, K=Ks[0], STAMPS=stamps, **common)
        else:
            assert programs is None and not stamps
            self.G = plans[0].P + plans[1].P
            self.meta = dict(LANES=lanes, C1=plans[0].C, K1=Ks[0] if plans[0].depth > 1 else 0,
                             C2=plans[1].C, K2=Ks[1] if plans[1].depth > 1 else 0, **common)

    def __call__(self, v):
        self.X[: self.n_out].fill_(SENT)
        self.X[self.n_out:] = v.view(torch.int64)
        if len(self.plans) == 1:
            _bands[(self.G,)](self.X, *self.tables[0], self.STAMP, self.plans[0].P, self.G, **self.meta)
        else:
            _pair_bands[(self.G,)](self.X, *self.tables[0], *self.tables[1], self.STAMP, self.plans[0].P, **self.meta)
        out = self.X[: self.n_out].view(torch.float64)
        return [out[i * self.n_in:(i + 1) * self.n_in] for i in range(len(self.plans))]


# ------------------------------------------------------------------------------------------- checks

def check():
    """Every variant against SciPy on small grids, under the interpreter: programs run one after
    another, so one program a band (a program striding over bands would spin on a band of a
    program not yet run), and every other band's operand is there at its first read."""
    os.environ.setdefault("TRITON_INTERPRET", "1")
    from scipy.sparse.linalg import spsolve_triangular
    from tiers.bench import sparse_fusion as bsf
    rng = np.random.default_rng(0)
    cases = [("poisson2d", 12, 36, 8), ("poisson3d", 5, 25, 8), ("poisson3d27", 5, 25, 8),
             ("poisson3d27", 4, 10, 4), ("poisson2d", 9, 20, 4)]
    for name, k, band_rows, lanes in cases:
        A = make_matrix(name, k)
        A = (A + sp.diags(rng.random(A.shape[0]))).tocsr()          # not only the grid's values
        L = sp.tril(A).tocsr()
        b = rng.random(L.shape[0]) + 0.5
        ref = spsolve_triangular(L, b, lower=True)
        for K in (0, 1, 2, 4):
            plan = Plan.solve(L, band_rows, lanes, K)
            for INTRA, tree in ((0, 0), (1, 0), (2, 0), (0, 1)):
                x = Runner([plan], "cpu", INTRA=INTRA, tree=tree)(torch.from_numpy(b))[0].numpy()
                err = np.linalg.norm(x - ref) / np.linalg.norm(ref)
                assert err < 1e-13, (name, k, K, INTRA, err)
        print("ok", name, k, band_rows, lanes, plan.stats(), flush=True)
        for pair in ("sptrsv_spmv", "spmv_sptrsv", "sptrsv_sptrsv"):
            mats = bsf.operands(pair, A)
            refs = bsf.reference(pair, mats, b)
            for K in (0, 2):
                outs = Runner(pair_plans(pair, mats, band_rows, lanes, K), "cpu")(torch.from_numpy(b))
                for out, ref in zip(outs, refs):
                    err = np.linalg.norm(out.numpy() - ref) / np.linalg.norm(ref)
                    assert err < 1e-13, (name, k, pair, K, err)
        print("ok", name, k, "pairs", flush=True)
    # a 6 × 6 grid in bands of two lines: the 4 lines after the first two each read 6 entries of
    # the line before, another band's every second line
    plan = Plan.solve(sp.tril(make_matrix("poisson2d", 6)).tocsr(), 12, 4, 1)
    assert (plan.KIND == APART).sum() == plan.edges_apart == 2 * 6 and plan.P == 3
    print("check passed")


def model():
    """Modelled critical paths (µs) on the benchmark grids, CPU only: the bands' steps at
    c_step against the dataflow executor's hop."""
    for name, k, band_rows, lanes in [("poisson3d27", 64, 4096, 32), ("poisson3d", 100, 10000, 128),
                                      ("poisson2d", 1000, 32000, 32)]:
        L = sp.tril(make_matrix(name, k)).tocsr()
        plan = Plan.solve(L, band_rows, lanes, 4)        # padded as the bench's plans are
        for c_step in (0.1, 0.2, 0.3, 0.4):
            print(name, plan.stats(), "c_step", c_step, "hop 0.6:", round(plan.model_us(c_step, 0.6), 1), "us",
                  flush=True)


def sass(out, K="4", INTRA="0", PF="8", lanes="32", C="16", warps="1", deadline="0", tree="0"):
    """_bands compiled for sm_90 on a CPU (Triton 3.6, no GPU): registers, spills, SASS beside OUT."""
    import subprocess
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    sys.path.insert(0, os.path.dirname(__file__))
    from sm90_registers import BIN, usage
    meta = dict(LANES=int(lanes), C=int(C), K=int(K), PF=int(PF), INTRA=int(INTRA), BARRIER=1, STAMPS=False, SENT=SENT,
                DEADLINE_NS=int(deadline), TREE=int(tree))
    sig = {"X": "*i64", "POS": "*i32", "VAL": "*fp64", "ROW": "*i32", "D": "*fp64", "RD": "*fp64",
           "SP": "*i64", "STAMP": "*i64", "P": "i32", "G": "i32"}
    sig.update({k: "constexpr" for k in meta})
    k = triton.compile(ASTSource(_bands, sig, meta), target=GPUTarget("cuda", 90, 32),
                       options={"num_warps": int(warps)})
    for ext in ("ptx", "ttgir"):
        with open(out + "." + ext, "w") as f:
            f.write(k.asm[ext])
    print(meta, *usage(k, out + ".cubin"))
    sass = subprocess.run([os.path.join(BIN, "cuobjdump"), "-sass", out + ".cubin"], capture_output=True, text=True)
    with open(out + ".sass", "w") as f:
        f.write(sass.stdout)


def _naps(variants):
    """The variants as (K, PF, INTRA, warps, TREE, NAP), NAP 0, and again with NAP =
    bands.BAND_NAP where K > 1, PF > 0 and INTRA = 0 (the package's own shape)."""
    return [v + (0,) for v in variants] + [v + (BAND_NAP,) for v in variants if v[0] > 1 and v[1] and not v[2]]


CASES = [  # matrix, size, band rows, lanes a step, variants (K, PF, INTRA, warps, TREE, NAP)
    ("poisson3d27", 64, 4096, 32, _naps([(k, pf, i, w, t) for w, t in ((1, 0), (1, 1), (4, 0)) for k in (0, 1, 2, 4)
                                         for pf in (0, 8) for i in (0, 2)])),
    ("poisson3d", 100, 10000, 128, _naps([(k, pf, i, 4, 0) for k in (0, 1, 2, 4) for pf in (0, 8) for i in (0, 2)])),
    ("poisson2d", 1000, 32000, 32, _naps([(k, pf, i, w, 0) for w in (1, 4) for k in (0, 1, 2, 4) for pf in (0, 8)
                                          for i in (0, 2)])),
]


PAIR_VARIANTS = {"poisson3d27": _naps([(2, 8, 0, 1, 1), (2, 8, 0, 4, 0), (4, 8, 0, 1, 1)]),
                 "poisson3d": _naps([(2, 8, 0, 4, 0), (4, 8, 0, 4, 0)]),
                 "poisson2d": _naps([(2, 8, 0, 1, 0), (4, 8, 0, 1, 0), (2, 8, 0, 4, 0)])}


def _err(outs, refs):
    """The worst relative error of outputs (device arrays) against float64 references."""
    worst = 0.0
    for out, ref in zip(outs, refs):
        got = out.double().cpu().numpy() if hasattr(out, "double") else np.asarray(out.get() if hasattr(out, "get")
                                                                                    else out, np.float64)
        if not np.isfinite(got).all():
            return float("nan")
        worst = max(worst, float(np.linalg.norm(got - ref) / np.linalg.norm(ref)))
    return worst


def bench(out, what="solve"):
    """GPU. what = "solve": every variant of CASES checked against SciPy (X starts as the
    sentinel, so an entry never written fails), then timed (do_bench medians, two passes in
    opposite orders); beside them, in the same process, cuSPARSE's SpSV of the same L (analysis
    once) and t3's dataflow sptrsv_spmv (x = L⁻¹b then A·x; its solve's chain sets its time);
    then the fastest variant once more with a %globaltimer stamp at the end of every step. A call
    is the sentinel's fill of X, the input's copy into X and the launch; c_step_fit_us is the
    step cost at which the model's critical path (Plan.model_us, hop 0.6 µs) takes the best
    variant's time. what = "pairs": the three vector pairs by bands (both kernels in one launch,
    PAIR_VARIANTS), t3 (dataflow, wavefront schedule) and cuSPARSE (SpSV and SpMV, analysis once)
    in the same process, each checked against the float64 reference first."""
    from scipy.sparse.linalg import spsolve_triangular
    from triton.testing import do_bench as timed
    from tiers import fusion_schedules as fs
    from tiers.bench import sparse_fusion as bsf
    from tiers.t3_triton_fused import sparse_fusion as sf
    dev = os.environ.get("BAND_DEVICE", "cuda")       # "cpu": a dry run of this function under the interpreter
    do_bench = timed if dev == "cuda" else lambda f, **kw: (f(), 0.0)[1]
    deadline = 2_000_000_000 if dev == "cuda" else 0  # ns: a stuck poll gives up after 2 s (GPU only)
    res = {"environment": {"device": torch.cuda.get_device_name() if dev == "cuda" else "cpu",
                           "torch": torch.__version__,
                           "triton": triton.__version__, "numpy": np.__version__,
                           "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())},
           "method": bench.__doc__, "what": what, "cases": []}
    rng = np.random.default_rng(0)
    cases = CASES if dev == "cuda" else [(m, k, rows, 8, [v for v in CASES[i][4] if v[1] == 0][:3])
                                         for i, (m, k, rows) in enumerate([("poisson3d27", 5, 25), ("poisson3d", 5, 25),
                                                                          ("poisson2d", 12, 36)])]
    for name, k, band_rows, lanes, variants in cases:
        A = make_matrix(name, k)
        b = rng.random(A.shape[0]) + 0.5
        bt = torch.from_numpy(b).to(dev)
        case = {"matrix": name, "size": k, "band_rows": band_rows}
        if what == "pairs":
            case["pairs"] = []
            for pair in ("sptrsv_spmv", "spmv_sptrsv", "sptrsv_sptrsv"):
                mats = bsf.operands(pair, A)
                refs = bsf.reference(pair, mats, b)
                row = {"pair": pair, "bands": []}
                plans = pair_plans(pair, mats, band_rows, lanes, 4)
                row["model_us"] = {str(c): model_us(plans, c, 0.6) for c in (0.1, 0.2, 0.3)}
                pv = PAIR_VARIANTS[name] if dev == "cuda" else [(0, 0, 0, 1, 0, 0), (2, 0, 0, 1, 0, 0)]
                for K, PF, INTRA, warps, tree, nap_ns in pv:
                    v = {"K": K, "PF": PF, "INTRA": INTRA, "warps": warps, "TREE": tree, "NAP": nap_ns}
                    try:
                        r = Runner(plans, dev, K=K, PF=PF, INTRA=INTRA, warps=warps, tree=tree, deadline_ns=deadline,
                                   nap=nap_ns)
                        v["rel_err"] = _err(r(bt), refs)
                        v["ok"] = bool(v["rel_err"] < 1e-12)
                        if v["ok"]:
                            v["ms"] = do_bench(lambda: r(bt), warmup=25, rep=100, return_mode="median")
                    except Exception as e:                       # noqa: BLE001 — a probe records and goes on
                        v["error"] = f"{type(e).__name__}: {str(e)[:200]}"
                    row["bands"].append(v)
                    print(name, pair, "bands", v, flush=True)
                try:
                    run = sf.prepare(pair, *mats, like=bt, schedule=fs.inspect(pair, *mats, kind="wavefront"),
                                     executor="dataflow")
                    row["t3_err"] = _err(run(bt), refs)
                    row["t3_ms"] = do_bench(lambda: run(bt), warmup=25, rep=100, return_mode="median")
                except Exception as e:                           # noqa: BLE001
                    row["t3_error"] = f"{type(e).__name__}: {str(e)[:200]}"
                if dev == "cuda":
                    try:
                        call = bsf.cupy_call("cusparse", pair, mats, bt)
                        row["cusparse_err"] = _err(call(), refs)
                        row["cusparse_ms"] = do_bench(call, warmup=25, rep=100, return_mode="median")
                    except Exception as e:                       # noqa: BLE001
                        row["cusparse_error"] = f"{type(e).__name__}: {str(e)[:200]}"
                print(name, pair, {key: row[key] for key in row if key != "bands"}, flush=True)
                case["pairs"].append(row)
            res["cases"].append(case)
            with open(out, "w") as f:
                json.dump(res, f, indent=1)
            continue
        L = sp.tril(A).tocsr()
        ref = spsolve_triangular(L, b, lower=True)
        plan = Plan.solve(L, band_rows, lanes, 4)
        case.update({**plan.stats(), "model_us": {str(c): plan.model_us(c, 0.6) for c in (0.1, 0.2, 0.3, 0.4)},
                     "variants": []})
        runners = []
        for K, PF, INTRA, warps, tree, nap_ns in variants:
            r = Runner([plan], dev, K=K, PF=PF, INTRA=INTRA, warps=warps, tree=tree, deadline_ns=deadline, nap=nap_ns)
            v = {"K": K, "PF": PF, "INTRA": INTRA, "warps": warps, "TREE": tree, "NAP": nap_ns,
                 "rel_err": _err(r(bt), [ref])}
            v["ok"] = bool(v["rel_err"] < 1e-12)
            case["variants"].append(v)
            if v["ok"]:
                runners.append((v, r))
            print(name, v, flush=True)
        for rnd, seq in enumerate((runners, runners[::-1])):
            for v, r in seq:
                v[f"ms_{rnd}"] = do_bench(lambda: r(bt), warmup=25, rep=100, return_mode="median")
        for v, _ in runners:
            v["ms"] = min(v["ms_0"], v["ms_1"])
            print(name, v, flush=True)
        if dev == "cuda":
            import cupy
            import cupyx.scipy.sparse as csp
            bc, xc = cupy.asarray(b), cupy.zeros(L.shape[0])
            solve = bsf._CuSpSV(csp.csr_matrix(L), bc, xc, lower=True, unit=False)
            solve()
            case["cusparse_spsv_ms"] = do_bench(solve, warmup=25, rep=100, return_mode="median")
            case["cusparse_err"] = _err([xc], [ref])
        mats = bsf.operands("sptrsv_spmv", A)
        run = sf.prepare("sptrsv_spmv", *mats, like=bt, schedule=fs.inspect("sptrsv_spmv", *mats, kind="wavefront"),
                         executor="dataflow")
        case["t3_err"] = _err(run(bt)[:1], [ref])
        case["t3_sptrsv_spmv_ms"] = do_bench(lambda: run(bt), warmup=25, rep=100, return_mode="median")
        if runners and dev == "cuda":
            v, _ = min(runners, key=lambda t: t[0]["ms"])
            r = Runner([plan], dev, K=v["K"], PF=v["PF"], INTRA=v["INTRA"], warps=v["warps"], tree=v["TREE"],
                       stamps=True, deadline_ns=deadline, nap=v["NAP"])
            r(bt)
            torch.cuda.synchronize()
            st = r.STAMP[: plan.S].cpu().numpy().astype(np.float64) / 1e3      # µs
            SP = plan.SP
            per_step = np.concatenate([np.diff(st[SP[p]:SP[p + 1]]) for p in range(plan.P)])
            case["stamped"] = {**{key: v[key] for key in ("K", "PF", "INTRA", "warps", "TREE", "NAP")},
                               "step_us_median": float(np.median(per_step)),
                               "step_us_p10_p90": [float(np.percentile(per_step, q)) for q in (10, 90)],
                               "band_end_us": [float(st[SP[p + 1] - 1] - st[SP[0]]) for p in range(plan.P)],
                               "band_start_us": [float(st[SP[p]] - st[SP[0]]) for p in range(plan.P)]}
        if runners:
            best = min(v["ms"] for v, _ in runners) * 1e3
            lo, hi = 0.0, 2.0                            # the step cost that the model needs for the best time
            for _ in range(12):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if plan.model_us(mid, 0.6) < best else (lo, mid)
            case["best_us"], case["c_step_fit_us"] = best, (lo + hi) / 2
        print(name, {key: case[key] for key in case if key not in ("variants", "stamped")}, flush=True)
        if "stamped" in case:
            keys = ("K", "PF", "INTRA", "warps", "TREE", "NAP", "step_us_median", "step_us_p10_p90")
            print(name, "stamped", {key: case["stamped"][key] for key in keys}, flush=True)
        res["cases"].append(case)
        with open(out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    {"check": check, "model": model, "sass": sass, "bench": bench}[sys.argv[1]](*sys.argv[2:])
