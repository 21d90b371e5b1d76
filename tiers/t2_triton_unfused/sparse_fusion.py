"""Sparse fusion's baseline, unfused: each kernel of the pair runs on its own, as a library of
sparse kernels would run it, and the second starts when the first has finished.

Each kernel is scheduled by the wavefront levels of *its own* DAG (tiers/sparse_dags.py:
kernel_dags): level l holds the rows whose longest chain of dependences within the kernel has
l edges. One launch per level —

    SpTRSV, ILU(0), IC(0)   as many launches as the kernel's DAG is deep
    SpMV                    one launch (no row depends on another)

— and a launch's programs take R rows each, with the row algorithms of
tiers/kernels/sparse_rows.py (the same the fused tier runs). The launch boundary is the only
synchronisation, which is why nothing inside a level waits for anything. A prepared call keeps
its launches, as a library would: the first call goes through Triton's JIT, the later ones
through the compiled kernel's runner (launch.Bound), so a level costs its kernel and one launch,
not the JIT's binding of every argument again.

`schedule=` is accepted and checked (it must be for this pair and these sparsity patterns) but
not followed: fusing the kernels is what this tier, by definition, does not do.
"""
from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from tiers import sparse_dags as dags
from tiers.kernels import sparse_rows as rows
from tiers.kernels.sparse_fusion_executors.launch import Bound, jit_launch
from tiers.kernels.sparse_rows import CHUNK, affine_rows, factor_iterations
from tiers.validation import interpreting, validate_sparse_fusion


@triton.jit
def _rows(ITER, START, COUNT, KIND, ENT_PTR, ENT_VAL, ENT_AUX, UPD_PTR, UPD_A, UPD_B, RHS, DIAG, SIGN, DST,
          FAC_PTR, HOLD_LEN, STEP_BITS, VAL, VEC, WHAT: tl.constexpr, STATIC: tl.constexpr, R: tl.constexpr,
          CHUNK: tl.constexpr, WIDE: tl.constexpr, W: tl.constexpr, S: tl.constexpr, C: tl.constexpr,
          WALK: tl.constexpr):
    """Rows ITER[START + pid·R …] of one level of one kernel (KIND … STEP_BITS: the row tables in
    rows.table_args' order; a launch holds one kind, WHAT, so KIND is not read). WHAT: 0 an SpMV
    or SpTRSV row, 1 an ILU(0) row, 2 an IC(0) row; STATIC: VAL holds no factor being computed; W, S, C: held
    factor rows (RowTables.held), WALK: some walk beside them (RowTables.walks)."""
    at = START + tl.program_id(0) * R + tl.arange(0, R)
    ok = at < START + COUNT
    v = tl.load(ITER + at, mask=ok, other=0)
    if WHAT == 0:
        affine_rows(v, ok, ENT_PTR, ENT_VAL, ENT_AUX, RHS, DIAG, SIGN, DST, VAL, VEC, STATIC, CHUNK, WIDE)
    else:
        factor_iterations(v, ok, FAC_PTR, HOLD_LEN, STEP_BITS, ENT_PTR, ENT_VAL, ENT_AUX, UPD_PTR, UPD_A, UPD_B,
                          VAL, WHAT, CHUNK, W, S, C, WALK)


def _rows_per_program(count: int) -> int:
    """A triangular solve's level is tens to thousands of rows: 8 per program still spreads it
    over the SMs; SpMV's one level of every row takes 32. The interpreter pays per program."""
    if interpreting():
        return min(64, triton.next_power_of_2(count))
    return 32 if count >= 8192 else 8


def _plan(problem, tables, device):
    """Launches (start, count, what, R, programs) over ITER, kernel 1's levels then kernel 2's,
    and ITER on the device."""
    g1, g2, _ = dags.kernel_dags(problem.pair, *problem.matrices)
    order, launches, base = [], [], 0
    for k, (g, offset) in enumerate(((g1, 0), (g2, tables.n1))):
        level = dags.wavefront_levels(g)
        by_level = np.argsort(level, kind="stable")
        order.append(by_level + offset)
        bounds = np.searchsorted(level[by_level], np.arange(int(level.max(initial=-1)) + 2))
        what = tables.factor if k == 0 else 0
        most = tables.held_lanes(64) if k == 0 else 64
        for a, b in zip(bounds[:-1], bounds[1:]):
            R = min(most, _rows_per_program(int(b - a)))
            launches.append((base + int(a), int(b - a), what, R, triton.cdiv(int(b - a), R)))
        base += g.n
    it = rows.to_device({"iter": np.concatenate(order).astype(np.int32)}, device)["iter"]
    return launches, it


BOUND = True
"""Whether a prepared call keeps its level launches (launch.Bound) from call to call, or launches
through the JIT at each call."""


class Prepared:
    """A pair on fixed matrices: `prepared(vector)` only launches the per-level kernels."""

    def __init__(self, problem, device, dtype):
        self.problem = problem
        self.tables, self.dev = rows.device_tables(problem, device)
        self.launches, self.iter = rows.pattern_cached(problem, ("t2_levels", str(device)),
                                                       lambda: _plan(problem, self.tables, device))
        self.values = torch.from_numpy(self.tables.values(problem.matrices)).to(device=device, dtype=dtype)
        self.kept = None                    # the level launches, kept by the first call where BOUND

    def __call__(self, vector):
        t, d = self.tables, self.dev
        vec = rows.new_vector(t, vector, self.values, "t2_triton_unfused")
        val = self.values.clone() if t.factor else self.values
        go = self.kept or self._level_launches()
        tables = rows.table_args(d)
        for launch, (start, count, *_) in zip(go, self.launches):
            launch(self.iter, start, count, *tables, val, vec)
        return rows.results(t, self.dev, val, rows.vector_outs(t, vec))

    def refresh(self, *matrices):
        """New values on the patterns this runner was prepared for, as t3's Prepared.refresh takes
        them (sparse_rows.checked_values), written in place into the values the launches read;
        the tables and launches are kept. Returns the runner."""
        new = rows.checked_values(self.problem, matrices, self.values.device)
        self.values.copy_(rows.refreshed_values(self.problem, self.tables, new, self.values.dtype))
        return self

    def _level_launches(self) -> list:
        """One launch per level (_plan), called with its positional arguments: launch.Bound, kept
        in self.kept, where BOUND; else through the JIT, made afresh each call."""
        t, wide = self.tables, self.tables.wide(CHUNK)
        make = Bound if BOUND else jit_launch
        go = [make(_rows, (grid,), dict(WHAT=what, STATIC=t.factor == 0, R=R, CHUNK=CHUNK, WIDE=wide, WALK=t.walks,
                                        **dict(zip("WSC", t.held(R) if what else (0, 0, 0))),
                                        num_warps=1 if R <= 8 else 2), varying=(-2, -1))    # val, vec
              for _, _, what, R, grid in self.launches]
        if BOUND:
            self.kept = go
        return go


def prepare(pair, *matrices, like, schedule=None) -> Prepared:
    """Validate once; the result runs the pair on vectors like the tensor `like`."""
    problem = validate_sparse_fusion(pair, matrices, like, schedule, tier="t2_triton_unfused")
    return Prepared(problem, like.device, like.dtype)


def sptrsv_spmv(L, A, b, schedule=None):
    """(x, y): x = L⁻¹b (L lower triangular), y = A·x."""
    return prepare("sptrsv_spmv", L, A, like=b, schedule=schedule)(b)


def spmv_sptrsv(A, L, x, schedule=None):
    """(y, z): y = A·x, z = L⁻¹y."""
    return prepare("spmv_sptrsv", A, L, like=x, schedule=schedule)(x)


def sptrsv_sptrsv(L, U, b, schedule=None):
    """(y, x): y = L⁻¹b, x = U⁻¹y (U upper triangular)."""
    return prepare("sptrsv_sptrsv", L, U, like=b, schedule=schedule)(b)


def spilu0_sptrsv(A, b, schedule=None):
    """(LU, x): ILU(0) of A on A's pattern (unit L and U packed), x = L⁻¹b."""
    return prepare("spilu0_sptrsv", A, like=b, schedule=schedule)(b)


def spic0_sptrsv(A, b, schedule=None):
    """(Lc, x): IC(0) of A on tril(A)'s pattern, x = Lc⁻¹b."""
    return prepare("spic0_sptrsv", A, like=b, schedule=schedule)(b)
