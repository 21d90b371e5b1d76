"""Argument checks shared by every tier. Each public entry point calls one of these once,
before any work, so bad input fails with a message that names the argument."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

_NUMPY_FLOATS = (np.float32, np.float64)
_TORCH_FLOATS = ("torch.float16", "torch.bfloat16", "torch.float32", "torch.float64")
TRITON_DTYPES = ("torch.float16", "torch.bfloat16", "torch.float32")


@dataclass(frozen=True)
class AttentionShape:
    B: int
    H: int
    Lq: int
    Lk: int
    D: int
    scale: float
    causal: bool


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch")


def interpreting() -> bool:
    """True when Triton kernels run in the CPU interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def check_array_kind(names_values, kind: str):
    """`kind` is "numpy" (t0) or "torch" (t1–t3)."""
    for name, x in names_values:
        if kind == "numpy" and not isinstance(x, np.ndarray):
            raise TypeError(f"{name} must be a numpy.ndarray for the t0 tier, got {type(x).__name__}")
        if kind == "torch" and not _is_torch(x):
            raise TypeError(f"{name} must be a torch.Tensor for this tier, got {type(x).__name__}")


def check_no_grad(names_values, algorithm: str, tier: str):
    """A tier without a backward for `algorithm` (registry: Algorithm.backward) refuses inputs
    that autograd follows while grad is enabled: its outputs would come back without a graph, and
    a loss that adds other terms would silently lose this one's gradient."""
    from tiers.registry import ALGORITHMS

    backward = ALGORITHMS[algorithm].backward
    if tier not in backward:
        check_forward_only(names_values, f"{tier}'s {algorithm}", " or ".join(backward))


def check_forward_only(names_values, what: str, instead: str):
    """`what` has no backward (a tier's algorithm, or one forward-only entry point of a tier that
    has one, like t3's attention_with_lse): refuse inputs that autograd follows while grad is
    enabled, naming `instead`, what to call for gradients."""
    import torch

    if not torch.is_grad_enabled():
        return
    for name, x in names_values:
        if x.requires_grad:
            raise ValueError(f"{name} requires grad, but {what} has no backward: use {instead} for gradients, "
                             "or detach the inputs (or call under torch.no_grad())")


def check_same_dtype(names_values, allowed):
    first_name, first = names_values[0]
    for name, x in names_values:
        if x.dtype != first.dtype:
            raise TypeError(f"{name} has dtype {x.dtype} but {first_name} has {first.dtype}: dtypes must match")
    if str(first.dtype) not in allowed and first.dtype not in allowed:
        raise TypeError(f"{first_name} has dtype {first.dtype}; supported: {', '.join(map(str, allowed))}")


def check_same_device(names_values):
    first_name, first = names_values[0]
    for name, x in names_values:
        if x.device != first.device:
            raise ValueError(f"{name} is on {x.device} but {first_name} is on {first.device}: devices must match")


def check_triton_device(name, x):
    """Triton kernels need a CUDA tensor, or CPU tensors under the interpreter."""
    if x.device.type == "cuda":
        return
    if x.device.type == "cpu" and interpreting():
        return
    raise ValueError(
        f"{name} is on {x.device}: the Triton tiers need CUDA tensors, or CPU tensors with "
        "TRITON_INTERPRET=1 set before triton is imported"
    )


def check_scale(scale, D: int) -> float:
    if scale is None:
        return 1.0 / math.sqrt(D)
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.floating)):
        raise TypeError(f"scale must be a float or None, got {type(scale).__name__}")
    scale = float(scale)
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"scale must be a positive finite number, got {scale}")
    return scale


def validate_attention(q, k, v, causal, scale, *, tier: str, algorithm: str = "attention") -> AttentionShape:
    """Checks for `attention(q, k, v, causal=, scale=)`; `tier` is the tier folder name,
    `algorithm` the registry's name of the caller (sparse attention checks its q, k, v here)."""
    qkv = (("q", q), ("k", k), ("v", v))
    kind = "numpy" if tier == "t0_numpy" else "torch"
    check_array_kind(qkv, kind)
    for name, x in qkv:
        if x.ndim != 4:
            raise ValueError(f"{name} must have rank 4 [B, H, L, D], got shape {tuple(x.shape)}")
    B, H, Lq, D = q.shape
    for name, x in (("k", k), ("v", v)):
        if x.shape[0] != B:
            raise ValueError(f"{name} has batch {x.shape[0]} but q has {B}")
        if x.shape[1] != H:
            raise ValueError(f"{name} has {x.shape[1]} heads but q has {H}")
        if x.shape[3] != D:
            raise ValueError(f"{name} has head dim {x.shape[3]} but q has {D}")
    Lk = k.shape[2]
    if v.shape[2] != Lk:
        raise ValueError(f"v has length {v.shape[2]} but k has {Lk}")
    for name, n in (("q length", Lq), ("k length", Lk), ("head dim", D), ("batch", B), ("heads", H)):
        if n < 1:
            raise ValueError(f"{name} must be at least 1, got {n}")
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"causal must be a bool, got {type(causal).__name__}")
    if kind == "numpy":
        check_same_dtype(qkv, _NUMPY_FLOATS)
    else:
        allowed = TRITON_DTYPES if tier.startswith("t2") or tier.startswith("t3") else _TORCH_FLOATS
        check_same_dtype(qkv, allowed)
        check_same_device(qkv)
        check_no_grad(qkv, algorithm, tier)
        if tier.startswith("t2") or tier.startswith("t3"):
            check_triton_device("q", q)
            if D > 256:
                raise ValueError(f"head dim {D} is larger than the Triton tiers support (256)")
    return AttentionShape(B, H, Lq, Lk, D, check_scale(scale, D), bool(causal))


@dataclass(frozen=True)
class NeighborhoodShape:
    B: int
    spatial: tuple      # (L,), (X, Y) or (X, Y, Z)
    H: int
    D: int
    kernel_size: tuple
    stride: tuple
    dilation: tuple
    causal: tuple
    scale: float


def _per_axis(name, value, ndim, kind):
    """An int (bool for is_causal) or a tuple of ndim of them -> tuple."""
    scalar_ok = (lambda x: isinstance(x, (bool, np.bool_))) if kind == "bool" else \
        (lambda x: isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)))
    if scalar_ok(value):
        return (bool(value) if kind == "bool" else int(value),) * ndim
    if isinstance(value, (tuple, list)):
        if len(value) != ndim:
            raise ValueError(f"{name} has {len(value)} entries but the input has {ndim} spatial axes")
        if not all(scalar_ok(x) for x in value):
            raise TypeError(f"{name} entries must be {'bools' if kind == 'bool' else 'ints'}, got {value!r}")
        return tuple(bool(x) if kind == "bool" else int(x) for x in value)
    raise TypeError(f"{name} must be {'a bool' if kind == 'bool' else 'an int'} or a tuple of {ndim}, "
                    f"got {type(value).__name__}")


def validate_neighborhood(q, k, v, kernel_size, stride, dilation, is_causal, scale, *, ndim: int,
                          tier: str) -> NeighborhoodShape:
    """Checks for `na{ndim}d(q, k, v, kernel_size, stride, dilation, is_causal, scale)`, heads-last
    layout [B, *spatial, H, D] as NATTEN."""
    qkv = (("q", q), ("k", k), ("v", v))
    kind = "numpy" if tier == "t0_numpy" else "torch"
    check_array_kind(qkv, kind)
    layout = "[B, " + ", ".join("LXYZ"[0] if ndim == 1 else "XYZ"[a] for a in range(ndim)) + ", H, D]"
    for name, x in qkv:
        if x.ndim != ndim + 3:
            raise ValueError(f"{name} must have rank {ndim + 3} {layout}, got shape {tuple(x.shape)}")
    for name, x in (("k", k), ("v", v)):
        if tuple(x.shape) != tuple(q.shape):
            raise ValueError(f"{name} has shape {tuple(x.shape)} but q has {tuple(q.shape)}: "
                             "neighborhood attention needs q, k, v of one shape")
    B, *spatial, H, D = (int(n) for n in q.shape)
    for name, n in (("batch", B), ("heads", H), ("head dim", D)):
        if n < 1:
            raise ValueError(f"{name} must be at least 1, got {n}")
    K = _per_axis("kernel_size", kernel_size, ndim, "int")
    s = _per_axis("stride", stride, ndim, "int")
    d = _per_axis("dilation", dilation, ndim, "int")
    c = _per_axis("is_causal", is_causal, ndim, "bool")
    for a in range(ndim):
        axis = f"axis {a}" if ndim > 1 else "the sequence"
        if K[a] < 2:
            raise ValueError(f"kernel_size must be at least 2 on {axis}, got {K[a]}")
        if d[a] < 1:
            raise ValueError(f"dilation must be at least 1 on {axis}, got {d[a]}")
        if K[a] * d[a] > spatial[a]:
            raise ValueError(f"kernel_size·dilation = {K[a]}·{d[a]} = {K[a] * d[a]} exceeds the length "
                             f"{spatial[a]} of {axis}")
        if not 1 <= s[a] <= K[a]:
            raise ValueError(f"stride must be between 1 and kernel_size ({K[a]}) on {axis}, got {s[a]}")
    if kind == "numpy":
        check_same_dtype(qkv, _NUMPY_FLOATS)
    else:
        triton_tier = tier.startswith("t2") or tier.startswith("t3")
        check_same_dtype(qkv, TRITON_DTYPES if triton_tier else _TORCH_FLOATS)
        check_same_device(qkv)
        check_no_grad(qkv, "neighborhood", tier)
        if triton_tier:
            check_triton_device("q", q)
            if D > 256:
                raise ValueError(f"head dim {D} is larger than the Triton tiers support (256)")
    return NeighborhoodShape(B, tuple(spatial), H, D, K, s, d, c, check_scale(scale, D))


@dataclass(frozen=True)
class SparseAttentionShape:
    B: int
    H: int
    Lq: int
    Lk: int
    D: int
    scale: float


def validate_sparse_attention(q, k, v, pattern, scale, *, tier: str) -> SparseAttentionShape:
    """Checks for `sparse_attention(q, k, v, pattern, scale=)`: q, k, v as for dense attention,
    and `pattern` a tiers.acsr.ACSR over exactly q's queries and k's keys."""
    from tiers.acsr import ACSR

    s = validate_attention(q, k, v, False, scale, tier=tier, algorithm="sparse_attention")
    if not isinstance(pattern, ACSR):
        raise TypeError(f"pattern must be a tiers.acsr.ACSR, got {type(pattern).__name__} "
                        "(ACSR.from_mask turns a boolean mask into one)")
    if pattern.Lq != s.Lq:
        raise ValueError(f"pattern has Lq = {pattern.Lq} query rows but q has length {s.Lq}")
    if pattern.Lk != s.Lk:
        raise ValueError(f"pattern has Lk = {pattern.Lk} key columns but k has length {s.Lk}")
    return SparseAttentionShape(s.B, s.H, s.Lq, s.Lk, s.D, s.scale)


# ---------------------------------------------------------------- sparse fusion

@dataclass(frozen=True)
class FusionProblem:
    pair: str
    matrices: tuple       # canonical CSR copies, float64 (tiers.sparse_dags.csr), in call order
    n: int                # rows of every matrix and length of the vector
    dtype: str            # "float64" or "float32": what the tier computes in (the vector's dtype)
    fingerprint: str      # tiers.fusion_schedules.fingerprint of the pair and patterns


def check_sparse_matrix(name, M):
    """A SciPy sparse matrix of real finite values, as a canonical float64 CSR copy (any SciPy
    format is accepted and converted once; the caller's matrix is never modified)."""
    import scipy.sparse as sp

    from tiers.sparse_dags import csr

    if not sp.issparse(M):
        raise ValueError(f"{name} must be a SciPy sparse matrix (e.g. scipy.sparse.csr_matrix), "
                         f"got {type(M).__name__}; convert a dense array with scipy.sparse.csr_matrix")
    if M.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got shape {M.shape}")
    check_real(name, M)
    C = csr(M)
    if C.dtype != np.float64:
        C = C.astype(np.float64)
    check_finite(name, C)
    return C


def check_real(name, M):
    """M (a SciPy sparse matrix or an array) holds no complex values: casting them away would
    drop the imaginary parts without a word."""
    if np.issubdtype(M.dtype, np.complexfloating):
        raise ValueError(f"{name} has complex values ({M.dtype}); only real matrices are supported")


def check_finite(name, C):
    """Every stored value of the CSR matrix C finite; the first that is not named with its place."""
    bad = ~np.isfinite(C.data)
    if bad.any():
        p = int(np.flatnonzero(bad)[0])
        i = int(np.searchsorted(C.indptr, p, side="right") - 1)
        raise ValueError(f"{name} has a non-finite value {C.data[p]} at ({i}, {int(C.indices[p])})")


def check_square(name, C):
    if C.shape[0] != C.shape[1]:
        raise ValueError(f"{name} must be square, got shape {C.shape}")


def check_triangle(name, C, lower: bool):
    """No stored entry on the wrong side of the diagonal (stored zeros count: they are pattern)."""
    from tiers.sparse_dags import row_ids

    rows = row_ids(C.indptr)
    wrong = C.indices > rows if lower else C.indices < rows
    if wrong.any():
        p = int(np.flatnonzero(wrong)[0])
        side, shape = ("above", "lower") if lower else ("below", "upper")
        raise ValueError(f"{name} must be {shape} triangular: it stores entry ({int(rows[p])}, {int(C.indices[p])}) "
                         f"{side} the diagonal")


def check_diagonal(name, C, nonzero: bool):
    """Every diagonal entry stored, and non-zero when `nonzero` (a triangular solve divides by it)."""
    from tiers.sparse_dags import diag_positions

    d = diag_positions(C.indptr, C.indices)
    if (d < 0).any():
        raise ValueError(f"{name} has no diagonal entry in row {int(np.flatnonzero(d < 0)[0])}: "
                         "the pattern must contain the whole diagonal")
    if nonzero and (C.data[d] == 0).any():
        raise ValueError(f"{name} has a zero diagonal entry in row {int(np.flatnonzero(C.data[d] == 0)[0])}: "
                         "the triangular solve would divide by zero")


def validate_fusion_matrices(pair, matrices) -> tuple:
    """The matrix checks of a sparse-fusion pair: SciPy sparse, real, finite, square, one size;
    triangular factors on the right side with a non-zero diagonal; ILU(0)/IC(0) input with its
    diagonal stored. Returns canonical float64 CSR copies."""
    from tiers.sparse_dags import FACTOR_PAIRS, check_pair

    spec = check_pair(pair)
    if len(matrices) != len(spec.matrices):
        raise ValueError(f"{pair} takes {len(spec.matrices)} matrices ({', '.join(spec.matrices)}), "
                         f"got {len(matrices)}")
    mats = tuple(check_sparse_matrix(name, M) for name, M in zip(spec.matrices, matrices))
    for name, C in zip(spec.matrices, mats):
        check_square(name, C)
        if C.shape[0] == 0:
            raise ValueError(f"{name} is empty (0×0): the kernels need at least one row")
    first = spec.matrices[0]
    for name, C in zip(spec.matrices[1:], mats[1:]):
        if C.shape != mats[0].shape:
            raise ValueError(f"{name} is {C.shape[0]}×{C.shape[1]} but {first} is "
                             f"{mats[0].shape[0]}×{mats[0].shape[1]}: the two kernels must have one size")
    for name, C in zip(spec.matrices, mats):
        if name == "L":
            check_triangle(name, C, lower=True)
            check_diagonal(name, C, nonzero=True)
        elif name == "U":
            check_triangle(name, C, lower=False)
            check_diagonal(name, C, nonzero=True)
        elif pair in FACTOR_PAIRS:
            check_diagonal(name, C, nonzero=False)      # its pivots are checked as they are made
    return mats


def validate_sparse_fusion(pair, matrices, vector, schedule, *, tier: str) -> FusionProblem:
    """Checks for every `<pair>(*matrices, vector, schedule=None)` of the sparse_fusion modules:
    the matrices (validate_fusion_matrices), the vector (NumPy for t0, a torch tensor for t1–t3;
    1-D, the matrices' size, float32 or float64, finite) and the schedule (None, or inspected for
    this pair and these sparsity patterns)."""
    from tiers.fusion_schedules import fingerprint, matches
    from tiers.sparse_dags import PAIRS

    mats = validate_fusion_matrices(pair, matrices)
    name = PAIRS[pair].vector
    kind = "numpy" if tier == "t0_numpy" else "torch"
    check_array_kind(((name, vector),), kind)
    if vector.ndim != 1:
        raise ValueError(f"{name} must be a 1-D vector, got shape {tuple(vector.shape)}")
    n = mats[0].shape[0]
    if vector.shape[0] != n:
        raise ValueError(f"{name} has length {vector.shape[0]} but {PAIRS[pair].matrices[0]} is {n}×{n}")
    if kind == "numpy":
        check_same_dtype(((name, vector),), _NUMPY_FLOATS)
        finite = bool(np.isfinite(vector).all())
    else:
        check_same_dtype(((name, vector),), ("torch.float32", "torch.float64"))
        check_no_grad(((name, vector),), "sparse_fusion", tier)   # before the inspection, not after it
        if tier.startswith("t2") or tier.startswith("t3"):
            check_triton_device(name, vector)
        import torch

        finite = bool(torch.isfinite(vector).all())
    if not finite:
        raise ValueError(f"{name} has non-finite values")
    fp = fingerprint(pair, *mats)
    if schedule is not None:
        matches(schedule, pair, fp)
    return FusionProblem(pair, mats, n, str(vector.dtype).replace("torch.", ""), fp)


def validate_refresh(problem: FusionProblem, matrices, device, diagonals) -> tuple:
    """Checks for a prepared runner's refresh(*matrices) (t2, t3): new values on the sparsity
    patterns it was prepared for, one argument per matrix of the pair. Each is either a SciPy
    sparse matrix (validate_fusion_matrices' checks, and its canonical pattern the prepared one)
    or a 1-D float32/float64 tensor on `device` holding the matrix's stored values in canonical
    CSR order (sorted columns, duplicates summed): as many as the prepared matrix stores, finite,
    and where the pair divides by a factor's diagonal (L, U) non-zero there. `diagonals(i)` gives
    matrix i's diagonal positions as a tensor on `device`, for the tensors' check. Returns each
    matrix's values as a tensor on `device`, in its own dtype."""
    import scipy.sparse as sp
    import torch

    from tiers.sparse_dags import PAIRS

    names = PAIRS[problem.pair].matrices
    if len(matrices) != len(names):
        raise ValueError(f"refresh takes the pair's {len(names)} matrices ({', '.join(names)}), got {len(matrices)}")
    out = []
    for i, (name, old, M) in enumerate(zip(names, problem.matrices, matrices)):
        if sp.issparse(M):
            M = torch.from_numpy(_values_on_pattern(name, M, old)).to(device, copy=True)
        elif not isinstance(M, torch.Tensor):
            raise ValueError(f"{name} must be a SciPy sparse matrix or a 1-D tensor of its stored values, "
                             f"got {type(M).__name__}")
        else:
            if M.ndim != 1 or M.shape[0] != old.nnz:
                raise ValueError(f"{name}'s values must be a 1-D tensor of the {old.nnz} values the prepared "
                                 f"pattern stores (canonical CSR order), got shape {tuple(M.shape)}")
            check_same_dtype(((name, M),), ("torch.float32", "torch.float64"))
            if M.device != torch.device(device):
                raise ValueError(f"{name}'s values are on {M.device}, but this runner was prepared for {device}")
            if not bool(torch.isfinite(M).all()):
                raise ValueError(f"{name} has non-finite values")
        if name in ("L", "U"):              # the pattern is the prepared one: every diagonal entry is stored
            zero = M[diagonals(i)] == 0
            if bool(zero.any()):
                raise ValueError(f"{name} has a zero diagonal entry in row {int(zero.nonzero()[0, 0])}: "
                                 "the triangular solve would divide by zero")
        out.append(M)
    return tuple(out)


def _values_on_pattern(name, M, old) -> np.ndarray:
    """The SciPy matrix M's stored values, float64 in canonical CSR order, once M has passed
    check_sparse_matrix's checks and its pattern is found to be the CSR matrix old's (canonical).
    A CSR M of real floats whose arrays are old's is read where it is (its order is canonical
    then); check_sparse_matrix's canonical copy, its indices widened to int64, is made only for
    any other: on the power-law graph's 7M entries the copy and its sort cost more than the rest
    of a refresh from SciPy."""
    def same(C):
        return C.shape == old.shape and np.array_equal(C.indptr, old.indptr) and np.array_equal(C.indices, old.indices)

    if M.format == "csr" and M.dtype.kind == "f" and same(M):
        check_finite(name, M)
    else:
        M = check_sparse_matrix(name, M)
        if not same(M):
            raise ValueError(f"{name}'s sparsity pattern is not the one this runner was prepared for: refresh "
                             "takes new values on the same pattern; prepare again for another pattern")
    return M.data.astype(np.float64, copy=False)


def factor_breakdown(kind: str, row: int, pivot) -> ValueError:
    """The error every tier raises when ILU(0) (kind "ilu0") or IC(0) ("ic0") meets an unusable
    pivot in `row`: the incomplete factor does not exist for that matrix."""
    if kind == "ilu0":
        return ValueError(f"ILU(0) breaks down in row {row}: pivot U[{row},{row}] = {pivot} "
                          "(the incomplete factorisation does not exist for this matrix)")
    return ValueError(f"IC(0) breaks down in row {row}: pivot a_ii − Σ l_ik² = {pivot} is not positive "
                      "(the incomplete Cholesky factor does not exist for this matrix)")


def unusable_pivots(kind: str, pivots):
    """Which pivots (a torch tensor) stop a factorisation: zero or non-finite for ILU(0), not
    positive or non-finite for IC(0) — check_factor_pivots' test, without reading it back."""
    import torch

    return ~torch.isfinite(pivots) | ((pivots == 0) if kind == "ilu0" else ~(pivots > 0))


def check_factor_pivots(kind: str, pivots):
    """Raise factor_breakdown for the lowest row whose pivot (a torch tensor, one per row) is
    unusable — zero or non-finite for ILU(0), not positive or non-finite for IC(0). Tiers that
    factor many rows at once check after the factorisation (one device-to-host read); the lowest
    bad row is the one a row-by-row factorisation stops at, later bad pivots descend from it."""
    bad = unusable_pivots(kind, pivots)
    if bool(bad.any()):
        i = int(bad.nonzero()[0, 0])
        raise factor_breakdown(kind, i, float(pivots[i]))
