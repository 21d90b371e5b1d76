"""Sparse fusion: the matrices, the dependence DAGs and ILU(0)/IC(0) structure against brute force,
the inspectors' schedules against the DAGs, t0 against SciPy, and every tier against t0."""
import importlib
import os
import pathlib
import re
import subprocess
import sys
import time
import zlib

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as sla
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import connected_components

from tests.conftest import DEVICE
from tiers import fusion_schedules as fs
from tiers import registry
from tiers import sparse_dags as sd
from tiers import sparse_matrices as sm
from tiers.tolerances import assert_close

ALG = registry.ALGORITHMS["sparse_fusion"]
TIERS = ALG.tiers
PAIRS = ALG.entries
KINDS = (None,) + fs.KINDS            # None: the tier's default (sequential loops in t0, wavefront elsewhere)
GENERATORS = tuple(sm.GENERATORS)
DTYPES = ("float64", "float32")
t0 = {pair: registry.get("sparse_fusion", "t0_numpy", pair) for pair in PAIRS}


def _seed(*parts):
    return zlib.crc32(repr(parts).encode())


def _kid(kind):
    return kind or "default"


# ---------------------------------------------------------------- problems

def _randomised(A, rng):
    """D·A·D with a random positive diagonal D: same pattern, new values, still SPD (and still an
    M- or H-matrix, so ILU(0) and IC(0) exist)."""
    return sm.rescaled(A, rng.uniform(0.5, 2.0, A.shape[0]))


def matrix(gen, size, seed):
    return _randomised(sm.GENERATORS[gen](size, seed), np.random.default_rng(seed + 1))


def operands(pair, A):
    """The pair's matrices built from one SPD matrix A: L = tril(A), U = triu(A)."""
    L, U = sm.tril_csr(A), sm.triu_csr(A)
    return {"sptrsv_spmv": (L, A), "spmv_sptrsv": (A, L), "sptrsv_sptrsv": (L, U)}.get(pair, (A,))


def unsymmetric(n, seed):
    """A random pattern unsymmetric in its entries and values, with up to two dense rows or
    columns, and a diagonal of either sign larger than its row's and its column's other entries
    together: strictly diagonally dominant by rows, an H-matrix, so ILU(0) exists
    (Meijerink–van der Vorst; Manteuffel) although some pivots are negative."""
    rng = np.random.default_rng(seed)
    M = sp.random(n, n, density=rng.uniform(0.02, 0.3), random_state=seed, format="lil")
    for h in rng.integers(0, n, rng.integers(0, 3)):
        if rng.random() < 0.5:
            M[int(h), :] = 1.0
        else:
            M[:, int(h)] = 1.0
    M = sp.csr_matrix(M)
    M.setdiag(0.0)
    M.eliminate_zeros()
    M.data = rng.uniform(0.1, 1.0, M.nnz) * rng.choice([-1.0, 1.0], M.nnz)
    big = np.maximum(abs(M).sum(1).A1, abs(M).sum(0).A1) + rng.uniform(0.5, 2.0, n)
    return sm._finish(M + sp.diags(big * rng.choice([-1.0, 1.0], n, p=[0.3, 0.7])))


def unsymmetric_operands(pair, n, seed):
    """The pair's matrices from unsymmetric patterns that share nothing: L = tril(B) beside A, and
    U = triu(B) beside L = tril(A), for independent B; ILU(0) on an unsymmetric A; IC(0) on an SPD
    A whose strictly upper triangle holds other entries, which IC(0) must never read."""
    A, B = unsymmetric(n, seed), unsymmetric(n, seed + 1)
    if pair == "spic0_sptrsv":
        T = sm.tril_csr(A, -1)
        S = T + T.T
        S = S + sp.diags(abs(S).sum(1).A1 + np.random.default_rng(seed).uniform(0.5, 2.0, n))
        return (sm._finish(sp.tril(S) + sp.triu(B, 1)),)
    return {"sptrsv_spmv": (sm.tril_csr(B), A), "spmv_sptrsv": (A, sm.tril_csr(B)),
            "sptrsv_sptrsv": (sm.tril_csr(A), sm.triu_csr(B)), "spilu0_sptrsv": (A,)}[pair]


def _as_tier(b, tier, dtype):
    if tier == "t0_numpy":
        return b.astype(dtype)
    return torch.tensor(b, dtype=getattr(torch, dtype), device=DEVICE)


def _round(M, dtype):
    """M with its values rounded to dtype, back in float64: exactly what a tier in dtype sees."""
    R = M.copy()
    R.data = R.data.astype(dtype).astype(np.float64)
    return R


def values_of(out, pattern=None):
    """Values of a result as float64 NumPy: vectors as they are, a factor as the values on its
    pattern in CSR order (SciPy matrix, torch sparse CSR tensor, 1-D values or dense tensor)."""
    if sp.issparse(out):
        C = sd.csr(out)
        if pattern is not None:
            np.testing.assert_array_equal(C.indptr, pattern.indptr)
            np.testing.assert_array_equal(C.indices, pattern.indices)
        return C.data.astype(np.float64)
    if isinstance(out, torch.Tensor):
        if out.layout == torch.sparse_csr:
            if pattern is not None:
                np.testing.assert_array_equal(out.crow_indices().cpu().numpy(), pattern.indptr)
                np.testing.assert_array_equal(out.col_indices().cpu().numpy(), pattern.indices)
            return out.values().detach().cpu().double().numpy()
        if out.ndim == 2 and pattern is not None:
            rows = sd.row_ids(pattern.indptr)
            return out.detach().cpu().double().numpy()[rows, pattern.indices]
        return out.detach().cpu().double().numpy()
    return np.asarray(out, dtype=np.float64)


def factor_pattern(pair, A):
    A = sd.csr(A)
    return {"spilu0_sptrsv": A, "spic0_sptrsv": sd.csr(sp.tril(A))}.get(pair)


def check_against_t0(tier, pair, mats, b, dtype, schedule):
    """Run `tier` in dtype and compare both results with t0 in float64 on the same rounded inputs."""
    ref = t0[pair](*(_round(M, dtype) for M in mats), b.astype(dtype).astype(np.float64))
    out = registry.get("sparse_fusion", tier, pair)(*mats, _as_tier(b, tier, dtype), schedule=schedule)
    assert len(out) == 2
    pat = factor_pattern(pair, mats[0])
    for k, (o, r) in enumerate(zip(out, ref)):
        is_factor = k == 0 and pat is not None
        if not is_factor:
            assert str(o.dtype).replace("torch.", "") == dtype
            if tier != "t0_numpy":
                assert o.device.type == DEVICE
        assert_close(values_of(o, pat if is_factor else None), values_of(r), dtype,
                     f"{tier} {pair} result {k}")
    return out


# ---------------------------------------------------------------- matrices

@settings(max_examples=25, deadline=None)
@given(gen=st.sampled_from(GENERATORS), size=st.integers(1, 80), seed=st.integers(0, 1000))
def test_generators_are_spd_canonical_csr(gen, size, seed):
    A = sm.GENERATORS[gen](size, seed)
    assert isinstance(A, sp.csr_matrix) and A.dtype == np.float64 and A.has_sorted_indices
    assert A.shape[0] == A.shape[1] >= 1
    assert (A.data != 0).all()
    C = A.copy()
    C.sum_duplicates()
    assert C.nnz == A.nnz
    D = A.toarray()
    np.testing.assert_array_equal(D, D.T)
    assert np.linalg.eigvalsh(D).min() > 0


def test_generator_stencils():
    P = sm.poisson2d(4).toarray()
    assert P.shape == (16, 16) and (np.diag(P) == 4).all()
    assert P[5, 4] == P[5, 6] == P[5, 1] == P[5, 9] == -1 and P[3, 4] == 0      # no wrap at a grid edge
    assert (np.abs(P).sum(axis=1) <= 8).all()
    Q = sm.poisson3d(3).toarray()
    assert Q.shape == (27, 27) and (np.diag(Q) == 6).all() and ((Q != 0).sum(axis=1)[13]) == 7
    R = sm.poisson3d(3, points=27)
    assert R.shape == (27, 27) and R[13, 13] == 26 and R.getrow(13).nnz == 27 and R.getrow(0).nnz == 8
    B = sm.banded_spd(20, 3, seed=4)
    i, j = B.nonzero()
    assert np.abs(i - j).max() == 3 and B.nnz == 20 + 2 * (19 + 18 + 17)
    assert (B.diagonal() > np.abs(B - sp.diags(B.diagonal())).sum(axis=1).A1).all()
    G = sm.powerlaw_laplacian(300, m=2, seed=1)
    degree = G.diagonal() - 1.0
    np.testing.assert_allclose(degree, -(G - sp.diags(G.diagonal())).sum(axis=1).A1)
    assert degree.min() >= 2 and degree.max() >= 5 * np.median(degree)          # a heavy tail


def test_reorder_tril_triu_and_mtx(tmp_path):
    import scipy.io

    A = sm.powerlaw_laplacian(60, seed=3)
    B, perm = sm.reorder(A, "rcm")
    assert sorted(perm.tolist()) == list(range(60))
    np.testing.assert_array_equal(B.toarray(), A.toarray()[np.ix_(perm, perm)])
    bw = lambda M: np.abs(np.subtract(*M.nonzero())).max()                                   # noqa: E731
    assert bw(B) < bw(A)
    N, p = sm.reorder(A, "natural")
    np.testing.assert_array_equal(p, np.arange(60))
    assert (N != A).nnz == 0
    np.testing.assert_array_equal((sm.tril_csr(A) + sm.triu_csr(A, 1)).toarray(), A.toarray())
    assert sm.tril_csr(A).has_sorted_indices and sm.triu_csr(A).has_sorted_indices
    scipy.io.mmwrite(tmp_path / "a.mtx", A, symmetry="symmetric")
    M = sm.load_mtx(tmp_path / "a.mtx")
    assert isinstance(M, sp.csr_matrix) and M.has_sorted_indices
    np.testing.assert_allclose(M.toarray(), A.toarray())


def test_load_mtx_refuses_complex_and_reads_patterns_as_ones(tmp_path):
    """A complex file used to come back real, its imaginary parts dropped with only a NumPy warning."""
    (tmp_path / "c.mtx").write_text("%%MatrixMarket matrix coordinate complex general\n2 2 2\n1 1 1 0\n2 2 1 1\n")
    with pytest.raises(ValueError, match=re.escape("c.mtx has complex values (complex128); only real matrices")):
        sm.load_mtx(tmp_path / "c.mtx")
    (tmp_path / "p.mtx").write_text("%%MatrixMarket matrix coordinate pattern symmetric\n3 3 4\n1 1\n2 1\n2 2\n3 3\n")
    P = sm.load_mtx(tmp_path / "p.mtx")
    assert P.dtype == np.float64 and P.has_sorted_indices
    np.testing.assert_array_equal(P.toarray(), [[1, 1, 0], [1, 1, 0], [0, 0, 1]])


@settings(max_examples=25, deadline=None)
@given(gen=st.sampled_from(GENERATORS), size=st.integers(1, 60), seed=st.integers(0, 1000),
       triangle=st.sampled_from(["full", "lower", "upper"]))
def test_rescaled_keeps_the_pattern(gen, size, seed, triangle):
    """rescaled(A, d) is D·A·D computed densely, on A's pattern entry for entry (what a prepared
    runner's refresh takes), for matrices and triangles of every generator."""
    A = {"full": lambda M: M, "lower": sm.tril_csr, "upper": sm.triu_csr}[triangle](sm.GENERATORS[gen](size, seed))
    d = np.random.default_rng(seed).uniform(-2.0, 2.0, A.shape[0])
    d[d == 0] = 1.0
    B = sm.rescaled(A, d)
    np.testing.assert_array_equal(B.indptr, A.indptr)
    np.testing.assert_array_equal(B.indices, A.indices)
    np.testing.assert_allclose(B.toarray(), d[:, None] * A.toarray() * d[None, :], rtol=1e-15, atol=0)
    assert not np.shares_memory(B.indices, A.indices)


def test_rescaled_rejects_bad_scales():
    A = sm.poisson2d(3)
    for A_, d, message in [(A, np.ones(8), "one scale per row, got shape (9, 9) and 8 scales"),
                           (A[:4], np.ones(4), "square matrix"),
                           (A, np.r_[np.ones(8), 0.0], "finite, non-zero scales"),
                           (A, np.r_[np.ones(8), np.nan], "finite, non-zero scales")]:
        with pytest.raises(ValueError, match=re.escape(message)):
            sm.rescaled(A_, d)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(gen=st.sampled_from(GENERATORS), size=st.integers(1, 40), seed=st.integers(0, 1000),
       symmetry=st.sampled_from(["general", "symmetric"]), gz=st.booleans())
@example(gen="banded_spd", size=2, seed=1, symmetry="symmetric", gz=False)
def test_mtx_round_trip_of_every_generator(tmp_path, gen, size, seed, symmetry, gz):
    """A matrix of every generator, written as Matrix Market (one triangle when symmetric, gzipped
    or not) and read back by load_mtx: the same pattern in canonical CSR and the same values to
    the bit (mmwrite keeps 17 significant digits), which t0 then runs as it runs the original.
    Stored symmetric, the matrix is first made exactly symmetric, as such a file's matrix is."""
    import gzip

    import scipy.io

    A = matrix(gen, size, seed)
    if symmetry == "symmetric":
        # the file keeps one triangle, so the other must be its exact mirror: D·A·D rounds a_ij and a_ji
        # separately, and they can differ in the last bit (banded_spd, size 2, seed 1)
        A = sm._finish(sp.tril(A) + sp.tril(A, -1).T)
    path = tmp_path / f"m_{gen}_{size}_{seed}_{symmetry}.mtx"
    scipy.io.mmwrite(path, A, symmetry=symmetry)
    if gz:
        path = path.with_name(path.name + ".gz")
        path.write_bytes(gzip.compress(path.with_name(path.name[:-3]).read_bytes()))
    M = sm.load_mtx(path)
    assert isinstance(M, sp.csr_matrix) and M.has_sorted_indices and M.dtype == np.float64
    np.testing.assert_array_equal(M.indptr, A.indptr)
    np.testing.assert_array_equal(M.indices, A.indices)
    np.testing.assert_array_equal(M.data, A.data)
    b = np.random.default_rng(seed).standard_normal(A.shape[0])
    for got, want in zip(t0["spic0_sptrsv"](M, b), t0["spic0_sptrsv"](A, b)):
        np.testing.assert_array_equal(np.asarray(got.toarray() if sp.issparse(got) else got),
                                      np.asarray(want.toarray() if sp.issparse(want) else want))


@pytest.mark.parametrize("call,match", [
    (lambda: sm.poisson3d(3, points=9), "points must be 7 or 27"),
    (lambda: sm.poisson2d(0), "n must be at least 1"),
    (lambda: sm.powerlaw_laplacian(10, shift=0.0), "shift must be a positive"),
    (lambda: sm.reorder(sm.poisson2d(3), "metis"), "ordering must be 'natural' or 'rcm'"),
    (lambda: sm.reorder(sp.random(3, 4, format="csr"), "rcm"), "square"),
])
def test_generator_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ---------------------------------------------------------------- DAGs and symbolic structure, by brute force

def brute_dag(pair, mats):
    """deps[v] for every joint iteration, written from the loops of the module docstring."""
    mats = [sd.csr(M) for M in mats]
    n = mats[0].shape[0]
    pat = [[set(M.indices[M.indptr[i]:M.indptr[i + 1]].tolist()) for i in range(n)] for M in mats]
    deps = [set() for _ in range(2 * n)]
    for i in range(n):
        if pair == "sptrsv_spmv":
            deps[i] = {j for j in pat[0][i] if j != i}
            deps[n + i] = set(pat[1][i])
        elif pair == "spmv_sptrsv":
            deps[n + i] = {n + j for j in pat[1][i] if j != i} | {i}
        elif pair == "sptrsv_sptrsv":
            deps[i] = {j for j in pat[0][i] if j != i}
            deps[n + i] = {n + j for j in pat[1][i] if j != i} | {i}
        else:
            deps[i] = {j for j in pat[0][i] if j < i}
            deps[n + i] = {n + j for j in pat[0][i] if j < i} | {i}
    return deps


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("gen", GENERATORS)
def test_joint_dag_and_levels_by_brute_force(gen, pair):
    mats = operands(pair, matrix(gen, 40, 0))
    dag = sd.joint_dag(pair, *mats)
    deps = brute_dag(pair, mats)
    assert dag.n1 == dag.n2 == mats[0].shape[0]
    for v in range(dag.n):
        assert set(dag.idx[dag.ptr[v]:dag.ptr[v + 1]].tolist()) == deps[v], dag.describe(v)
    level = sd.wavefront_levels(dag)
    for v in range(dag.n):
        assert level[v] == 1 + max((level[u] for u in deps[v]), default=-1)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 30), edges=st.integers(0, 120), runs=st.integers(0, 3), seed=st.integers(0, 2**16))
def test_dag_from_edges_and_levels_by_brute_force(n, edges, runs, seed):
    """dag_from_edges groups the edges by v, each group sorted by u, whatever order they come in:
    shuffled, sorted (no sort then) or in a few sorted runs (a stable sort merges them), repeated
    edges kept (dag_of_distinct_edges: once, the same groups otherwise); and wavefront_levels gives
    the longest path from a source, an edge listed twice counting as the one dependence it is."""
    rng = np.random.default_rng(seed)
    v = rng.integers(0, n, edges)
    u = rng.integers(0, n, edges) % np.maximum(v, 1)      # u < v: acyclic
    keep = u < v
    u, v = u[keep], v[keep]
    if runs == 0:
        order = rng.permutation(len(u))
    else:                                                  # `runs` sorted pieces, one after another
        piece = rng.integers(0, runs, len(u))
        order = np.lexsort((u, v, piece))
    u, v = u[order], v[order]
    dag = sd.dag_from_edges(u, v, n)
    want = sorted(zip(v.tolist(), u.tolist()))
    got = [(x, int(w)) for x in range(n) for w in dag.idx[dag.ptr[x]:dag.ptr[x + 1]]]
    assert got == want
    once = sd.dag_of_distinct_edges(u, v, n)
    assert [(x, int(w)) for x in range(n) for w in once.idx[once.ptr[x]:once.ptr[x + 1]]] == sorted(set(want))
    assert once.n1 == n and once.idx.dtype == once.ptr.dtype == np.int64
    level = sd.wavefront_levels(dag)
    assert np.array_equal(sd.wavefront_levels(once), level)
    deps = {x: set() for x in range(n)}
    for a, b in zip(u.tolist(), v.tolist()):
        deps[b].add(a)
    brute = {}
    for x in range(n):                                     # u < v: ids are a topological order
        brute[x] = 1 + max((brute[a] for a in deps[x]), default=-1)
    assert level.tolist() == [brute[x] for x in range(n)]


@settings(max_examples=60, deadline=None)
@given(n1=st.integers(1, 20), n2=st.integers(1, 20), e1=st.integers(0, 60), e2=st.integers(0, 60),
       inter=st.integers(0, 60), form=st.sampled_from(["sorted", "shuffled", "repeated"]), seed=st.integers(0, 2**16))
@example(n1=5, n2=6, e1=8, e2=0, inter=12, form="sorted", seed=1)   # kernel 2 without edges (an SpMV)
def test_joint_from_is_dag_from_edges(n1, n2, e1, e2, inter, form, seed):
    """joint_from places the kernel-2 rows' edges without a sort where the inter-kernel edges come
    grouped by row with increasing sources, as every pair's do (kernel 2's rows holding them alone
    where it has no edges), and sorts otherwise (shuffled, an edge repeated): the DAG
    dag_from_edges makes of the concatenation, either way."""
    rng = np.random.default_rng(seed)

    def kernel(n, e):
        v = rng.integers(0, n, e)
        u = rng.integers(0, n, e) % np.maximum(v, 1)
        keep = u < v
        return sd.dag_from_edges(u[keep], v[keep], n)

    g1, g2 = kernel(n1, e1), kernel(n2, e2)
    key = np.unique(rng.integers(0, n1 * n2, inter))           # (i, u) once each, grouped by i, u increasing
    i, u = key // n1, key % n1
    if form == "shuffled":
        order = rng.permutation(len(u))
        u, i = u[order], i[order]
    elif form == "repeated" and len(u):
        u, i = np.r_[u, u[:1]], np.r_[i, i[:1]]
    dag = sd.joint_from(g1, g2, (u, i))
    u1, v1 = g1.sources()
    u2, v2 = g2.sources()
    want = sd.dag_from_edges(np.r_[u1, u2 + n1, u], np.r_[v1, v2 + n1, i + n1], n1, n2)
    assert (dag.n1, dag.n2) == (n1, n2)
    assert np.array_equal(dag.ptr, want.ptr) and np.array_equal(dag.idx, want.idx)
    assert dag.ptr.dtype == dag.idx.dtype == np.int64


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 5), min_size=0, max_size=12), seed=st.integers(0, 2**16))
def test_segment_reduce_by_loops(sizes, seed):
    """segment_reduce: each consecutive piece reduced on its own, an empty piece (first, last or
    between others) given the stated value, not its neighbour's first element."""
    x = np.random.default_rng(seed).integers(-50, 50, sum(sizes))
    starts = np.cumsum([0] + sizes)
    for ufunc, empty in ((np.maximum, -99), (np.minimum, 99), (np.bitwise_or, 0)):
        want = [ufunc.reduce(x[a:b]) if b > a else empty for a, b in zip(starts[:-1], starts[1:])]
        got = sd.segment_reduce(ufunc, x, sizes, empty)
        assert got.tolist() == want and got.dtype == x.dtype


def test_wavefront_levels_reject_a_cycle():
    dag = sd.DAG(np.array([0, 1, 2, 3]), np.array([2, 0, 1]), 3)
    with pytest.raises(ValueError, match="cycle"):
        sd.wavefront_levels(dag)


@pytest.mark.parametrize("pair", PAIRS)
def test_reversed_dag_turns_every_dependence_around(pair):
    """DAG.reversed: iteration u lists exactly the iterations that need it, and turning it around
    again gives every iteration its own dependences back."""
    dag = sd.joint_dag(pair, *operands(pair, matrix("powerlaw_laplacian", 60, 1)))
    rev = dag.reversed()
    u, v = dag.sources()
    ru, rv = rev.sources()
    assert (rev.n1, rev.n2) == (dag.n1, dag.n2)
    assert sorted(zip(u.tolist(), v.tolist())) == sorted(zip(rv.tolist(), ru.tolist()))
    back = rev.reversed()
    assert np.array_equal(back.ptr, dag.ptr)
    for x in range(dag.n):
        assert sorted(back.idx[back.ptr[x]:back.ptr[x + 1]]) == sorted(dag.idx[dag.ptr[x]:dag.ptr[x + 1]])
    # so the reversed DAG's levels may take the DAG itself as their successors (_latest_levels)
    np.testing.assert_array_equal(sd.reversed_levels(dag), sd.wavefront_levels(rev))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=st.sampled_from(PAIRS), gen=st.sampled_from(GENERATORS), size=st.integers(2, 60),
       seed=st.integers(0, 2**16))
def test_joint_levels_from_the_kernels_dags(pair, gen, size, seed):
    """joint_levels (the inspectors' levels, from each kernel's DAG and the edges between them) and
    reversed_levels (the latest levels' longest paths to a sink) give what Kahn's algorithm gives
    on the joint DAG itself and on its reversal, on every pair and generator, with and without g2's
    own levels given; where both kernels have one DAG (the factor pairs), also with kernel-2 rows
    reading another kernel-1 row than their own, which the shortcut for reading one's own must
    not take."""
    mats = operands(pair, matrix(gen, size, seed))
    g1, g2, inter = sd.kernel_dags(pair, *mats)
    dag = sd.joint_from(g1, g2, inter)
    want = sd.wavefront_levels(dag)
    np.testing.assert_array_equal(sd.joint_levels(g1, g2, inter), want)
    np.testing.assert_array_equal(sd.joint_levels(g1, g2, inter, sd.wavefront_levels(g2)), want)
    np.testing.assert_array_equal(sd.reversed_levels(dag), sd.wavefront_levels(dag.reversed()))
    if pair in sd.FACTOR_PAIRS:
        i = np.arange(g2.n)
        for u in ((i + 1) % g2.n, i[::-1].copy()):
            np.testing.assert_array_equal(sd.joint_levels(g1, g2, (u, i), sd.wavefront_levels(g2)),
                                          sd.wavefront_levels(sd.joint_from(g1, g2, (u, i))))


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("gen", GENERATORS)
def test_lbc_on_a_kernels_rows_takes_its_own_dag(gen, pair):
    """The sub-DAG that LBC builds from the joint DAG on one kernel's rows is that kernel's own DAG
    (kernel 1 reads no kernel-2 row; kernel 2's edges among themselves are g2's): given it and its
    levels (`sub`, as the sparse-fusion inspector passes), the same coarse levels and partitions."""
    mats = operands(pair, matrix(gen, 50, 4))
    prob = fs._problem(pair, mats)
    n1, n = prob.dag.n1, prob.dag.n
    for nodes, g in ((np.arange(n1), prob.g1), (np.arange(n1, n), prob.g2)):
        built = fs._lbc_assign(prob.dag, prob.cost, 4, 0.1, nodes=nodes)
        given_ = fs._lbc_assign(prob.dag, prob.cost, 4, 0.1, nodes=nodes, sub=(g, sd.wavefront_levels(g)))
        assert all(np.array_equal(a, b) for a, b in zip(built, given_))
    np.testing.assert_array_equal(prob.levels[:n1], sd.wavefront_levels(prob.g1))

@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 30), edges=st.integers(0, 120), seed=st.integers(0, 2**16))
def test_wavefront_levels_from_least_levels_by_brute_force(n, edges, seed):
    """start: each level is max(start, 1 + the largest level among its dependences)."""
    rng = np.random.default_rng(seed)
    v = rng.integers(0, n, edges)
    u = rng.integers(0, n, edges) % np.maximum(v, 1)
    keep = u < v
    dag = sd.dag_from_edges(u[keep], v[keep], n)
    start = rng.integers(0, 6, n)
    brute = []
    for x in range(n):                                     # u < v: ids are a topological order
        deps = dag.idx[dag.ptr[x]:dag.ptr[x + 1]]
        brute.append(max([int(start[x])] + [brute[a] + 1 for a in deps.tolist()]))
    assert sd.wavefront_levels(dag, start=start).tolist() == brute


def _symbolic_by_brute_force(A):
    """ilu0_symbolic and ic0_symbolic of A checked entry by entry against dictionaries."""
    A = sd.csr(A)
    n = A.shape[0]
    pos = {(i, int(A.indices[p])): p for i in range(n) for p in range(A.indptr[i], A.indptr[i + 1])}
    s = sd.ilu0_symbolic(A)
    for (i, k), p in pos.items():
        want = [(pos[(i, j)], pos[(k, j)]) for j in range(k + 1, n) if k < i and (i, j) in pos and (k, j) in pos]
        got = list(zip(s.upd_target[s.upd_ptr[p]:s.upd_ptr[p + 1]].tolist(),
                       s.upd_source[s.upd_ptr[p]:s.upd_ptr[p + 1]].tolist()))
        assert got == want, (i, k)
    T = sd.csr(sp.tril(A))
    tpos = {(i, int(T.indices[p])): p for i in range(n) for p in range(T.indptr[i], T.indptr[i + 1])}
    c = sd.ic0_symbolic(A)
    np.testing.assert_array_equal(c.indptr, T.indptr)
    for (i, j), p in tpos.items():
        want = [(tpos[(i, k)], tpos[(j, k)]) for k in range(j) if (i, k) in tpos and (j, k) in tpos]
        got = list(zip(c.pair_left[c.pair_ptr[p]:c.pair_ptr[p + 1]].tolist(),
                       c.pair_right[c.pair_ptr[p]:c.pair_ptr[p + 1]].tolist()))
        assert got == want, (i, j)
    for lists in ((s.upd_target, s.upd_source), (c.pair_left, c.pair_right)):
        assert all(x.dtype == np.int32 for x in lists)      # positions of fewer than 2^31 entries


def test_positions_take_int64_only_past_int32():
    """The factor structures' pair lists are int32 up to 2^31 − 1 entries, int64 from 2^31."""
    assert sd.position_dtype(range(2**31 - 1)) is np.int32
    assert sd.position_dtype(range(2**31)) is np.int64


@pytest.mark.parametrize("gen", GENERATORS)
def test_ilu0_and_ic0_structure_by_brute_force(gen):
    _symbolic_by_brute_force(matrix(gen, 40, 1))


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 40), density=st.floats(0.02, 0.4), hubs=st.integers(0, 3), seed=st.integers(0, 2**16),
       chunk=st.sampled_from([1, 3, 17, sd.PIECE]), threads=st.sampled_from([1, 3]))
def test_symbolic_structure_with_hubs_by_brute_force(n, density, hubs, seed, chunk, threads):
    """Random unsymmetric patterns with a few dense rows and columns: the symbolic structures
    walk the shorter of the two rows they intersect (sparse_dags._common_entries), so both a
    short row beside a hub and a hub beside a short row must give every common entry, in order.
    `chunk`: the candidates per piece (PIECE), small enough here to cut them into many, which
    `threads` run side by side (PIECE_THREADS)."""
    rng = np.random.default_rng(seed)
    M = sp.random(n, n, density=density, random_state=seed, format="lil")
    for h in rng.integers(0, n, hubs):
        M[int(h), :] = 1.0
        M[:, int(h)] = 1.0
    kept = sd.PIECE, sd.PIECE_THREADS
    sd.PIECE, sd.PIECE_THREADS = chunk, threads
    try:
        _symbolic_by_brute_force((M + sp.eye(n)).tocsr())
    finally:
        sd.PIECE, sd.PIECE_THREADS = kept


def test_distinct_is_numpys_unique():
    rng = np.random.default_rng(5)
    for keys in (rng.integers(0, 50, 400), rng.integers(-3, 3, 7), np.zeros(0, np.int64), np.array([4])):
        np.testing.assert_array_equal(sd.distinct(keys), np.unique(keys))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(-5, 40), st.integers(-3, 4)), max_size=30)
       | st.lists(st.tuples(st.integers(-5, 40), st.integers(-3, 30)), max_size=30))
def test_expand_ranges_is_the_plain_loop(ranges):
    """Every range's integers in range order with its owner; empty and reversed ranges give
    nothing, and negative starts count like any other. Short ranges (≤ 4 on average) and long
    ones take different paths (gathered values, a running sum of steps): lengths up to 4 and
    up to 30 reach both. range_values gives the same values without the owners."""
    starts = np.array([a for a, _ in ranges], dtype=np.int64)
    stops = starts + np.array([d for _, d in ranges], dtype=np.int64)
    owner, value = sd.expand_ranges(starts, stops)
    want = [(r, v) for r, (a, b) in enumerate(zip(starts, stops)) for v in range(a, b)]
    assert owner.dtype == value.dtype == np.int64
    assert list(zip(owner.tolist(), value.tolist())) == want
    alone = sd.range_values(starts, stops)
    assert alone.dtype == np.int64 and alone.tolist() == [v for _, v in want]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 60), st.integers(0, 2 ** 20), st.integers(-3, 3), st.integers(0, 2 ** 61), st.integers(0, 99))
@example(50, 2 ** 20, -3, 2 ** 61, 1)          # past 63 bits: np.lexsort
@example(50, 2 ** 20, -3, 2 ** 20, 1)          # packed
def test_sorted_by_is_lexsort_by_id(n, level_top, low, key_top, seed):
    """_assemble's order: np.lexsort of (id, key, part, level), whether the columns' ranges pack
    into one int64 (argsort of the packed key) or not (np.lexsort itself), negative lows too."""
    rng = np.random.default_rng(seed)
    level = rng.integers(low, low + level_top + 1, n)
    part = rng.integers(0, 5, n)
    key = rng.integers(-key_top, key_top + 1, n)
    want = np.lexsort((np.arange(n), key, part, level))
    np.testing.assert_array_equal(fs._sorted_by(level, part, key), want)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 30), st.floats(0.0, 0.5), st.integers(0, 99))
def test_lower_part_is_scipys_tril(n, density, seed):
    """lower_part: sp.tril's matrix (the same index arrays and values), as canonical() takes it
    without a copy; explicit zeros kept, empty rows and a missing diagonal alike."""
    M = sp.random(n, n, density=density, random_state=seed, format="csr")
    if M.nnz:
        M.data[0] = 0.0                                   # an explicitly stored zero stays stored
    T, want = sd.lower_part(M), sd.csr(sp.tril(M, format="csr"))
    for a in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(T, a), getattr(want, a))
    assert sd.canonical(T) is T
    rows = sd.row_ids(sd.csr(M).indptr)
    assert sd.is_lower(sd.csr(M)) == bool((sd.csr(M).indices <= rows).all())
    assert sd.is_lower(T) and sd.lower_part(T) is T               # tril(A) handed in comes back as it is
    U = sd.csr(sp.triu(M, k=1, format="csr") + sp.eye(n, format="csr"))
    assert sd.is_lower(U) == (U.nnz == n)                         # only the diagonal is lower
    if n > 1:                                                     # unsorted indices are sorted first
        P = sp.csr_matrix((np.array([1.0, 1.0, 1.0]), np.array([0, 1, 1]), np.array([0, 2, 3])), shape=(2, 2))
        P.indices, P.has_sorted_indices = np.array([1, 0, 1]), False      # row 0 stores (0, 1) first
        assert not sd.is_lower(P) and sd.is_lower(sd.lower_part(P))


@pytest.mark.parametrize("pair", PAIRS)
def test_kernel_operands_give_what_the_operands_give(pair):
    """kernel_dags, joint_cost and reuse_ratio on kernel_operands are theirs on the operands."""
    A = sp.csr_matrix(sm.poisson2d(7)) + sp.random(49, 49, density=0.05, random_state=3, format="csr")
    A = sd.csr(A + A.T + 20 * sp.eye(49))
    ops = operands(pair, A)
    seen = sd.kernel_operands(pair, *ops)
    assert len(seen) == len(ops)
    a, b = sd.kernel_dags(pair, *ops), sd.kernel_dags(pair, *seen)
    for g, h in zip(a[:2], b[:2]):
        np.testing.assert_array_equal(g.ptr, h.ptr)
        np.testing.assert_array_equal(g.idx, h.idx)
    for x, y in zip(a[2], b[2]):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(sd.joint_cost(pair, *ops), sd.joint_cost(pair, *seen))
    assert sd.reuse_ratio(pair, *ops) == sd.reuse_ratio(pair, *seen)
    if pair == "spic0_sptrsv":
        assert seen[0].nnz < ops[0].nnz and sd.is_lower(seen[0])


def test_stable_order_is_numpys_stable_argsort():
    """The same permutation as np.argsort(kind="stable"), whether the keys fit in int16 or not."""
    rng = np.random.default_rng(6)
    for keys in (rng.integers(0, 56, 5000), -rng.integers(0, 4000, 3000), rng.integers(-40000, 40000, 3000),
                 np.array([32767, -32768, 0, 32767]), np.array([40000, 3, 40000]), np.zeros(0, np.int64),
                 rng.random(50)):
        np.testing.assert_array_equal(sd.stable_order(keys), np.argsort(keys, kind="stable"))


@pytest.mark.parametrize("threads", [1, 3])
def test_map_pieces_in_order_raising_and_stopping(threads, monkeypatch):
    """map_pieces yields fn's results in the pieces' order whatever the threads; an exception in a
    piece reaches the caller; a caller that stops early leaves the pieces not yet started unrun."""
    monkeypatch.setattr(sd, "PIECE_THREADS", threads)
    bounds = [(a, a + 2) for a in range(0, 40, 2)]
    assert list(sd.map_pieces(lambda a, b: (a, b), bounds)) == bounds

    def bad(a, b):
        if a == 10:
            raise ValueError("piece 10")
        return a
    with pytest.raises(ValueError, match="piece 10"):
        list(sd.map_pieces(bad, bounds))
    ran = []

    def slow(a, b):
        ran.append(a)
        time.sleep(0.01)
        return a == 0
    assert any(sd.map_pieces(slow, bounds * 20))
    assert len(ran) < 100


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 40).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n))))
def test_weak_components_are_scipys(graph):
    """The same components, numbered the same way, as SciPy's weak connected components: self
    loops, repeated and reversed edges, isolated nodes and long chains alike."""
    n, edges = graph
    u = np.array([a for a, _ in edges], dtype=np.int64)
    v = np.array([b for _, b in edges], dtype=np.int64)
    g = sp.coo_matrix((np.ones(len(edges)), (u, v)), shape=(n, n))
    _, want = connected_components(g, directed=True, connection="weak")
    np.testing.assert_array_equal(sd.weak_components(n, u, v), want)
    chain = np.arange(n - 1)[::-1]                 # a path whose edges come largest first
    np.testing.assert_array_equal(sd.weak_components(n, chain + 1, chain), np.zeros(n, np.int64))


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(0, 12), max_size=40), size=st.integers(1, 20))
def test_whole_pieces_cover_the_groups_in_order_unsplit(sizes, size):
    """The pieces that _common_entries and pair_pieces walk: every group once, in order, none split;
    a piece holds fewer than `size` items besides its largest group (empty groups at the end
    included); one empty piece for no groups."""
    got = list(sd.whole_pieces(np.array(sizes, dtype=np.int64), size))
    assert got[0][0] == 0 and got[-1][1] == len(sizes)
    assert all(a1 == b0 for (_, a1), (b0, _) in zip(got, got[1:]))
    assert all(g0 < g1 for g0, g1 in got) if sizes else got == [(0, 0)]
    assert all(sum(sizes[g0:g1]) - max(sizes[g0:g1], default=0) < size for g0, g1 in got)


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 40).flatmap(lambda n: st.tuples(
    st.just(n), st.integers(0, n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n))))
def test_grow_components_is_weak_components_of_every_edge(graph):
    """Growing the components of the first h nodes by the edges that touch the others gives the
    labels weak_components gives over every edge (LBC's gallop extends each balanced window so),
    whichever way the edges point."""
    n, h, edges = graph
    u = np.array([a for a, _ in edges], dtype=np.int64)
    v = np.array([b for _, b in edges], dtype=np.int64)
    inside = (u < h) & (v < h)
    old = sd.weak_components(h, u[inside], v[inside])
    np.testing.assert_array_equal(sd.grow_components(old, n - h, u[~inside], v[~inside]),
                                  sd.weak_components(n, u, v))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), W=st.integers(1, 9), levels=st.integers(1, 6), m=st.integers(0, 40))
def test_least_loaded_by_is_one_call_per_level(seed, W, levels, m):
    """The sparse-fusion inspector places the kernel-2 iterations that no partition takes over, for
    every level at once (_least_loaded_by): the same bins and loads as one _least_loaded call per
    level in increasing level, the loop it replaced — singletons, ties, levels whose bins are
    already loaded; costs are whole numbers, as the inspector's are."""
    rng = np.random.default_rng(seed)
    load = rng.integers(0, 5, (levels, W)).astype(np.float64)
    t = rng.integers(0, levels, m)
    cost = rng.integers(1, 6, m).astype(np.float64)
    want, want_load = np.empty(m, dtype=np.int64), load.copy()
    for lv in np.unique(t):
        sel = np.flatnonzero(t == lv)
        want[sel] = fs._least_loaded(want_load[lv], cost[sel])
        np.add.at(want_load, (np.full(len(sel), lv), want[sel]), cost[sel])
    got = fs._least_loaded_by(load, t, cost)
    np.testing.assert_array_equal(got, want)
    np.add.at(load, (t, got), cost)
    np.testing.assert_array_equal(load, want_load)


def test_canonical_copies_only_what_is_not_canonical():
    """canonical() hands back a matrix that csr() made as it is, and canonicalises anything else
    into a copy (int32 indices, unsorted or duplicate entries, another format); the input is never
    modified."""
    A = sd.csr(sm.poisson2d(5))
    assert sd.canonical(A) is A
    narrow = sp.csr_matrix(sm.poisson2d(5))
    narrow.indptr, narrow.indices = narrow.indptr.astype(np.int32), narrow.indices.astype(np.int32)
    for M in (narrow, sm.poisson2d(5).tocoo(), sm.poisson2d(5).tocsc()):
        C = sd.canonical(M)
        assert C is not M and C.indices.dtype == np.int64 and C.has_canonical_format
        assert (C != A).nnz == 0
    U = sp.csr_matrix((np.array([1.0, 2.0, 3.0]), np.array([1, 0, 0]), np.array([0, 2, 3])), shape=(2, 2))
    U.indptr, U.indices = U.indptr.astype(np.int64), U.indices.astype(np.int64)
    U.has_canonical_format = False
    before = U.indices.copy()
    C = sd.canonical(U)
    assert C is not U and C.has_canonical_format and list(C.indices) == [0, 1, 0]
    np.testing.assert_array_equal(U.indices, before)


# ---------------------------------------------------------------- t0 against SciPy

def scipy_reference(pair, mats, b):
    tri = lambda T, r, lower=True, unit=False: sla.spsolve_triangular(                      # noqa: E731
        sp.csr_matrix(T), r, lower=lower, unit_diagonal=unit)
    if pair == "sptrsv_spmv":
        x = tri(mats[0], b)
        return x, mats[1] @ x
    if pair == "spmv_sptrsv":
        y = mats[0] @ b
        return y, tri(mats[1], y)
    if pair == "sptrsv_sptrsv":
        y = tri(mats[0], b)
        return y, tri(mats[1], y, lower=False)
    return None


def check_factor(pair, A, F, x, b):
    """ILU(0): (L·U)_ij = a_ij on A's pattern; IC(0): (Lc·Lcᵀ)_ij = a_ij on tril(A)'s; and x solves
    with the factor's (unit) lower triangle."""
    A = sd.csr(A)
    pat = factor_pattern(pair, A)
    F = sd.csr(F)
    assert (F.indptr == pat.indptr).all() and (F.indices == pat.indices).all()
    if pair == "spilu0_sptrsv":
        Lf = sp.tril(F, -1) + sp.identity(A.shape[0])
        P = (Lf @ sp.triu(F)).tocsr()
        x_ref = sla.spsolve_triangular(sp.csr_matrix(Lf), b, lower=True, unit_diagonal=True)
    else:
        P = (F @ F.T).tocsr()
        x_ref = sla.spsolve_triangular(F, b, lower=True)
    rows = sd.row_ids(pat.indptr)
    got = np.asarray(P[rows, pat.indices]).ravel()
    assert_close(got, sd.csr(pat).data if pair == "spilu0_sptrsv" else sd.csr(sp.tril(A)).data, "float64",
                 f"{pair} factor product on the pattern")
    assert_close(x, x_ref, "float64", f"{pair} solve")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen=st.sampled_from(GENERATORS), size=st.integers(1, 90), seed=st.integers(0, 10_000),
       pair=st.sampled_from(PAIRS))
def test_t0_matches_scipy(gen, size, seed, pair):
    A = matrix(gen, size, seed)
    mats = operands(pair, A)
    b = np.random.default_rng(seed).standard_normal(A.shape[0])
    out = t0[pair](*mats, b)
    ref = scipy_reference(pair, mats, b)
    if ref is None:
        check_factor(pair, A, out[0], out[1], b)
    else:
        for o, r in zip(out, ref):
            assert o.dtype == np.float64
            assert_close(o, r, "float64", pair)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 90), seed=st.integers(0, 10_000), pair=st.sampled_from(PAIRS))
def test_t0_matches_scipy_on_unsymmetric_patterns(n, seed, pair):
    """The generators are all symmetric; ILU(0) is for matrices that are not, and a pair's two
    matrices need not share a pattern (unsymmetric_operands)."""
    mats = unsymmetric_operands(pair, n, seed)
    b = np.random.default_rng(seed).standard_normal(n)
    out = t0[pair](*mats, b)
    ref = scipy_reference(pair, mats, b)
    if ref is None:
        check_factor(pair, mats[0], out[0], out[1], b)
    else:
        for o, r in zip(out, ref):
            assert_close(o, r, "float64", pair)


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("gen", GENERATORS)
def test_t0_every_schedule_gives_the_sequential_numbers(gen, pair):
    """Each row's arithmetic does not depend on when it runs, so any valid order is bit-identical."""
    mats = operands(pair, matrix(gen, 50, 2))
    b = np.random.default_rng(_seed(gen, pair)).standard_normal(mats[0].shape[0])
    ref = t0[pair](*mats, b)
    for kind in fs.KINDS:
        out = t0[pair](*mats, b, schedule=fs.inspect(pair, *mats, kind=kind, workers=3))
        for o, r in zip(out, ref):
            np.testing.assert_array_equal(values_of(o), values_of(r), err_msg=f"{kind}")


# ---------------------------------------------------------------- schedules

@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("gen", GENERATORS)
def test_every_schedule_is_valid(gen, pair):
    mats = operands(pair, matrix(gen, 120, 3))
    dag = sd.joint_dag(pair, *mats)
    wf = fs.inspect(pair, *mats, kind="wavefront")
    for kind in fs.KINDS:
        s = fs.inspect(pair, *mats, kind=kind, workers=4)
        fs.check_schedule(s, dag)
        assert (s.kind, s.pair, s.n1, s.n2) == (kind, pair, dag.n1, dag.n2)
        assert s.levels() <= wf.levels()
        st_ = s.stats()
        assert st_["levels"] == s.levels() and st_["syncs"] == s.levels() - 1
        assert st_["partition_size"]["min"] >= 1 and st_["partitions"] == s.partitions()
        assert st_["critical_cost"] <= st_["total_cost"] == float(s.cost.sum())
        assert 0.0 <= st_["fused_fraction"] <= 1.0
    assert wf.partitions() == dag.n and fs.inspect(pair, *mats, kind="sequential").levels() == 1


@pytest.mark.parametrize("gen,workers,at_most", [("banded_spd", 8, 0.1), ("powerlaw_laplacian", 2, 0.6),
                                                  ("powerlaw_laplacian", 8, 0.95)])
def test_sparse_fusion_needs_fewer_levels_than_wavefront(gen, workers, at_most):
    """Where the head kernel's DAG coarsens the fused schedule saves synchronisations: a band (a
    dependence chain) runs as one level instead of ~n; a power-law graph's levels drop by 40 % for
    two workers and a few for eight (more workers need more independent work per level). The
    second kernel mostly joins the first kernel's partitions."""
    A = matrix(gen, 300, _seed(gen, workers) % 100)
    for pair in PAIRS:
        mats = operands(pair, A)
        wf = fs.inspect(pair, *mats, kind="wavefront")
        sf = fs.inspect(pair, *mats, kind="sparse_fusion", workers=workers)
        assert sf.levels() <= at_most * wf.levels(), pair
        if pair != "sptrsv_sptrsv":      # U's solve starts after L's last row: little to fuse
            assert sf.stats()["fused_fraction"] > 0.75, pair


def test_packing_follows_the_reuse_ratio():
    A = matrix("poisson2d", 64, 0)
    ratios = {pair: sd.reuse_ratio(pair, *operands(pair, A)) for pair in PAIRS}
    assert ratios["sptrsv_spmv"] == 1.0
    assert ratios["spmv_sptrsv"] < 1 and ratios["sptrsv_sptrsv"] < 1
    assert ratios["spilu0_sptrsv"] > 1 and ratios["spic0_sptrsv"] > 1
    for pair in PAIRS:
        s = fs.inspect(pair, *operands(pair, A))
        assert s.packing == ("interleaved" if ratios[pair] > 1 else "separated")
        assert s.stats()["reuse_ratio"] == ratios[pair]
        forced = fs.inspect(pair, *operands(pair, A), packing="interleaved")
        fs.check_schedule(forced, sd.joint_dag(pair, *operands(pair, A)))
    # separated: inside every partition, all of kernel 1 before any of kernel 2
    s = fs.inspect("sptrsv_spmv", *operands("sptrsv_spmv", A))
    for p in range(s.partitions()):
        k = s.order[s.part_ptr[p]:s.part_ptr[p + 1]] >= s.n1
        assert (np.diff(k.astype(int)) >= 0).all()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen=st.sampled_from(GENERATORS), size=st.integers(1, 150), seed=st.integers(0, 1000),
       pair=st.sampled_from(PAIRS), workers=st.integers(1, 12), slack=st.sampled_from([0.0, 0.1, 1.0, 10.0]))
def test_schedule_property(gen, size, seed, pair, workers, slack):
    mats = operands(pair, matrix(gen, size, seed))
    dag = sd.joint_dag(pair, *mats)
    wf = fs.inspect(pair, *mats, kind="wavefront").levels()
    for kind, opts in (("lbc", {"slack": slack}), ("sparse_fusion", {"slack": slack})):
        s = fs.inspect(pair, *mats, kind=kind, workers=workers, **opts)
        fs.check_schedule(s, dag)
        assert s.levels() <= wf
        assert np.diff(s.level_ptr).max() <= max(workers, 1) or kind == "sparse_fusion"


def test_sparse_fusion_falls_back_when_placement_costs_levels(monkeypatch):
    """Should placing kernel 2 ever need more levels than the joint wavefronts (no test matrix
    does), the inspector coarsens the joint DAG instead."""
    mats = operands("sptrsv_spmv", matrix("powerlaw_laplacian", 40, 0))
    one_level_each = lambda dag, *rest: (np.arange(dag.n), np.zeros(dag.n, np.int64), np.arange(dag.n))  # noqa: E731
    monkeypatch.setattr(fs, "_fuse_head_first", one_level_each)
    s = fs.inspect("sptrsv_spmv", *mats, workers=3)
    fs.check_schedule(s, sd.joint_dag("sptrsv_spmv", *mats))
    assert s.kind == "sparse_fusion" and s.levels() <= fs.inspect("sptrsv_spmv", *mats, kind="wavefront").levels()


def _broken(s, order):
    return fs.Schedule(s.kind, s.pair, s.n1, s.n2, s.level_ptr, s.part_ptr, order, s.packing, s.fingerprint)


@pytest.mark.parametrize("kind", ["sequential", "wavefront", "sparse_fusion"])
def test_check_schedule_rejects_broken_schedules(kind):
    mats = operands("sptrsv_spmv", matrix("poisson2d", 36, 0))
    dag = sd.joint_dag("sptrsv_spmv", *mats)
    s = fs.inspect("sptrsv_spmv", *mats, kind=kind, workers=2)
    fs.check_schedule(s, dag)
    pos = np.empty(dag.n, dtype=np.int64)
    pos[s.order] = np.arange(dag.n)
    # swap two dependent iterations: the dependence now runs backwards
    u, v = dag.sources()
    t = int(np.argmax(pos[v] - pos[u]))
    order = s.order.copy()
    order[pos[u[t]]], order[pos[v[t]]] = order[pos[v[t]]], order[pos[u[t]]]
    with pytest.raises(ValueError, match=r"dependence broken: iteration \d+ \(kernel [12] row \d+\) needs "
                                         r"iteration \d+"):
        fs.check_schedule(_broken(s, order), dag)
    # an iteration listed twice, another never
    order = s.order.copy()
    order[-1] = order[0]
    with pytest.raises(ValueError, match=r"iteration \d+ \(kernel [12] row \d+\) runs (never|2 times)"):
        fs.check_schedule(_broken(s, order), dag)
    with pytest.raises(ValueError, match="outside"):
        fs.check_schedule(_broken(s, np.where(s.order == 0, dag.n, s.order)), dag)
    with pytest.raises(ValueError, match="iterations but the DAG has"):
        fs.check_schedule(s, sd.joint_dag("sptrsv_spmv", *operands("sptrsv_spmv", matrix("poisson2d", 25, 0))))
    fs.check_schedule(s, (dag.ptr, dag.idx))          # a bare (ptr, idx) DAG works too


def test_lockstep_groups_cover_the_schedule_in_dependence_order():
    for pair in PAIRS:
        mats = operands(pair, matrix("powerlaw_laplacian", 80, 5))
        s = fs.inspect(pair, *mats, workers=3)
        gptr, gk, glevel, rows = fs.lockstep(s)
        joint = np.where(np.repeat(gk, np.diff(gptr)) == 1, rows + s.n1, rows)
        order = np.concatenate([np.arange(0)] + [joint[a:b] for a, b in zip(gptr[:-1], gptr[1:])])
        assert sorted(order.tolist()) == list(range(s.n1 + s.n2))
        # as one partition per group member in one level per group, it is a valid schedule
        flat = fs.Schedule("lockstep", pair, s.n1, s.n2, gptr, np.arange(len(order) + 1, dtype=np.int64), order,
                           "", s.fingerprint)
        fs.check_schedule(flat, sd.joint_dag(pair, *mats))
        assert (np.diff(glevel) >= 0).all()


def test_inspector_is_vectorised():
    """A 40 000-row 2-D Poisson pair in seconds (poisson2d(1000), a million rows, takes 3–6 s)."""
    A = sm.poisson2d(200)
    mats = operands("spilu0_sptrsv", A)
    t = time.perf_counter()
    s = fs.inspect("spilu0_sptrsv", *mats)
    assert time.perf_counter() - t < 20
    assert s.levels() <= 2 * 200


@pytest.mark.parametrize("call,match", [
    (lambda A: fs.inspect("spmv_spmv", A), "unknown kernel pair 'spmv_spmv'"),
    (lambda A: fs.inspect("spilu0_sptrsv", A, kind="metis"), "kind must be one of"),
    (lambda A: fs.inspect("spilu0_sptrsv", A, workers=0), "workers must be a positive int"),
    (lambda A: fs.inspect("spilu0_sptrsv", A, kind="lbc", slack=-1.0), "slack must be a non-negative"),
    (lambda A: fs.inspect("spilu0_sptrsv", A, packing="mixed"), "packing must be 'interleaved' or 'separated'"),
    (lambda A: fs.inspect("spilu0_sptrsv", A, kind="wavefront", slack=1.0), "takes no option 'slack'"),
    (lambda A: fs.inspect("spilu0_sptrsv", A, A), r"spilu0_sptrsv takes 1 matrices \(A\), got 2"),
    (lambda A: fs.inspect("sptrsv_spmv", A, A), "L must be lower triangular"),
])
def test_inspect_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call(sm.poisson2d(4))


# ---------------------------------------------------------------- every tier against t0

def cases_for(tier):
    """(generator, size) × pair × schedule kind × dtype: the full set for the PyTorch tier, a few
    matrices of at most 100 rows and no default-schedule repeat for the interpreted Triton tiers;
    t0 only in float32 (its float64 is the reference)."""
    if tier == "t0_numpy":
        return [(g, 64, pair, kind, "float32") for g in ("poisson2d", "powerlaw_laplacian")
                for pair in PAIRS for kind in KINDS]
    if tier == "t1_torch":
        mats = [("poisson2d", 100), ("poisson3d_27", 64), ("powerlaw_laplacian", 120), ("banded_spd", 90)]
        kinds = KINDS
    else:
        mats = [("poisson2d", 49), ("powerlaw_laplacian", 60)]
        kinds = fs.KINDS
    return [(g, n, pair, kind, dt) for g, n in mats for pair in PAIRS for kind in kinds for dt in DTYPES]


TIER_CASES = [pytest.param(tier, *c, id=f"{tier}-{c[0]}{c[1]}-{c[2]}-{_kid(c[3])}-{c[4]}")
              for tier in TIERS for c in cases_for(tier)]
_SCHEDULES: dict = {}


def _schedule(pair, mats, kind, key):
    """One schedule per (matrix, pair, kind), shared by the tiers and dtypes: reused as intended."""
    if kind is None:
        return None
    if key not in _SCHEDULES:
        _SCHEDULES[key] = fs.inspect(pair, *mats, kind=kind, workers=4)
    return _SCHEDULES[key]


@pytest.mark.parametrize("tier,gen,size,pair,kind,dtype", TIER_CASES)
def test_tier_matches_t0(tier, gen, size, pair, kind, dtype):
    mats = operands(pair, matrix(gen, size, 7))
    b = np.random.default_rng(_seed(tier, gen, pair, kind, dtype)).standard_normal(mats[0].shape[0])
    check_against_t0(tier, pair, mats, b, dtype, _schedule(pair, mats, kind, (gen, size, pair, kind)))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen=st.sampled_from(GENERATORS), size=st.integers(1, 120), seed=st.integers(0, 1000),
       pair=st.sampled_from(PAIRS), kind=st.sampled_from(KINDS), workers=st.integers(1, 9),
       dtype=st.sampled_from(DTYPES))
def test_t1_property(gen, size, seed, pair, kind, workers, dtype):
    mats = operands(pair, matrix(gen, size, seed))
    s = None if kind is None else fs.inspect(pair, *mats, kind=kind, workers=workers)
    b = np.random.default_rng(seed).standard_normal(mats[0].shape[0])
    check_against_t0("t1_torch", pair, mats, b, dtype, s)


# two matrices per tier and pair, under one schedule kind that rotates over the pairs and tiers
# (each tier meets every kind, each pair three of the five): the interpreted tiers' share stays small
UNSYMMETRIC_CASES = [pytest.param(tier, pair, KINDS[(i + k) % len(KINDS)], n, id=f"{tier}-{pair}-{n}")
                     for k, tier in enumerate(TIERS) if tier != "t0_numpy"
                     for i, pair in enumerate(PAIRS) for n in (23, 70)]


@pytest.mark.parametrize("tier,pair,kind,n", UNSYMMETRIC_CASES)
def test_tier_matches_t0_on_unsymmetric_patterns(tier, pair, kind, n):
    mats = unsymmetric_operands(pair, n, _seed("unsymmetric", pair, n))
    rng = np.random.default_rng(_seed("unsymmetric", tier, pair, n))
    s = None if kind is None else fs.inspect(pair, *mats, kind=kind, workers=3)
    for dtype in DTYPES:
        check_against_t0(tier, pair, mats, rng.standard_normal(n), dtype, s)


def _degenerate(name):
    """SPD matrices at the edges of what the executors meet, which the generators do not make:
    one row; a diagonal (no dependence at all); an arrow (row and column 0 full, a hub that every
    other row reads and that reads every other row); a dense 3 × 3 (every row reads every earlier
    one, a triangle of updates)."""
    n = {"one_row": 1, "diagonal": 5, "arrow": 7, "dense3": 3}[name]
    A = np.diag(np.full(n, 4.0 if name == "dense3" else 2.0 * n))
    if name == "arrow":
        A[0, 1:] = A[1:, 0] = 1.0
    if name == "dense3":
        A += 1.0 - np.eye(3)
    return sd.csr(sp.csr_matrix(A))


@pytest.mark.parametrize("kind", KINDS, ids=_kid)
@pytest.mark.parametrize("name", ("one_row", "diagonal", "arrow", "dense3"))
@pytest.mark.parametrize("tier", TIERS)
def test_degenerate_matrices(tier, name, kind):
    rng = np.random.default_rng(_seed("degenerate", tier, name, _kid(kind)))
    A = _randomised(_degenerate(name), rng)
    dtype = "float32" if tier == "t0_numpy" else "float64"
    for pair in PAIRS:
        mats = operands(pair, A)
        s = None if kind is None else fs.inspect(pair, *mats, kind=kind, workers=2)
        check_against_t0(tier, pair, mats, rng.standard_normal(A.shape[0]), dtype, s)


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("tier", TIERS)
def test_schedule_reused_with_new_values(tier, pair):
    """Inspect once on one set of values; execute on others with the same pattern."""
    A = sm.powerlaw_laplacian(70, seed=8)
    s = fs.inspect(pair, *operands(pair, A), workers=3)
    rng = np.random.default_rng(_seed("reuse", tier, pair))
    for _ in range(2):
        mats = operands(pair, _randomised(A, rng))
        check_against_t0(tier, pair, mats, rng.standard_normal(A.shape[0]), "float64" if tier == "t1_torch"
                         else "float32", s)


@pytest.mark.parametrize("tier", [t for t in TIERS if t != "t0_numpy"])
def test_factor_pairs_warn_nothing(tier):
    """The factor pairs return torch sparse CSR factors without torch's warnings (the invariant
    checks opted out of, the beta notice silenced): in a fresh process, as torch gives its beta
    notice once per process, with every warning an error."""
    code = (f"import torch\nfrom tiers import registry, sparse_matrices as sm\nA = sm.poisson2d(5)\n"
            f"b = torch.rand(25, dtype=torch.float64, device={str(DEVICE)!r})\n"
            f"for pair in ('spilu0_sptrsv', 'spic0_sptrsv'):\n"
            f"    LU, x = registry.get('sparse_fusion', {tier!r}, pair)(A, b)\n"
            f"    assert LU.layout == torch.sparse_csr\n")
    env = {**os.environ, "PYTHONWARNINGS": "error::UserWarning"}
    if not torch.cuda.is_available():
        env["TRITON_INTERPRET"] = "1"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=pathlib.Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("tier", TIERS)
def test_inputs_are_not_modified_and_any_format_is_read(tier):
    """Unsorted CSR with duplicate entries, CSC and COO give the canonical matrix's results, and
    neither the matrices nor the vector change."""
    A = matrix("poisson2d", 36, 9)
    n = A.shape[0]
    rows = sd.row_ids(A.indptr)
    rev = np.lexsort((-A.indices, rows))         # each row's entries backwards, each stored twice as halves
    messy = sp.csr_matrix((np.repeat(A.data[rev] / 2, 2), np.repeat(A.indices[rev], 2), 2 * A.indptr), shape=A.shape)
    assert not messy.has_canonical_format
    before = (messy.data.copy(), messy.indices.copy(), messy.indptr.copy())
    b = np.random.default_rng(9).standard_normal(n)
    bt = _as_tier(b, tier, "float32")
    bt_before = bt.copy() if tier == "t0_numpy" else bt.clone()
    f = registry.get("sparse_fusion", tier, "spilu0_sptrsv")
    ref = t0["spilu0_sptrsv"](A, b)
    for M in (messy, sp.csc_matrix(A), sp.coo_matrix(A)):
        LU, x = f(M, bt)
        assert_close(values_of(x), ref[1], "float32")
        assert_close(values_of(LU, A), ref[0].data, "float32")
    for got, want in zip((messy.data, messy.indices, messy.indptr), before):
        np.testing.assert_array_equal(got, want)
    assert (values_of(bt) == values_of(bt_before)).all()


# ---------------------------------------------------------------- validation: one message per mistake

def _with(A, i, j, value):
    B = sp.lil_matrix(A)
    B[i, j] = value
    return sp.csr_matrix(B)


def _explicit_zero_diagonal(L, row):
    L = sd.csr(L)
    L.data[sd.diag_positions(L.indptr, L.indices)[row]] = 0.0
    return L


def _without_diagonal(A, row):
    A = sd.csr(A).tolil()
    A[row, row] = 0
    A = sp.csr_matrix(A)
    A.eliminate_zeros()
    return A


def _ic0_breaks_at_3():
    """Tridiagonal 2, −1 with a_33 = 0.5: the pivot of row 3 is 0.5 − 3/4 < 0."""
    A = sm.tril_csr(sp.diags([-np.ones(7), 2 * np.ones(8), -np.ones(7)], [-1, 0, 1], format="csr"))
    A = _with(A + sm.triu_csr(A.T, 1), 3, 3, 0.5)
    return A


def _ilu0_breaks_at_1():
    """U_11 = a_11 − a_10·a_01/a_00 = 1 − 1 = 0; rows 2 and 3 depend on row 1."""
    D = np.array([[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 3, 1], [0, 2, 1, 3]], dtype=float)
    return sp.csr_matrix(D)


A10 = sm.poisson2d(3)     # 9 rows
L10, U10 = sm.tril_csr(A10), sm.triu_csr(A10)
INVALID = [
    ("sptrsv_spmv", lambda: (L10.toarray(), A10), 9, "L must be a SciPy sparse matrix"),
    ("sptrsv_spmv", lambda: (_with(L10, 0, 3, 1.0), A10), 9,
     r"L must be lower triangular: it stores entry \(0, 3\) above the diagonal"),
    ("sptrsv_sptrsv", lambda: (L10, _with(U10, 5, 1, 1.0)), 9,
     r"U must be upper triangular: it stores entry \(5, 1\) below the diagonal"),
    ("sptrsv_spmv", lambda: (_explicit_zero_diagonal(L10, 2), A10), 9, "L has a zero diagonal entry in row 2"),
    ("sptrsv_sptrsv", lambda: (L10, _without_diagonal(U10, 4)), 9, "U has no diagonal entry in row 4"),
    ("spilu0_sptrsv", lambda: (_without_diagonal(A10, 6),), 9, "A has no diagonal entry in row 6"),
    ("spmv_sptrsv", lambda: (sp.random(9, 8, density=0.5, format="csr", random_state=0), L10), 8,
     r"A must be square, got shape \(9, 8\)"),
    ("spmv_sptrsv", lambda: (sm.poisson2d(2), L10), 4, "L is 9×9 but A is 4×4: the two kernels must have one size"),
    ("spic0_sptrsv", lambda: (_with(A10, 1, 2, np.nan),), 9, r"A has a non-finite value nan at \(1, 2\)"),
    ("spic0_sptrsv", lambda: (sp.csr_matrix(A10, dtype=np.complex128),), 9, "A has complex values"),
    ("sptrsv_spmv", lambda: (L10, A10), 8, "b has length 8 but L is 9×9"),
    ("spilu0_sptrsv", lambda: (sp.csr_matrix((0, 0)),), 0, r"A is empty \(0×0\)"),
    ("spic0_sptrsv", lambda: (_ic0_breaks_at_3(),), 8, r"IC\(0\) breaks down in row 3: pivot"),
    ("spilu0_sptrsv", lambda: (_ilu0_breaks_at_1(),), 4, r"ILU\(0\) breaks down in row 1: pivot"),
]


@pytest.mark.parametrize("pair,build,n,match", INVALID, ids=[f"{p}-{m[:30]}" for p, _, _, m in INVALID])
@pytest.mark.parametrize("tier", TIERS)
def test_invalid_input(tier, pair, build, n, match):
    b = _as_tier(np.random.default_rng(0).standard_normal(n), tier, "float32")
    with pytest.raises(ValueError, match=match):
        registry.get("sparse_fusion", tier, pair)(*build(), b)


@pytest.mark.parametrize("tier", TIERS)
def test_invalid_vector(tier):
    f = registry.get("sparse_fusion", tier, "sptrsv_spmv")
    bad = np.ones(9)
    bad[4] = np.inf
    with pytest.raises(ValueError, match="b has non-finite values"):
        f(L10, A10, _as_tier(bad, tier, "float64"))
    with pytest.raises(ValueError, match=r"b must be a 1-D vector, got shape \(9, 1\)"):
        f(L10, A10, _as_tier(np.ones((9, 1)), tier, "float64"))
    with pytest.raises(TypeError, match="dtype"):
        f(L10, A10, np.arange(9) if tier == "t0_numpy" else torch.arange(9, device=DEVICE))
    with pytest.raises(TypeError, match="must be a"):
        f(L10, A10, torch.ones(9, dtype=torch.float64) if tier == "t0_numpy" else np.ones(9))


@pytest.mark.parametrize("tier", [t for t in TIERS if t not in ("t0_numpy", "t1_torch")])
def test_triton_tiers_refuse_a_vector_that_requires_grad(tier):
    """t2 and t3 have no backward: a vector that autograd follows is refused, not answered with
    outputs whose gradient is not the solve's (before the check they carried a slice's); detached
    or under no_grad, the call runs."""
    f = registry.get("sparse_fusion", tier, "sptrsv_spmv")
    b = torch.rand(9, dtype=torch.float64, device=DEVICE, requires_grad=True)
    with pytest.raises(ValueError, match=f"b requires grad, but {tier}'s sparse_fusion has no backward: "
                                         "use t1_torch for gradients"):
        f(L10, A10, b)                  # refused by the shared validation, before any inspection
    run = importlib.import_module(f"tiers.{tier}.sparse_fusion").prepare("sptrsv_spmv", L10, A10, like=b.detach())
    with pytest.raises(ValueError, match=f"the vector requires grad, but {tier}'s sparse_fusion has no backward: "
                                         "use t1_torch for gradients"):
        run(b)                          # and by a prepared runner, call by call
    ref = t0["sptrsv_spmv"](L10, A10, b.detach().cpu().numpy())
    with torch.no_grad():
        out = f(L10, A10, b)
    for got in (out, f(L10, A10, b.detach())):
        assert not any(o.requires_grad for o in got)
        for o, r in zip(got, ref):
            assert_close(values_of(o), r, "float64")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen=st.sampled_from(GENERATORS), size=st.integers(1, 30), seed=st.integers(0, 1000),
       pair=st.sampled_from(PAIRS), kind=st.sampled_from(KINDS))
def test_t1_gradients_are_the_transposed_solves(gen, size, seed, pair, kind):
    """t1 differentiates through autograd with respect to the vector, under every schedule:
    torch.autograd.gradcheck against finite differences, and the vector-Jacobian product against
    the transposed solves in SciPy (x = L⁻¹b: ∂/∂b of ⟨g, x⟩ is L⁻ᵀg; y = A·x adds Aᵀ; the factor
    pairs' factor does not depend on the vector)."""
    A = matrix(gen, size, seed)
    mats = operands(pair, A)
    s = None if kind is None else fs.inspect(pair, *mats, kind=kind, workers=3)
    f = registry.get("sparse_fusion", "t1_torch", pair)
    vec_outs = (1,) if pair in sd.FACTOR_PAIRS else (0, 1)

    def vector_results(v):
        out = f(*mats, v, schedule=s)
        return tuple(out[i] for i in vec_outs)

    rng = np.random.default_rng(seed)
    b = torch.tensor(rng.standard_normal(A.shape[0]), requires_grad=True)
    assert torch.autograd.gradcheck(vector_results, (b,))
    gs = [rng.standard_normal(A.shape[0]) for _ in vec_outs]
    torch.autograd.backward(vector_results(b), [torch.tensor(g) for g in gs])
    solve_t = lambda M, g, lower: sla.spsolve_triangular(sp.csr_matrix(M.T), g, lower=lower)  # noqa: E731
    if pair == "sptrsv_spmv":            # x = L⁻¹b, y = A x
        L, A_ = mats
        want = solve_t(L, gs[0] + A_.T @ gs[1], lower=False)
    elif pair == "spmv_sptrsv":          # y = A x, z = L⁻¹y
        A_, L = mats
        gy = solve_t(L, gs[1], lower=False)
        want = A_.T @ (gs[0] + gy)
    elif pair == "sptrsv_sptrsv":        # y = L⁻¹b, x = U⁻¹y
        L, U = mats
        want = solve_t(L, gs[0] + solve_t(U, gs[1], lower=True), lower=False)
    else:                                # x = L⁻¹b with the factor's L (unit for ILU(0))
        LU = values_of(t0[pair](*mats, b.detach().numpy())[0])
        F = sd.csr(mats[0]) if pair == "spilu0_sptrsv" else sd.lower_part(mats[0])
        Lf = sp.csr_matrix((LU, F.indices, F.indptr), shape=F.shape)
        if pair == "spilu0_sptrsv":
            Lf = sp.tril(Lf, -1) + sp.identity(F.shape[0])
        want = solve_t(Lf, gs[0], lower=False)
    assert_close(b.grad.numpy(), want, "float64")


@pytest.mark.parametrize("tier", TIERS)
def test_schedule_for_another_problem_is_refused(tier):
    f = registry.get("sparse_fusion", tier, "sptrsv_spmv")
    b = _as_tier(np.ones(9), tier, "float32")
    with pytest.raises(ValueError, match="schedule was inspected for the pair 'spmv_sptrsv', not 'sptrsv_spmv'"):
        f(L10, A10, b, schedule=fs.inspect("spmv_sptrsv", A10, L10))
    other = sm.banded_spd(9, 2)
    with pytest.raises(ValueError, match="schedule was inspected for other matrices"):
        f(L10, A10, b, schedule=fs.inspect("sptrsv_spmv", sm.tril_csr(other), other))
    with pytest.raises(ValueError, match="schedule must be a tiers.fusion_schedules.Schedule"):
        f(L10, A10, b, schedule="wavefront")
    # same pattern, other values: accepted
    f(_randomised(L10, np.random.default_rng(1)), A10, b, schedule=fs.inspect("sptrsv_spmv", L10, A10))
