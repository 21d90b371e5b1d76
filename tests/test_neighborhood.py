"""Neighborhood attention: every tier in the registry against the float64 NumPy spec."""
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import dtypes_for, randn, to_tier
from tiers import registry
from tiers.neighborhood_windows import axis_neighbors, key_tile_queries, neighbor_mask
from tiers.t0_numpy.attention import attention as dense_spec
from tiers.t0_numpy.neighborhood import na1d, na2d, na3d, na_backward
from tiers.tolerances import assert_close

ALG = registry.ALGORITHMS["neighborhood"]
SPEC = {1: na1d, 2: na2d, 3: na3d}
# t0 in float64 is the reference itself, so t0 is checked in float32 only
CASES = [(tier, dt) for tier in ALG.tiers for dt in dtypes_for(tier) if (tier, dt) != ("t0_numpy", "float64")]
GRAD_CASES = [(tier, dt) for tier in ALG.backward for dt in dtypes_for(tier)]


def _p(shape, kernel_size, stride=1, dilation=1, is_causal=False, scale=None, id=None):
    """One problem: shape [B, *spatial, H, D] and the per-axis arguments."""
    kw = dict(kernel_size=kernel_size, stride=stride, dilation=dilation, is_causal=is_causal, scale=scale)
    return pytest.param(shape, kw, id=id)


# Small enough for Triton's interpreter: ≤ ~300 tokens, B·H ≤ 4, D in 16/32.
PROBLEMS = [
    _p((1, 37, 2, 16), 7, id="1d-L37-K7"),
    _p((2, 41, 1, 32), 8, id="1d-L41-K8-even"),
    _p((1, 45, 2, 16), 5, dilation=3, id="1d-L45-K5-d3"),
    _p((1, 39, 2, 16), 6, stride=4, id="1d-L39-K6-s4"),
    _p((1, 33, 2, 16), 5, is_causal=True, id="1d-L33-K5-causal"),
    _p((1, 61, 2, 32), 4, stride=3, dilation=4, is_causal=True, id="1d-L61-K4-s3-d4-causal"),
    _p((2, 53, 2, 16), 6, stride=5, dilation=7, scale=0.37, id="1d-L53-K6-s5-d7-scale"),
    *[_p((1, 9, 11, 2, 16), (3, 4), stride=(2, 3), dilation=(2, 1), is_causal=c,
         id=f"2d-9x11-causal{int(c[0])}{int(c[1])}")
      for c in [(False, False), (True, False), (False, True), (True, True)]],
    _p((1, 4, 5, 6, 2, 16), (2, 3, 3), id="3d-4x5x6"),
    _p((1, 4, 6, 6, 1, 16), (2, 3, 2), stride=(1, 2, 2), dilation=(2, 1, 3), is_causal=(True, False, True),
       id="3d-4x6x6-mixed"),
    # NATTEN's hard case 2D (67, 80) K=(12, 7) s=(8, 4) d=(5, 11), scaled down keeping K·d just
    # under L, 1 < s < K and d > 1 on both axes (uneven dilation groups; some exactly K long)
    _p((1, 13, 22, 2, 32), (4, 3), stride=(3, 2), dilation=(3, 7), id="2d-hard"),
    _p((1, 13, 22, 2, 32), (4, 3), stride=(3, 2), dilation=(3, 7), is_causal=True, id="2d-hard-causal"),
]


def _seed(*parts):
    return zlib.crc32(repr(parts).encode())   # hash() of a str changes between runs


def _rounded(xs, dtype):
    """The exact values the tier sees, in float64."""
    return [np.asarray(to_tier(x, "t1_torch", dtype).double().cpu()) if dtype in ("float16", "bfloat16")
            else x.astype(dtype).astype(np.float64) for x in xs]


def _entry(shape):
    return f"na{len(shape) - 3}d"


def _check_forward(tier, dtype, shape, kw, rng, ref_fn=None):
    q, k, v = (randn(rng, *shape) for _ in range(3))
    rounded = _rounded((q, k, v), dtype)
    ref = (ref_fn or SPEC[len(shape) - 3])(*rounded, **kw)
    out = registry.get("neighborhood", tier, _entry(shape))(*(to_tier(x, tier, dtype) for x in (q, k, v)), **kw)
    assert tuple(out.shape) == tuple(shape)
    assert str(out.dtype).replace("torch.", "") == dtype
    assert_close(out, ref, dtype)


@pytest.mark.parametrize("shape,kw", PROBLEMS)
@pytest.mark.parametrize("tier,dtype", CASES)
def test_forward_matches_spec(tier, dtype, shape, kw):
    _check_forward(tier, dtype, shape, kw, np.random.default_rng(_seed(tier, dtype, shape, kw)))


def _dense(causal):
    """Dense attention on [B, *spatial, H, D] via the t0 attention spec ([B, H, L, D])."""
    def ref(q, k, v, **kw):
        B, H, D = q.shape[0], q.shape[-2], q.shape[-1]
        flat = [np.moveaxis(x.reshape(B, -1, H, D), 2, 1) for x in (q, k, v)]
        return np.moveaxis(dense_spec(*flat, causal=causal), 1, 2).reshape(q.shape)
    return ref


@pytest.mark.parametrize("shape,causal", [((1, 19, 2, 16), False), ((1, 19, 2, 16), True),
                                          ((2, 5, 7, 1, 16), False), ((1, 3, 4, 5, 2, 16), False)],
                         ids=["1d", "1d-causal", "2d", "3d"])
@pytest.mark.parametrize("tier,dtype", CASES)
def test_full_kernel_is_dense_attention(tier, dtype, shape, causal):
    """K = L on every axis is self attention (causal only in 1D, where token order is the axis)."""
    kw = dict(kernel_size=tuple(shape[1:-2]), is_causal=causal)
    _check_forward(tier, dtype, shape, kw, np.random.default_rng(_seed(tier, shape, causal)),
                   ref_fn=_dense(causal))


@st.composite
def _problems(draw):
    ndim = draw(st.integers(1, 2))
    # per-axis limits keep a 2D problem under ~300 tokens
    kmax, dmax, extra = (8, 4, 20) if ndim == 1 else (4, 3, 5)
    spatial, kw = [], dict(kernel_size=[], stride=[], dilation=[], is_causal=[])
    for _ in range(ndim):
        K, d = draw(st.integers(2, kmax)), draw(st.integers(1, dmax))
        spatial.append(draw(st.integers(K * d, K * d + extra)))
        for name, value in zip(kw, (K, draw(st.integers(1, K)), d, draw(st.booleans()))):
            kw[name].append(value)
    shape = (draw(st.integers(1, 2)), *spatial, draw(st.integers(1, 2)), draw(st.sampled_from([16, 32])))
    return shape, {name: tuple(v) for name, v in kw.items()}


@pytest.mark.parametrize("tier", ALG.tiers[1:])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=_problems(), seed=st.integers(0, 2**31))
def test_forward_property_sweep(tier, problem, seed):
    shape, kw = problem
    _check_forward(tier, "float32", shape, kw, np.random.default_rng(seed))


GRAD_PROBLEMS = [
    _p((1, 29, 2, 16), 5, stride=2, dilation=2, is_causal=True, id="1d-causal"),
    _p((1, 9, 10, 2, 16), (3, 4), stride=(2, 1), dilation=(2, 2), is_causal=(True, False), id="2d"),
    _p((1, 4, 5, 6, 1, 16), (2, 3, 3), id="3d"),
]


@pytest.mark.parametrize("shape,kw", GRAD_PROBLEMS)
@pytest.mark.parametrize("tier,dtype", GRAD_CASES)
def test_gradients_match_spec(tier, dtype, shape, kw):
    rng = np.random.default_rng(_seed(tier, dtype, shape, kw))
    tq, tk, tv = (to_tier(randn(rng, *shape), tier, dtype, requires_grad=True) for _ in range(3))
    tdo = to_tier(randn(rng, *shape), tier, dtype)
    out = registry.get("neighborhood", tier, _entry(shape))(tq, tk, tv, **kw)
    (out * tdo).sum().backward()
    refs = na_backward(*(t.detach().double().cpu().numpy() for t in (tq, tk, tv, tdo)), **kw)
    for name, t, ref in zip("qkv", (tq, tk, tv), refs):
        assert_close(t.grad, ref, dtype, what=f"d{name}")


@pytest.mark.parametrize("tier", ALG.backward)
def test_sum_backward_runs(tier):
    """out.sum().backward() (a broadcast, zero-stride upstream gradient) works."""
    rng = np.random.default_rng(3)
    shape, kw = (1, 20, 1, 16), dict(kernel_size=4, dilation=2, is_causal=True)
    q, k, v = (to_tier(randn(rng, *shape), tier, "float32", requires_grad=True) for _ in range(3))
    registry.get("neighborhood", tier, "na1d")(q, k, v, **kw).sum().backward()
    ref = na_backward(*(t.detach().double().cpu().numpy() for t in (q, k, v)), np.ones(shape), **kw)
    for name, t, r in zip("qkv", (q, k, v), ref):
        assert_close(t.grad, r, "float32", what=f"d{name}")


@pytest.mark.parametrize("shape,kw", PROBLEMS)
def test_t0_matches_neighbor_mask_dense_softmax(shape, kw):
    """Cross-check of the formulas: the shared [N, N] mask with a dense masked softmax gives t0."""
    ndim = len(shape) - 3
    rng = np.random.default_rng(_seed("mask", shape, kw))
    q, k, v = (randn(rng, *shape) for _ in range(3))
    B, *spatial, H, D = shape
    per_axis = {name: (val,) * ndim if np.isscalar(val) else val for name, val in kw.items() if name != "scale"}
    mask = neighbor_mask(spatial, per_axis["kernel_size"], per_axis["stride"], per_axis["dilation"],
                         per_axis["is_causal"])
    scale = kw["scale"] or 1 / np.sqrt(D)
    qf, kf, vf = (x.reshape(B, -1, H, D) for x in (q, k, v))
    scores = np.where(mask[None, None], scale * np.einsum("bihd,bjhd->bhij", qf, kf), -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = np.einsum("bhij,bjhd->bihd", p, vf).reshape(shape)
    assert_close(SPEC[ndim](q, k, v, **kw), out, "float64")


def test_windows_match_the_pictures():
    """The windows drawn in tiers/neighborhood_windows.py, and the shrinking causal window."""
    rows = lambda m: [list(np.flatnonzero(r)) for r in m]
    assert rows(axis_neighbors(10, 3)[[0, 4, 9]]) == [[0, 1, 2], [3, 4, 5], [7, 8, 9]]
    assert rows(axis_neighbors(10, 3, d=2)[[0, 1, 9]]) == [[0, 2, 4], [1, 3, 5], [5, 7, 9]]
    assert rows(axis_neighbors(10, 3, causal=True)[[0, 1, 5]]) == [[0], [0, 1], [3, 4, 5]]
    assert rows(axis_neighbors(10, 3, s=3)[[0, 2, 3, 9]]) == [[0, 1, 2], [0, 1, 2], [3, 4, 5], [7, 8, 9]]


@settings(max_examples=60, deadline=None)
@given(L=st.integers(2, 40), K=st.integers(2, 8), d=st.integers(1, 4), s=st.integers(1, 8), causal=st.booleans(),
       tile=st.sampled_from([1, 2, 4, 8, 16]))
def test_key_tile_queries_are_exactly_the_queries_that_see_the_tile(L, K, d, s, causal, tile):
    """The backward's dK/dV program walks these queries only, so they must be all of them."""
    if K * d > L or s > K:
        return
    table, seen = key_tile_queries(L, K, d, s, causal, tile), axis_neighbors(L, K, d, s, causal)
    for g in range(d):
        keys = np.arange(g, L, d)
        for t in range(table.shape[1]):
            tile_keys = keys[t * tile:(t + 1) * tile]
            queries = np.flatnonzero(seen[:, tile_keys].any(1)) if len(tile_keys) else np.array([], int)
            assert (queries % d == g).all()
            first, last = table[g, t]
            assert list(queries // d) == list(range(first, last)), (g, t)


def _bad(q, k, v):
    """Variants of valid float32 inputs (a dtype every tier takes), for the error table."""
    q, k, v = (x.astype(np.float32) for x in (q, k, v))
    return {"ok": (q, k, v), "k_shape": (q, k[:, :-1], v), "dtype": (q, k.astype(np.float64), v)}


# (id, entry, spatial, variant, kwargs, exception, message)
ERRORS = [
    ("kernel-lt-2", "na1d", (12,), "ok", dict(kernel_size=1), ValueError, "kernel_size must be at least 2"),
    ("kernel-times-dilation", "na1d", (12,), "ok", dict(kernel_size=5, dilation=3), ValueError,
     r"kernel_size·dilation = 5·3 = 15 exceeds the length 12"),
    ("kernel-times-dilation-2d", "na2d", (6, 8), "ok", dict(kernel_size=3, dilation=(2, 3)), ValueError,
     r"exceeds the length 8 of axis 1"),
    ("stride-gt-kernel", "na1d", (12,), "ok", dict(kernel_size=3, stride=4), ValueError,
     r"stride must be between 1 and kernel_size \(3\)"),
    ("stride-lt-1", "na1d", (12,), "ok", dict(kernel_size=3, stride=0), ValueError, "stride must be between"),
    ("dilation-lt-1", "na1d", (12,), "ok", dict(kernel_size=3, dilation=0), ValueError,
     "dilation must be at least 1"),
    ("tuple-length", "na2d", (6, 8), "ok", dict(kernel_size=(3, 3, 3)), ValueError,
     "kernel_size has 3 entries but the input has 2 spatial axes"),
    ("stride-tuple-length", "na1d", (12,), "ok", dict(kernel_size=3, stride=(1, 1)), ValueError,
     "stride has 2 entries"),
    ("kernel-float", "na1d", (12,), "ok", dict(kernel_size=3.0), TypeError, "kernel_size must be an int"),
    ("kernel-bool", "na1d", (12,), "ok", dict(kernel_size=True), TypeError, "kernel_size must be an int"),
    ("kernel-entry-float", "na2d", (6, 8), "ok", dict(kernel_size=(3, 2.0)), TypeError,
     "kernel_size entries must be ints"),
    ("causal-entry", "na2d", (6, 8), "ok", dict(kernel_size=3, is_causal=(True, 1)), TypeError,
     "is_causal entries must be bools"),
    ("causal-int", "na1d", (12,), "ok", dict(kernel_size=3, is_causal=1), TypeError, "is_causal must be a bool"),
    ("rank", "na2d", (12,), "ok", dict(kernel_size=3), ValueError, r"q must have rank 5 \[B, X, Y, H, D\]"),
    ("k-shape", "na1d", (12,), "k_shape", dict(kernel_size=3), ValueError, r"k has shape .* but q has"),
    ("dtype-mismatch", "na1d", (12,), "dtype", dict(kernel_size=3), TypeError, "dtypes must match"),
    ("scale", "na1d", (12,), "ok", dict(kernel_size=3, scale=-1.0), ValueError, "scale must be a positive"),
]


@pytest.mark.parametrize("case", ERRORS, ids=[e[0] for e in ERRORS])
@pytest.mark.parametrize("tier", ALG.tiers)
def test_invalid_arguments(tier, case):
    _, entry, spatial, variant, kw, exc, match = case
    rng = np.random.default_rng(0)
    q, k, v = _bad(*(randn(rng, 1, *spatial, 1, 16) for _ in range(3)))[variant]
    args = (x if tier == "t0_numpy" else to_tier(x, "t1_torch", str(x.dtype)) for x in (q, k, v))
    with pytest.raises(exc, match=match):
        registry.get("neighborhood", tier, entry)(*args, **kw)


def test_t0_wrong_array_kind():
    import torch
    q = torch.randn(1, 12, 1, 16, dtype=torch.float64)
    with pytest.raises(TypeError, match="q must be a numpy.ndarray"):
        na1d(q, q, q, 3)
    with pytest.raises(ValueError, match="dout has shape"):
        na_backward(*(np.ones((1, 12, 1, 16)),) * 3, np.ones((1, 11, 1, 16)), 3)
