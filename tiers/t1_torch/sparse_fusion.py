"""Sparse fusion in vectorised PyTorch: any schedule executed in lockstep, CPU or GPU.

Same pairs, formulas and results as the specification (tiers/t0_numpy/sparse_fusion.py); the
vector's device and dtype (float64 or float32) decide where and how it runs. LU and Lc come
back as torch sparse CSR tensors with A's (tril(A)'s) pattern, values in the same order as
t0's SciPy matrices.

Execution. A schedule (tiers/fusion_schedules.py; without one, the joint DAG's wavefronts) is
cut into lockstep groups: step k of a level runs the k-th iteration of every partition of that
level, one group per kernel (fusion_schedules.lockstep). A group's rows are independent, so
each group is a handful of tensor operations over all its rows at once:

    SpMV    y[R]  = Σ_p a[p] · x[col p]                      one gather, one index_add
    SpTRSV  x[R]  = (r[R] − Σ_{p off-diagonal} t[p] · x[col p]) / t[diag R]
    ILU(0)  sub-step s = the s-th strictly lower entry p = (i, k) of every row i in R:
              a[p] /= a[diag k];  a[(i,j)] −= a[p] · a[(k,j)]   (the precomputed update pairs)
    IC(0)   sub-step s = the s-th entry p = (i, j) of every row i in R (diagonal last):
              v = a[p] − Σ_k l[(i,k)] · l[(j,k)];  l[p] = v / l[diag j]  or  √v on the diagonal

The index tensors of every group (positions, columns, segment ids, update pairs) depend only on
the schedule and the patterns, so they are built once with NumPy, moved to the device once and
kept in schedule.cache; a repeated call pays for validating the matrices (copy, checks,
fingerprint) and the arithmetic, not for the plan. ILU(0)/IC(0) breakdowns
are found after the factorisation from the recorded pivots (one synchronisation instead of one
per row): the lowest row whose pivot is zero (ILU) or not positive (IC) is reported, which is
the row t0 stops at — any later non-finite pivot descends from it.
"""

import numpy as np
import scipy.sparse as sp
import torch

from tiers import fusion_schedules as fs
from tiers import sparse_dags as sd
from tiers.buffers import sparse_csr
from tiers.validation import check_factor_pivots, validate_sparse_fusion

def _t(a, device):
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64)).to(device)


def _slices(ptr):
    return [slice(int(a), int(b)) for a, b in zip(ptr[:-1], ptr[1:])]


# ---------------------------------------------------------------- per-kernel plans

class _RowGather:
    """SpMV or a triangular solve: per group, the positions of its rows' entries to gather
    (start[i]..stop[i]−1), their columns, and which row of the group each belongs to."""

    def __init__(self, rows, gptr, start, stop, indices, diag, device):
        owner, pos = sd.expand_ranges(start[rows], stop[rows])
        group_of_row = np.repeat(np.arange(len(gptr) - 1), np.diff(gptr))
        seg = owner - gptr[group_of_row[owner]] if owner.size else owner
        pptr = np.searchsorted(owner, gptr)
        self.rows, self.pos, self.col, self.seg = (_t(a, device) for a in (rows, pos, indices[pos], seg))
        self.diag = _t(diag[rows], device) if diag is not None else None
        self.row_sl, self.pos_sl = _slices(gptr), _slices(pptr)

    def dot(self, j, values, x):
        """Σ over each row's listed entries of values[p] · x[col p], for the rows of group j."""
        r, q = self.row_sl[j], self.pos_sl[j]
        acc = torch.zeros(r.stop - r.start, dtype=x.dtype, device=x.device)
        return acc.index_add_(0, self.seg[q], values[self.pos[q]] * x[self.col[q]])

    def spmv(self, j, values, x, y):
        y[self.rows[self.row_sl[j]]] = self.dot(j, values, x)

    def solve(self, j, values, rhs, x, unit=False):
        rows = self.rows[self.row_sl[j]]
        v = rhs[rows] - self.dot(j, values, x)
        x[rows] = v if unit else v / values[self.diag[self.row_sl[j]]]


def _substeps(rows, gptr, start, stop):
    """Entries start[i]..stop[i]−1 of every row, regrouped into sub-steps: sub-step s of group g
    holds the s-th entry of each of g's rows that has one. Returns (entries, owner row, sub-step
    pointer into entries, group pointer into sub-steps)."""
    owner, pos = sd.expand_ranges(start[rows], stop[rows])
    G = len(gptr) - 1
    group = np.repeat(np.arange(G), np.diff(gptr))[owner]
    s = pos - start[rows][owner]
    order = np.lexsort((owner, s, group))
    pos, owner, s, group = pos[order], owner[order], s[order], group[order]
    new = np.ones(len(pos), dtype=bool)
    new[1:] = (s[1:] != s[:-1]) | (group[1:] != group[:-1])
    sub_start = np.flatnonzero(new)
    sptr = np.append(sub_start, len(pos))
    gsub = np.searchsorted(group[sub_start], np.arange(G + 1))
    return pos, rows[owner], sptr, gsub


class _ILU0:
    """Row-wise IKJ ILU(0) over the groups of kernel 1 (structure: sparse_dags.ILU0Structure)."""

    def __init__(self, st, rows, gptr, device):
        pos, _, sptr, gsub = _substeps(rows, gptr, st.indptr[:-1], st.diag)
        k = st.indices[pos]
        owner, pair = sd.expand_ranges(st.upd_ptr[pos], st.upd_ptr[pos + 1])
        uptr = np.searchsorted(owner, sptr)
        self.pos, self.kdiag = _t(pos, device), _t(st.diag[k], device)
        self.own, self.tgt, self.src = (_t(a, device) for a in (pos[owner], st.upd_target[pair],
                                                                  st.upd_source[pair]))
        self.sub_sl, self.upd_sl, self.gsub = _slices(sptr), _slices(uptr), gsub
        self.diag = _t(st.diag, device)

    def step(self, j, a):
        for s in range(self.gsub[j], self.gsub[j + 1]):
            e, u = self.sub_sl[s], self.upd_sl[s]
            p = self.pos[e]
            a[p] = a[p] / a[self.kdiag[e]]
            a.index_add_(0, self.tgt[u], -(a[self.own[u]] * a[self.src[u]]))


class _IC0:
    """Up-looking IC(0) over the groups of kernel 1 (structure: sparse_dags.IC0Structure)."""

    def __init__(self, st, rows, gptr, device):
        pos, row, sptr, gsub = _substeps(rows, gptr, st.indptr[:-1], st.indptr[1:])
        col = st.indices[pos]
        owner, pair = sd.expand_ranges(st.pair_ptr[pos], st.pair_ptr[pos + 1])
        sub_of = np.repeat(np.arange(len(sptr) - 1), np.diff(sptr))
        seg = owner - sptr[sub_of[owner]] if owner.size else owner
        pptr = np.searchsorted(owner, sptr)
        is_diag = col == row
        self.pos, self.jdiag, self.seg = _t(pos, device), _t(st.diag[col], device), _t(seg, device)
        self.is_diag = torch.from_numpy(is_diag).to(device)
        self.left, self.right = _t(st.pair_left[pair], device), _t(st.pair_right[pair], device)
        self.row = _t(row, device)
        self.sub_sl, self.pair_sl, self.gsub = _slices(sptr), _slices(pptr), gsub

    def step(self, j, l, pivots):
        for s in range(self.gsub[j], self.gsub[j + 1]):
            e, q = self.sub_sl[s], self.pair_sl[s]
            p = self.pos[e]
            acc = torch.zeros(e.stop - e.start, dtype=l.dtype, device=l.device)
            v = l[p] - acc.index_add_(0, self.seg[q], l[self.left[q]] * l[self.right[q]])
            d = self.is_diag[e]
            l[p] = torch.where(d, torch.sqrt(v.clamp(min=0)), v / l[self.jdiag[e]])
            pivots[self.row[e][d]] = v[d]


# ---------------------------------------------------------------- plan of a schedule

class _Plan:
    """Everything derived from (schedule, patterns) on one device: the group sequence and
    each kernel's index tensors."""

    def __init__(self, pair, schedule, mats, device):
        gptr, gkernel, _, rows = fs.lockstep(schedule)
        self.kernel = gkernel.tolist()
        local = np.zeros(len(gkernel), dtype=np.int64)
        self.ops = []
        spec = sd.PAIRS[pair]
        for k in (0, 1):
            mine = np.flatnonzero(gkernel == k)
            local[mine] = np.arange(len(mine))
            sizes = gptr[mine + 1] - gptr[mine]
            krows = rows[sd.expand_ranges(gptr[mine], gptr[mine + 1])[1]]
            kptr = np.append(0, np.cumsum(sizes)).astype(np.int64)
            self.ops.append(self._op(spec.kernels[k], k, pair, mats, krows, kptr, device))
        self.local = local.tolist()

    @staticmethod
    def _op(kernel, k, pair, mats, rows, gptr, device):
        if pair == "spilu0_sptrsv":
            M = mats[0]
        elif pair == "spic0_sptrsv":
            M = sd.csr(sp.tril(mats[0]))        # IC(0) and its solve only see tril(A)
        else:
            M = mats[k]
        if kernel == "spilu0":
            return _ILU0(sd.ilu0_symbolic(M), rows, gptr, device)
        if kernel == "spic0":
            return _IC0(sd.ic0_symbolic(M), rows, gptr, device)
        ip, ix = M.indptr, M.indices
        diag = sd.diag_positions(ip, ix)
        if kernel == "spmv":
            return _RowGather(rows, gptr, ip[:-1], ip[1:], ix, None, device)
        if kernel == "sptrsv_lower":
            return _RowGather(rows, gptr, ip[:-1], diag, ix, diag, device)
        if kernel == "sptrsv_unit_lower":
            return _RowGather(rows, gptr, ip[:-1], diag, ix, None, device)
        if kernel == "sptrsv_upper":
            return _RowGather(rows, gptr, diag + 1, ip[1:], ix, diag, device)
        raise ValueError(kernel)


def _plan(pair, schedule, problem, device) -> _Plan:
    return schedule.cached(("t1_torch", str(device)), lambda: _Plan(pair, schedule, problem.matrices, device))


def _prepare(pair, matrices, vector, schedule):
    p = validate_sparse_fusion(pair, matrices, vector, schedule, tier="t1_torch")
    schedule = schedule if schedule is not None else fs.default_schedule(pair, p.matrices, p.fingerprint)
    plan = _plan(pair, schedule, p, vector.device)
    return p, plan


def _values(M, like):
    return torch.from_numpy(M.data).to(device=like.device, dtype=like.dtype)


def _run(plan, first, second):
    for g, k in enumerate(plan.kernel):
        (first if k == 0 else second)(plan.local[g])


def _csr_tensor(M, values):
    return sparse_csr(_t(M.indptr, values.device), _t(M.indices, values.device), values, M.shape)


# ---------------------------------------------------------------- the pairs

def sptrsv_spmv(L, A, b, schedule=None):
    """x = L⁻¹b (L lower triangular), y = A·x → (x, y)."""
    p, plan = _prepare("sptrsv_spmv", (L, A), b, schedule)
    lv, av = _values(p.matrices[0], b), _values(p.matrices[1], b)
    x, y = torch.zeros_like(b), torch.zeros_like(b)
    solve, spmv = plan.ops
    _run(plan, lambda j: solve.solve(j, lv, b, x), lambda j: spmv.spmv(j, av, x, y))
    return x, y


def spmv_sptrsv(A, L, x, schedule=None):
    """y = A·x, z = L⁻¹y (L lower triangular) → (y, z)."""
    p, plan = _prepare("spmv_sptrsv", (A, L), x, schedule)
    av, lv = _values(p.matrices[0], x), _values(p.matrices[1], x)
    y, z = torch.zeros_like(x), torch.zeros_like(x)
    spmv, solve = plan.ops
    _run(plan, lambda j: spmv.spmv(j, av, x, y), lambda j: solve.solve(j, lv, y, z))
    return y, z


def sptrsv_sptrsv(L, U, b, schedule=None):
    """y = L⁻¹b (L lower), x = U⁻¹y (U upper triangular) → (y, x)."""
    p, plan = _prepare("sptrsv_sptrsv", (L, U), b, schedule)
    lv, uv = _values(p.matrices[0], b), _values(p.matrices[1], b)
    y, x = torch.zeros_like(b), torch.zeros_like(b)
    lower, upper = plan.ops
    _run(plan, lambda j: lower.solve(j, lv, b, y), lambda j: upper.solve(j, uv, y, x))
    return y, x


def spilu0_sptrsv(A, b, schedule=None):
    """LU = ILU(0) of A on A's pattern, x = L⁻¹b with L its unit lower part → (LU, x)."""
    p, plan = _prepare("spilu0_sptrsv", (A,), b, schedule)
    A = p.matrices[0]
    a = _values(A, b).clone()
    x = torch.zeros_like(b)
    ilu, solve = plan.ops
    _run(plan, lambda j: ilu.step(j, a), lambda j: solve.solve(j, a, b, x, unit=True))
    check_factor_pivots("ilu0", a[ilu.diag])
    return _csr_tensor(A, a), x


def spic0_sptrsv(A, b, schedule=None):
    """Lc = IC(0) of A on tril(A)'s pattern (Lc·Lcᵀ ≈ A), x = Lc⁻¹b → (Lc, x)."""
    p, plan = _prepare("spic0_sptrsv", (A,), b, schedule)
    T = sd.csr(sp.tril(p.matrices[0]))
    l = _values(T, b).clone()
    x = torch.zeros_like(b)
    pivots = torch.full_like(b, float("nan"))
    ic, solve = plan.ops
    _run(plan, lambda j: ic.step(j, l, pivots), lambda j: solve.solve(j, l, b, x))
    check_factor_pivots("ic0", pivots)
    return _csr_tensor(T, l), x
