"""One tolerance table for every comparison in the project.

A result passes when both hold:
  ‖out − ref‖ / ‖ref‖ ≤ rel            (the whole tensor is right)
  |out − ref| ≤ atol + rtol·|ref|      (no single element is far off)
The reference is always computed in float64 (t0, or float64 autograd). Where the result is a
difference of much larger terms (a gradient through a saturated softmax), rounding error grows
from the terms, not from the result: `scale` then names those magnitudes — the formula redone
with every term by absolute value — and stands in for |ref| in both checks.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Tolerance:
    rel: float
    atol: float
    rtol: float


# Keyed by the dtype the tier computed in. "tf32" is float32 storage with
# tensor-core (10-bit mantissa) products.
TOLERANCES: dict[str, Tolerance] = {
    "float64": Tolerance(rel=1e-10, atol=1e-10, rtol=1e-9),
    "float32": Tolerance(rel=1e-5, atol=1e-5, rtol=1e-4),
    "tf32": Tolerance(rel=3e-3, atol=3e-3, rtol=3e-2),
    "float16": Tolerance(rel=1e-2, atol=1e-2, rtol=5e-2),
    "bfloat16": Tolerance(rel=5e-2, atol=5e-2, rtol=2e-1),
}


def dtype_key(x) -> str:
    """Name of the dtype of a NumPy array or torch tensor, as used in TOLERANCES."""
    name = str(getattr(x, "dtype", x)).replace("torch.", "")
    if name not in TOLERANCES:
        raise KeyError(f"no tolerance for dtype {name!r}")
    return name


def _as_f64(x) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().to("cpu").double().numpy()
    return np.asarray(x, dtype=np.float64)


def compare(out, ref, dtype: str, scale=None) -> dict:
    """Errors of `out` against the float64 reference `ref`, judged by TOLERANCES[dtype]; `scale`
    (ref's shape, at least |ref| element-wise): the magnitudes the rounding error grows from
    (module docstring), by default |ref|."""
    tol = TOLERANCES[dtype]
    o, r = _as_f64(out), _as_f64(ref)
    if o.shape != r.shape:
        raise AssertionError(f"shape {o.shape} != reference shape {r.shape}")
    m = np.abs(r) if scale is None else _as_f64(scale)
    if m.shape != r.shape or not np.all(m >= np.abs(r) * (1 - 1e-12)):
        raise ValueError("scale must have the reference's shape and be at least |ref| element-wise")
    finite = bool(np.isfinite(o).all())
    diff = np.abs(o - r)
    ref_norm = float(np.linalg.norm(m))
    rel = float(np.linalg.norm(o - r) / ref_norm) if ref_norm > 0 else float(np.linalg.norm(o - r))
    bound = tol.atol + tol.rtol * m
    worst = int(np.argmax(diff - bound)) if diff.size else 0
    ok_elem = bool((diff <= bound).all())
    return {
        "rel": rel,
        "max_abs": float(diff.max()) if diff.size else 0.0,
        "finite": finite,
        "ok": finite and rel <= tol.rel and ok_elem,
        "worst_index": np.unravel_index(worst, o.shape) if diff.size else (),
        "tol": tol,
    }


def assert_close(out, ref, dtype: str, what: str = "output", scale=None) -> float:
    """Raise AssertionError with the numbers when `out` is not within tolerance of `ref` (compare)."""
    res = compare(out, ref, dtype, scale)
    if not res["ok"]:
        o, r = _as_f64(out), _as_f64(ref)
        i = res["worst_index"]
        raise AssertionError(
            f"{what} ({dtype}): rel err {res['rel']:.3e}{'' if scale is None else ' of the scale'} "
            f"(limit {res['tol'].rel:.0e}), "
            f"max abs {res['max_abs']:.3e}, finite={res['finite']}, "
            f"worst at {tuple(int(j) for j in i)}: got {o[i]!r}, want {r[i]!r}"
        )
    return res["rel"]
