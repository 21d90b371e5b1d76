"""Bands: a lower-triangular solve whose rows are cut into bands of consecutive rows, one program
a band, the band's own dependences kept inside the program. A probe, not package code.

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

    PYTHONPATH=$PWD python dev/sparse_fusion/band_probe.py check          # interpreter, small grids
    PYTHONPATH=$PWD python dev/sparse_fusion/band_probe.py model          # modelled times, CPU
    PYTHONPATH=$PWD python dev/sparse_fusion/band_probe.py bench OUT.json # GPU: variants, t3, cuSPARSE
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

SENT = 0x7FF00000DEADBEEF    # t3's float64 sentinel (sparse_rows.SENTINEL)
ONE = 0x3FF0000000000000     # 1.0's bits


# --------------------------------------------------------------------------------------------- plan

OWN, APART, RHS = 1, 2, 3    # what a record's slot holds (KIND; 0: nothing)
KIND_SHIFT = 29              # the kernel reads a slot's kind and column as one word: column | kind << 29
_OWN, _APART, _SHIFT = tl.constexpr(OWN), tl.constexpr(APART), tl.constexpr(KIND_SHIFT)   # the same, in kernels
_COLUMN = tl.constexpr((1 << KIND_SHIFT) - 1)


class Plan:
    """Steps of every band, lane by lane: a record of C slots a row, POS / VAL / KIND stored
    [S, C, LANES] (a slot of every lane side by side) — the row's off-diagonal entries (column,
    −L_ij; OWN: a row of the same band, APART: of another), then its right-hand side in the last
    slot (RHS, taken times one) — and per lane ROW (−1: no row), D and RD (L_ii, 1/L_ii)
    [S, LANES]. SP [P + 1]: band p's steps SP[p]:SP[p+1], a multiple of K."""

    def __init__(self, L, band_rows, lanes, K):
        L = sp.csr_matrix(L)
        L.sort_indices()
        n = L.shape[0]
        rows = dags.row_ids(L.indptr)
        cols = L.indices.astype(np.int64)
        off = cols < rows
        if (cols > rows).any():
            raise ValueError("L is not lower triangular")
        if n >= 1 << KIND_SHIFT:
            raise ValueError("a column must fit in KIND_SHIFT bits")
        d = np.zeros(n)
        d[rows[cols == rows]] = L.data[cols == rows]
        if (d == 0).any():
            raise ValueError("L has a zero or missing diagonal entry")
        band = np.arange(n) // band_rows
        u, v = cols[off], rows[off]
        own = band[u] == band[v]
        step_level = dags.wavefront_levels(dags.dag_from_edges(u[own], v[own], n))
        depth = int(step_level.max()) + 1
        order = np.lexsort((np.arange(n), step_level, band))
        group = band[order] * depth + step_level[order]
        starts = np.r_[0, np.flatnonzero(np.diff(group)) + 1]
        first = np.repeat(starts, np.diff(np.r_[starts, n]))
        chunk = (np.arange(n) - first) // lanes                 # the group's chunk of LANES rows
        lane = (np.arange(n) - first) % lanes
        step_key = group * (n + 1) + chunk
        new_step = np.r_[True, step_key[1:] != step_key[:-1]]
        step_in_all = np.cumsum(new_step) - 1                   # before padding
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
        self.ROW[step, lane] = order
        counts = np.bincount(v, minlength=n)
        C = int(counts.max()) + 1
        C = 1 << (C - 1).bit_length()
        self.C = C
        at = np.empty(n, dtype=np.int64)
        at[order] = step * lanes + lane                          # a row's (step, lane) slot
        k = np.arange(len(u)) - np.repeat(np.r_[0, np.cumsum(counts)[:-1]], counts)
        slot = at[v] * C + k
        self.POS = np.zeros(S * lanes * C, dtype=np.int32)
        self.VAL = np.zeros(S * lanes * C)
        self.KIND = np.zeros(S * lanes * C, dtype=np.int8)
        self.POS[slot] = u
        self.VAL[slot] = -L.data[off]
        self.KIND[slot] = np.where(own, OWN, APART)
        self.KIND[np.arange(S * lanes) * C + C - 1] = RHS
        self.D = np.ones((S, lanes))
        self.D[step, lane] = d[order]
        self.RD = 1.0 / self.D
        # stored [S, C, LANES]: a slot of the lanes' records side by side, so that the tables'
        # loads are contiguous along the lanes, as the gathers' layout is (one thread a row)
        lanes_last = lambda a: np.ascontiguousarray(a.reshape(S, lanes, C).transpose(0, 2, 1)).reshape(-1)
        self.POS, self.VAL, self.KIND = lanes_last(self.POS), lanes_last(self.VAL), lanes_last(self.KIND)
        self.SP = SP
        self.edges_own, self.edges_apart = int(own.sum()), int((~own).sum())

    def values(self, b):
        """VAL with b in the RHS slots (0 where a lane holds no row)."""
        out = self.VAL.copy().reshape(self.S, self.C, self.lanes)
        ok = self.ROW >= 0
        out[:, self.C - 1, :][ok] = b[self.ROW[ok]]
        return out.reshape(-1)

    def model_us(self, c_step, hop):
        """The critical path if a step costs c_step µs after its band's previous step and an
        operand of another band arrives `hop` µs after its step ends (prefetch assumed deep
        enough): the time the last step ends."""
        done = np.zeros(self.n + 1)
        ROW, POS, KIND = self.ROW, self.POS.reshape(self.S, -1), self.KIND.reshape(self.S, -1)   # a step's slots
        end = 0.0
        for p in range(self.P):
            t = 0.0
            for s in range(self.SP[p], self.SP[p + 1]):
                apart = POS[s][KIND[s] == APART]
                t = max(t, done[apart].max() + hop - c_step if apart.size else 0.0) + c_step
                r = ROW[s]
                done[r[r >= 0]] = t
            end = max(end, t)
        return end

    def stats(self):
        return {"n": self.n, "bands": self.P, "steps": self.S, "steps_unpadded": self.steps_real,
                "band_levels_max": self.depth, "lanes": self.lanes, "C": self.C, "K": self.K,
                "edges_own": self.edges_own, "edges_apart": self.edges_apart}


# ------------------------------------------------------------------------------------------- kernel

@triton.jit
def _l1_prefetch(at):
    tl.inline_asm_elementwise("prefetch.global.L1 [$1]; mov.u32 $0, 0;", "=r,l", [at], dtype=tl.int32,
                              is_pure=False, pack=1)


@triton.jit
def _prefetch_step(POS, VAL, s, LANES: tl.constexpr, C: tl.constexpr):
    """Step s's tables into L1, one prefetch per 128-byte line (GPU only)."""
    _l1_prefetch(POS + s * C * LANES + tl.arange(0, C * LANES // 32) * 32)
    _l1_prefetch(VAL + s * C * LANES + tl.arange(0, C * LANES // 16) * 16)


@triton.jit
def _clock():
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _look_apart(X, POS, s, lane, c, LANES: tl.constexpr, C: tl.constexpr, ONE: tl.constexpr = ONE):
    """Step s's operands from other bands, read once (volatile), not waited for; 1.0 in every
    other slot (the right-hand side's factor; the padding's values are 0)."""
    w = tl.load(POS + (s * C + c) * LANES + lane)
    return tl.load(X + (w & _COLUMN), mask=(w >> _SHIFT) == _APART, other=ONE, volatile=True)


@triton.jit
def _await(x, X, pos, m, t0, SENT: tl.constexpr, DEADLINE_NS: tl.constexpr):
    """x (bits) read from X[pos] over m, read again through L2 where it holds the sentinel; with
    DEADLINE_NS > 0 (GPU only) no longer once the kernel has run that long since t0: a plan bug
    then leaves sentinels in the result, which the check reports, instead of a kernel that never
    ends."""
    w = m & (x == SENT)
    while tl.max(tl.max(w.to(tl.int32), 1), 0) != 0:
        x = tl.where(w, tl.load(X + pos, mask=w, other=0, volatile=True), x)
        w = m & (x == SENT)
        if DEADLINE_NS > 0:
            w = w & (_clock() - t0 < DEADLINE_NS)
    return x


@triton.jit
def _step(X, POS, VAL, ROW, D, RD, STAMP, s, lane, c, xa, t0, LANES: tl.constexpr, C: tl.constexpr,
          INTRA: tl.constexpr, BARRIER: tl.constexpr, STAMPS: tl.constexpr, SENT: tl.constexpr,
          DEADLINE_NS: tl.constexpr, TREE: tl.constexpr):
    """One step: every lane's row from its record, its other bands' operands xa read earlier."""
    at = (s * C + c) * LANES + lane
    w = tl.load(POS + at)
    pos = w & _COLUMN
    kind = w >> _SHIFT
    a = tl.load(VAL + at)
    one = tl.arange(0, LANES)
    row = tl.load(ROW + s * LANES + one)
    d = tl.load(D + s * LANES + one)
    rd = tl.load(RD + s * LANES + one)
    own = kind == _OWN
    if INTRA == 0:
        xo = tl.load(X + pos, mask=own, other=0)
    elif INTRA == 1:
        xo = tl.load(X + pos, mask=own, other=0, cache_modifier=".cg")
    else:
        xo = tl.load(X + pos, mask=own, other=0, volatile=True)
    xb = _await(tl.where(own, xo, xa), X, pos, own | (kind == _APART), t0, SENT, DEADLINE_NS)
    xb = xb.to(tl.float64, bitcast=True)
    if TREE and C >= 8:
        # the row's products summed as 4 interleaved chains, then across them: a shorter chain
        # of dependent DFMAs than one running sum over C slots
        r = tl.sum(tl.sum(tl.reshape(a * xb, [LANES, 4, C // 4]), 2), 1)
    else:
        r = tl.sum(a * xb, 1)
    q = r * rd
    q = tl.fma(tl.fma(-q, d, r), rd, q)          # one Markstein step: rounds as r / d does
    tl.store(X + row, q.to(tl.int64, bitcast=True), mask=row >= 0)
    if BARRIER:
        tl.debug_barrier()
    if STAMPS:
        tl.store(STAMP + s + one, _clock() + one * 0, mask=one == 0)


@triton.jit
def _bands(X, POS, VAL, ROW, D, RD, SP, STAMP, P, G,
           LANES: tl.constexpr, C: tl.constexpr, K: tl.constexpr, PF: tl.constexpr, INTRA: tl.constexpr,
           BARRIER: tl.constexpr, STAMPS: tl.constexpr, SENT: tl.constexpr, DEADLINE_NS: tl.constexpr = 0,
           TREE: tl.constexpr = 0):
    """Program g runs bands g, g + G, …; a band's steps in order, the other bands' operands of
    step s + K read at step s (K = 0: at step s)."""
    lane = tl.arange(0, LANES)[:, None] + tl.zeros([LANES, C], tl.int32)
    c = tl.arange(0, C)[None, :] + tl.zeros([LANES, C], tl.int32)
    t0 = 0
    if DEADLINE_NS > 0:
        t0 = tl.max(tl.max(_clock() + lane * 0, 1), 0)
    for p in range(tl.program_id(0), P, G):
        s0 = tl.load(SP + p)
        s1 = tl.load(SP + p + 1)
        if K == 0:
            for s in range(s0, s1):
                if PF > 0:
                    _prefetch_step(POS, VAL, s + PF, LANES, C)
                xa = _look_apart(X, POS, s, lane, c, LANES, C)
                _step(X, POS, VAL, ROW, D, RD, STAMP, s, lane, c, xa, t0, LANES, C, INTRA, BARRIER, STAMPS, SENT,
                      DEADLINE_NS, TREE)
        else:
            ring = ()
            for j in tl.static_range(K):
                ring = ring + (_look_apart(X, POS, s0 + j, lane, c, LANES, C),)
            for s in range(s0, s1, K):
                for j in tl.static_range(K):
                    if PF > 0:
                        _prefetch_step(POS, VAL, s + j + PF, LANES, C)
                    _step(X, POS, VAL, ROW, D, RD, STAMP, s + j, lane, c, ring[j], t0, LANES, C, INTRA, BARRIER,
                          STAMPS, SENT, DEADLINE_NS, TREE)
                    # read after the step has used ring[j], so that the load can land in ring[j]'s
                    # registers: issued before, it would need its own, and the loop's back edge
                    # would copy it there, waiting for it (seen in the sm_90 SASS)
                    nxt = tl.minimum(s + j + K, s1 - 1)       # past the band's end: read its last step again
                    ring = ring[:j] + (_look_apart(X, POS, nxt, lane, c, LANES, C),) + ring[j + 1:]


class Runner:
    """The plan's tables on a device and a launch: x = L⁻¹b written into X[:n]."""

    def __init__(self, plan, b, device, K=None, PF=0, INTRA=0, BARRIER=1, programs=None, stamps=False, warps=None,
                 deadline_ns=0, tree=0):
        t = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(device)
        self.plan, self.device = plan, device
        pad = (PF + 1) * plan.lanes * plan.C                      # prefetches past the last step stay in bounds
        self.POS = t(np.r_[plan.POS | (plan.KIND.astype(np.int32) << KIND_SHIFT), np.zeros(pad, np.int32)])
        self.VAL = t(np.r_[plan.values(b), np.zeros(pad)])
        self.ROW, self.D, self.RD, self.SP = t(plan.ROW), t(plan.D), t(plan.RD), t(plan.SP)
        self.X = torch.empty(plan.n + 1, dtype=torch.int64, device=device)
        self.STAMP = torch.zeros(plan.S + 1, dtype=torch.int64, device=device)
        self.K = plan.K if K is None else K
        assert self.K in (0, plan.K) or plan.K % max(self.K, 1) == 0
        self.meta = dict(LANES=plan.lanes, C=plan.C, K=self.K, PF=PF, INTRA=INTRA, BARRIER=BARRIER,
                         STAMPS=stamps, SENT=SENT, DEADLINE_NS=deadline_ns, TREE=tree,
                         num_warps=warps or max(1, plan.lanes // 32))
        if programs is None:
            programs = plan.P
        self.G = min(plan.P, programs)

    def __call__(self):
        self.X[: self.plan.n].fill_(SENT)
        self.X[self.plan.n] = 0
        _bands[(self.G,)](self.X, self.POS, self.VAL, self.ROW, self.D, self.RD, self.SP, self.STAMP,
                          self.plan.P, self.G, **self.meta)
        return self.X[: self.plan.n].view(torch.float64)


# ------------------------------------------------------------------------------------------- checks

def _grids():
    from tiers import sparse_matrices as sm
    return {"poisson2d": sm.poisson2d, "poisson3d": lambda k: sm.poisson3d(k, 7),
            "poisson3d27": lambda k: sm.poisson3d(k, 27)}


def check():
    """Every variant against SciPy on small grids, under the interpreter: programs run one after
    another, so one program a band (a program striding over bands would spin on a band of a
    program not yet run), and every other band's operand is there at its first read."""
    os.environ.setdefault("TRITON_INTERPRET", "1")
    from scipy.sparse.linalg import spsolve_triangular
    rng = np.random.default_rng(0)
    cases = [("poisson2d", 12, 36, 8), ("poisson3d", 5, 25, 8), ("poisson3d27", 5, 25, 8),
             ("poisson3d27", 4, 10, 4), ("poisson2d", 9, 20, 4)]
    for name, k, band_rows, lanes in cases:
        A = _grids()[name](k)
        L = sp.tril(A).tocsr()
        L = L + sp.diags(rng.random(L.shape[0]))                     # not only the grid's values
        b = rng.random(L.shape[0]) + 0.5
        ref = spsolve_triangular(L.tocsr(), b, lower=True)
        for K in (0, 1, 2, 4):
            plan = Plan(L, band_rows, lanes, K)
            for INTRA, tree in ((0, 0), (1, 0), (2, 0), (0, 1)):
                x = Runner(plan, b, "cpu", INTRA=INTRA, tree=tree)().numpy()
                err = np.linalg.norm(x - ref) / np.linalg.norm(ref)
                assert err < 1e-13, (name, k, K, INTRA, err)
        print("ok", name, k, band_rows, lanes, plan.stats(), flush=True)
    # a 6 × 6 grid in bands of two lines: the 4 lines after the first two each read 6 entries of
    # the line before, another band's every second line
    plan = Plan(sp.tril(_grids()["poisson2d"](6)).tocsr(), 12, 4, 1)
    assert (plan.KIND == 2).sum() == plan.edges_apart == 2 * 6 and plan.P == 3
    print("check passed")


def model():
    """Modelled critical paths (µs) on the benchmark grids, CPU only: the bands' steps at
    c_step against the dataflow executor's hop."""
    for name, k, band_rows, lanes in [("poisson3d27", 64, 4096, 32), ("poisson3d", 100, 10000, 128),
                                      ("poisson2d", 1000, 32000, 32)]:
        L = sp.tril(_grids()[name](k)).tocsr()
        plan = Plan(L, band_rows, lanes, 1)
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


CASES = [  # matrix, size, band rows, lanes a step, variants (K, PF, INTRA, warps, TREE)
    ("poisson3d27", 64, 4096, 32, [(k, pf, i, w, t) for w, t in ((1, 0), (1, 1), (4, 0)) for k in (0, 1, 2, 4)
                                   for pf in (0, 8) for i in (0, 2)]),
    ("poisson3d", 100, 10000, 128, [(k, pf, i, 4, 0) for k in (0, 1, 2, 4) for pf in (0, 8) for i in (0, 2)]),
    ("poisson2d", 1000, 32000, 32, [(k, pf, i, w, 0) for w in (1, 4) for k in (0, 1, 2, 4) for pf in (0, 8)
                                    for i in (0, 2)]),
]


def bench(out):
    """GPU: every variant of CASES checked against SciPy (X starts as the sentinel, so an entry
    never written fails), then timed (do_bench medians, two passes in opposite orders); beside
    them, in the same process, cuSPARSE's SpSV of the same L (analysis once) and t3's dataflow
    sptrsv_spmv (x = L⁻¹b then A·x; its solve's chain sets its time); then the fastest variant
    once more with a %globaltimer stamp at the end of every step. A call is the sentinel's fill
    of X, X[n] = 0 and the launch; c_step_fit_us is the step cost at which the model's critical
    path (Plan.model_us, hop 0.6 µs) takes the best variant's time."""
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
           "method": bench.__doc__, "cases": []}
    rng = np.random.default_rng(0)
    cases = CASES if dev == "cuda" else [(m, k, rows, 8, [v for v in CASES[i][4] if v[1] == 0][:3])
                                         for i, (m, k, rows) in enumerate([("poisson3d27", 5, 25), ("poisson3d", 5, 25),
                                                                          ("poisson2d", 12, 36)])]
    for name, k, band_rows, lanes, variants in cases:
        A = bsf.make_matrix(name, k)
        L = sp.tril(A).tocsr()
        b = rng.random(L.shape[0]) + 0.5
        ref = spsolve_triangular(L, b, lower=True)
        plan = Plan(L, band_rows, lanes, 4)
        case = {"matrix": name, "size": k, "band_rows": band_rows, **plan.stats(),
                "model_us": {str(c): plan.model_us(c, 0.6) for c in (0.1, 0.2, 0.3, 0.4)}, "variants": []}
        runners = []
        for K, PF, INTRA, warps, tree in variants:
            r = Runner(plan, b, dev, K=K, PF=PF, INTRA=INTRA, warps=warps, tree=tree, deadline_ns=deadline)
            x = r().double().cpu().numpy()
            err = float(np.linalg.norm(x - ref) / np.linalg.norm(ref)) if np.isfinite(x).all() else float("nan")
            v = {"K": K, "PF": PF, "INTRA": INTRA, "warps": warps, "TREE": tree, "rel_err": err,
                 "ok": bool(err < 1e-12)}
            case["variants"].append(v)
            if v["ok"]:
                runners.append((v, r))
            print(name, v, flush=True)
        for rnd, seq in enumerate((runners, runners[::-1])):
            for v, r in seq:
                v[f"ms_{rnd}"] = do_bench(r, warmup=25, rep=100, return_mode="median")
        for v, _ in runners:
            v["ms"] = min(v["ms_0"], v["ms_1"])
            print(name, v, flush=True)
        if dev == "cuda":
            import cupy
            import cupyx.scipy.sparse as csp
            Lc = csp.csr_matrix(L)
            bc, xc = cupy.asarray(b), cupy.zeros(L.shape[0])
            solve = bsf._CuSpSV(Lc, bc, xc, lower=True, unit=False)
            solve()
            case["cusparse_spsv_ms"] = do_bench(solve, warmup=25, rep=100, return_mode="median")
            case["cusparse_err"] = float(np.linalg.norm(cupy.asnumpy(xc) - ref) / np.linalg.norm(ref))
        mats = bsf.operands("sptrsv_spmv", A)
        vt = torch.from_numpy(b).to(dev)
        run = sf.prepare("sptrsv_spmv", *mats, like=vt, schedule=fs.inspect("sptrsv_spmv", *mats, kind="wavefront"),
                         executor="dataflow")
        xt, _ = run(vt)
        case["t3_err"] = float(np.linalg.norm(xt.cpu().numpy() - ref) / np.linalg.norm(ref))
        case["t3_sptrsv_spmv_ms"] = do_bench(lambda: run(vt), warmup=25, rep=100, return_mode="median")
        if runners and dev == "cuda":
            v, _ = min(runners, key=lambda t: t[0]["ms"])
            r = Runner(plan, b, dev, K=v["K"], PF=v["PF"], INTRA=v["INTRA"], warps=v["warps"], tree=v["TREE"],
                       stamps=True,
                       deadline_ns=deadline)
            r()
            torch.cuda.synchronize()
            st = r.STAMP[: plan.S].cpu().numpy().astype(np.float64) / 1e3      # µs
            SP = plan.SP
            per_step = np.concatenate([np.diff(st[SP[p]:SP[p + 1]]) for p in range(plan.P)])
            case["stamped"] = {**{key: v[key] for key in ("K", "PF", "INTRA", "warps", "TREE")},
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
            keys = ("K", "PF", "INTRA", "warps", "TREE", "step_us_median", "step_us_p10_p90")
            print(name, "stamped", {key: case["stamped"][key] for key in keys}, flush=True)
        res["cases"].append(case)
        with open(out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    {"check": check, "model": model, "sass": sass, "bench": bench}[sys.argv[1]](*sys.argv[2:])
