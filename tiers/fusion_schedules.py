"""Inspectors for sparse fusion: schedules of a kernel pair's joint iterations, computed once
from the sparsity patterns and reused by every executor (inspector–executor).

A schedule is levels → partitions → iterations:
    levels run one after another (a synchronisation between consecutive levels);
    the partitions of a level are independent (they may run in parallel, one per worker);
    a partition runs its iterations in the listed order, which respects every dependence.
So it is valid when every dependence u → v (v needs u, tiers/sparse_dags.py) has u in an
earlier level, or in v's partition earlier in the order. A vectorised executor may run a level
in "lockstep": step k runs the k-th iteration of every partition of the level at once —
partitions are independent and each partition's first k−1 iterations are done by then.

The inspectors, all on the joint DAG of tiers/sparse_dags.py with cost(v) = stored entries of
the row v reads:

sequential     one level, one partition: kernel 1's rows then kernel 2's (no parallelism).
wavefront      level l holds the iterations whose longest dependence chain has l edges; every
               iteration is its own partition. The most parallel, the most synchronisations.
lbc            load-balanced level coarsening (Cheshmi et al., ParSy, SC'18): consecutive
               wavefront levels are merged while the merged coarse level still splits into
               balanced independent work — its connected components (within the coarse level)
               are bin-packed into `workers` partitions by cost, and the merge is kept when the
               heaviest partition costs at most (1 + slack) × Σ over the merged wavefront levels
               of max(level cost / workers, largest iteration). Partitions run in wavefront order.
sparse_fusion  multi-sparse DAG partitioning (Cheshmi, Strout, Mehri Dehnavi, SC'23): LBC on the
               DAG of the kernel with loop-carried dependences (the head), then every iteration
               of the other kernel is placed where its dependences allow — into the partition of
               its dependences when they all sit in one partition of the latest coarse level
               involved (fused), else into the next coarse level on the least loaded partition;
               iterations that fall past the head's levels get LBC levels of their own. Inside a
               partition the two kernels' iterations are packed interleaved (dependence order,
               when kernel 2 reuses much of kernel 1's data: reuse ratio > 1) or separated
               (kernel 1's iterations, then kernel 2's). Never more levels than wavefront.
"""
from __future__ import annotations

import hashlib
import heapq
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from tiers import sparse_dags as dags

KINDS = ("sequential", "wavefront", "lbc", "sparse_fusion")
DEFAULT_WORKERS = 8
"""Partitions per level the balanced inspectors aim for: a CPU socket's worth of cores. The
vectorised executors run every partition of a level at once whatever this number is."""


# the keys under which an inspector leaves the joint DAG and its wavefront levels in a schedule's cache
JOINT_DAG, JOINT_LEVELS = "joint_dag", "joint_levels"


@dataclass(frozen=True, eq=False)
class Schedule:
    kind: str              # "sequential" | "wavefront" | "lbc" | "sparse_fusion"
    pair: str              # "sptrsv_spmv", ...
    n1: int                # iterations of kernel 1 (joint ids 0..n1-1)
    n2: int                # iterations of kernel 2 (joint ids n1..n1+n2-1)
    level_ptr: np.ndarray  # int64 [S+1]: level s holds partitions level_ptr[s]:level_ptr[s+1]
    part_ptr: np.ndarray   # int64 [P+1]: partition p holds order[part_ptr[p]:part_ptr[p+1]]
    order: np.ndarray      # int64 [n1+n2]: joint iteration ids, dependence order inside a partition
    packing: str           # "interleaved" | "separated" | ""
    fingerprint: str       # hash of pair + shapes + patterns
    cost: np.ndarray = field(default=None, repr=False)   # int64 [n1+n2] cost of each joint iteration
    workers: int = 0
    reuse_ratio: float = float("nan")
    cache: dict = field(default_factory=dict, repr=False)
    """Executors keep what they derive from the schedule here (index tensors per device), so a
    schedule reused across calls is prepared once."""

    def levels(self) -> int:
        return len(self.level_ptr) - 1

    def cached(self, key, build):
        """self.cache[key], built by `build()` on first use."""
        if key not in self.cache:
            self.cache[key] = build()
        return self.cache[key]

    def forget(self) -> None:
        """Drop what executors derived from the schedule; keep what the inspector left (_assemble)."""
        for key in [k for k in self.cache if k not in (JOINT_DAG, JOINT_LEVELS)]:
            del self.cache[key]

    def partitions(self) -> int:
        return len(self.part_ptr) - 1

    def partition_of(self) -> np.ndarray:
        """Partition of each iteration (indexed by joint iteration id)."""
        part = np.empty(self.n1 + self.n2, dtype=np.int64)
        part[self.order] = np.repeat(np.arange(self.partitions(), dtype=np.int64), np.diff(self.part_ptr))
        return part

    def partition_level(self) -> np.ndarray:
        """Level of each partition."""
        return np.repeat(np.arange(self.levels(), dtype=np.int64), np.diff(self.level_ptr))

    def stats(self) -> dict:
        """Levels and synchronisations, partitions per level, partition sizes (iterations and
        cost), the critical path Σ_level max partition cost against the total cost, lockstep
        steps (Σ_level longest partition), reuse ratio and packing, and the fraction of kernel-2
        iterations that share a partition with kernel-1 iterations."""
        S, P = self.levels(), self.partitions()
        sizes = np.diff(self.part_ptr)
        per_level = np.diff(self.level_ptr)
        cost = self.cost if self.cost is not None else np.ones(self.n1 + self.n2, dtype=np.int64)
        pcost = np.add.reduceat(cost[self.order], self.part_ptr[:-1]) if P else np.zeros(0)
        plevel = self.partition_level()
        crit = np.zeros(S)
        np.maximum.at(crit, plevel, pcost)
        steps = np.zeros(S, dtype=np.int64)
        np.maximum.at(steps, plevel, sizes)
        part_of = self.partition_of()
        has_k1 = np.zeros(P, dtype=bool)
        has_k1[part_of[:self.n1]] = True
        total = float(cost.sum())
        return {
            "kind": self.kind, "pair": self.pair, "n1": self.n1, "n2": self.n2, "workers": self.workers,
            "levels": S, "syncs": max(S - 1, 0), "partitions": P,
            "partitions_per_level": _mmm(per_level), "partition_size": _mmm(sizes), "partition_cost": _mmm(pcost),
            "total_cost": total, "critical_cost": float(crit.sum()),
            "parallelism": total / float(crit.sum()) if crit.sum() else 0.0,
            "lockstep_steps": int(steps.sum()),
            "reuse_ratio": self.reuse_ratio, "packing": self.packing,
            "fused_fraction": float(has_k1[part_of[self.n1:]].mean()) if self.n2 else 0.0,
        }


def _mmm(a) -> dict:
    a = np.asarray(a)
    if a.size == 0:
        return {"min": 0, "mean": 0.0, "max": 0}
    return {"min": a.min().item(), "mean": float(a.mean()), "max": a.max().item()}


# ---------------------------------------------------------------- identity of a problem

def fingerprint(pair: str, *matrices) -> str:
    """Hash of the pair, the matrices' shapes and their canonical CSR patterns (values are
    not part of it: a schedule serves every matrix with the same pattern). SHA-256, fed the index
    arrays themselves, not copies: CPUs with SHA extensions hash it at 1.2 GB/s against BLAKE2b's
    0.44, and the inspector and `prepare` each take a fingerprint; the power-law graph's
    sptrsv_spmv's took 0.136 s against 0.239 with BLAKE2b and copies, the 27-point grid's ILU(0)'s
    0.064 against 0.133 (development machine's CPU, medians of 5)."""
    h = hashlib.sha256()
    h.update(pair.encode())
    for M in matrices:
        C = dags.canonical(M)
        h.update(repr(C.shape).encode())
        h.update(np.ascontiguousarray(C.indptr, dtype=np.int64))
        h.update(np.ascontiguousarray(C.indices, dtype=np.int64))
    return h.hexdigest()[:32]


# ---------------------------------------------------------------- validity

def check_schedule(schedule: Schedule, dag) -> None:
    """Raise ValueError unless `schedule` runs every iteration of `dag` (a sparse_dags.DAG, or
    (ptr, idx)) exactly once and respects every dependence; the message names the first
    problem (a missing or repeated iteration, or the first dependence u → v broken)."""
    if not isinstance(dag, dags.DAG):
        ptr, idx = dag
        dag = dags.DAG(np.asarray(ptr, np.int64), np.asarray(idx, np.int64), len(ptr) - 1)
    n = dag.n
    lp, pp, order = (np.asarray(a) for a in (schedule.level_ptr, schedule.part_ptr, schedule.order))
    if schedule.n1 + schedule.n2 != n:
        raise ValueError(f"schedule has {schedule.n1} + {schedule.n2} iterations but the DAG has {n}")
    if lp.ndim != 1 or len(lp) < 1 or lp[0] != 0 or lp[-1] != len(pp) - 1 or (np.diff(lp) < 0).any():
        raise ValueError("schedule level_ptr must rise from 0 to the number of partitions")
    if pp.ndim != 1 or len(pp) < 1 or pp[0] != 0 or pp[-1] != len(order) or (np.diff(pp) < 0).any():
        raise ValueError("schedule part_ptr must rise from 0 to the length of order")
    if order.ndim != 1 or ((order < 0) | (order >= n)).any():
        bad = order[(order < 0) | (order >= n)]
        raise ValueError(f"schedule lists iteration {int(bad[0])}, outside 0..{n - 1}")
    seen = np.bincount(order, minlength=n)
    if (seen != 1).any():
        v = int(np.flatnonzero(seen != 1)[0])
        what = "never" if seen[v] == 0 else f"{seen[v]} times"
        raise ValueError(f"iteration {v} ({dag.describe(v)}) runs {what}: each must run exactly once")
    part_of = schedule.partition_of()
    level_of = schedule.partition_level()[part_of]
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    u, v = dag.sources()
    ok = (level_of[u] < level_of[v]) | ((part_of[u] == part_of[v]) & (pos[u] < pos[v]))
    if not ok.all():
        t = int(np.flatnonzero(~ok)[0])
        a, b = int(u[t]), int(v[t])
        where = (f"later in the same partition {part_of[a]} of level {level_of[a]}" if part_of[a] == part_of[b]
                 else f"in level {level_of[a]} partition {part_of[a]}, while iteration {b} is in level "
                      f"{level_of[b]} partition {part_of[b]}")
        raise ValueError(f"dependence broken: iteration {b} ({dag.describe(b)}) needs iteration {a} "
                         f"({dag.describe(a)}), which runs {where}")


def matches(schedule, pair: str, fp: str) -> None:
    """Raise ValueError unless `schedule` was inspected for this pair and these patterns."""
    if not isinstance(schedule, Schedule):
        raise ValueError(f"schedule must be a tiers.fusion_schedules.Schedule (from inspect), "
                         f"got {type(schedule).__name__}")
    if schedule.pair != pair:
        raise ValueError(f"schedule was inspected for the pair {schedule.pair!r}, not {pair!r}")
    if schedule.fingerprint != fp:
        raise ValueError(f"schedule was inspected for other matrices: its fingerprint {schedule.fingerprint[:12]}… "
                         f"does not match these matrices' sizes and sparsity patterns ({fp[:12]}…)")


# ---------------------------------------------------------------- assembling a schedule

def _sorted_by(*columns) -> np.ndarray:
    """np.lexsort((ids, *reversed(columns))): the ids sorting by the integer columns, first column
    first, then by id. Where the columns' ranges fit in 63 bits together, one stable argsort of
    them packed into one int64 (stable, so ties stay in id order): on the power-law graph's five
    sparse-fusion schedules 0.12–0.14 s against 0.27–0.28 (medians of 5 rounds, development
    machine's CPU, figures/data/inspector_order_tril_host_cpu_2026-12-07.txt), the same order."""
    cols = [np.asarray(c, dtype=np.int64) for c in columns]
    n = len(cols[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    lows = [int(c.min()) for c in cols]
    bits = [int(c.max() - lo).bit_length() for c, lo in zip(cols, lows)]
    if sum(bits) > 63:
        return np.lexsort((np.arange(n, dtype=np.int64), *reversed(cols)))
    packed = cols[0] - lows[0]
    for c, lo, b in zip(cols[1:], lows[1:], bits[1:]):
        packed <<= b
        packed |= c - lo
    return np.argsort(packed, kind="stable")


def _assemble(kind, prob, level, part, key, *, packing, workers):
    """Schedule of `prob` (_problem) from per-iteration (coarse level, partition label within the
    level, order key): iterations sorted by (level, partition, key, id); empty levels dropped.
    The joint DAG and its wavefront levels are left in the schedule's cache (JOINT_DAG,
    JOINT_LEVELS), where the sync-free executors look for them instead of building them again."""
    dag = prob.dag
    n = dag.n
    order = _sorted_by(level, part, key)
    lv, pt = level[order], part[order]
    new_part = np.ones(n, dtype=bool)
    new_part[1:] = (lv[1:] != lv[:-1]) | (pt[1:] != pt[:-1])
    starts = np.flatnonzero(new_part)
    part_ptr = np.append(starts, n).astype(np.int64)
    plevel = lv[starts]
    new_level = np.ones(len(starts), dtype=bool)
    new_level[1:] = plevel[1:] != plevel[:-1]
    level_ptr = np.append(np.flatnonzero(new_level), len(starts)).astype(np.int64)
    if n == 0:
        part_ptr, level_ptr = np.zeros(1, np.int64), np.zeros(1, np.int64)
    return Schedule(kind, prob.pair, dag.n1, dag.n2, level_ptr, part_ptr, order.astype(np.int64), packing,
                    prob.fp, prob.cost, workers, prob.reuse, cache={JOINT_DAG: dag, JOINT_LEVELS: prob.levels})


class _Problem(NamedTuple):
    """What every inspector derives from the validated matrices (_problem)."""
    pair: str
    dag: dags.DAG            # the joint DAG
    levels: np.ndarray       # its wavefront levels
    cost: np.ndarray         # joint_cost
    fp: str                  # fingerprint
    reuse: float             # reuse_ratio
    g1: dags.DAG             # kernel 1's DAG and kernel 2's, which the joint DAG is built from
    g2: dags.DAG
    w2: np.ndarray | None    # kernel 2's DAG's own levels, where asked (own_levels)


def _problem(pair, matrices, own_levels=False) -> _Problem:
    """Validate the matrices once and derive what every inspector needs; with own_levels
    (sparse fusion's, which places kernel 2 by them) kernel 2's own levels too, taken once."""
    from tiers.validation import validate_fusion_matrices

    mats = validate_fusion_matrices(pair, matrices)
    seen = dags.kernel_operands(pair, *mats)
    g1, g2, inter = dags.kernel_dags(pair, *seen)
    dag = dags.joint_from(g1, g2, inter)
    w2 = dags.wavefront_levels(g2) if own_levels else None
    return _Problem(pair, dag, dags.joint_levels(g1, g2, inter, w2), dags.joint_cost(pair, *seen),
                    fingerprint(pair, *mats), dags.reuse_ratio(pair, *seen), g1, g2, w2)


def _workers(workers):
    if workers is None:
        return DEFAULT_WORKERS
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
        raise ValueError(f"workers must be a positive int, got {workers!r}")
    return int(workers)


def inspect(pair: str, *matrices, kind: str = "sparse_fusion", workers=None, **options) -> Schedule:
    """The schedule of `pair` on these matrices (the same matrices, in the same order, as the
    pair's function takes). kind: "sequential", "wavefront", "lbc" or "sparse_fusion".
    Options: lbc and sparse_fusion take slack= (default 0.1); sparse_fusion takes packing=
    ("interleaved" or "separated", default chosen by the reuse ratio)."""
    dags.check_pair(pair)
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    return {"sequential": sequential, "wavefront": wavefront, "lbc": lbc,
            "sparse_fusion": sparse_fusion}[kind](pair, *matrices, workers=workers, **options)


_DEFAULTS: dict = {}
_DEFAULTS_KEPT = 8


def default_schedule(pair: str, matrices, fingerprint: str) -> Schedule:
    """The schedule a pair function runs when called with schedule=None: the joint DAG's
    wavefronts, inspected once per (pair, pattern) — `fingerprint` from the validated problem —
    and kept for the last few patterns, so repeated calls on one pattern inspect once."""
    if fingerprint not in _DEFAULTS:
        while len(_DEFAULTS) >= _DEFAULTS_KEPT:
            _DEFAULTS.pop(next(iter(_DEFAULTS)))
        _DEFAULTS[fingerprint] = inspect(pair, *matrices, kind="wavefront")
    return _DEFAULTS[fingerprint]


def _no_options(kind, options):
    if options:
        raise ValueError(f"the {kind} inspector takes no option {', '.join(map(repr, options))}")


def sequential(pair: str, *matrices, workers=None, **options) -> Schedule:
    """One level, one partition: kernel 1's rows in dependence order, then kernel 2's."""
    _no_options("sequential", options)
    prob = _problem(pair, matrices)
    n, n1 = prob.dag.n, prob.dag.n1
    kernel = (np.arange(n) >= n1).astype(np.int64)
    zero = np.zeros(n, dtype=np.int64)
    return _assemble("sequential", prob, zero, zero, kernel * (n + 1) + prob.levels, packing="separated",
                     workers=1)


def wavefront(pair: str, *matrices, workers=None, **options) -> Schedule:
    """Level sets of the joint DAG; every iteration is its own partition."""
    _no_options("wavefront", options)
    prob = _problem(pair, matrices)
    n = prob.dag.n
    return _assemble("wavefront", prob, prob.levels, np.arange(n, dtype=np.int64), np.zeros(n, np.int64),
                     packing="", workers=_workers(workers))


def lbc(pair: str, *matrices, workers=None, slack: float = 0.1, **options) -> Schedule:
    """Load-balanced level coarsening of the joint DAG (see the module docstring)."""
    _no_options("lbc", options)
    W = _workers(workers)
    prob = _problem(pair, matrices)
    level, part = _lbc_assign(prob.dag, prob.cost, W, _slack(slack), sub=(prob.dag, prob.levels))
    return _assemble("lbc", prob, level, part, prob.levels, packing="", workers=W)


def _slack(slack):
    if not isinstance(slack, (int, float, np.floating)) or not np.isfinite(slack) or slack < 0:
        raise ValueError(f"slack must be a non-negative number, got {slack!r}")
    return float(slack)


# ---------------------------------------------------------------- LBC

def _pack(comp_cost, W) -> np.ndarray:
    """Bin of each component: the 2W heaviest by longest-processing-time-first on a heap, the
    rest poured in decreasing cost into the bins' remaining room up to the mean load (each bin
    overshoots by at most one small component)."""
    C = len(comp_cost)
    bins = np.zeros(C, dtype=np.int64)
    if C <= W:
        return np.arange(C, dtype=np.int64)
    order = np.argsort(-comp_cost, kind="stable")
    load = np.zeros(W)
    heap = [(0.0, b) for b in range(W)]
    head = order[:2 * W]
    for c in head:
        l, b = heapq.heappop(heap)
        bins[c] = b
        l += float(comp_cost[c])
        load[b] = l
        heapq.heappush(heap, (l, b))
    rest = order[2 * W:]
    if rest.size:
        rc = comp_cost[rest]
        room = np.maximum((load.sum() + rc.sum()) / W - load, 0)
        edge = np.cumsum(room)
        mid = (np.cumsum(rc) - rc / 2) * (edge[-1] / rc.sum())   # rest's cost mapped onto the room
        bins[rest] = np.minimum(np.searchsorted(edge, mid, side="right"), W - 1)
    return bins


def _lbc_assign(dag, cost, W, slack, nodes=None, sub=None):
    """LBC on the sub-DAG induced by `nodes` (default all; dependences on other iterations are
    taken as already satisfied). Returns (coarse level, partition label) per node of the DAG
    (−1 outside `nodes`), with levels 0.. and labels unique within a level. sub: (that sub-DAG
    on local ids 0..len(nodes)−1, its wavefront levels), where the caller has them — a kernel's
    own DAG, when `nodes` are its rows: filtering the joint DAG's 10M edges down to kernel 1's
    took 0.5 s on the power-law graph's sptrsv_spmv (development machine's CPU)."""
    n = dag.n
    if nodes is None:
        nodes = np.arange(n, dtype=np.int64)
    level = np.full(n, -1, dtype=np.int64)
    part = np.full(n, -1, dtype=np.int64)
    if len(nodes) == 0:
        return level, part
    if sub is None:
        # local levels of the sub-DAG: its own longest paths
        inside = np.zeros(n, dtype=bool)
        inside[nodes] = True
        u, v = dag.sources()
        keep = inside[u] & inside[v]
        local = np.full(n, -1, dtype=np.int64)
        local[nodes] = np.arange(len(nodes))
        sub = dags.dag_from_edges(local[u[keep]], local[v[keep]], len(nodes))
        sl = dags.wavefront_levels(sub) if sub.edges else np.zeros(len(nodes), dtype=np.int64)
    else:
        sub, sl = sub
    # nodes sorted by sub-level; window of levels [a, b) = positions lstart[a]:lstart[b]
    by_level = dags.stable_order(sl)
    L = int(sl.max()) + 1
    lstart = np.zeros(L + 1, dtype=np.int64)
    np.cumsum(np.bincount(sl, minlength=L), out=lstart[1:])
    rank = np.empty(len(nodes), dtype=np.int64)
    rank[by_level] = np.arange(len(nodes))
    # the edges as (rank of u, rank of v), grouped by v's rank: sub's rows taken in by_level's
    # order, each row's entries as they are — what a stable sort by v's rank gives, without the
    # sort (argsort and two gathers took 0.29 s of _lbc_assign's 0.81 in a line profile of the
    # power-law ILU(0)'s sparse-fusion inspector)
    at = dags.range_values(sub.ptr[by_level], sub.ptr[by_level + 1])
    eu = rank[sub.idx[at]]
    ev = np.repeat(np.arange(len(nodes), dtype=np.int64), np.diff(sub.ptr)[by_level])
    c = cost[nodes][by_level].astype(np.float64)
    lcost = np.add.reduceat(c, lstart[:-1]) if len(c) else np.zeros(L)
    lmax = np.maximum.reduceat(c, lstart[:-1])
    ideal = np.maximum(lcost / W, lmax)

    def split(a, b, grown=None):
        """Components of window [a, b) packed into bins: (labels per window position, max bin cost,
        the window's components, for a later call's `grown`). grown: those of a window [a, a')
        with a' < b, which this one extends (sparse_dags.grow_components), so that only the
        edges into levels a'.. are walked: recomputing every window of the gallop from scratch
        walked the first levels' edges again at every doubling (the power-law ILU(0)'s and IC(0)'s
        sparse-fusion inspectors 10–16 % faster on the development machine's CPU, the schedules
        identical; figures/data/lbc_gallop_grow_cpu_2026-12-07.txt)."""
        lo, hi = lstart[a], lstart[b]
        old = grown if grown is not None else np.zeros(0, np.int64)
        h0 = lo + len(old)                   # the grown window's end: its components cover it
        e0, e1 = np.searchsorted(ev, [h0, hi])
        x, y = eu[e0:e1], ev[e0:e1]
        m = x >= lo
        comp = dags.grow_components(old, hi - h0, x[m] - lo, y[m] - lo)
        ccost = np.bincount(comp, weights=c[lo:hi])
        bins = _pack(ccost, W)
        return bins[comp], float(np.bincount(bins, weights=ccost).max()), comp

    out_level = np.empty(len(nodes), dtype=np.int64)
    out_part = np.empty(len(nodes), dtype=np.int64)
    a, s = 0, 0
    while a < L:
        best = split(a, a + 1)
        width = 1
        # gallop: double the window while it stays balanced, then bisect the last doubling; each
        # try extends the widest window that stayed balanced
        step = 1
        while True:
            step = min(step, L - a - width)
            if step == 0:
                break
            tried = split(a, a + width + step, best[2])
            if tried[1] <= (1 + slack) * ideal[a:a + width + step].sum():
                width, best = width + step, tried
                step *= 2
            elif step > 1:
                step //= 2
            else:
                break
        lo, hi = lstart[a], lstart[a + width]
        out_level[lo:hi] = s
        out_part[lo:hi] = best[0]
        a += width
        s += 1
    level[nodes[by_level]] = out_level
    part[nodes[by_level]] = out_part
    return level, part


# ---------------------------------------------------------------- sparse fusion (SC'23)

def sparse_fusion(pair: str, *matrices, workers=None, slack: float = 0.1, packing=None, **options) -> Schedule:
    """Multi-sparse DAG partitioning (see the module docstring)."""
    _no_options("sparse_fusion", options)
    W = _workers(workers)
    slack = _slack(slack)
    prob = _problem(pair, matrices, own_levels=True)
    dag, cost, wl, g1, g2, w2 = prob.dag, prob.cost, prob.levels, prob.g1, prob.g2, prob.w2
    if packing is None:
        packing = "interleaved" if prob.reuse > 1 else "separated"
    if packing not in ("interleaved", "separated"):
        raise ValueError(f"packing must be 'interleaved' or 'separated', got {packing!r}")
    n1, n = dag.n1, dag.n
    if g1.edges == 0 and g2.edges > 0:
        level, part, key = _fuse_tail_first(dag, g2, w2, cost, W, slack, wl)
    else:
        level, part, key = _fuse_head_first(dag, g1, w2, cost, W, slack, wl)
    if packing == "separated":
        key = (np.arange(n) >= n1) * (2 * n + 2) + key
    s = _assemble("sparse_fusion", prob, level, part, key, packing=packing, workers=W)
    if s.levels() > int(wl.max(initial=-1)) + 1:
        # a DAG where placing kernel 2 costs levels (not met on the test matrices): coarsen the
        # joint DAG instead, which never has more levels than its wavefronts
        level, part = _lbc_assign(dag, cost, W, slack, sub=(dag, wl))
        s = _assemble("sparse_fusion", prob, level, part, 2 * wl, packing=packing, workers=W)
    return s


def _least_loaded(load_row, costs):
    """Spread iterations of the given costs over the bins of one level, filling the least
    loaded bins first (vectorised water-filling); returns a bin per iteration. The one-level
    form that _least_loaded_by, which the inspectors call, is tested against."""
    W = len(load_row)
    if len(costs) == 1:
        return np.array([int(np.argmin(load_row))])
    total = load_row.sum() + costs.sum()
    room = np.maximum(total / W - load_row, 0)
    edge = np.cumsum(room)
    mid = np.cumsum(costs) - costs / 2
    return np.minimum(np.searchsorted(edge, mid, side="right"), W - 1)


def _least_loaded_by(load, t, costs):
    """_least_loaded for many levels at once: iterations (in order, with costs) spread over the
    bins of their levels t by each level's own water-filling on load[t], as one call per level
    would (the levels are apart, so no level's placements change another's loads). The costs are
    whole numbers (the inspector's), so the running sums within a level, taken as differences
    of one running sum, are exact. On the 2D grid's sptrsv_spmv, whose SpMV rows form one
    wavefront level spread over 2 000 target levels, the loop over levels it replaced made the
    sparse-fusion inspector 3.15 s against 2.39 (development machine's CPU, 3 alternating rounds,
    same schedules; figures/data/inspector_least_loaded_cpu_2026-12-03.txt); elsewhere even.
    _fuse_tail_first places its leftover kernel-1 rows by it too."""
    if len(t) == 0:
        return np.zeros(0, dtype=np.int64)
    W = load.shape[1]
    order = np.argsort(t, kind="stable")
    ts, cs = t[order], costs[order]
    first = np.ones(len(ts), dtype=bool)
    first[1:] = ts[1:] != ts[:-1]
    group = np.cumsum(first) - 1
    starts = np.flatnonzero(first)
    levels = ts[starts]
    sizes = np.diff(np.append(starts, len(ts)))
    rows = load[levels]                                               # [G, W]
    total = rows.sum(1) + np.add.reduceat(cs, starts)
    edge = np.cumsum(np.maximum(total[:, None] / W - rows, 0), axis=1)
    run = np.cumsum(cs)
    mid = run - (run[starts] - cs[starts])[group] - cs / 2            # cumsum within the level, less half
    bins = np.minimum((edge[group] <= mid[:, None]).sum(1), W - 1)
    alone = sizes[group] == 1
    bins[alone] = np.argmin(rows[group[alone]], axis=1)
    out = np.empty(len(t), dtype=np.int64)
    out[order] = bins
    return out


def _fuse_head_first(dag, g1, w2, cost, W, slack, wl):
    """Kernel 1 has the loop-carried dependences (or both do): LBC on kernel 1, then kernel 2's
    iterations in their own wavefront order, each fused into its dependences' partition when
    those at the latest level share one, else put one level later on the least loaded bin."""
    n1, n = dag.n1, dag.n
    level = np.full(n, -1, dtype=np.int64)
    part = np.full(n, -1, dtype=np.int64)
    k1 = np.arange(n1, dtype=np.int64)
    l1, p1 = _lbc_assign(dag, cost, W, slack, nodes=k1, sub=(g1, wl[:n1]))    # kernel 1 reads no kernel-2 row
    level[:n1], part[:n1] = l1[:n1], p1[:n1]
    S = int(level[:n1].max(initial=-1)) + 1
    load = np.zeros((max(S, 1), W))
    _add_load(load, level[:n1], part[:n1], cost[:n1])
    REST = S                                 # placeholder level: past the head's levels
    # fusing may grow a partition as far as its level's heaviest kernel-1 partition plus the
    # share of kernel-2 work a uniform spread would bring, with the slack: past that, fusing
    # would serialise what the next level can run in parallel
    grow = 1 + cost[n1:].sum() / max(cost[:n1].sum(), 1)
    cap = (1 + slack) * grow * load.max(axis=1)
    by2 = dags.stable_order(w2)                # kernel 2's rows by their own levels
    bounds = np.searchsorted(w2[by2], np.arange(int(w2.max(initial=-1)) + 2))
    # a (level, partition) pair packed as level·span + partition + 1 (REST rows keep partition −1;
    # placing never makes a partition past W − 1), so that one maximum per row gives both
    span = max(int(part.max(initial=-1)), W - 1) + 2
    for l in range(len(bounds) - 1):
        vs = by2[bounds[l]:bounds[l + 1]] + n1
        dep = dag.idx[dags.range_values(dag.ptr[vs], dag.ptr[vs + 1])]
        # per row of vs (its dependences lie together in dep): the latest level among them, and
        # the greatest and least partition at that level, as the maxima of (level, partition) and
        # of (level, −partition): two passes over the dependences (7M in the power-law graph's
        # sptrsv_spmv) instead of a mask of the latest level's and three reductions. This function
        # took 1.40 s against 1.06 there, 1.05 against 0.85 on the 2D grid's, the same schedules
        # (figures/data/fuse_head_packed_cpu_2026-12-07.txt)
        size = dag.ptr[vs + 1] - dag.ptr[vs]
        dl, dp = level[dep] * span, part[dep] + 1
        hi = dags.segment_reduce(np.maximum, dl + dp, size, -1)
        lo = dags.segment_reduce(np.maximum, dl + (span - 1 - dp), size, -1)
        smax = np.where(hi >= 0, hi // span, -1)
        pmin, pmax = span - 2 - lo % span, hi % span - 1
        rest = smax >= REST
        fused = ~rest & (smax >= 0) & (pmin == pmax)
        fused[fused] = _fits(load, cap, smax[fused], pmin[fused], cost[vs[fused]])
        level[vs[rest]] = REST
        level[vs[fused]], part[vs[fused]] = smax[fused], pmin[fused]
        _add_load(load, smax[fused], pmin[fused], cost[vs[fused]])
        moved = ~rest & ~fused
        target = np.where(smax < 0, 0, smax + 1)
        to_rest = moved & (target >= REST)
        level[vs[to_rest]] = REST
        moved &= ~to_rest
        sel, t = vs[moved], target[moved]
        bins = _least_loaded_by(load, t, cost[sel].astype(np.float64))
        level[sel], part[sel] = t, bins
        _add_load(load, t, bins, cost[sel])
    rest_nodes = np.flatnonzero(level == REST)
    if rest_nodes.size:
        lr, pr = _lbc_assign(dag, cost, W, slack, nodes=rest_nodes)
        level[rest_nodes] = S + lr[rest_nodes]
        part[rest_nodes] = pr[rest_nodes]
    return level, part, 2 * wl


def _add_load(load, lv, pt, c):
    """load[lv[t], pt[t]] += c[t] for every t, as np.add.at does it, by one bincount: costs are
    integers, so the sums are exact in float64 and the order of the additions does not matter."""
    if len(lv):
        load += np.bincount(lv * load.shape[1] + pt, weights=c, minlength=load.size).reshape(load.shape)


def _fits(load, cap, lv, pt, c):
    """Which of these placements (level lv, partition pt, cost c), taken in the given order,
    keep their partition's load within the level's cap (running sums per partition)."""
    if len(lv) == 0:
        return np.zeros(0, dtype=bool)
    order = np.lexsort((np.arange(len(lv)), pt, lv))
    l, p, cc = lv[order], pt[order], c[order].astype(np.float64)
    first = np.ones(len(l), dtype=bool)
    first[1:] = (l[1:] != l[:-1]) | (p[1:] != p[:-1])
    run = np.cumsum(cc)
    start = np.maximum.accumulate(np.where(first, np.arange(len(l)), 0))
    within = run - (run[start] - cc[start])
    ok = np.empty(len(lv), dtype=bool)
    ok[order] = load[l, p] + within <= cap[l]
    return ok


def _fuse_tail_first(dag, g2, w2, cost, W, slack, wl):
    """Kernel 1 has no dependences of its own (SpMV first): LBC on kernel 2, then every
    kernel-1 iteration joins the partition of its consumers when those at their earliest level
    share one — placed just before its first consumer — else one level earlier."""
    n1, n = dag.n1, dag.n
    k2 = np.arange(n1, n, dtype=np.int64)
    level, part = _lbc_assign(dag, cost, W, slack, nodes=k2, sub=(g2, w2))
    key = 2 * wl
    u, v = dag.sources()
    cross = (u < n1) & (v >= n1)
    cu, cv = u[cross], v[cross]
    big = np.iinfo(np.int64).max
    smin = np.full(n1, big)
    np.minimum.at(smin, cu, level[cv])
    low = level[cv] == smin[cu]
    pmin = np.full(n1, big)
    pmax = np.full(n1, -1, dtype=np.int64)
    kmin = np.full(n1, big)
    np.minimum.at(pmin, cu[low], part[cv][low])
    np.maximum.at(pmax, cu[low], part[cv][low])
    np.minimum.at(kmin, cu[low], key[cv][low])
    fused = (smin < big) & (pmin == pmax)
    ids = np.flatnonzero(fused)
    level[ids], part[ids], key[ids] = smin[ids], pmin[ids], kmin[ids] - 1
    other = np.flatnonzero(~fused)
    if other.size:
        target = np.where(smin[other] < big, smin[other] - 1, 0)
        if (target < 0).any():
            level[level >= 0] += 1
            target += 1
        S = int(level.max(initial=0)) + 1
        load = np.zeros((S, W))
        placed = level >= 0
        _add_load(load, level[placed], np.minimum(part[placed], W - 1), cost[placed])
        bins = _least_loaded_by(load, target, cost[other].astype(np.float64))
        # sharing a label with a kernel-2 partition of level t is harmless: the iteration
        # depends on nothing, runs first (key 0), and its consumers sit in later levels
        level[other], part[other], key[other] = target, bins, 0
        _add_load(load, target, bins, cost[other])
    return level, part, key


# ---------------------------------------------------------------- executing a schedule in lockstep

def lockstep(schedule: Schedule):
    """The schedule as vectorisable groups, in execution order: group g runs the rows
    rows[group_ptr[g]:group_ptr[g+1]] of kernel group_kernel[g] (0 or 1; kernel-local row ids)
    at once. Groups follow (level, step, kernel): step k of a level holds the k-th iteration of
    each of its partitions, so a group's rows are independent of one another and everything
    they need ran in an earlier group. Cached on the schedule.
    Returns (group_ptr, group_kernel, group_level, rows), int64 NumPy arrays."""
    return schedule.cached("lockstep", lambda: _lockstep(schedule))


def _lockstep(schedule: Schedule):
    N, P = len(schedule.order), schedule.partitions()
    sizes = np.diff(schedule.part_ptr)
    part = np.repeat(np.arange(P, dtype=np.int64), sizes)
    step = np.arange(N, dtype=np.int64) - schedule.part_ptr[part]
    lvl = schedule.partition_level()[part]
    v = schedule.order
    kernel = (v >= schedule.n1).astype(np.int64)
    by = np.lexsort((part, kernel, step, lvl))
    lvl, step, kernel = lvl[by], step[by], kernel[by]
    new = np.ones(N, dtype=bool)
    new[1:] = (lvl[1:] != lvl[:-1]) | (step[1:] != step[:-1]) | (kernel[1:] != kernel[:-1])
    starts = np.flatnonzero(new)
    out = (np.append(starts, N).astype(np.int64), kernel[starts], lvl[starts],
           np.where(kernel == 1, v[by] - schedule.n1, v[by]).astype(np.int64))
    return out
