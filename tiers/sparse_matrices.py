"""Test and benchmark matrices for sparse fusion, and the few pattern operations every tier needs.

Every generator returns a `scipy.sparse.csr_matrix`, float64, with sorted column indices, no
duplicate entries, no explicit zeros, and symmetric positive definite values, so that all five
kernel pairs (SpTRSV on its triangles, ILU(0), IC(0)) are defined on it:

    poisson2d(n)            5-point Laplacian on an n×n grid, N = n²         (4 on the diagonal, −1 off)
    poisson3d(n, points)    7- or 27-point Laplacian on an n×n×n grid, N = n³ (6 or 26 on the diagonal)
    banded_spd(n, bw)       full band |i − j| ≤ bw, random off-diagonal values of either sign,
                            diagonal = 1 + Σ_j |a_ij| (strictly diagonally dominant, hence SPD)
    powerlaw_laplacian(n)   graph Laplacian D − W of a Barabási–Albert graph (each new vertex joins
                            m existing ones chosen with probability ∝ degree) plus shift·I

The Laplacians are M-matrices and the band matrix is an H-matrix with positive diagonal, so
ILU(0) and IC(0) exist for all of them (Meijerink–van der Vorst; Manteuffel).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def _finish(A) -> sp.csr_matrix:
    """CSR, float64, duplicates summed, zeros dropped, indices sorted."""
    A = sp.csr_matrix(A, dtype=np.float64)
    A.sum_duplicates()
    A.eliminate_zeros()
    A.sort_indices()
    return A


def _check_size(name, value, least=1):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < least:
        raise ValueError(f"{name} must be at least {least}, got {value}")
    return int(value)


def _laplacian_1d(n):
    return sp.diags([-np.ones(n - 1), 2.0 * np.ones(n), -np.ones(n - 1)], [-1, 0, 1], format="csr")


def poisson2d(n: int) -> sp.csr_matrix:
    """The 5-point finite-difference Laplacian on an n×n grid with Dirichlet boundaries (N = n²),
    grid point (r, c) numbered r·n + c."""
    n = _check_size("n", n)
    T, I = _laplacian_1d(n), sp.identity(n, format="csr")
    return _finish(sp.kron(I, T) + sp.kron(T, I))


def poisson3d(n: int, points: int = 7) -> sp.csr_matrix:
    """The 7-point (faces) or 27-point (faces, edges, corners: 26 on the diagonal, −1 to each
    neighbour) Laplacian on an n×n×n grid, N = n³, point (a, b, c) numbered (a·n + b)·n + c."""
    n = _check_size("n", n)
    if points == 7:
        T, I = _laplacian_1d(n), sp.identity(n, format="csr")
        return _finish(sp.kron(sp.kron(T, I), I) + sp.kron(sp.kron(I, T), I) + sp.kron(sp.kron(I, I), T))
    if points == 27:
        # the 3×3×3 block of ones around each point, minus the point itself: a Kronecker
        # product of 1-D "self and both neighbours" matrices
        B = sp.diags([np.ones(n - 1), np.ones(n), np.ones(n - 1)], [-1, 0, 1], format="csr")
        neighbours = sp.kron(sp.kron(B, B), B) - sp.identity(n ** 3)
        return _finish(26.0 * sp.identity(n ** 3) - neighbours)
    raise ValueError(f"points must be 7 or 27, got {points!r}")


def banded_spd(n: int, bandwidth: int, seed: int = 0) -> sp.csr_matrix:
    """Symmetric, every entry with |i − j| ≤ bandwidth present; off-diagonal values uniform in
    ±[0.1, 1] (never an explicit zero) and diagonal 1 + Σ_j≠i |a_ij|."""
    n = _check_size("n", n)
    bandwidth = _check_size("bandwidth", bandwidth, least=0)
    rng = np.random.default_rng(seed)
    offsets, bands = [], []
    for k in range(1, min(bandwidth, n - 1) + 1):
        v = rng.uniform(0.1, 1.0, n - k) * rng.choice([-1.0, 1.0], n - k)
        offsets += [-k, k]
        bands += [v, v]
    off = sp.diags(bands, offsets, shape=(n, n), format="csr") if bands else sp.csr_matrix((n, n))
    diag = 1.0 + np.asarray(abs(off).sum(axis=1)).ravel()
    return _finish(off + sp.diags(diag))


def powerlaw_laplacian(n: int, m: int = 3, seed: int = 0, shift: float = 1.0) -> sp.csr_matrix:
    """Laplacian of a Barabási–Albert graph plus shift·I. Vertices 0..m form a clique; each later
    vertex v links to m distinct earlier vertices drawn with probability proportional to their
    degree (by sampling uniformly from the list of edge endpoints so far). Degrees follow a
    power law, so a few rows are long: the load-balance case."""
    n = _check_size("n", n)
    m = _check_size("m", m)
    if not np.isfinite(shift) or shift <= 0:
        raise ValueError(f"shift must be a positive finite number (it makes the Laplacian definite), got {shift}")
    rng = np.random.default_rng(seed)
    k = min(m + 1, n)
    first = np.array([(i, j) for i in range(k) for j in range(i)], dtype=np.int64).reshape(-1, 2)
    endpoints = np.empty(2 * (len(first) + m * max(n - k, 0)), dtype=np.int64)
    endpoints[:2 * len(first)] = first.ravel()
    used = 2 * len(first)
    rows, cols = [first[:, 0]], [first[:, 1]]
    for v in range(k, n):
        chosen = set()
        while len(chosen) < m:   # m distinct targets; repeats are rare once the graph has grown
            chosen.update(endpoints[rng.integers(0, used, m - len(chosen))].tolist())
        t = np.fromiter(chosen, dtype=np.int64, count=m)
        rows.append(np.full(m, v, dtype=np.int64))
        cols.append(t)
        endpoints[used:used + 2 * m] = np.stack([np.full(m, v), t], axis=1).ravel()
        used += 2 * m
    r, c = np.concatenate(rows), np.concatenate(cols)
    W = sp.coo_matrix((np.ones(len(r)), (r, c)), shape=(n, n))
    W = ((W + W.T) > 0).astype(np.float64)
    degree = np.asarray(W.sum(axis=1)).ravel()
    return _finish(sp.diags(degree + shift) - W)


def load_mtx(path) -> sp.csr_matrix:
    """A Matrix Market file as CSR float64 (symmetric files are expanded by scipy.io.mmread).
    Entries stored in the file are kept even when zero: they are part of the pattern. A pattern
    file's entries read as 1 (SciPy's convention); a complex file is refused by the validation's
    check_real, which the pair functions apply too, since the cast below would drop it."""
    import scipy.io

    from tiers.validation import check_real

    try:
        M = scipy.io.mmread(path)
    except ValueError as e:
        raise ValueError(f"{path} is not a Matrix Market file that SciPy can read: {e}") from None
    check_real(f"the matrix in {path}", M)
    A = sp.csr_matrix(M, dtype=np.float64)
    A.sum_duplicates()
    A.sort_indices()
    return A


def reorder(A, ordering: str = "natural"):
    """(P·A·Pᵀ, perm) with row i of the result being row perm[i] of A. "natural" keeps A,
    "rcm" is reverse Cuthill–McKee on the symmetrised pattern (smaller bandwidth)."""
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    A = sp.csr_matrix(A)
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"reorder needs a square matrix, got shape {A.shape}")
    if ordering == "natural":
        perm = np.arange(A.shape[0], dtype=np.int64)
    elif ordering == "rcm":
        perm = np.asarray(reverse_cuthill_mckee(A, symmetric_mode=False), dtype=np.int64)
    else:
        raise ValueError(f"ordering must be 'natural' or 'rcm', got {ordering!r}")
    B = A[perm][:, perm].tocsr()
    B.sort_indices()
    return B, perm


def tril_csr(A, k: int = 0) -> sp.csr_matrix:
    """The lower triangle (entries with j ≤ i + k) as CSR with sorted indices; explicit entries kept."""
    L = sp.tril(sp.csr_matrix(A), k=k, format="csr")
    L.sort_indices()
    return L


def triu_csr(A, k: int = 0) -> sp.csr_matrix:
    """The upper triangle (entries with j ≥ i + k) as CSR with sorted indices; explicit entries kept."""
    U = sp.triu(sp.csr_matrix(A), k=k, format="csr")
    U.sort_indices()
    return U


def rescaled(A, d) -> sp.csr_matrix:
    """D·A·D with D = diag(d): A's pattern, every stored entry kept in its place, with the values
    d_i·a_ij·d_j — the same matrix refactored with new values (a prepared runner's refresh). With
    d > 0 an SPD matrix stays SPD and an M- or H-matrix stays one, so ILU(0) and IC(0) still exist."""
    A = sp.csr_matrix(A, dtype=np.float64)
    d = np.asarray(d, dtype=np.float64)
    if A.shape[0] != A.shape[1] or d.shape != (A.shape[0],):
        raise ValueError(f"rescaled needs a square matrix and one scale per row, got shape {A.shape} "
                         f"and {d.shape[0] if d.ndim == 1 else d.shape} scales")
    if not (np.isfinite(d).all() and (d != 0).all()):
        raise ValueError("rescaled needs finite, non-zero scales")
    from tiers.sparse_dags import row_ids

    return sp.csr_matrix((d[row_ids(A.indptr)] * A.data * d[A.indices], A.indices.copy(), A.indptr.copy()),
                         shape=A.shape)


GENERATORS = {
    "poisson2d": lambda size, seed=0: poisson2d(max(1, round(size ** 0.5))),
    "poisson3d": lambda size, seed=0: poisson3d(max(1, round(size ** (1 / 3)))),
    "poisson3d_27": lambda size, seed=0: poisson3d(max(1, round(size ** (1 / 3))), points=27),
    "banded_spd": lambda size, seed=0: banded_spd(size, 3, seed),
    "powerlaw_laplacian": lambda size, seed=0: powerlaw_laplacian(size, 3, seed),
}
"""Each generator as `f(size, seed)` giving a matrix of about `size` rows (tests and benchmarks)."""
