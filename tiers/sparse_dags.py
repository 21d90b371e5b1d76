"""Dependence DAGs of the sparse-fusion kernel pairs, and the symbolic structure of ILU(0)/IC(0).

One iteration of a kernel is one row. What row i reads decides what it waits for:

    SpMV      y_i = Σ_j A_ij x_j                           needs nothing of its own kernel
    SpTRSV    x_i = (b_i − Σ_{j≠i} T_ij x_j) / T_ii         needs x_j for every off-diagonal T_ij
              (lower T: j < i, so rows run upwards in index; upper T: j > i, downwards)
    SpILU0    row i of L\\U, row-wise IKJ on A's pattern:
                for k < i in row i, increasing:  a_ik /= a_kk
                                                 a_ij −= a_ik · a_kj   for j > k with (i,j), (k,j) in the pattern
              needs rows k < i of its pattern finished
    SpIC0     row i of Lc on tril(A)'s pattern, up-looking:
                for j < i in row i, increasing:  l_ij = (a_ij − Σ_{k<j} l_ik l_jk) / l_jj
                                                 l_ii = √(a_ii − Σ_{k<i} l_ik²)
              (sums over k in both rows' patterns) needs rows j < i of its pattern finished

A DAG is stored CSR-like: iteration v depends on idx[ptr[v]:ptr[v+1]]. For a pair, the joint
DAG numbers kernel 1's iterations 0..n1−1 and kernel 2's n1..n1+n2−1; kernel 2's row i also
depends on the kernel-1 rows whose results it reads:

    sptrsv_spmv    y = A·(L⁻¹b):  y_i needs x_j for every j in row i of A
    spmv_sptrsv    z = L⁻¹(A·x):  z_i needs y_i
    sptrsv_sptrsv  x = U⁻¹(L⁻¹b): x_i needs y_i
    spilu0_sptrsv  x = L⁻¹b with L from ILU(0):  x_i needs factor row i
    spic0_sptrsv   x = Lc⁻¹b with Lc from IC(0): x_i needs factor row i

Everything here works on canonical CSR patterns (sorted indices, no duplicates) and is
vectorised NumPy: building the DAGs and ILU(0)/IC(0) update lists of a million-row matrix
takes about a second.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class PairSpec:
    matrices: tuple     # argument names of the matrices, in call order
    kernels: tuple      # (kernel 1, kernel 2)
    vector: str         # name of the vector argument
    outputs: tuple      # names of the two results


PAIRS: dict[str, PairSpec] = {
    "sptrsv_spmv": PairSpec(("L", "A"), ("sptrsv_lower", "spmv"), "b", ("x", "y")),
    "spmv_sptrsv": PairSpec(("A", "L"), ("spmv", "sptrsv_lower"), "x", ("y", "z")),
    "sptrsv_sptrsv": PairSpec(("L", "U"), ("sptrsv_lower", "sptrsv_upper"), "b", ("y", "x")),
    "spilu0_sptrsv": PairSpec(("A",), ("spilu0", "sptrsv_unit_lower"), "b", ("LU", "x")),
    "spic0_sptrsv": PairSpec(("A",), ("spic0", "sptrsv_lower"), "b", ("Lc", "x")),
}
PAIR_NAMES = tuple(PAIRS)
FACTOR_PAIRS = tuple(p for p, spec in PAIRS.items() if spec.kernels[0] in ("spilu0", "spic0"))
"""The pairs whose first kernel computes a factor in place (its rows rewrite entries step by step)."""


def check_pair(pair) -> PairSpec:
    if pair not in PAIRS:
        raise ValueError(f"unknown kernel pair {pair!r}; pairs: {', '.join(PAIRS)}")
    return PAIRS[pair]


# ---------------------------------------------------------------- CSR helpers

def csr(M) -> sp.csr_matrix:
    """M as canonical CSR (sorted indices, duplicates summed) with int64 index arrays; M itself
    is never modified."""
    C = sp.csr_matrix(M, copy=True)
    C.sum_duplicates()          # also sorts the indices
    C.indptr = C.indptr.astype(np.int64, copy=False)
    C.indices = C.indices.astype(np.int64, copy=False)
    return C


def canonical(M) -> sp.csr_matrix:
    """M itself where it already is what csr() returns (canonical CSR with int64 index arrays),
    else csr(M): for the functions below that only read their matrices, which the inspectors
    and tables call on matrices validated once (tiers/validation.py). Each csr() copies; on the
    power-law graph's sptrsv_spmv the inspector's twelve copies took 1.1 s of 6.1 (development
    machine's CPU)."""
    if (getattr(M, "format", None) == "csr" and M.indptr.dtype == np.int64 and M.indices.dtype == np.int64
            and M.has_canonical_format):
        return M
    return csr(M)


def lower_part(M) -> sp.csr_matrix:
    """tril(M) as csr() returns it (canonical, int64 indices), by masking M's own arrays: the
    entries keep their order, so nothing is sorted again, and canonical() takes it without the
    copy that SciPy's narrowed indices cost. sp.tril goes through COO and back: 0.097 s against
    0.077 on the power-law graph's 7M entries (medians of 5 rounds, development machine's CPU,
    figures/data/inspector_order_tril_host_cpu_2026-12-07.txt). M itself where it holds no entry
    above the diagonal (is_lower), so a caller handed tril(A) pays O(n), not another mask."""
    M = canonical(M)
    if is_lower(M):
        return M
    rows = row_ids(M.indptr)
    keep = M.indices <= rows
    indptr = np.zeros(M.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows[keep], minlength=M.shape[0]), out=indptr[1:])
    T = sp.csr_matrix((M.data[keep], M.indices[keep], indptr), shape=M.shape)
    T.indptr, T.indices = indptr, M.indices[keep]     # int64, as csr() keeps them (SciPy narrows)
    return T


def is_lower(M) -> bool:
    """Whether M stores no entry above the diagonal: in canonical form each row's last index
    (sorted, so its largest) is at most its row, which reads n entries, not nnz."""
    M = canonical(M)
    ip = M.indptr
    full = np.flatnonzero(ip[1:] > ip[:-1])
    return bool((M.indices[ip[full + 1] - 1] <= full).all())


def row_ids(indptr) -> np.ndarray:
    """The row of every stored entry."""
    return np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))


def expand_ranges(starts, stops) -> tuple[np.ndarray, np.ndarray]:
    """(owner, value): for each range r, the integers starts[r]..stops[r]−1, owner = r;
    concatenated in range order without a Python loop. Where ranges are long (over 4 on
    average) the values are a running sum of steps — 1 inside a range, and at each range's first
    place the jump from the previous range's last value to its start — so only the starts are
    scattered: for the 42M candidates of the 27-point grid's ILU(0) structure, gathering each
    value's start and offset took 2.0–3.0 s against 0.2–0.4 s (development machine's CPU, numpy
    2.4.6). Short ranges keep the gathers, which cost less than scattering a step per range
    there (3M candidates in 2M ranges: 0.054 s against 0.094)."""
    return _expand(starts, stops, True)


def segment_reduce(ufunc, x, sizes, empty) -> np.ndarray:
    """ufunc's reduction of each of len(sizes) consecutive pieces of x, sizes[s] long (a row's
    entries, a step's pairs), `empty` for a piece of none: ufunc.reduceat alone would give an
    empty piece the next piece's first element."""
    sizes = np.asarray(sizes)
    out = np.full(len(sizes), empty, dtype=np.asarray(x).dtype)
    some = sizes > 0
    if some.any():
        out[some] = ufunc.reduceat(x, (np.cumsum(sizes) - sizes)[some])
    return out


def whole_pieces(sizes, size):
    """A long pass over groups of items (a range's candidates, a step's pairs), sizes[g] items in
    group g, cut into pieces that keep its temporaries small (PIECE says why): (first, stop)
    groups of consecutive pieces that never split a group, covering every group, each ending with
    the group that reaches the next multiple of `size` items (the last piece with the last
    group), so a piece holds fewer than `size` items besides its largest group. One empty piece
    when there is no group."""
    ends = np.cumsum(sizes)
    cuts = distinct(np.searchsorted(ends, np.arange(size, int(ends[-1]) if len(ends) else 0, size)) + 1)
    bounds = np.r_[0, cuts[(cuts > 0) & (cuts < len(ends))], len(ends)]
    return zip(bounds[:-1].tolist(), bounds[1:].tolist())


PIECE = 1 << 20
"""The items (candidates, pairs) that a long pass over tens of millions takes at a time. A piece's
temporaries, 8 MiB of int64 and more only by a group that a piece does not split, stay under
glibc's largest mmap threshold (32 MiB): freed, they go back to the heap and the next piece reuses
their pages, where larger ones were each mapped afresh and their pages faulted in again. On the
27-point grid's ILU(0) structure (_common_entries) the fresh pages fell from 3.9 GB with pieces of
2^22 to 2.0 GB with 2^21 and 1.6 GB with 2^20 (minor faults at 4 KB pages, development machine's
CPU; figures/data/symbolic_threads_cpu_2026-12-07.txt)."""

PIECE_THREADS = min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
"""Threads that map_pieces runs a long pass's pieces on: at most 8, and no more than the CPUs this
process may run on."""


def map_pieces(fn, bounds):
    """fn(a, b) for each (a, b) in bounds, yielded in order, the pieces run side by side on up to
    PIECE_THREADS threads: NumPy's passes and SciPy's element lookups release the GIL, so a host
    with cores to spare (the lent GPU's has 16) takes a long pass in a fraction of the time, with
    the same result."""
    bounds = list(bounds)
    if PIECE_THREADS <= 1 or len(bounds) <= 1:
        yield from (fn(a, b) for a, b in bounds)
        return
    pool = ThreadPoolExecutor(min(PIECE_THREADS, len(bounds)))
    try:
        yield from pool.map(lambda ab: fn(*ab), bounds)
    finally:                             # a caller that stops early (any()) starts no more pieces
        pool.shutdown(cancel_futures=True)


def drain(pieces) -> None:
    """Run to the end pieces that write their results in place (map_pieces' or a caller's
    generator of them), keeping nothing they yield."""
    for _ in pieces:
        pass


def range_values(starts, stops) -> np.ndarray:
    """expand_ranges' values alone: where ranges are long, the owners are never made (the
    power-law graph's flat records expand 11M entries whose owners they do not read)."""
    return _expand(starts, stops, False)[1]


def _expand(starts, stops, owners):
    starts = np.asarray(starts, dtype=np.int64)
    lens = np.maximum(np.asarray(stops, dtype=np.int64) - starts, 0)
    ends = np.cumsum(lens)
    total = int(ends[-1]) if ends.size else 0
    short = total <= 4 * len(starts)
    owner = np.repeat(np.arange(len(starts), dtype=np.int64), lens) if owners or short else None
    if short:
        return owner, np.arange(total, dtype=np.int64) - (ends - lens)[owner] + starts[owner]
    step = np.ones(total, dtype=np.int64)
    if not lens.all():                             # only non-empty ranges have a first place
        full = lens > 0
        starts, lens, ends = starts[full], lens[full], ends[full]
    step[ends[:-1]] = starts[1:] - (starts[:-1] + lens[:-1] - 1)
    step[0] = starts[0]
    return owner, np.cumsum(step, out=step)


def distinct(keys) -> np.ndarray:
    """The distinct values of keys, ascending: a sort and a neighbour test. NumPy 2.4's np.unique
    without return_* takes a hash path that took 11.5 s on 10M random int64 keys against 0.17 s
    for this (development machine's CPU, numpy 2.4.6)."""
    s = np.sort(np.asarray(keys), kind="quicksort")
    return s[np.concatenate(([True], s[1:] != s[:-1]))] if s.size else s


def stable_order(keys) -> np.ndarray:
    """np.argsort(keys, kind="stable"), the keys taken as int16 where they fit (levels, mostly):
    NumPy sorts 16-bit integers by radix, about 5× faster than int64 (10M keys: 0.15 against
    0.79 s on the development machine's CPU). The same permutation either way."""
    keys = np.asarray(keys)
    if keys.size and keys.dtype.kind in "iu" and keys.min() >= -32768 and keys.max() <= 32767:
        keys = keys.astype(np.int16)
    return np.argsort(keys, kind="stable")


def weak_components(n, u, v) -> np.ndarray:
    """Component of each of n nodes under the edges u[k] — v[k], direction ignored, numbered in
    the order of each component's smallest node (as scipy.sparse.csgraph.connected_components
    numbers them). Each round hooks, for every edge joining two trees, the larger root under the
    smaller, then jumps every node to its root; the roots are each tree's smallest node
    throughout. For the inspectors' many small windows (_lbc_assign) this replaced a CSR build
    and SciPy's call, whose checks cost more than the search."""
    lab = np.arange(n, dtype=np.int64)
    u, v = np.asarray(u, dtype=np.int64), np.asarray(v, dtype=np.int64)
    while u.size:
        lu, lv = lab[u], lab[v]
        apart = lu != lv
        if not apart.any():
            break
        np.minimum.at(lab, np.maximum(lu, lv)[apart], np.minimum(lu, lv)[apart])
        while True:                      # pointer jumping: every node to its tree's root
            up = lab[lab]
            if np.array_equal(up, lab):
                break
            lab = up
    return np.cumsum(lab == np.arange(n))[lab] - 1


def grow_components(old, n_new, u, v) -> np.ndarray:
    """weak_components of len(old) + n_new nodes, where `old` holds those of the first len(old)
    nodes under the edges among them, and u — v are the edges that touch a new node: each old
    component stands as one node, so the old edges are not walked again. The labels equal
    weak_components' over every edge: both number components in the order of their first node,
    and a merged component's first node is its first old component's (every old node precedes
    every new one)."""
    old = np.asarray(old, dtype=np.int64)
    h, k = len(old), int(old.max()) + 1 if len(old) else 0

    def node(x):
        x = np.asarray(x, dtype=np.int64)
        out = x - h + k
        early = x < h
        out[early] = old[x[early]]
        return out

    lab = weak_components(k + n_new, node(u), node(v))
    return np.concatenate((lab[old], lab[k:]))


def diag_positions(indptr, indices) -> np.ndarray:
    """Position of entry (i, i) in each row, −1 when it is not stored."""
    n = len(indptr) - 1
    rows = row_ids(indptr)
    pos = np.full(n, -1, dtype=np.int64)
    on = np.flatnonzero(indices == rows)
    pos[rows[on]] = on
    return pos


def _lookup(indptr, indices, shape):
    """The pattern as a SciPy CSR matrix holding each entry's position + 1 (see _positions)."""
    return sp.csr_matrix((np.arange(1, len(indices) + 1, dtype=np.int64), indices, indptr), shape=shape)


def _positions(P, rows, cols) -> np.ndarray:
    """Position of each (rows[t], cols[t]) in the canonical CSR pattern P = _lookup(…), −1 when
    absent. SciPy's CSR element lookup binary-searches within each row in C++; one searchsorted
    over all nnz row-major keys took 8× longer (17.3 s against 2.1 s on the development
    machine's CPU, for the 143M candidates that walking one fixed row made on the power-law
    graph, _common_entries)."""
    if len(rows) == 0:           # SciPy answers an empty lookup with a sparse matrix
        return np.zeros(0, dtype=np.int64)
    found = np.asarray(P[rows, cols]).ravel()
    found -= 1                   # P holds position + 1, so absent entries (0) become −1
    return found


def position_dtype(indices):
    """int32 where every position in a pattern of these indices fits (below 2^31 entries), else
    int64: what the factor structures' longest lists hold (_common_entries). The row tables take
    them as int32 as they are; the 27-point grid's ILU(0) made 25M pairs, whose three int64 lists
    took 600 MB of fresh pages and then 0.2–0.5 s to cast."""
    return np.int32 if len(indices) < 2**31 else np.int64


def _common_entries(indptr, indices, shape, a_row, a_lo, a_hi, b_row, b_lo, b_hi):
    """For each t: the columns stored both in row a_row[t] at positions a_lo[t]..a_hi[t]−1 and in
    row b_row[t] at b_lo[t]..b_hi[t]−1, where both ranges hold the same interval of columns (e.g.
    every column above k), so a column of one range found in the other row lies in its range.
    Walks the shorter range and looks each column up in the other row, so a hub row of a
    power-law graph is never walked once per neighbour (walking one fixed side made 143M
    candidates there for 3M common entries). Returns (t, position in a, position in b), grouped
    by t, columns increasing, in position_dtype(indices).

    The candidates go through in pieces of about PIECE (the 27-point grid's ILU(0) makes 42M), run
    side by side (map_pieces); each piece's results are copied, in order, into arrays sized for
    every candidate, of which only the found entries' pages are ever touched. The 27-point
    ILU(0)'s symbolic structure: 6.5 s with all the candidates at once, 1.9 s with pieces of 2^22
    (medians of three processes, development machine's CPU, numpy 2.4.6,
    figures/data/symbolic_pieces_cpu_2026-12-04.txt). On 2026-12-07 the same code took 4.24 s
    there, most of it system time, and pieces of 2^20 on two threads 1.54 s; `prepare` on the
    lent H100's host (8 threads) went from 5.27 to 3.88 s
    (figures/data/symbolic_threads_cpu_2026-12-07.txt, once_ab_threads_h100_2026-12-07.txt)."""
    walk_a = (a_hi - a_lo) <= (b_hi - b_lo)
    lo, hi = np.where(walk_a, a_lo, b_lo), np.where(walk_a, a_hi, b_hi)
    other = np.where(walk_a, b_row, a_row)
    P = _lookup(indptr, indices, shape)
    lens = np.maximum(hi - lo, 0)

    def piece(t0, t1):
        t, q = expand_ranges(lo[t0:t1], hi[t0:t1])
        r = _positions(P, other[t0 + t], indices[q])
        keep = np.flatnonzero(r >= 0)
        t, q, r = t[keep] + t0, q[keep], r[keep]
        wa = walk_a[t]
        return t, np.where(wa, q, r), np.where(wa, r, q)

    out = [np.empty(int(lens.sum()), dtype=position_dtype(indices)) for _ in range(3)]
    m = 0
    for found in map_pieces(piece, whole_pieces(lens, PIECE)):
        for o, f in zip(out, found):
            o[m:m + len(f)] = f
        m += len(found[0])
    return tuple(o[:m] for o in out)


# ---------------------------------------------------------------- DAGs

@dataclass(frozen=True, eq=False)
class DAG:
    """Iteration v depends on idx[ptr[v]:ptr[v+1]]. For a pair's joint DAG, ids < n1 are
    kernel 1's rows and ids ≥ n1 kernel 2's (row v − n1); a single kernel's DAG has n2 = 0."""
    ptr: np.ndarray
    idx: np.ndarray
    n1: int
    n2: int = 0

    @property
    def n(self) -> int:
        return self.n1 + self.n2

    @property
    def edges(self) -> int:
        return len(self.idx)

    def sources(self) -> tuple[np.ndarray, np.ndarray]:
        """(u, v) for every dependence u → v (v needs u)."""
        return self.idx, row_ids(self.ptr)

    def reversed(self) -> DAG:
        """Every dependence turned around: iteration u lists the iterations that need it. SciPy's
        CSR-to-CSC conversion does it in O(edges); a sort of the sources took 5–6× longer on the
        power-law graph's 10M-edge joint DAG."""
        n = self.n
        T = sp.csr_matrix((np.ones(len(self.idx), dtype=np.int8), self.idx, self.ptr), shape=(n, n)).tocsc()
        return DAG(T.indptr.astype(self.ptr.dtype), T.indices.astype(self.idx.dtype), self.n1, self.n2)

    def describe(self, v: int) -> str:
        v = int(v)
        return f"kernel 1 row {v}" if v < self.n1 else f"kernel 2 row {v - self.n1}"


def dag_from_edges(u, v, n1, n2=0) -> DAG:
    """DAG from dependences u[t] → v[t] (v needs u), grouped by v, each group sorted by u. One sort
    of the key v·n + u, not np.lexsort of the two: the same (u, v) order, about 4× faster on the
    power-law graph's joint DAG (7M edges: 0.52 s against 2.10 on the development machine's CPU,
    2026-11-29), and the inspectors build several such DAGs: on that graph they now take 1.8–2.5×
    less time, with the same schedules (figures/data/inspector_sort_cpu_2026-11-29.txt). The
    edges mostly come from CSR rows, already in that order (a kernel's DAG) or in a few sorted
    runs (the joint DAG: each kernel's edges, then the edges between them): no sort where they
    are sorted, else a stable one, a merge of the runs (timsort), not a quicksort that ignores
    them — the 3D grid's ILU(0) joint DAG in 0.19 s against 1.13, the 27-point one's in 0.02
    against 1.0 (figures/data/inspector_stable_sort_cpu_*). Equal keys are equal edges, so the
    result is the same whichever sort."""
    n = n1 + n2
    u, v = np.asarray(u, np.int64), np.asarray(v, np.int64)
    key = v * max(n, 1) + u
    if key.size and not (key[1:] >= key[:-1]).all():
        order = np.argsort(key, kind="stable")
        u, v = u[order], v[order]
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(v, minlength=n), out=ptr[1:])
    return DAG(ptr, u, n1, n2)


def dag_of_distinct_edges(u, v, n1, n2=0) -> DAG:
    """dag_from_edges with an edge named more than once kept once, for a DAG whose paths matter,
    not how many times an edge was named: the tickets' merged DAG (_ticket_graph in
    tiers/kernels/sparse_fusion_executors/tickets.py), whose fused rows name each factor edge
    twice. SciPy's COO-to-CSR conversion buckets the edges by v in O(edges), then sorts each
    group and drops its repeats in C++. Half the edges make the levels and the latest levels
    walked there 1.4–1.7× faster, the same levels; the build takes what dag_from_edges' takes
    (0.05–0.07 s), where dropping the repeats after its sort took 0.1–0.3 (development machine's
    CPU, 2026-12-07, figures/data/merged_dag_distinct_cpu_2026-12-07.txt)."""
    n = n1 + n2
    M = sp.coo_matrix((np.ones(len(u), dtype=bool), (np.asarray(v), np.asarray(u))), shape=(n, n)).tocsr()
    M.sum_duplicates()                   # a no-op where tocsr did it; what the result rests on
    return DAG(M.indptr.astype(np.int64), M.indices.astype(np.int64), n1, n2)


def kernel_dag(kernel: str, M) -> DAG:
    """Dependences among the rows of one kernel on matrix M (see the module docstring)."""
    M = canonical(M)
    n = M.shape[0]
    rows, cols = row_ids(M.indptr), M.indices
    if kernel == "spmv":
        keep = np.zeros(len(cols), dtype=bool)
    elif kernel in ("sptrsv_lower", "sptrsv_upper"):
        keep = cols != rows
    elif kernel in ("spilu0", "spic0", "sptrsv_unit_lower"):
        keep = cols < rows
    else:
        raise ValueError(f"unknown kernel {kernel!r}")
    return dag_from_edges(cols[keep], rows[keep], n)


def kernel_operands(pair: str, *matrices) -> tuple:
    """The pair's operands as its kernels read them: IC(0)'s tril(A) in place of A, taken once.
    kernel_dags, joint_cost and reuse_ratio give the same on these as on the operands, without
    masking A again each (an inspection called all three on A: 0.05–0.08 s a mask on the
    power-law graph). Not for fingerprint, which names the operands themselves."""
    mats = [canonical(M) for M in matrices]
    return (lower_part(mats[0]),) if pair == "spic0_sptrsv" else tuple(mats)


def _kernel_matrices(pair, mats):
    """The matrix each kernel of the pair iterates over: a one-matrix pair's kernels both read
    its kernel operand (IC(0) and its solve only see tril(A))."""
    ops = kernel_operands(pair, *mats)
    return ops[0], ops[-1]


def inter_dependences(pair: str, *matrices) -> tuple[np.ndarray, np.ndarray]:
    """(u, i): kernel-2 row i needs kernel-1 row u."""
    check_pair(pair)
    mats = [canonical(M) for M in matrices]
    if pair == "sptrsv_spmv":
        A = mats[1]
        return A.indices.copy(), row_ids(A.indptr)
    i = np.arange(mats[-1].shape[0], dtype=np.int64)     # kernel 2's rows: those of the pair's last matrix
    return i, i.copy()


def kernel_dags(pair: str, *matrices) -> tuple[DAG, DAG, tuple[np.ndarray, np.ndarray]]:
    """(DAG of kernel 1, DAG of kernel 2, inter-kernel dependences (u, i))."""
    spec = check_pair(pair)
    mats = [canonical(M) for M in matrices]
    M1, M2 = _kernel_matrices(pair, mats)
    return kernel_dag(spec.kernels[0], M1), kernel_dag(spec.kernels[1], M2), inter_dependences(pair, *mats)


def joint_dag(pair: str, *matrices) -> DAG:
    """The pair's iterations as one DAG: kernel 1's rows are 0..n1−1, kernel 2's n1..n1+n2−1."""
    return joint_from(*kernel_dags(pair, *matrices))


def joint_from(g1: DAG, g2: DAG, inter) -> DAG:
    """joint_dag from what kernel_dags returns, for a caller that needs the kernels' DAGs too.
    Where the inter-kernel edges come grouped by row with increasing sources (every pair's do),
    each kernel-2 row's edges from kernel 1 are placed before its own, which is dag_from_edges'
    order, without sorting the concatenation (its stable sort merged the two runs; the power-law
    ILU(0)'s sparse-fusion inspector took 2.44 s against 2.00 with this, medians of three
    processes on the development machine's CPU, figures/data/inspector_merge_cpu_2026-12-07.txt;
    the GPU machine's 16-core CPU showed no change, docs/sparse_fusion_log.md), and without the
    concatenation at all where kernel 2 has no edges (an SpMV second: its 7M sources, targets and
    keys on the power-law graph were 320 MB of fresh pages). Otherwise the concatenation, sorted."""
    u, i = (np.asarray(x, np.int64) for x in inter)
    n1, n2 = g1.n1, g2.n1
    if u.size and not ((i[1:] > i[:-1]) | ((i[1:] == i[:-1]) & (u[1:] > u[:-1]))).all():
        u1, v1 = g1.sources()
        u2, v2 = g2.sources()
        return dag_from_edges(np.concatenate([u1, u2 + n1, u]), np.concatenate([v1, v2 + n1, i + n1]), n1, n2)
    into = np.bincount(i, minlength=n2)
    ptr = np.empty(n1 + n2 + 1, dtype=np.int64)
    ptr[:n1 + 1] = g1.ptr
    np.cumsum(into + np.diff(g2.ptr), out=ptr[n1 + 1:])
    ptr[n1 + 1:] += g1.ptr[-1]
    if g2.edges == 0:                                      # kernel 2's rows hold their inter edges alone
        return DAG(ptr, np.concatenate([g1.idx, u]), n1, n2)
    idx = np.empty(int(ptr[-1]), dtype=np.int64)
    idx[:g1.edges] = g1.idx
    firsts = np.cumsum(into) - into                        # each kernel-2 row's first inter edge
    idx[ptr[n1 + i] + np.arange(len(i)) - firsts[i]] = u
    own = row_ids(g2.ptr)
    idx[ptr[n1 + own] + into[own] + np.arange(g2.edges) - g2.ptr[own]] = g2.idx + n1
    return DAG(ptr, idx, n1, n2)


def joint_cost(pair: str, *matrices) -> np.ndarray:
    """Cost of each joint iteration: the stored entries of the row it reads (its matrix row;
    for the solve after ILU(0), the strictly lower part plus one)."""
    spec = check_pair(pair)
    mats = [canonical(M) for M in matrices]
    M1, M2 = _kernel_matrices(pair, mats)
    c1 = np.diff(M1.indptr)
    if spec.kernels[1] == "sptrsv_unit_lower":        # its strictly lower entries, counted, plus one
        rows = row_ids(M2.indptr)
        c2 = np.bincount(rows[M2.indices < rows], minlength=M2.shape[0]) + 1
    else:
        c2 = np.diff(M2.indptr)
    return np.maximum(np.concatenate([c1, c2]), 1).astype(np.int64)


def reuse_ratio(pair: str, *matrices) -> float:
    """How much of what kernel 2 reads kernel 1 also touches, over what only kernel 2 reads
    (counted in array elements read; the solve's own output is not counted):

        sptrsv_spmv    x_j read by SpMV (nnz A)         / A's values (nnz A)          = 1
        spmv_sptrsv    y_i (n)                          / L's values (nnz L)          < 1
        sptrsv_sptrsv  y_i (n)                          / U's values (nnz U)          < 1
        spilu0_sptrsv  the factor's strict lower part   / b (n)                       > 1 usually
        spic0_sptrsv   the factor Lc (nnz tril A)       / b (n)

    Above 1 the two kernels share most of their data and iterations are packed interleaved;
    otherwise separated (the Sympiler sparse-fusion rule)."""
    check_pair(pair)
    mats = [canonical(M) for M in matrices]
    if pair == "sptrsv_spmv":
        return float(mats[1].nnz) / max(mats[1].nnz, 1)
    if pair in ("spmv_sptrsv", "sptrsv_sptrsv"):
        return mats[1].shape[0] / max(mats[1].nnz, 1)
    A = kernel_operands(pair, *mats)[0]                 # IC(0): tril(A), every entry of it shared
    if pair == "spic0_sptrsv":
        return A.nnz / max(A.shape[0], 1)
    rows = row_ids(A.indptr)
    return int((A.indices < rows).sum()) / max(A.shape[0], 1)


def wavefront_levels(dag: DAG, start=None) -> np.ndarray:
    """Level of every iteration: 0 without dependences, else 1 + the largest level among them
    (the longest path from a source). Kahn's algorithm one frontier at a time: each step is a
    few NumPy calls over the frontier's successors, so the cost is O(edges) plus O(levels)
    calls; the in-degrees fall by np.subtract.at rather than by np.unique's counts, whose sort
    took about half the time (1.3–2× faster on the benchmark DAGs, the same levels:
    figures/data/inspector_stable_sort_cpu_*). start: a least level per iteration (joint_levels:
    what a second kernel's rows inherit from the first's), each level then max(start, 1 + the
    largest level among its dependences). Raises ValueError on a cycle."""
    rev = dag.reversed()
    return _kahn(np.diff(dag.ptr).astype(np.int64), rev.ptr, rev.idx, dag.describe, start)


def reversed_levels(dag: DAG) -> np.ndarray:
    """wavefront_levels(dag.reversed()) without building the reversed DAG: its in-degrees are
    the DAG's out-degrees and its successors the DAG's dependences, which Kahn's algorithm is
    all it reads (the longest path from each iteration to a sink). On the power-law graph's
    sptrsv_spmv (10M edges) 0.83 s against 1.34 with the reversal (0.60 s of it), the same levels
    (development machine's CPU, 2026-12-05)."""
    return _kahn(np.bincount(dag.idx, minlength=dag.n).astype(np.int64), dag.ptr, dag.idx, dag.describe)


def _kahn(indeg, sptr, succ, describe, start=None) -> np.ndarray:
    """wavefront_levels' loop: in-degrees, the successors as CSR (sptr, succ), least levels."""
    n = len(indeg)
    level = np.full(n, -1, dtype=np.int64)
    slot = np.empty(n, dtype=np.int64)
    best = None if start is None else np.asarray(start, dtype=np.int64).copy()
    frontier = np.flatnonzero(indeg == 0)
    lvl = 0
    while frontier.size:
        level[frontier] = lvl if best is None else best[frontier]
        owner, at = expand_ranges(sptr[frontier], sptr[frontier + 1])
        if at.size == 0:
            break
        touched = succ[at]
        np.subtract.at(indeg, touched, 1)
        if best is not None:           # a frontier's levels are final: every dependence ran before
            np.maximum.at(best, touched, level[frontier][owner] + 1)
        free = touched[indeg[touched] == 0]     # each once per edge into it from the frontier
        k = np.arange(free.size)
        slot[free] = k                          # one of its positions survives: keep that one
        frontier = free[slot[free] == k]
        lvl += 1
    if (level < 0).any():
        raise ValueError(f"the dependences form a cycle through {describe(int(np.flatnonzero(level < 0)[0]))}")
    return level


def joint_levels(g1: DAG, g2: DAG, inter, w2=None) -> np.ndarray:
    """wavefront_levels(joint_from(g1, g2, inter)) from the kernels' own DAGs: kernel 1 needs
    nothing of kernel 2, so its rows keep their levels in g1, and a kernel-2 row starts one level after the latest kernel-1 row it reads; only g2's edges are
    walked from there. The inter-kernel edges, most of the power-law graph's sptrsv_spmv joint DAG
    (7M of 10M), are read once instead of reversed and walked: 0.51 s against 1.28 there, the
    same levels; on the pairs whose kernels both have edges within 10 % either way (development
    machine's CPU, 2026-12-05; the inspector as a whole: figures/data/
    inspector_joint_levels_cpu_2026-12-05.txt). w2: g2's own wavefront levels, if the caller
    has them.

    Where both kernels have the same DAG and kernel-2 row i reads kernel-1 row i alone (the factor
    pairs: ILU(0) and its unit-lower solve, IC(0) and its solve, on one pattern), each kernel-2
    row's level is its kernel-1 row's plus one (by induction over the rows in level order), so
    one walk serves both: the GPU host's power-law ILU(0) inspector walked the same DAG three
    times (figures/data/setup_profile_h100_2026-12-07.txt)."""
    u, i = (np.asarray(x, dtype=np.int64) for x in inter)
    same = g1.n1 == g2.n1 and np.array_equal(g1.ptr, g2.ptr) and np.array_equal(g1.idx, g2.idx)
    l1 = w2 if same and w2 is not None else wavefront_levels(g1)
    if same and np.array_equal(u, i) and np.array_equal(i, np.arange(g2.n)):
        return np.concatenate([l1, l1 + 1])
    start = np.zeros(g2.n, dtype=np.int64)
    if i.size and (i[1:] >= i[:-1]).all():      # grouped by the kernel-2 row (every pair's order)
        heads = np.flatnonzero(np.r_[True, i[1:] != i[:-1]])
        start[i[heads]] = np.maximum.reduceat(l1[u], heads) + 1
    elif i.size:
        np.maximum.at(start, i, l1[u] + 1)
    if g2.edges == 0:
        l2 = start
    elif start.size and start.min() == start.max():   # every row one level after the same one
        l2 = (wavefront_levels(g2) if w2 is None else w2) + start[0]
    else:
        l2 = wavefront_levels(g2, start=start)
    return np.concatenate([l1, l2])


# ---------------------------------------------------------------- ILU(0) and IC(0) symbolic structure

@dataclass(frozen=True, eq=False)
class ILU0Structure:
    """ILU(0) on A's pattern, row-wise IKJ, with every search done once here.

    For row i, its strictly lower entries are positions indptr[i]..diag[i]−1 (k increasing).
    Processing entry p = (i, k):   a[p] /= a[diag[k]]
                                   a[target[t]] −= a[p] · a[source[t]]   for t in upd_ptr[p]..upd_ptr[p+1]−1
    where the pairs (target, source) = ((i, j), (k, j)) for every j > k with both in the pattern,
    in increasing j; upd_target and upd_source in position_dtype(indices)."""
    n: int
    indptr: np.ndarray
    indices: np.ndarray
    diag: np.ndarray
    upd_ptr: np.ndarray
    upd_target: np.ndarray
    upd_source: np.ndarray

    @property
    def lower_count(self) -> np.ndarray:
        return self.diag - self.indptr[:-1]


def ilu0_symbolic(A) -> ILU0Structure:
    """Requires every diagonal entry stored (the validation layer checks it first)."""
    A = canonical(A)
    n, ip, ix = A.shape[0], A.indptr, A.indices
    diag = diag_positions(ip, ix)
    if (diag < 0).any():
        raise ValueError(f"A has no stored diagonal entry in row {int(np.flatnonzero(diag < 0)[0])}")
    rows = row_ids(ip)
    lower = np.flatnonzero(ix < rows)                            # entries (i, k), k < i
    i, k = rows[lower], ix[lower]
    # targets (i, j), j > k: row i after (i, k);  sources (k, j), j > k: row k after its diagonal
    t, tgt, src = _common_entries(ip, ix, A.shape, i, lower + 1, ip[i + 1], k, diag[k] + 1, ip[k + 1])
    count = np.zeros(len(ix), dtype=np.int64)                    # pairs of each entry (i, k), by t
    count[lower] = np.bincount(t, minlength=len(lower))
    upd_ptr = np.zeros(len(ix) + 1, dtype=np.int64)
    np.cumsum(count, out=upd_ptr[1:])
    return ILU0Structure(n, ip, ix, diag, upd_ptr, tgt, src)


@dataclass(frozen=True, eq=False)
class IC0Structure:
    """IC(0) on tril(A)'s pattern (indptr, indices of tril(A); the diagonal is last in its row).

    Entry p = (i, j), j ≤ i, taken in increasing j within row i:
        s = Σ_t l[left[t]] · l[right[t]]   over t in pair_ptr[p]..pair_ptr[p+1]−1
        l[p] = (a[p] − s) / l[diag[j]]  if j < i,   l[p] = √(a[p] − s)  if j = i
    with (left, right) = ((i, k), (j, k)) for every k < j in both rows (for j = i: ((i,k), (i,k)));
    pair_left and pair_right in position_dtype(indices)."""
    n: int
    indptr: np.ndarray
    indices: np.ndarray
    diag: np.ndarray
    pair_ptr: np.ndarray
    pair_left: np.ndarray
    pair_right: np.ndarray


def ic0_symbolic(A) -> IC0Structure:
    """Reads only tril(A), trimming A only where it stores entries above the diagonal (its callers
    pass tril(A) already). Requires every diagonal entry stored."""
    T = lower_part(A)
    n, ip, ix = T.shape[0], T.indptr, T.indices
    diag = diag_positions(ip, ix)
    if (diag < 0).any():
        raise ValueError(f"A has no stored diagonal entry in row {int(np.flatnonzero(diag < 0)[0])}")
    rows = row_ids(ip)
    off = np.flatnonzero(ix < rows)                              # entries (i, j), j < i
    i, j = rows[off], ix[off]
    # (i, k), k < j: positions ip[i].. of row i before (i, j);  (j, k), k < j: row j before its diagonal
    t, left_off, right_off = _common_entries(ip, ix, T.shape, i, ip[i], off, j, ip[j], diag[j])
    owner_d, q_d = expand_ranges(ip[:-1], diag)                  # the diagonal: (i, k), k < i
    # Row r's pairs are its off-diagonal entries' pairs, then its diagonal's (a row's last entry),
    # each list already in entry order, k increasing: a pair's place is its place in its own list
    # plus the other list's pairs of the rows before r (and of row r, for a diagonal pair). No
    # sort and no concatenation, whose temporaries' fresh pages cost more than the merge.
    n_d = diag - ip[:-1]                                         # each row's diagonal pairs
    row_off = i[t]
    place_off = np.arange(len(t), dtype=np.int64)
    place_off += (np.cumsum(n_d) - n_d)[row_off]
    place_d = np.arange(len(q_d), dtype=np.int64)
    place_d += np.cumsum(np.bincount(row_off, minlength=n))[owner_d]
    left, right = (np.empty(len(t) + len(q_d), dtype=position_dtype(ix)) for _ in range(2))
    left[place_off], left[place_d] = left_off, q_d
    right[place_off], right[place_d] = right_off, q_d
    count = np.zeros(len(ix), dtype=np.int64)
    count[off] = np.bincount(t, minlength=len(off))
    count[diag] = n_d
    pair_ptr = np.zeros(len(ix) + 1, dtype=np.int64)
    np.cumsum(count, out=pair_ptr[1:])
    return IC0Structure(n, ip, ix, diag, pair_ptr, left, right)
