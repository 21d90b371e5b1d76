"""Sparse-fusion benchmark: two consecutive sparse kernels run as one schedule (t3 under the
wavefront, LBC and sparse-fusion schedules) beside the unfused t2, cuSPARSE through CuPy and
SciPy on the CPU.

Matrices (tiers/sparse_matrices.py; every one SPD, CSR, float64 values):
  poisson2d     2D Poisson, 5-point, 1000 × 1000 grid            N = 1,000,000
  poisson3d     3D Poisson, 7-point, 100³ grid                   N = 1,000,000
  poisson3d27   3D Poisson, 27-point, 64³ grid                   N =   262,144
  powerlaw      power-law graph Laplacian + I, 1M nodes, m = 3   N = 1,000,000
each in the natural ordering and, with `--ordering natural,rcm`, after reverse Cuthill–McKee.
`--matrices` also takes Matrix Market files (`path/to/m.mtx`, or `.mtx.gz`: a SuiteSparse matrix,
as the paper measured), each at its own size and labelled by its file name; the pairs take L and U
from its triangles as from a generator's matrix, so the file should hold an SPD matrix or one
whose ILU(0) and IC(0) exist (what does not holds is reported in its rows, never timed).
Pairs: sptrsv_spmv, spmv_sptrsv, sptrsv_sptrsv, spilu0_sptrsv, spic0_sptrsv (the matrices each
takes are `operands(pair, A)`).

Providers:
  t3_triton_fused    one row per schedule kind and executor (levels, syncfree, dataflow, chains,
                     segments); the schedule is inspected once, outside the timing
  t2_triton_unfused  each kernel by its own DAG's wavefronts, one launch per level: the unfused
                     Triton baseline (it checks but does not follow a schedule: one row)
  t1_torch           optional (`--providers`); every schedule; timed as the whole call
                     (t1 has no `prepare`, so its validation is inside the time)
  cusparse   cuSPARSE through CuPy with its analysis done once, outside the timing (SpSM with one
             right-hand side for SpTRSV; csrilu02 / csric02 with their analysis kept; SpMV by
             cupyx's `A @ x`): the library's inspector-executor, the fair anchor
  cupyx      CuPy's public calls as a user writes them (spsolve_triangular, csrilu02), which
             redo cuSPARSE's analysis on every call
  scipy      SciPy on one CPU thread (spsolve_triangular, A @ x); no ILU(0)/IC(0) exists there
Every provider's output is checked against a float64 reference before it is timed; a wrong
result is recorded as status "wrong", never timed. GPU times are `triton.testing.do_bench`
medians; SciPy's are medians of `time.perf_counter`; in `--quick` on a CPU each tier's time is
its one checked run (interpreter toy numbers, written under the temporary folder).

Bytes for GB/s count each matrix operand's values and indices once (4-byte indices, row
pointers included), a factor written once, and each input and output vector once: the traffic
of a perfect fused execution. `setup_ms` is the wall time of what a provider does once before its
runs: t2's and t3's `prepare` (validation, tables, uploads), the anchors' construction (cuSPARSE's
analysis and buffers, the matrices' upload). `one_off_ms` = inspector ms + setup ms of a fused
row − setup ms of the best unfused row, and `payoff_runs` = one_off_ms / (best unfused ms − fused
ms): the number of executor runs that repay everything the fused code does once beyond what the
best unfused code does once (0 when that is nothing, None when the fused run is not faster);
best unfused is the fastest of t2 and the two cuSPARSE anchors. `refresh_ms` (t2, t3): the wall
time of `refresh` handing the prepared runner new values on its pattern as tensors of the stored
values already on the device (the median of three, the same values again, after the runner is
prepared and before it is checked and timed): what new values cost once the pattern's one-off work
is done.
"""
from __future__ import annotations

import datetime
import inspect as _inspect
import itertools
import math
import os
import statistics
import sys
import time
import zlib

import numpy as np

from tiers.bench.common import environment, measure_ceilings, time_ms, write_rows

from tiers.sparse_dags import FACTOR_PAIRS, PAIR_NAMES as PAIRS
KINDS = ("wavefront", "lbc", "sparse_fusion")
TIER_PROVIDERS = ("t1_torch", "t2_triton_unfused", "t3_triton_fused")
ANCHORS = ("cusparse", "cupyx", "scipy")
PROVIDERS = ("t2_triton_unfused", "t3_triton_fused", "cusparse", "cupyx", "scipy")
UNFUSED = ("t2_triton_unfused", "cusparse", "cupyx")
# tiers that take `schedule=` only to check it: t2 runs each kernel by the wavefronts of its own
# DAG, one launch per level (its module docstring), so it is measured once per case
OWN_SCHEDULE = {"t2_triton_unfused": "per-kernel wavefront"}

# name: (size argument of the generator, size in --quick, description with {s} for the size)
MATRICES = {
    "poisson2d": (1000, 6, "2D Poisson 5-point, {s}x{s} grid"),
    "poisson3d": (100, 3, "3D Poisson 7-point, {s}^3 grid"),
    "poisson3d27": (64, 3, "3D Poisson 27-point, {s}^3 grid"),
    "powerlaw": (1_000_000, 40, "power-law Laplacian + I, {s} nodes, m=3"),
}
MTX_SUFFIXES = (".mtx", ".mtx.gz")   # --matrices also takes Matrix Market files (sparse_matrices.load_mtx)
T0_REFERENCE_ROWS = 5000   # the t0 loops take seconds beyond this
CASE_KEYS = ("matrix", "ordering", "n", "pair", "dtype", "provider", "schedule", "executor", "workers",
             "options", "block_rows", "nap_ns", "chain_steps", "programs_per_sm", "tickets", "tickets_ahead",
             "claim", "fuse_rows")


def make_matrix(name: str, size: int):
    from tiers import sparse_matrices as sm

    if name == "poisson2d":
        return sm.poisson2d(size)
    if name == "poisson3d":
        return sm.poisson3d(size, points=7)
    if name == "poisson3d27":
        return sm.poisson3d(size, points=27)
    if name == "powerlaw":
        return sm.powerlaw_laplacian(size, m=3, seed=0)
    raise ValueError(f"unknown matrix {name!r}; known: {', '.join(MATRICES)}")


def is_mtx(name: str) -> bool:
    """Whether a --matrices entry names a Matrix Market file rather than a generator."""
    return str(name).lower().endswith(MTX_SUFFIXES)


def mtx_label(name: str) -> str:
    """A Matrix Market file's label in the rows: its file name without the suffix."""
    base = os.path.basename(name)
    return base[: -len(next(x for x in MTX_SUFFIXES if base.lower().endswith(x)))]


def matrix_source(name: str, size: int | None):
    """(matrix, label for the rows, description) of a --matrices entry: a generator of MATRICES at
    `size`, or a Matrix Market file at its own size (run checked that it exists), labelled by its
    file name without suffix. A file that is not square stops the run here, by the validation's
    own check (without it the RCM ordering would fail outside any row), as does one that load_mtx
    refuses or SciPy cannot read. What else the pairs need
    (a stored, non-zero diagonal; IC(0) and ILU(0) without breakdown) the validation reports in
    each row."""
    from tiers.sparse_matrices import load_mtx
    from tiers.validation import check_square

    if not is_mtx(name):
        return make_matrix(name, size), name, MATRICES[name][2].format(s=size)
    try:
        A = load_mtx(name)
        check_square(f"the matrix in {name}", A)
    except ValueError as e:          # not Matrix Market, complex or not square
        raise SystemExit(str(e)) from None
    return A, mtx_label(name), f"Matrix Market file {name}"


def operands(pair: str, A):
    """The matrices `pair` takes, built from one SPD matrix A: L = tril(A), U = triu(A)."""
    from tiers.sparse_matrices import tril_csr, triu_csr

    if pair == "sptrsv_spmv":
        return (tril_csr(A), A)
    if pair == "spmv_sptrsv":
        return (A, tril_csr(A))
    if pair == "sptrsv_sptrsv":
        return (tril_csr(A), triu_csr(A))
    if pair in FACTOR_PAIRS:
        return (A,)
    raise ValueError(f"unknown pair {pair!r}; known: {', '.join(PAIRS)}")


def traffic_bytes(pair: str, mats, val_bytes: int) -> int:
    """Bytes a perfect fused execution moves (see the module docstring)."""
    n = mats[0].shape[0]

    def csr(M):
        return M.nnz * (val_bytes + 4) + (M.shape[0] + 1) * 4

    if pair in FACTOR_PAIRS:
        from tiers.sparse_matrices import tril_csr

        F = mats[0] if pair == "spilu0_sptrsv" else tril_csr(mats[0])
        return csr(F) + F.nnz * val_bytes + 2 * n * val_bytes   # read A, write the factor; b, x
    return sum(csr(M) for M in mats) + 3 * n * val_bytes           # one vector in, two out


# ----------------------------------------------------------------------------- the reference

def _unit_lower(LU):
    import scipy.sparse as sp

    return (sp.tril(LU, -1, format="csr") + sp.identity(LU.shape[0], format="csr")).tocsr()


def factor_residual(pair: str, A, values) -> float:
    """‖(F·Fᵀ or L·U) − A‖ / ‖A‖ restricted to the factor's pattern: zero for the exact IC(0) /
    ILU(0) factor, whichever code computed it. Checks the reference without trusting a tier."""
    import scipy.sparse as sp

    from tiers.sparse_matrices import tril_csr

    pattern = A if pair == "spilu0_sptrsv" else tril_csr(A)
    F = sp.csr_matrix((np.asarray(values, dtype=np.float64), pattern.indices, pattern.indptr), shape=A.shape)
    product = _unit_lower(F) @ sp.triu(F, format="csr") if pair == "spilu0_sptrsv" else F @ F.T.tocsr()
    ones = sp.csr_matrix((np.ones(pattern.nnz), pattern.indices, pattern.indptr), shape=A.shape)
    diff = product.multiply(ones) - pattern
    return float(np.linalg.norm(diff.tocsr().data) / np.linalg.norm(pattern.data))


def as_values(out):
    """A factor as the values of its CSR pattern in row order (scipy, torch sparse or a values
    array), or a vector as it is; torch results stay torch so `compare` reads them."""
    import scipy.sparse as sp

    if type(out).__module__.split(".")[0] == "cupy":   # NumPy refuses implicit device-to-host copies
        return out.get()
    if sp.issparse(out):
        out = out.tocsr()
        if not out.has_sorted_indices:
            out = out.sorted_indices()
        return out.data
    layout = str(getattr(out, "layout", ""))
    if "sparse_csr" in layout:
        return out.values()
    if "sparse_coo" in layout:
        return out.coalesce().values()
    return out


def reference(pair, mats, v, device="cpu"):
    """float64 outputs of `pair` as NumPy arrays. SpMV/SpTRSV by SciPy; the ILU(0)/IC(0) factor
    by the t0 loops on small matrices and by the t1 tier in float64 (tested against t0) on large
    ones, then checked by `factor_residual`, so the reference never rests on the code it judges."""
    from scipy.sparse.linalg import spsolve_triangular as trsv

    if pair == "sptrsv_spmv":
        L, A = mats
        x = trsv(L, v, lower=True)
        return [x, A @ x]
    if pair == "spmv_sptrsv":
        A, L = mats
        y = A @ v
        return [y, trsv(L, y, lower=True)]
    if pair == "sptrsv_sptrsv":
        L, U = mats
        y = trsv(L, v, lower=True)
        return [y, trsv(U, y, lower=False)]
    import scipy.sparse as sp
    import torch

    from tiers import registry
    from tiers.sparse_matrices import tril_csr

    A = mats[0]
    if A.shape[0] <= T0_REFERENCE_ROWS:
        factor, _ = registry.get("sparse_fusion", "t0_numpy", pair)(A, v)
    else:
        factor, _ = registry.get("sparse_fusion", "t1_torch", pair)(A, torch.tensor(v, dtype=torch.float64,
                                                                                      device=device))
    values = as_values(factor)
    values = values.detach().cpu().numpy() if hasattr(values, "detach") else np.asarray(values, np.float64)
    res = factor_residual(pair, A, values)
    if not res < 1e-10:
        raise AssertionError(f"reference {pair} factor off its defining identity: residual {res:.1e}")
    pattern = A if pair == "spilu0_sptrsv" else tril_csr(A)
    F = sp.csr_matrix((values, pattern.indices, pattern.indptr), shape=A.shape)
    if pair == "spilu0_sptrsv":
        return [values, trsv(_unit_lower(F), v, lower=True, unit_diagonal=True)]
    return [values, trsv(F, v, lower=True)]


def check(outs, refs, dtype: str) -> tuple[bool, float, str]:
    """(ok, worst relative error, message) of a provider's outputs against the reference."""
    from tiers.tolerances import compare

    worst, msg = 0.0, ""
    for i, (o, r) in enumerate(zip(outs, refs)):
        try:
            res = compare(as_values(o), r, dtype)
        except AssertionError as e:   # a shape mismatch
            return False, math.inf, f"output {i}: {e}"
        worst = max(worst, res["rel"]) if res["rel"] == res["rel"] else math.inf
        if not res["ok"]:
            msg = msg or f"output {i}: rel err {res['rel']:.2e} (limit {res['tol'].rel:.0e}), finite={res['finite']}"
    if len(outs) != len(refs):
        return False, math.inf, f"{len(outs)} outputs, expected {len(refs)}"
    return not msg, worst, msg


# ------------------------------------------------------------------------------ the anchors

class _CuSpSV:
    """One cuSPARSE triangular solve `M out = rhs` with SpSM's analysis done at construction:
    each call is only the solve phase (the cuSPARSE generic API's inspector-executor)."""

    def __init__(self, M, rhs, out, lower: bool, unit: bool):
        import cupy
        from cupy._core import _dtype
        from cupy.cuda import device
        from cupy_backends.cuda.libs import cusparse as lib
        from cupyx import cusparse as cx

        self.lib, self.handle = lib, device.get_cusparse_handle()
        self.keep = (M, rhs, out)   # the descriptors point into these
        self.mat = cx.SpMatDescriptor.create(M)
        self.b = cx.DnMatDescriptor.create(rhs.reshape(-1, 1))
        self.c = cx.DnMatDescriptor.create(out.reshape(-1, 1))
        self.mat.set_attribute(lib.CUSPARSE_SPMAT_FILL_MODE,
                               lib.CUSPARSE_FILL_MODE_LOWER if lower else lib.CUSPARSE_FILL_MODE_UPPER)
        self.mat.set_attribute(lib.CUSPARSE_SPMAT_DIAG_TYPE,
                               lib.CUSPARSE_DIAG_TYPE_UNIT if unit else lib.CUSPARSE_DIAG_TYPE_NON_UNIT)
        self.alpha = np.array(1.0, dtype=M.dtype)
        self.cuda_dtype = _dtype.to_cuda_dtype(M.dtype)
        self.descr = lib.spSM_createDescr()
        op = lib.CUSPARSE_OPERATION_NON_TRANSPOSE
        self.args = (self.handle, op, op, self.alpha.ctypes.data, self.mat.desc, self.b.desc, self.c.desc,
                     self.cuda_dtype, lib.CUSPARSE_SPSM_ALG_DEFAULT, self.descr)
        size = lib.spSM_bufferSize(*self.args)
        self.buf = cupy.empty(max(int(size), 1), dtype=cupy.int8)
        lib.spSM_analysis(*self.args, self.buf.data.ptr)

    def __call__(self):
        self.lib.spSM_solve(*self.args, self.buf.data.ptr)
        return self.keep[2]

    def __del__(self):
        try:
            self.lib.spSM_destroyDescr(self.descr)
        except Exception:
            pass


class _CuFactor:
    """cuSPARSE csrilu02 (ILU(0)) or csric02 (IC(0)) in place on a copy of the values, with the
    analysis done once; each call copies A's values in and factors."""

    def __init__(self, kind: str, M):
        import cupy
        from cupy.cuda import device
        from cupy_backends.cuda.libs import cusparse as lib
        from cupyx import cusparse as cx

        t = {"f": "s", "d": "d"}[M.dtype.char]
        self.lib, self.handle, self.M = lib, device.get_cusparse_handle(), M
        self.values = M.data.copy()
        self.desc = cx.MatDescriptor.create()
        self.desc.set_mat_type(lib.CUSPARSE_MATRIX_TYPE_GENERAL)
        self.desc.set_mat_index_base(lib.CUSPARSE_INDEX_BASE_ZERO)
        name = "csrilu02" if kind == "ilu0" else "csric02"
        create = getattr(lib, "createCsrilu02Info" if kind == "ilu0" else "createCsric02Info")
        self.info = create()
        self.solve = getattr(lib, t + name)
        m, nnz = M.shape[0], M.nnz
        self.args = (self.handle, m, nnz, self.desc.descriptor, self.values.data.ptr, M.indptr.data.ptr,
                     M.indices.data.ptr, self.info)
        size = getattr(lib, t + name + "_bufferSize")(*self.args)
        self.buf = cupy.empty(max(int(size), 1), dtype=cupy.int8)
        self.policy = lib.CUSPARSE_SOLVE_POLICY_USE_LEVEL
        getattr(lib, t + name + "_analysis")(*self.args, self.policy, self.buf.data.ptr)

    def __call__(self):
        self.values[...] = self.M.data
        self.solve(*self.args, self.policy, self.buf.data.ptr)
        return self.values


def cupy_status() -> str:
    """'' when CuPy and a GPU are usable, else why not (recorded in the anchors' rows)."""
    try:
        import cupy
        cupy.cuda.runtime.getDeviceCount()
        return ""
    except Exception as e:
        return f"n/a: cupy unusable ({type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''})"


_WARM: set = set()


def warm_anchor(provider: str, pair: str, dtype: str, device: str = "cuda") -> None:
    """Run the anchor's call once on a 4 × 4 grid, once per (provider, pair, dtype) and process, so
    that the setup timed next (`setup_ms`, which the payoff subtracts) is the anchor's analysis of
    the matrix, not CuPy's first use: cuSPARSE's handle, its kernels' modules, CuPy's own kernels'
    compilation. Without it the first pair of each process in the README's float64 table (H200)
    recorded 109–170 ms of cuSPARSE setup against 32–53 for the vector pairs after it, and a 27-point
    grid read from a file first took 305 ms against 18 for the same matrix right after
    (figures/data/mtx_cli_*), which shrank that pair's payoff. A failure here is left to the call
    that is measured, which reports it."""
    if (provider, pair, dtype) in _WARM:
        return
    _WARM.add((provider, pair, dtype))
    import torch

    from tiers.sparse_matrices import poisson2d

    try:
        v = torch.ones(16, dtype=getattr(torch, dtype), device=device)
        cupy_call(provider, pair, operands(pair, poisson2d(4)), v)()
        torch.cuda.synchronize()
    except Exception:
        pass


def cupy_call(provider: str, pair: str, mats, v_torch):
    """A call that runs the cuSPARSE anchor (or CuPy's public calls) on the device arrays of `mats`
    and returns the pair's outputs.
    Raises NotImplementedError with the reason when the library lacks a kernel."""
    import cupy
    import cupyx.scipy.sparse as csp
    from cupyx import cusparse as cx
    from cupyx.scipy.sparse.linalg import spsolve_triangular

    from tiers.sparse_matrices import tril_csr

    dtype = str(v_torch.dtype).replace("torch.", "")
    v = cupy.asarray(v_torch)   # shares the torch tensor's memory (DLPack / CUDA array interface)
    dev = [csp.csr_matrix(M.astype(dtype)) for M in mats]
    n = v.shape[0]
    if provider == "cupyx":
        def trsv(M, rhs, lower, unit=False):
            return spsolve_triangular(M, rhs, lower=lower, unit_diagonal=unit).astype(dtype, copy=False)
        if pair == "sptrsv_spmv":
            L, A = dev
            def call():
                x = trsv(L, v, True)
                return x, A @ x
        elif pair == "spmv_sptrsv":
            A, L = dev
            def call():
                y = A @ v
                return y, trsv(L, y, True)
        elif pair == "sptrsv_sptrsv":
            L, U = dev
            def call():
                y = trsv(L, v, True)
                return y, trsv(U, y, False)
        elif pair == "spilu0_sptrsv":
            if not cx.check_availability("csrilu02"):
                raise NotImplementedError("cupyx.cusparse.csrilu02 not available in this CUDA")
            A = dev[0]
            def call():
                LU = A.copy()
                cx.csrilu02(LU, level_info=True)
                Lstrict = csp.tril(LU, k=-1, format="csr")
                return LU.data, trsv(Lstrict, v, True, unit=True)
        else:
            raise NotImplementedError("CuPy has no public IC(0) call (cupyx.cusparse has no csric02 wrapper)")
        return call

    # "cusparse": analysis once, the executor timed
    if pair in FACTOR_PAIRS:
        kind = "ilu0" if pair == "spilu0_sptrsv" else "ic0"
        pattern = dev[0] if kind == "ilu0" else csp.csr_matrix(tril_csr(mats[0]).astype(dtype))
        try:
            fac = _CuFactor(kind, pattern)
            fac()
        except AttributeError as e:
            raise NotImplementedError(f"cuSPARSE {kind} not exposed by this CuPy: {e}") from e
        F = csp.csr_matrix((fac.values, pattern.indices, pattern.indptr), shape=pattern.shape)
        x = cupy.zeros(n, dtype=dtype)
        # the triangle SpSM reads is chosen by its fill mode, so the packed LU serves as L
        solve = _CuSpSV(F, v, x, lower=True, unit=(kind == "ilu0"))

        def call():
            fac()
            return fac.values, solve()
        return call
    a, b = dev
    if pair == "sptrsv_spmv":
        x = cupy.zeros(n, dtype=dtype)
        solve = _CuSpSV(a, v, x, lower=True, unit=False)
        return lambda: (solve(), b @ x)
    if pair == "spmv_sptrsv":
        y, z = cupy.zeros(n, dtype=dtype), cupy.zeros(n, dtype=dtype)
        solve = _CuSpSV(b, y, z, lower=True, unit=False)

        def call():
            y[...] = a @ v
            return y, solve()
        return call
    y, x = cupy.zeros(n, dtype=dtype), cupy.zeros(n, dtype=dtype)
    s1, s2 = _CuSpSV(a, v, y, lower=True, unit=False), _CuSpSV(b, y, x, lower=False, unit=False)
    return lambda: (s1(), s2())


def scipy_call(pair: str, mats, v):
    """SciPy on the host; matrices and vector already in the benchmark dtype."""
    from scipy.sparse.linalg import spsolve_triangular as trsv

    if pair == "sptrsv_spmv":
        L, A = mats
        def call():
            x = trsv(L, v, lower=True)
            return x, A @ x
    elif pair == "spmv_sptrsv":
        A, L = mats
        def call():
            y = A @ v
            return y, trsv(L, y, lower=True)
    elif pair == "sptrsv_sptrsv":
        L, U = mats
        def call():
            y = trsv(L, v, lower=True)
            return y, trsv(U, y, lower=False)
    else:
        raise NotImplementedError("SciPy has no ILU(0)/IC(0) (spilu is SuperLU's thresholded ILUTP)")
    return call


# ---------------------------------------------------------------------------------- timing

def _host_ms(fn, reps: int) -> float:
    """Median host milliseconds of fn(), outputs not poisoned (as time_ms)."""
    from tiers.buffers import poisoned

    times = []
    with poisoned(False):
        for _ in range(reps):
            start = time.perf_counter()
            fn()
            times.append(1e3 * (time.perf_counter() - start))
            if sum(times) > 3000:   # a slow provider is timed fewer times
                break
    return statistics.median(times)


def _synced_ms(fn, reps: int) -> float:
    """_host_ms of fn() with the device synchronised before the first call and after each: the wall
    time of host work whose kernels may end after it returns (a refresh's copies)."""
    import torch

    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)

    def once():
        fn()
        sync()
    sync()
    return _host_ms(once, reps)


def _enqueue_ms(fn, calls: int = 20):
    """Host milliseconds a call of fn() takes to issue: `calls` calls back to back, the GPU not
    waited for between them (it is before and after, outside the timing), outputs not poisoned.
    Beside the device time (_device_ms) it says whether the GPU may wait for the host: a call
    whose host time nears its device time is timed partly on the host's side, as the slow
    rounds of the README's table might be. A call that reads a result back (a factor pair's
    breakdown flag) waits for its kernels inside, and a launch queue that fills makes the host
    wait too: their host time includes the device's. None without CUDA."""
    import torch

    if not torch.cuda.is_available():
        return None
    from tiers.buffers import poisoned

    with poisoned(False):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        ms = 1e3 * (time.perf_counter() - start) / calls
        torch.cuda.synchronize()
    return ms


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _device_ms(fn, quick: bool) -> tuple[float, str]:
    import torch

    if torch.cuda.is_available():
        return time_ms(fn, warmup=5 if quick else 25, rep=20 if quick else 100), "cuda_events"
    return _host_ms(fn, 1 if quick else 3), "host"


def _error(e: Exception) -> str:
    text = str(e).splitlines()[0][:160] if str(e) else ""
    return f"error: {type(e).__name__}: {text}"


def _scalar(x):
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    return x if isinstance(x, (int, float, str, bool)) or x is None else None


def schedule_columns(s) -> dict:
    """The schedule's counts as row columns: levels, partitions, and every scalar of stats()."""
    cols = {"levels": int(s.levels()), "partitions": int(s.partitions()), "packing": s.packing}
    try:
        for k, v in s.stats().items():
            v = _scalar(v)
            if v is not None and k not in cols:
                cols[k if k in ("syncs",) else f"sched_{k}"] = v
    except Exception as e:   # stats are informative; a failure there must not lose the timing
        cols["sched_stats_error"] = _error(e)
    return cols


def executors_of(fn, pair=None) -> tuple:
    """The executor variants of a tier's module that can run `pair` (t3's executors_for), else (None,)."""
    module = sys.modules[fn.__module__]
    if pair is not None and hasattr(module, "executors_for"):
        return tuple(module.executors_for(pair))
    return tuple(getattr(module, "EXECUTORS", (None,)))


def payoffs(rows: list[dict]) -> None:
    """Fill `best_unfused_ms`, `one_off_ms` and `payoff_runs` in the rows of one (matrix, pair,
    dtype) case (the module docstring says what they count)."""
    best = best_row(rows, UNFUSED)
    for r in rows:
        if r.get("schedule") in KINDS and r["provider"] in ("t3_triton_fused", "t2_triton_unfused", "t1_torch"):
            r["best_unfused_ms"] = best["ms"] if best else None
            one_off = (r["inspector_ms"] + (r.get("setup_ms") or 0.0) - (best.get("setup_ms") or 0.0)
                       if best and r.get("inspector_ms") is not None else None)
            r["one_off_ms"] = one_off
            gain = best["ms"] - r["ms"] if best and r.get("status") == "ok" else None
            r["payoff_runs"] = max(one_off, 0.0) / gain if gain and gain > 0 and one_off is not None else None


def _log(msg: str, progress: bool):
    if progress:
        print(msg, flush=True)


# ------------------------------------------------------------------------------------ the run

def inspector_options(kind: str, options=None) -> dict:
    """The keyword options the `kind` inspector is given: those of `options` (e.g. slack) that
    its signature takes (the wavefront takes none)."""
    from tiers import fusion_schedules

    params = _inspect.signature(getattr(fusion_schedules, kind)).parameters
    return {k: v for k, v in (options or {}).items() if k in params}


def check_inspector_options(kinds, options=None) -> None:
    """Raise SystemExit when an option is taken by none of the inspectors asked for: a sweep
    over an option nobody reads would record identical schedules under different labels."""
    wanted = dict(options or {})
    taken = set()
    for kind in kinds:
        taken |= set(inspector_options(kind, options))
    unused = [k for k in wanted if k not in taken]
    if unused:
        raise SystemExit(f"no inspector among {', '.join(kinds)} takes {', '.join(unused)}; see "
                         "tiers.fusion_schedules.inspect for the options each takes")


def inspect_all(pair, mats, kinds, workers, options=None) -> dict:
    """{(kind, workers): (schedule or None, inspector wall ms, row columns)}; the wavefront does
    not depend on the worker count, so it is built once."""
    from tiers.fusion_schedules import inspect as inspect_schedule

    out = {}
    for kind in kinds:
        for w in workers if kind != "wavefront" else (None,):
            opts = {} if w is None else {"workers": int(w)}
            opts.update(inspector_options(kind, options))
            try:
                start = time.perf_counter()
                s = inspect_schedule(pair, *mats, kind=kind, **opts)
                ms = 1e3 * (time.perf_counter() - start)      # the inspector alone, not the statistics below
                cols = schedule_columns(s)
                cols["options"] = ",".join(f"{k}={v}" for k, v in opts.items() if k != "workers")
                out[(kind, w)] = (s, ms, cols)
            except Exception as e:
                out[(kind, w)] = (None, None, {"inspector_error": _error(e)})
    return out


def runner(fn, pair, mats, v, schedule, executor, row, tune=None):
    """(row, call) for a tier: when its module has `prepare` (validation, tables and the upload
    of the values done once, like cuSPARSE's analysis) the prepared executor is what is timed,
    and the preparation's wall time, with nothing cached but what the inspector left, is
    recorded as setup_ms; otherwise the pair function.
    `tune`: more options for prepare (t3's TUNABLE)."""
    import torch

    kw = {"schedule": schedule, **({"executor": executor} if executor else {})}
    module = sys.modules[fn.__module__]
    prepare = getattr(module, "prepare", None)
    if prepare is not None:
        kw.update(tune or {})
    if prepare is None:
        return {**row, "timed": "call"}, lambda: fn(*mats, v, **kw)
    from tiers.kernels.sparse_rows import forget_patterns

    forget_patterns()      # the pattern's tables and the plans count in every row's setup, not only the first's
    if schedule is not None:
        schedule.forget()
    start = time.perf_counter()
    try:
        prepared = prepare(pair, *mats, like=v, **kw)
        if v.is_cuda:
            torch.cuda.synchronize()
    except Exception as e:   # recorded by measure() as this row's error
        return row, _raiser(e)
    # the options the prepared runner took: prepare decides some of them from the matrices
    names = module.tunable(executor, pair) if hasattr(module, "tunable") else ()
    took = {k: getattr(prepared, k) for k in names}
    if getattr(prepared, "fused", 0):
        took["fused_rows"] = prepared.fused      # how many solve rows ran inside their factor row's block
    tables = getattr(prepared, "tables", None)
    if tables is not None and tables.factor:
        # the pattern's held factor rows (sparse_rows.held_spans): their shape, and the rows with
        # steps that walk in memory instead (all of them where the pattern holds none)
        took["held_shape"] = "x".join(str(x) for x in tables.held_shape)
        took["walked_rows"] = int(tables.walked.sum())
        took["lean"] = bool(getattr(prepared, "lean", False))     # the lean rows ran it (t3's runs_lean)
    if getattr(prepared, "record_shape", None) is not None:     # the dataflow kernel's shape, from the pattern
        took["record_shape"] = " ".join(f"{k}={v}" for k, v in prepared.record_shape.items())
        took["direct"] = prepared.direct
        took["early"] = prepared.early
        took["flat"] = prepared.flat
    setup_ms = 1e3 * (time.perf_counter() - start)
    return {**row, **took, "timed": "prepared", "setup_ms": setup_ms, **refresh_columns(prepared, mats, v)}, \
        lambda: prepared(v)


def refresh_columns(prepared, mats, v) -> dict:
    """{"refresh_ms": ...} for a runner that takes new values (refresh): its median wall time over
    three refreshes with the matrices' own values as tensors on the vector's device, synchronised;
    {} for one that does not, {"refresh_error": ...} where it fails (the row's check then tells
    whether the runner still computes right)."""
    import torch

    from tiers.sparse_dags import canonical

    if not hasattr(prepared, "refresh"):
        return {}
    values = [torch.from_numpy(canonical(M).data).to(device=v.device, dtype=v.dtype) for M in mats]
    try:
        return {"refresh_ms": _synced_ms(lambda: prepared.refresh(*values), 3)}
    except Exception as e:
        return {"refresh_error": _error(e)}


def _raiser(e):
    def call():
        raise e
    return call


class _Case:
    """The rows of one (matrix, ordering, pair, dtype): records, checks and times providers."""

    def __init__(self, common, refs, quick, progress, sink):
        self.common, self.refs, self.quick, self.progress, self.sink = common, refs, quick, progress, sink
        self.rows = []
        self.timed = []       # (row, call) of every row timed on the device, for more rounds (rounds)

    def record(self, row):
        row = {**self.common, "workers": None, "schedule": "", "executor": "", **row,
               "measured_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
        ms = row.setdefault("ms", math.nan)
        row["gbps"] = row["bytes"] / ms / 1e6 if ms == ms and ms > 0 else math.nan
        self.rows.append(row)
        self.sink(row)
        label = "/".join(str(row.get(k)) for k in ("provider", "schedule", "executor", "workers") if row.get(k) not in (None, ""))
        label += f" R={row['block_rows']}" if row.get("block_rows") else ""
        label += f" nap={row['nap_ns']}" if row.get("nap_ns") else ""
        label += f" S={row['chain_steps']}" if row.get("chain_steps") else ""
        label += f" P={row['programs_per_sm']}/SM" if row.get("programs_per_sm") else ""
        label += f" tickets={row['tickets']}" if row.get("tickets") else ""
        label += f" ahead={row['tickets_ahead']}" if row.get("tickets_ahead") else ""
        label += f" claim={row['claim']}" if row.get("claim") not in (None, "counter") else ""
        label += f" fused={row['fused_rows']}" if row.get("fused_rows") else ""
        label += f" walked={row['walked_rows']}" if row.get("walked_rows") else ""
        label += " fuse_rows=off" if row.get("fuse_rows") is False else ""
        c = self.common
        _log(f"  {c['matrix']:<11} {c['ordering']:<7} {c['dtype']:<7} {c['pair']:<14} {label:<36} "
             + (f"{ms:9.3f} ms {row['gbps']:7.1f} GB/s" if row["status"] == "ok" else row["status"][:100]),
             self.progress)
        return row

    def measure(self, row, call):
        """Run once with poisoned outputs (buffers.poisoned) and check against the reference; time
        only a result that is right, without the poisoning (time_ms)."""
        from tiers.buffers import poisoned

        if isinstance(self.refs, Exception):
            return self.record({**row, "status": f"reference failed: {_error(self.refs)}"})
        try:
            start = time.perf_counter()
            with poisoned(True):
                outs = call()
            first_ms = 1e3 * (time.perf_counter() - start)
            ok, rel, msg = check(outs, self.refs, self.common["dtype"])
        except Exception as e:
            return self.record({**row, "status": _error(e)})
        row["rel_err"] = rel
        if not ok:
            return self.record({**row, "status": f"wrong: {msg}"})
        on_device = False
        try:
            if row["provider"] == "scipy":
                row["ms"], row["timer"] = _host_ms(call, 2 if self.quick else 5), "host"
            elif self.quick and not _cuda():
                # the interpreter compiles nothing, so the checked run is a fair (toy) time
                row["ms"], row["timer"] = first_ms, "host, checked run"
            else:
                row["ms"], row["timer"] = _device_ms(call, self.quick)
                row["host_ms"] = _enqueue_ms(call)
                on_device = True
            row["status"] = "ok"
        except Exception as e:
            row.update(status=_error(e), ms=math.nan)
        recorded = self.record(row)
        if on_device and recorded["status"] == "ok":
            self.timed.append((recorded, call))
        return recorded

    def rounds(self, reps: int):
        """Time every row this case timed on the device reps − 1 more times, in rounds that go
        through all of them in turn (the flag executor's times move by up to a third between two
        runs of the same code, one after the other), and keep the median, every sample in
        ms_reps. A row whose call fails in a later round keeps its earlier samples. Each round
        also takes the call's host time (_enqueue_ms; host_ms_reps, its median host_ms)."""
        for row, _ in self.timed:
            row["ms_reps"], row["host_ms_reps"] = [row["ms"]], [row.get("host_ms")]
        for _ in range(reps - 1):
            for row, call in self.timed:
                try:
                    ms, host = _device_ms(call, self.quick)[0], _enqueue_ms(call)
                    row["ms_reps"].append(ms)          # both or neither: the samples stay side by side
                    row["host_ms_reps"].append(host)
                except Exception as e:
                    row.setdefault("round_error", _error(e))
        for row, _ in self.timed:
            row["ms"] = statistics.median(row["ms_reps"])
            host = [h for h in row["host_ms_reps"] if h is not None]
            row["host_ms"] = statistics.median(host) if host else None
            row["gbps"] = row["bytes"] / row["ms"] / 1e6 if row["ms"] > 0 else math.nan
        self.timed = []


def run(matrices=tuple(MATRICES), pairs=PAIRS, providers=PROVIDERS, orderings=("natural",), dtypes=("float64",),
        sizes=None, quick=False, workers=(None,), options=None, out_dir=None, append=False,
        progress=True, kinds=KINDS, executors=None, block_rows=(None,), nap_ns=(None,), chain_steps=(None,),
        programs_per_sm=(None,), tickets=(None,), tickets_ahead=(None,), claim=(None,), fuse_rows=(None,),
        reps=1):
    """Measure every (matrix, ordering, pair, dtype, provider, schedule) case; rows are written
    after each one, so a run cut short keeps what it measured. Returns (env, ceilings, rows, paths).
    `quick` takes the tiny sizes and writes under the temporary folder unless `out_dir` is given.
    `workers` (a sweep) and `options` go to the inspectors that take them; `executors`
    restricts t3's executor variants (default: all it has); `block_rows` sweeps the iterations
    per block of its sync-free executors (None: the module's default), `nap_ns` the sync-free
    executors' sleep between polls, `chain_steps` the chain executor's links per block,
    `programs_per_sm` the sync-free executors' persistent programs per SM (0: one program per
    block), `tickets` the block order of the dataflow and flag executors, `tickets_ahead` the
    tickets a persistent dataflow program holds beyond its block, `claim` how a persistent
    program of the flag or dataflow executor finds its next block, `fuse_rows` whether the flag
    executor runs a factor pair's solve rows inside their factor rows' blocks where the
    schedule allows (True / False). `reps` > 1 times each case's device rows that many times in
    interleaved rounds and keeps the median (_Case.rounds)."""
    import torch

    from tiers import registry
    from tiers.sparse_matrices import reorder

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" and not quick:
        raise SystemExit("the sparse-fusion benchmark needs a CUDA GPU at full size; `--quick` runs tiny "
                         "matrices on the CPU (Triton interpreter) to check the pipeline")
    for name in matrices:
        if name not in MATRICES and not is_mtx(name):
            raise SystemExit(f"unknown matrix {name!r}; known: {', '.join(MATRICES)}, or a Matrix Market "
                             f"file ({' or '.join(MTX_SUFFIXES)})")
        if is_mtx(name) and not os.path.isfile(name):
            raise SystemExit(f"Matrix Market file {name!r} not found")
    labels = [mtx_label(m) if is_mtx(m) else m for m in matrices]
    for label in labels:
        if labels.count(label) > 1:
            raise SystemExit(f"two --matrices entries would both be labelled {label!r} in the rows: "
                             f"{', '.join(m for m, x in zip(matrices, labels) if x == label)}")
    for name in sizes or {}:
        if name not in MATRICES:
            raise SystemExit(f"--sizes names {name!r}, which is not a generator ({', '.join(MATRICES)}); "
                             f"a Matrix Market file has its own size")
    for pair in pairs:
        if pair not in PAIRS:
            raise SystemExit(f"unknown pair {pair!r}; known: {', '.join(PAIRS)}")
    if quick and out_dir is None:   # toy timings must never land beside the recorded GPU data
        import tempfile
        from pathlib import Path
        out_dir = Path(tempfile.gettempdir()) / "tiers_quick"
    check_inspector_options([k for k in kinds if k != "wavefront"] or kinds, options)
    env = environment()
    ceilings = measure_ceilings() if device == "cuda" and not quick else {}
    no_cupy = cupy_status() if device == "cuda" else "n/a: no CUDA device"
    sizes, workers = dict(sizes or {}), tuple(workers) or (None,)
    tiers_here = [p for p in providers if p in TIER_PROVIDERS]
    sweeps = {"block_rows": block_rows, "nap_ns": nap_ns, "chain_steps": chain_steps,
              "programs_per_sm": programs_per_sm, "tickets": tickets, "tickets_ahead": tickets_ahead,
              "claim": claim, "fuse_rows": fuse_rows}
    rows, paths = [], ()

    def write():
        nonlocal paths
        paths = write_rows(rows, "sparse_fusion", env, out_dir, extra={"ceilings": ceilings}, append=append,
                           case_keys=CASE_KEYS)

    def sink(row):
        rows.append(row)
        write()

    _log(f"sparse fusion bench on {env['device']}: {', '.join(matrices)} x {', '.join(pairs)}, "
         f"{', '.join(dtypes)}, orderings {', '.join(orderings)}, providers {', '.join(providers)}", progress)
    for name in matrices:
        default, small, _ = MATRICES.get(name, (None, None, None))
        size = int(sizes.get(name, small if quick else default)) if default else None
        start = time.perf_counter()
        base, name, what = matrix_source(name, size)
        size = base.shape[0] if size is None else size
        _log(f"[{name}] {what}: n={base.shape[0]:,} nnz={base.nnz:,} "
             f"({'built' if default else 'read'} in {time.perf_counter() - start:.1f} s)", progress)
        for ordering in orderings:
            A = base if ordering == "natural" else reorder(base, ordering)[0]
            rng = np.random.default_rng(zlib.crc32(f"{name}/{size}".encode()))
            # float32-representable values: the float64 reference and a float32 run see one input
            v64 = rng.standard_normal(A.shape[0]).astype(np.float32).astype(np.float64)
            for pair in pairs:
                mats = operands(pair, A)
                schedules = inspect_all(pair, mats, kinds, workers, options) if tiers_here else {}
                try:
                    refs = reference(pair, mats, v64, device)
                except Exception as e:   # without a reference nothing can be checked, so nothing is timed
                    refs = e
                for dtype in dtypes:
                    v = torch.tensor(v64, dtype=getattr(torch, dtype), device=device)
                    common = dict(matrix=name, size=size, ordering=ordering, n=A.shape[0], nnz=A.nnz, pair=pair,
                                  dtype=dtype, operand_nnz="+".join(str(M.nnz) for M in mats),
                                  bytes=traffic_bytes(pair, mats, np.dtype(dtype).itemsize))
                    case = _Case(common, refs, quick, progress, sink)
                    for prov in tiers_here:
                        fn = registry.get("sparse_fusion", prov, pair)
                        if prov in OWN_SCHEDULE:
                            case.measure(*runner(fn, pair, mats, v, None, None,
                                                 dict(provider=prov, schedule=OWN_SCHEDULE[prov])))
                            continue
                        for (kind, w), (s, insp_ms, cols) in schedules.items():
                            for ex in (x for x in executors_of(fn, pair) if executors is None or x in executors):
                                module = sys.modules[fn.__module__]
                                defaults = module.tuning_defaults(ex, pair) if hasattr(module, "tuning_defaults") else {}
                                for combo in itertools.product(*(sweeps[k] for k in defaults)):
                                    tune = {k: c for k, c in zip(defaults, combo) if c is not None}
                                    row = dict(provider=prov, schedule=kind, executor=ex or "", workers=w,
                                               inspector_ms=insp_ms, **cols, **{**defaults, **tune})
                                    if s is None:
                                        case.record({**row, "status": cols["inspector_error"]})
                                        continue
                                    case.measure(*runner(fn, pair, mats, v, s, ex, row, tune))
                    for prov in (p for p in providers if p in ANCHORS):
                        row = dict(provider=prov)
                        try:
                            start = time.perf_counter()
                            if prov == "scipy":
                                call = scipy_call(pair, [M.astype(dtype) for M in mats], v64.astype(dtype))
                            elif no_cupy:
                                case.record({**row, "status": no_cupy})
                                continue
                            else:
                                warm_anchor(prov, pair, dtype)
                                start = time.perf_counter()
                                call = cupy_call(prov, pair, mats, v)
                                torch.cuda.synchronize()
                            row["setup_ms"] = 1e3 * (time.perf_counter() - start)
                        except NotImplementedError as e:
                            case.record({**row, "status": f"n/a: {e}"})
                            continue
                        except Exception as e:
                            case.record({**row, "status": _error(e)})
                            continue
                        case.measure(row, call)
                    if reps > 1:
                        case.rounds(reps)
                    payoffs(case.rows)   # fills columns of rows already written
                    write()
                    if device == "cuda":
                        torch.cuda.empty_cache()
    return env, ceilings, rows, paths


# -------------------------------------------------------------------------------- the summary

def best_row(rows, providers, schedule=None):
    """The fastest ok row of a provider or of any of a tuple of providers (under one schedule
    kind, over executors and workers), or None."""
    providers = (providers,) if isinstance(providers, str) else providers
    ok = [r for r in rows if r["provider"] in providers and r.get("status") == "ok"
          and (schedule is None or r.get("schedule") == schedule) and r["ms"] == r["ms"]]
    return min(ok, key=lambda r: r["ms"]) if ok else None


def best_ms(rows, providers, schedule=None):
    """best_row's time, NaN without one."""
    best = best_row(rows, providers, schedule)
    return best["ms"] if best else math.nan


def speedups(rows) -> dict:
    """Per (matrix, ordering, dtype, pair): t3 under the sparse-fusion schedule (best executor)
    over the best unfused code (min of t2 and cuSPARSE), over cuSPARSE, over t2, and over t3
    under the wavefront and LBC schedules. The figure and the summary both read this."""
    by = {}
    for r in rows:
        by.setdefault((r["matrix"], r["ordering"], r["dtype"], r["pair"]), []).append(r)
    out = {}
    for key, rs in by.items():
        fused = best_ms(rs, "t3_triton_fused", "sparse_fusion")
        cus = best_ms(rs, ("cusparse", "cupyx"))
        t2 = best_ms(rs, "t2_triton_unfused")
        unfused = best_ms(rs, UNFUSED)
        out[key] = {"fused_ms": fused, "over_unfused": unfused / fused, "over_cusparse": cus / fused,
                    "over_t2": t2 / fused, "over_wavefront": best_ms(rs, "t3_triton_fused", "wavefront") / fused,
                    "over_lbc": best_ms(rs, "t3_triton_fused", "lbc") / fused}
    return out


TABLE_NAMES = {"poisson2d": "2D Poisson {s}²", "poisson3d": "3D Poisson {s}³", "poisson3d27": "3D 27-point {s}³",
               "powerlaw": "power-law, {s} nodes"}


def _size_name(size: int) -> str:
    """A size as the table says it: whole millions as "1M", else with thousands separators."""
    return f"{size // 1_000_000}M" if size >= 1_000_000 and size % 1_000_000 == 0 else f"{size:,}"


def markdown_table(rows, dtype="float64", full=True) -> str:
    """The README's table of recorded rows of one dtype, natural order, in the order recorded: per
    matrix and pair the times of t2, of t3 under each schedule (its best executor), of cuSPARSE,
    and with `full` of CuPy and SciPy; the ratios of t3 under the sparse-fusion schedule to
    cuSPARSE and to the other two schedules, in bold where they reach the goal (4× cuSPARSE;
    faster than the other schedule by 2 % or more); with `full` the sparse-fusion row's inspector
    + setup (s) and its payoff runs. ms as 3 significant digits, below 0.1 ms as 3 decimals."""
    def ms(r):
        return "n/a" if r is None else f"{r['ms']:.3g}" if r["ms"] >= 0.1 else f"{r['ms']:.3f}"

    def ratio(x, goal):
        return f"**{x:.2f}×**" if x >= goal else f"{x:.2f}×"

    head = ["matrix", "pair", "t2 unfused", "t3 wavefront", "t3 LBC", "t3 sparse fusion", "cuSPARSE"]
    head += ["CuPy calls", "SciPy"] if full else []
    head += ["t3 SF / cuSPARSE", "t3 SF / t3 wavefront", "t3 SF / t3 LBC"]
    head += ["SF inspector + setup", "SF payoff runs"] if full else []
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    by = {}
    for r in rows:
        if r["dtype"] == dtype and r["ordering"] == "natural":
            by.setdefault((r["matrix"], r["pair"]), []).append(r)
    for (matrix, pair), rs in by.items():
        t3 = {k: best_row(rs, "t3_triton_fused", k) for k in KINDS}
        sf, cus = t3["sparse_fusion"], best_row(rs, "cusparse")
        if sf is None or cus is None:
            continue
        size = rs[0]["size"]
        name = TABLE_NAMES.get(matrix, matrix).format(s=_size_name(size) if matrix == "powerlaw" else size)
        cells = [name, pair, ms(best_row(rs, "t2_triton_unfused"))] + [ms(t3[k]) for k in KINDS] + [ms(cus)]
        cells += [ms(best_row(rs, "cupyx")), ms(best_row(rs, "scipy"))] if full else []
        cells += [ratio(cus["ms"] / sf["ms"], 4)]
        cells += [ratio(t3[k]["ms"] / sf["ms"], 1.02) if t3[k] else "n/a" for k in ("wavefront", "lbc")]
        if full:
            pay = sf.get("payoff_runs")
            cells += [f"{sf['inspector_ms'] / 1e3:.1f} + {sf['setup_ms'] / 1e3:.1f}",
                      f"{pay:,.0f}" if pay is not None and pay == pay else "n/a"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary(rows) -> str:
    by = {}
    for r in rows:
        by.setdefault((r["matrix"], r["ordering"], r["dtype"], r["pair"]), []).append(r)
    sp = speedups(rows)
    lines = [f"{'matrix':<11} {'order':<7} {'dtype':<7} {'pair':<14} | ms per provider (best executor) "
             f"| t3-SF speedup over: cuSPARSE, t2, t3-wavefront, t3-LBC | runs to pay off"]
    for key in by:   # in the order measured: matrices as asked, pairs in PAIRS order
        rs = by[key]
        cells = []
        for prov in dict.fromkeys(r["provider"] for r in rs):
            kinds = [k for k in KINDS if any(r.get("schedule") == k for r in rs if r["provider"] == prov)] or [None]
            for k in kinds:
                ms = best_ms(rs, prov, k)
                label = prov.replace("_triton_fused", "").replace("_triton_unfused", "").replace("_torch", "")
                label += f"-{ {'wavefront': 'wf', 'lbc': 'lbc', 'sparse_fusion': 'sf'}[k] }" if k else ""
                if ms == ms:
                    cells.append(f"{label} {ms:.3g}")
                else:
                    status = next(r["status"] for r in rs if r["provider"] == prov)
                    cells.append(f"{label} {status.split(':')[0]}")
        s = sp[key]
        sf = best_row(rs, "t3_triton_fused", "sparse_fusion")
        pay = sf.get("payoff_runs") if sf else None
        lines.append(f"{key[0]:<11} {key[1]:<7} {key[2]:<7} {key[3]:<14} | " + ", ".join(cells) + " | "
                     + "  ".join(f"{s[k]:.2f}x" if s[k] == s[k] else "-" for k in
                                 ("over_cusparse", "over_t2", "over_wavefront", "over_lbc"))
                     + (f" | {pay:,.0f}" if pay is not None else " | -"))
    return "\n".join(lines)
