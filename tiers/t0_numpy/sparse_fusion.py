"""Sparse fusion, the specification: two sparse kernels run one row at a time in plain loops.

The five pairs (matrices are SciPy sparse, any format, read once as CSR; the vector is NumPy):

    sptrsv_spmv(L, A, b)    x = L⁻¹b,  y = A·x          → (x, y)
    spmv_sptrsv(A, L, x)    y = A·x,   z = L⁻¹y         → (y, z)
    sptrsv_sptrsv(L, U, b)  y = L⁻¹b,  x = U⁻¹y         → (y, x)
    spilu0_sptrsv(A, b)     L\\U = ILU(0) of A,  x = L⁻¹b  (L unit lower) → (LU, x)
    spic0_sptrsv(A, b)      Lc = IC(0) of tril(A),  x = Lc⁻¹b           → (Lc, x)

One iteration is one row of one kernel:

    SpMV    y_i = Σ_j A_ij x_j
    SpTRSV  x_i = (b_i − Σ_{j≠i} T_ij x_j) / T_ii          (unit lower: no division)
    ILU(0)  for k < i in row i, increasing:  a_ik /= a_kk;  a_ij −= a_ik a_kj  for j > k in both rows
            then the pivot a_ii must be non-zero
    IC(0)   for j ≤ i in row i, increasing:  s = a_ij − Σ_{k<j} l_ik l_jk  (k in both rows)
            l_ij = s / l_jj (j < i),  l_ii = √s, and s must be positive

LU is returned as a SciPy CSR matrix with A's pattern (the strictly lower part is L, the
rest U); Lc as one with tril(A)'s pattern. Everything is computed in the vector's dtype
(float64 or float32).

Without a schedule the kernels run one after the other, each in its natural row order. With
`schedule=` (tiers.fusion_schedules.inspect) the same row functions run in the schedule's
order — level by level, partition by partition, iteration by iteration — which must give the
same numbers: that is the inspector–executor contract every faster tier relies on.
"""
import math

import numpy as np
import scipy.sparse as sp

from tiers.sparse_dags import csr
from tiers.validation import factor_breakdown, validate_sparse_fusion


def _dtype(vector):
    return np.float32 if vector.dtype == np.float32 else np.float64


class _Rows:
    """One matrix's CSR arrays in the compute dtype, and a column → position map per row."""

    def __init__(self, M, dt):
        self.indptr, self.indices, self.data = M.indptr, M.indices, M.data.astype(dt)
        self.n = M.shape[0]
        self.pos = [dict(zip(self.indices[self.indptr[i]:self.indptr[i + 1]].tolist(),
                             range(self.indptr[i], self.indptr[i + 1]))) for i in range(self.n)]
        self.diag = np.array([self.pos[i].get(i, -1) for i in range(self.n)], dtype=np.int64)


# ---------------------------------------------------------------- one row of each kernel

def _spmv_row(A, x, y, i):
    s = y.dtype.type(0)
    for p in range(A.indptr[i], A.indptr[i + 1]):
        s += A.data[p] * x[A.indices[p]]
    y[i] = s


def _trsv_row(T, values, rhs, x, i, unit=False):
    """x_i from row i of T (`values` holds T's entries in T's pattern)."""
    s = rhs[i]
    for p in range(T.indptr[i], T.indptr[i + 1]):
        j = T.indices[p]
        if j != i and (not unit or j < i):
            s -= values[p] * x[j]
    x[i] = s if unit else s / values[T.diag[i]]


def _ilu0_row(A, a, i):
    for p in range(A.indptr[i], A.diag[i]):                 # (i, k), k < i, increasing
        k = A.indices[p]
        a[p] /= a[A.diag[k]]
        for q in range(A.diag[k] + 1, A.indptr[k + 1]):     # (k, j), j > k
            t = A.pos[i].get(A.indices[q])
            if t is not None:
                a[t] -= a[p] * a[q]
    pivot = a[A.diag[i]]
    if pivot == 0 or not np.isfinite(pivot):
        raise factor_breakdown("ilu0", i, pivot)


def _ic0_row(T, l, i):
    for p in range(T.indptr[i], T.indptr[i + 1]):           # (i, j), j ≤ i, increasing
        j = T.indices[p]
        s = l[p]                                             # still a_ij: this entry is not done
        for q in range(T.indptr[i], p):                      # (i, k), k < j
            t = T.pos[j].get(T.indices[q])
            if t is not None:
                s -= l[q] * l[t]
        if j < i:
            l[p] = s / l[T.diag[j]]
        elif s > 0:
            l[p] = math.sqrt(s)
        else:
            raise factor_breakdown("ic0", i, s)


# ---------------------------------------------------------------- running a pair

def _run(n1, n2, row1, row2, order1, order2, schedule):
    """Sequential: kernel 1's rows in order1, then kernel 2's in order2. Scheduled: joint
    iteration v is kernel 1's row v when v < n1, else kernel 2's row v − n1."""
    if schedule is None:
        for i in order1:
            row1(i)
        for i in order2:
            row2(i)
        return
    for level in range(schedule.levels()):
        for part in range(schedule.level_ptr[level], schedule.level_ptr[level + 1]):
            for v in schedule.order[schedule.part_ptr[part]:schedule.part_ptr[part + 1]]:
                if v < n1:
                    row1(int(v))
                else:
                    row2(int(v) - n1)


def sptrsv_spmv(L, A, b, schedule=None):
    """x = L⁻¹b (L lower triangular), y = A·x → (x, y)."""
    p = validate_sparse_fusion("sptrsv_spmv", (L, A), b, schedule, tier="t0_numpy")
    dt = _dtype(b)
    L, A = (_Rows(M, dt) for M in p.matrices)
    b = b.astype(dt)
    x, y = np.zeros(p.n, dt), np.zeros(p.n, dt)
    _run(p.n, p.n, lambda i: _trsv_row(L, L.data, b, x, i), lambda i: _spmv_row(A, x, y, i),
         range(p.n), range(p.n), schedule)
    return x, y


def spmv_sptrsv(A, L, x, schedule=None):
    """y = A·x, z = L⁻¹y (L lower triangular) → (y, z)."""
    p = validate_sparse_fusion("spmv_sptrsv", (A, L), x, schedule, tier="t0_numpy")
    dt = _dtype(x)
    A, L = (_Rows(M, dt) for M in p.matrices)
    x = x.astype(dt)
    y, z = np.zeros(p.n, dt), np.zeros(p.n, dt)
    _run(p.n, p.n, lambda i: _spmv_row(A, x, y, i), lambda i: _trsv_row(L, L.data, y, z, i),
         range(p.n), range(p.n), schedule)
    return y, z


def sptrsv_sptrsv(L, U, b, schedule=None):
    """y = L⁻¹b (L lower), x = U⁻¹y (U upper triangular) → (y, x)."""
    p = validate_sparse_fusion("sptrsv_sptrsv", (L, U), b, schedule, tier="t0_numpy")
    dt = _dtype(b)
    L, U = (_Rows(M, dt) for M in p.matrices)
    b = b.astype(dt)
    y, x = np.zeros(p.n, dt), np.zeros(p.n, dt)
    _run(p.n, p.n, lambda i: _trsv_row(L, L.data, b, y, i), lambda i: _trsv_row(U, U.data, y, x, i),
         range(p.n), range(p.n - 1, -1, -1), schedule)
    return y, x


def spilu0_sptrsv(A, b, schedule=None):
    """LU = ILU(0) of A on A's pattern, x = L⁻¹b with L its unit lower part → (LU, x)."""
    p = validate_sparse_fusion("spilu0_sptrsv", (A,), b, schedule, tier="t0_numpy")
    dt = _dtype(b)
    M = _Rows(p.matrices[0], dt)
    a = M.data.copy()
    b = b.astype(dt)
    x = np.zeros(p.n, dt)
    _run(p.n, p.n, lambda i: _ilu0_row(M, a, i), lambda i: _trsv_row(M, a, b, x, i, unit=True),
         range(p.n), range(p.n), schedule)
    return sp.csr_matrix((a, M.indices.copy(), M.indptr.copy()), shape=(p.n, p.n)), x


def spic0_sptrsv(A, b, schedule=None):
    """Lc = IC(0) of A on tril(A)'s pattern (Lc·Lcᵀ ≈ A), x = Lc⁻¹b → (Lc, x)."""
    p = validate_sparse_fusion("spic0_sptrsv", (A,), b, schedule, tier="t0_numpy")
    dt = _dtype(b)
    T = _Rows(csr(sp.tril(p.matrices[0])), dt)
    l = T.data.copy()
    b = b.astype(dt)
    x = np.zeros(p.n, dt)
    _run(p.n, p.n, lambda i: _ic0_row(T, l, i), lambda i: _trsv_row(T, l, b, x, i),
         range(p.n), range(p.n), schedule)
    return sp.csr_matrix((l, T.indices.copy(), T.indptr.copy()), shape=(p.n, p.n)), x
