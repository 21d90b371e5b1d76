"""SPLAT sparse attention: the ACSR format (tiers/acsr.py) against masks written straight from
the definitions, and every tier against the float64 NumPy spec."""
import time
import zlib

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.conftest import DEVICE
from tests.helpers import dtypes_for, randn, to_tier
from tiers import registry
from tiers.acsr import ACSR
from tiers.t0_numpy.attention import attention as dense_spec
from tiers.t0_numpy.sparse_attention import (sparse_attention as spec, sparse_attention_backward as spec_backward,
                                             sparse_attention_backward_magnitudes as spec_magnitudes)
from tiers.tolerances import assert_close

ALG = registry.ALGORITHMS["sparse_attention"]
TIERS = ALG.tiers
BACKWARD = ALG.backward
# t0 in float64 is the reference itself, so t0 is checked in float32 only
CASES = [(tier, dt) for tier in TIERS for dt in dtypes_for(tier) if (tier, dt) != ("t0_numpy", "float64")]
GRAD_CASES = [(tier, dt) for tier in BACKWARD for dt in dtypes_for(tier)]


def _impl(tier):
    return registry.get("sparse_attention", tier)


def _seed(*parts):
    return zlib.crc32(repr(parts).encode())   # hash() of a str changes between runs


# ---------------------------------------------------------------- the definitions, by brute force

def definition(kind, L, **kw):
    """[L, L] bool, entry (i, j) written directly from the constructor's docstring formula."""
    i, j = np.arange(L)[:, None], np.arange(L)[None, :]
    if kind == "sliding_window":
        w = kw["window"]
        return (0 <= i - j) & (i - j < w) if kw.get("causal") else np.abs(i - j) <= w // 2
    if kind == "dilated_window":
        w, d = kw["window"], kw["dilation"]
        ms = range(-(w - 1), 1) if kw.get("causal") else range(-(w // 2), w // 2 + 1)
        return np.any([j == i + m * d for m in ms], axis=0)
    if kind == "strided":
        return (j <= i) & ((i - j < kw["local"]) | ((i - j) % kw["stride"] == 0))
    if kind == "blocked":
        return i // kw["block"] == j // kw["block"]
    if kind == "global_local":
        G = kw["n_global"]
        return (np.abs(i - j) <= kw["window"] // 2) | (i < G) | (j < G)
    raise KeyError(kind)


def _c(kind, L, **kw):
    return pytest.param(kind, L, kw, id=f"{kind}-L{L}-" + "-".join(f"{k}{int(v)}" for k, v in kw.items()))


CONSTRUCTORS = [
    _c("sliding_window", 37, window=7), _c("sliding_window", 37, window=8),
    _c("sliding_window", 37, window=7, causal=True), _c("sliding_window", 36, window=8, causal=True),
    _c("sliding_window", 5, window=1), _c("sliding_window", 9, window=40), _c("sliding_window", 1, window=3),
    _c("dilated_window", 41, window=5, dilation=3), _c("dilated_window", 40, window=6, dilation=4),
    _c("dilated_window", 41, window=4, dilation=3, causal=True), _c("dilated_window", 23, window=9, dilation=7),
    _c("dilated_window", 30, window=3, dilation=1, causal=True),
    _c("strided", 37, local=3, stride=5), _c("strided", 40, local=5, stride=5), _c("strided", 41, local=7, stride=3),
    _c("strided", 33, local=1, stride=1), _c("strided", 29, local=40, stride=4), _c("strided", 31, local=2, stride=40),
    _c("blocked", 37, block=8), _c("blocked", 40, block=8), _c("blocked", 7, block=10), _c("blocked", 13, block=1),
    _c("global_local", 37, window=6, n_global=3), _c("global_local", 40, window=9, n_global=0),
    _c("global_local", 41, window=4, n_global=10), _c("global_local", 20, window=30, n_global=2),
    _c("global_local", 15, window=3, n_global=15), _c("global_local", 29, window=1, n_global=1),
]


def _check_pattern(p, mask):
    """Every view of p agrees with mask, and the segments of each row are disjoint."""
    p.check()
    assert p.to_mask().shape == mask.shape
    np.testing.assert_array_equal(p.to_mask(), mask)
    assert p.nnz == mask.sum()
    np.testing.assert_array_equal(p.row_counts(), mask.sum(axis=1))
    csr = p.to_csr()
    np.testing.assert_array_equal(csr.toarray().astype(bool), mask)
    assert np.all(np.diff(csr.indices[csr.indptr[0]:csr.indptr[1]]) > 0)
    for i in {0, mask.shape[0] // 2, mask.shape[0] - 1}:
        np.testing.assert_array_equal(p.row_keys(i), np.flatnonzero(mask[i]))


@pytest.mark.parametrize("kind,L,kw", CONSTRUCTORS)
def test_constructor_matches_definition(kind, L, kw):
    p = getattr(ACSR, kind)(L, **kw)
    _check_pattern(p, definition(kind, L, **kw))
    assert (p.Lq, p.Lk) == (L, L)


@st.composite
def _constructor_args(draw):
    kind = draw(st.sampled_from(["sliding_window", "dilated_window", "strided", "blocked", "global_local"]))
    L = draw(st.integers(1, 70))
    kw = {"sliding_window": lambda: dict(window=draw(st.integers(1, 80)), causal=draw(st.booleans())),
          "dilated_window": lambda: dict(window=draw(st.integers(1, 20)), dilation=draw(st.integers(1, 9)),
                                         causal=draw(st.booleans())),
          "strided": lambda: dict(local=draw(st.integers(1, 20)), stride=draw(st.integers(1, 20))),
          "blocked": lambda: dict(block=draw(st.integers(1, 80))),
          "global_local": lambda: dict(window=draw(st.integers(1, 40)), n_global=draw(st.integers(0, L)))}[kind]()
    return kind, L, kw


@settings(max_examples=150, deadline=None)
@given(args=_constructor_args())
def test_constructor_property(args):
    kind, L, kw = args
    mask = definition(kind, L, **kw)
    p = getattr(ACSR, kind)(L, **kw)
    _check_pattern(p, mask)
    # the JIT analysis recovers as compact a pattern from the mask alone
    q = ACSR.from_mask(mask)
    _check_pattern(q, mask)
    assert q.n_groups <= max(p.n_groups + 1, 3)


# ---------------------------------------------------------------- from_mask

def _bigbird(rng, Lq, Lk, block, window, n_global, n_random):
    """Union of a window, global rows and columns and random key blocks per query block."""
    i, j = np.arange(Lq)[:, None], np.arange(Lk)[None, :]
    mask = (np.abs(i - j) <= window // 2) | (i < n_global) | (j < n_global)
    for r in range(0, Lq, block):
        for c in rng.choice(-(-Lk // block), size=min(n_random, -(-Lk // block)), replace=False):
            mask[r:r + block, c * block:(c + 1) * block] = True
    return mask


@st.composite
def _masks(draw):
    Lq, Lk = draw(st.integers(1, 60)), draw(st.integers(1, 60))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    kind = draw(st.sampled_from(["random", "bigbird", "empty-rows", "ones", "zeros", "constructor-union"]))
    if kind == "random":
        mask = rng.random((Lq, Lk)) < draw(st.floats(0.0, 1.0))
    elif kind == "bigbird":
        mask = _bigbird(rng, Lq, Lk, draw(st.integers(1, 8)), draw(st.integers(1, 9)), draw(st.integers(0, 3)),
                        draw(st.integers(0, 3)))
    elif kind == "empty-rows":
        mask = rng.random((Lq, Lk)) < 0.4
        mask[rng.random(Lq) < 0.5] = False
    elif kind == "ones":
        mask = np.ones((Lq, Lk), dtype=bool)
    elif kind == "zeros":
        mask = np.zeros((Lq, Lk), dtype=bool)
    else:   # two structured patterns overlaid: segments of the union must be re-derived
        L = Lq
        mask = definition("dilated_window", L, window=draw(st.integers(1, 9)), dilation=draw(st.integers(1, 5))) \
            | definition("strided", L, local=draw(st.integers(1, 6)), stride=draw(st.integers(1, 9)))
    return mask


@settings(max_examples=200, deadline=None)
@given(mask=_masks())
def test_from_mask_round_trips(mask):
    p = ACSR.from_mask(mask)
    _check_pattern(p, mask)
    assert p.n_groups <= mask.shape[0]


@pytest.mark.parametrize("kind,L,kw", CONSTRUCTORS)
def test_from_mask_of_constructor(kind, L, kw):
    mask = definition(kind, L, **kw)
    p, q = getattr(ACSR, kind)(L, **kw), ACSR.from_mask(mask)
    _check_pattern(q, mask)
    assert q.n_groups <= max(p.n_groups + 1, 3)


@pytest.mark.parametrize("L", [64, 257, 1000])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("window", [1, 2, 7, 64])
def test_from_mask_finds_few_groups(L, causal, window):
    """A sliding window is one group (clipping gives both edges), ≤ 3 in any case; so is a
    dilated window. Strided and global-local patterns stay a handful of groups and blocked
    patterns one group per block, independent of L."""
    for p in (ACSR.sliding_window(L, window, causal), ACSR.dilated_window(L, window, 3, causal)):
        assert ACSR.from_mask(p.to_mask()).n_groups <= 3
    assert ACSR.from_mask(ACSR.strided(L, window, 16).to_mask()).n_groups <= 3
    assert ACSR.from_mask(ACSR.global_local(L, window, 5).to_mask()).n_groups <= 4
    blocked = ACSR.blocked(L, window)
    assert ACSR.from_mask(blocked.to_mask()).n_groups == blocked.n_groups == (-(-L // window) if window > 1 else 1)


def test_from_mask_is_fast_at_4096():
    """The analysis is vectorised: O(nnz) NumPy work plus a loop over runs, not over keys."""
    rng = np.random.default_rng(0)
    masks = [ACSR.dilated_window(4096, 256, 4).to_mask(), ACSR.strided(4096, 64, 64).to_mask(),
             _bigbird(rng, 4096, 4096, 64, 192, 64, 3)]
    for mask in masks:
        t = time.perf_counter()
        p = ACSR.from_mask(mask)
        assert time.perf_counter() - t < 10.0
        assert p.nnz == mask.sum()
        np.testing.assert_array_equal(p.to_mask(), mask)
    assert ACSR.from_mask(masks[0]).n_groups == 1 and ACSR.from_mask(masks[1]).n_groups == 1


def test_from_mask_of_unstructured_mask_is_exact_but_not_compact():
    mask = np.random.default_rng(1).random((200, 300)) < 0.5
    p = ACSR.from_mask(mask)
    _check_pattern(p, mask)
    s = p.stats()
    assert s["groups"] > 150 and s["nnz"] == mask.sum() and s["dense_bytes"] == 200 * 300


# ---------------------------------------------------------------- format: invariants, size, layout

def test_check_rejects_overlapping_segments():
    ok = ACSR.from_groups(8, 8, [(0, 8, [(1, -1, 1, 0, 2), (1, 1, 2, 0, 2)])])        # {i−1, i} ∪ {i+1, i+3}
    ok.check()
    bad = ACSR.from_groups(8, 8, [(0, 4, [(0, 0, 1, 0, 8)]), (4, 8, [(1, -1, 1, 0, 3), (1, 1, 2, 0, 2)])])
    with pytest.raises(ValueError, match=r"segments overlap: row 4 gets key 5 from segments 0 and 1 "
                                         r"of row group \[4, 8\)"):
        bad.check()
    # overlapping only where the clipped ranges meet: row 0 keeps key 0 from both segments
    edge = ACSR.from_groups(5, 5, [(0, 5, [(0, 0, 1, 0, 1), (1, -3, 3, 0, 2)])])
    with pytest.raises(ValueError, match="row 0 gets key 0"):
        edge.check()


def test_from_groups_fills_gaps_and_validates():
    p = ACSR.from_groups(10, 6, [(2, 4, [(0, 0, 1, 0, 6)]), (7, 9, [(0, 5, 1, 0, 1)])])
    np.testing.assert_array_equal(p.row_bounds, [0, 2, 4, 7, 9, 10])
    np.testing.assert_array_equal(p.row_counts(), [0, 0, 6, 6, 0, 0, 0, 1, 1, 0])
    assert p.geometry == ((), (1,), (), (1,), ())
    with pytest.raises(ValueError, match="non-overlapping"):
        ACSR.from_groups(10, 10, [(0, 5, []), (4, 8, [])])
    with pytest.raises(ValueError, match="strides must be at least 1"):
        ACSR.from_groups(4, 4, [(0, 4, [(1, 0, 0, 0, 1)])])
    with pytest.raises(ValueError, match="a segment is"):
        ACSR.from_groups(4, 4, [(0, 4, [(1, 0, 1)])])


def test_nnz_is_computed_not_expanded():
    """nnz and row counts come from the closed form per (row, segment), even at L = 2^20."""
    p = ACSR.sliding_window(1 << 20, 1025)
    h = 512
    assert p.nnz == (1 << 20) * 1025 - h * (h + 1)
    assert ACSR.strided(1 << 20, 256, 256).metadata_bytes() == 4 * (2 * 2 + 5 * 2)


@pytest.mark.parametrize("build", [
    lambda L: ACSR.sliding_window(L, 33), lambda L: ACSR.sliding_window(L, 33, causal=True),
    lambda L: ACSR.dilated_window(L, 17, 4), lambda L: ACSR.strided(L, 32, 32),
    lambda L: ACSR.global_local(L, 32, 8)], ids=["window", "causal-window", "dilated", "strided", "longformer"])
def test_metadata_is_independent_of_L(build):
    sizes = {L: build(L) for L in (256, 1000, 4096)}
    assert len({p.metadata_bytes() for p in sizes.values()}) == 1
    assert len({p.geometry for p in sizes.values()}) == 1
    for L, p in sizes.items():
        s = p.stats()
        assert s["csr_bytes"] == 4 * (L + 1 + p.nnz) and s["dense_bytes"] == L * L
        assert s["metadata_bytes"] <= 200 and s["csr_over_acsr"] > 50


def test_blocked_metadata_per_group_is_independent_of_L():
    for L in (256, 1000, 4096):
        p = ACSR.blocked(L, 64)
        assert p.n_groups == -(-L // 64) and p.n_segments == p.n_groups
        assert p.metadata_bytes() == 4 * (2 * (p.n_groups + 1) + 5 * p.n_groups)


def test_kernel_arrays_drive_a_kernel():
    """A scalar 'kernel' that reads only kernel_arrays() and row_tiles() rebuilds the mask."""
    p = ACSR.global_local(45, 8, 3)
    ka = p.kernel_arrays()
    assert all(x.dtype == np.int32 and x.flags.c_contiguous for x in (ka.row_bounds, ka.seg_ptr, ka.segs))
    assert ka.segs.shape == (p.n_segments, 5) and ka.row_bounds.shape == ka.seg_ptr.shape == (p.n_groups + 1,)
    assert ka.geometry == ((1,), (1, 1), (1, 1)) and hash(ka.geometry) == hash(p.geometry)
    np.testing.assert_array_equal(p.table[:, :2], [[0, 3], [3, 7], [3, 7], [7, 45], [7, 45]])
    mask = np.zeros((p.Lq, p.Lk), dtype=bool)
    tiles = p.row_tiles(4)
    assert tiles[0].tolist() == [0, 3, 0] and np.all(tiles[:, 1] - tiles[:, 0] <= 4)
    np.testing.assert_array_equal(np.sort(np.concatenate([np.arange(a, b) for a, b, _ in tiles])), np.arange(45))
    for r0, r1, g in tiles:
        for a, b, stride, ac, bc in ka.segs[ka.seg_ptr[g]:ka.seg_ptr[g + 1]]:
            for i in range(r0, r1):
                for m in range(max(ac * i + bc, 0)):
                    j = a * i + b + stride * m
                    if 0 <= j < ka.Lk:
                        mask[i, j] = True
    np.testing.assert_array_equal(mask, definition("global_local", 45, window=8, n_global=3))
    with pytest.raises(OverflowError, match="too large for int32"):
        ACSR.from_groups(4, 4, [(0, 4, [(1 << 30, 0, 1, 0, 1)])]).kernel_arrays()
    assert ACSR.from_groups(4, 4, [(0, 4, [(1 << 30, 0, 1, 0, 1)])]).kernel_arrays(np.int64).segs.dtype == np.int64


def test_patterns_are_hashable_values():
    a, b = ACSR.sliding_window(100, 9), ACSR.from_mask(ACSR.sliding_window(100, 9).to_mask())
    assert a == b and hash(a) == hash(b) and a != ACSR.sliding_window(100, 11)
    c = ACSR(100, 100, a.row_bounds, a.seg_ptr, a.segs)     # hashed once, at construction
    assert hash(c) == hash(a) and hash(ACSR.sliding_window(100, 11)) != hash(a)
    with pytest.raises(ValueError):
        a.segs[0, 0] = 5     # read-only: a cached kernel may hold on to them
    assert a.geometry == ((1,),) and ACSR.strided(1000, 128, 128).geometry == ((1, 128),)
    g = ACSR.global_local(50, 8, 4).groups()
    assert (g[0].row0, g[0].row1) == (0, 4) and g[2].segments[1].a_start == 1


def test_repr_and_draw():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p = ACSR.strided(8192, 128, 128)
    assert repr(p).splitlines() == ["ACSR(8192×8192, 1 group, 2 segments, nnz=1,298,496)",
                                    "  rows [0, 8192): j = i-127 + m, m < 128 | j = i-8064 + 128·m, m < 63"]
    assert "… 28 more groups" in repr(ACSR.blocked(8192, 256))
    ax = p.draw(max_size=256)
    img = ax.images[0].get_array()
    assert img.shape == (256, 256) and set(np.unique(img)) == {0, 1, 2}   # background, two segments
    ax = ACSR.global_local(40, 6, 3).draw()
    assert ax.images[0].get_array().shape == (40, 40) and len(ax.lines) == 2    # two inner boundaries
    plt.close("all")


INVALID = [
    (lambda: ACSR.sliding_window(0, 3), ValueError, "L must be at least 1, got 0"),
    (lambda: ACSR.sliding_window(10, 0), ValueError, "window must be at least 1, got 0"),
    (lambda: ACSR.sliding_window(10, 3.0), TypeError, "window must be an int"),
    (lambda: ACSR.sliding_window(10, 3, causal=1), TypeError, "causal must be a bool"),
    (lambda: ACSR.dilated_window(10, 3, 0), ValueError, "dilation must be at least 1"),
    (lambda: ACSR.dilated_window(True, 3, 1), TypeError, "L must be an int"),
    (lambda: ACSR.strided(10, 0, 2), ValueError, "local must be at least 1"),
    (lambda: ACSR.strided(10, 2, 0), ValueError, "stride must be at least 1"),
    (lambda: ACSR.blocked(10, 0), ValueError, "block must be at least 1"),
    (lambda: ACSR.blocked(-3, 2), ValueError, "L must be at least 1"),
    (lambda: ACSR.global_local(10, 3, -1), ValueError, "n_global must be at least 0"),
    (lambda: ACSR.global_local(10, 3, 11), ValueError, "n_global must be at most L = 10, got 11"),
    (lambda: ACSR.global_local(10, 0, 2), ValueError, "window must be at least 1"),
    (lambda: ACSR.from_mask(np.ones((4, 4), dtype=np.int8)), ValueError, "mask must be a 2-D boolean array"),
    (lambda: ACSR.from_mask(np.ones(4, dtype=bool)), ValueError, "mask must be a 2-D boolean array"),
    (lambda: ACSR.from_mask(np.ones((0, 4), dtype=bool)), ValueError, "at least one row and column"),
    (lambda: ACSR.sliding_window(10, 3).row_keys(10), ValueError, r"row 10 is outside \[0, 10\)"),
    (lambda: ACSR.sliding_window(10, 3).row_tiles(0), ValueError, "block_m must be at least 1"),
]


@pytest.mark.parametrize("call,exc,match", INVALID, ids=[m for _, _, m in INVALID])
def test_invalid_pattern_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# ---------------------------------------------------------------- the tiers

def _rounded(xs, dtype):
    """The exact values the tier sees, in float64."""
    return [np.asarray(to_tier(x, "t1_torch", dtype).double().cpu()) if dtype in ("float16", "bfloat16")
            else x.astype(dtype).astype(np.float64) for x in xs]


def _empty_rows_mask(Lq, Lk):
    mask = np.random.default_rng(5).random((Lq, Lk)) < 0.3
    mask[[0, 3, 4, 5, Lq - 1]] = False
    return mask


# (id, pattern, shape of q, Lk): small enough for Triton's interpreter
TIER_PATTERNS = [
    ("window", lambda: ACSR.sliding_window(37, 7), (2, 2, 37, 16), 37),
    ("window-even-causal", lambda: ACSR.sliding_window(37, 8, causal=True), (1, 2, 37, 16), 37),
    ("dilated", lambda: ACSR.dilated_window(45, 5, 3), (1, 2, 45, 32), 45),
    ("dilated-causal", lambda: ACSR.dilated_window(41, 4, 3, causal=True), (2, 1, 41, 16), 41),
    ("strided", lambda: ACSR.strided(41, 5, 7), (1, 2, 41, 16), 41),
    ("blocked", lambda: ACSR.blocked(43, 8), (2, 2, 43, 16), 43),
    ("longformer", lambda: ACSR.global_local(39, 6, 3), (1, 2, 39, 32), 39),
    ("bigbird", lambda: ACSR.from_mask(_bigbird(np.random.default_rng(2), 48, 48, 8, 7, 2, 2)), (1, 2, 48, 16), 48),
    ("empty-rows", lambda: ACSR.from_mask(_empty_rows_mask(30, 44)), (2, 1, 30, 16), 44),
    ("cross-lq-lt-lk", lambda: ACSR.from_mask(np.tri(20, 35, 15, dtype=bool)), (1, 2, 20, 16), 35),
]


def _check_forward(tier, dtype, pattern, shape, Lk, rng, scale=None):
    B, H, Lq, D = shape
    q, k, v = randn(rng, B, H, Lq, D), randn(rng, B, H, Lk, D), randn(rng, B, H, Lk, D)
    ref = spec(*_rounded((q, k, v), dtype), pattern, scale=scale)
    out = _impl(tier)(*(to_tier(x, tier, dtype) for x in (q, k, v)), pattern, scale=scale)
    assert tuple(out.shape) == shape
    assert str(out.dtype).replace("torch.", "") == dtype
    assert_close(out, ref, dtype)
    return out, ref


@pytest.mark.parametrize("pid,build,shape,Lk", TIER_PATTERNS, ids=[t[0] for t in TIER_PATTERNS])
@pytest.mark.parametrize("tier,dtype", CASES)
def test_forward_matches_spec(tier, dtype, pid, build, shape, Lk):
    _check_forward(tier, dtype, build(), shape, Lk, np.random.default_rng(_seed(tier, dtype, pid)))


@pytest.mark.parametrize("tier", TIERS)
def test_explicit_scale(tier):
    _check_forward(tier, "float32", ACSR.strided(33, 4, 5), (1, 2, 33, 16), 33, np.random.default_rng(4), scale=0.37)


@pytest.mark.parametrize("Lq,Lk", [(33, 33), (17, 40)])
@pytest.mark.parametrize("tier,dtype", CASES)
def test_all_ones_pattern_is_dense_attention(tier, dtype, Lq, Lk):
    rng = np.random.default_rng(_seed("dense", tier, dtype, Lq, Lk))
    q, k, v = randn(rng, 2, 2, Lq, 16), randn(rng, 2, 2, Lk, 16), randn(rng, 2, 2, Lk, 16)
    out = _impl(tier)(*(to_tier(x, tier, dtype) for x in (q, k, v)), ACSR.from_mask(np.ones((Lq, Lk), dtype=bool)))
    assert_close(out, dense_spec(*_rounded((q, k, v), dtype)), dtype)


@pytest.mark.parametrize("tier,dtype", CASES)
def test_causal_window_of_full_length_is_causal_attention(tier, dtype):
    rng = np.random.default_rng(_seed("causal", tier, dtype))
    q, k, v = (randn(rng, 1, 2, 29, 16) for _ in range(3))
    out = _impl(tier)(*(to_tier(x, tier, dtype) for x in (q, k, v)), ACSR.sliding_window(29, 29, causal=True))
    assert_close(out, dense_spec(*_rounded((q, k, v), dtype), causal=True), dtype)


@pytest.mark.parametrize("tier", TIERS)
def test_rows_without_keys_give_zeros(tier):
    mask = _empty_rows_mask(30, 44)
    for pattern in (ACSR.from_mask(mask), ACSR.from_mask(np.zeros((30, 44), dtype=bool))):
        out, _ = _check_forward(tier, "float32", pattern, (2, 2, 30, 16), 44, np.random.default_rng(6))
        out = np.asarray(out.cpu() if tier != "t0_numpy" else out)
        empty = ~pattern.to_mask().any(axis=1)
        assert np.isfinite(out).all() and empty.any()
        assert np.all(out[:, :, empty] == 0) and np.all(np.abs(out[:, :, ~empty]).sum(-1) > 0)


@st.composite
def _tier_problems(draw):
    L = draw(st.integers(1, 48))
    kind = draw(st.sampled_from(["sliding_window", "dilated_window", "strided", "blocked", "global_local", "mask"]))
    if kind == "mask":
        rng = np.random.default_rng(draw(st.integers(0, 2**31)))
        pattern = ACSR.from_mask(rng.random((L, L)) < draw(st.floats(0, 1)))
    else:
        pattern = getattr(ACSR, kind)(L, **{
            "sliding_window": lambda: dict(window=draw(st.integers(1, 20)), causal=draw(st.booleans())),
            "dilated_window": lambda: dict(window=draw(st.integers(1, 9)), dilation=draw(st.integers(1, 6)),
                                           causal=draw(st.booleans())),
            "strided": lambda: dict(local=draw(st.integers(1, 9)), stride=draw(st.integers(1, 9))),
            "blocked": lambda: dict(block=draw(st.integers(1, 16))),
            "global_local": lambda: dict(window=draw(st.integers(1, 12)), n_global=draw(st.integers(0, L)))}[kind]())
    return pattern, (draw(st.integers(1, 2)), draw(st.integers(1, 2)), L, draw(st.sampled_from([16, 32])))


@pytest.mark.parametrize("tier", TIERS[1:])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=_tier_problems(), seed=st.integers(0, 2**31))
def test_forward_property_sweep(tier, problem, seed):
    pattern, shape = problem
    _check_forward(tier, "float32", pattern, shape, shape[2], np.random.default_rng(seed))


@settings(max_examples=150, deadline=None)
@given(problem=_tier_problems(), block_n=st.sampled_from([1, 4, 16, 64]))
def test_t3_band_inversion_lists_every_row_that_sees_a_key_tile(problem, block_n):
    """t3's dK/dV programs walk only the (row residue, group, slot, t-interval) items the host lists
    for their key tile; every allowed (row, key) pair of every class must fall in one of them."""
    from tiers.t3_triton_fused.sparse_attention import _dkdv_items_on, _plan, _query_order_on, dkdv_items

    pattern = problem[0]
    bounds = pattern.kernel_arrays().row_bounds
    for n, c in enumerate(_plan(pattern, torch.device("cpu"))[3]):
        sigma, slots = c.sigma, c.host_table.shape[1]
        ptr, items = dkdv_items(pattern, n, block_n)
        per_class = -(-(-(-pattern.Lk // sigma)) // block_n)
        assert len(ptr) == sigma * per_class + 1 and ptr[-1] == len(items)
        for g in range(len(bounds) - 1):
            for slot in range(slots):
                a, b, ac, bc = (int(x) for x in c.host_table[g, slot])
                for i in range(bounds[g], bounds[g + 1]):
                    start, count = a * i + b, max(ac * i + bc, 0)
                    for j in range(start, start + sigma * count, sigma):
                        if not 0 <= j < pattern.Lk:
                            continue
                        kappa, u, rho, t = j % sigma, j // sigma, i % sigma, i // sigma
                        mine = items[ptr[kappa * per_class + u // block_n]:ptr[kappa * per_class + u // block_n + 1]]
                        assert any(r == rho and gs == g * slots + slot and lo <= t < hi for r, gs, lo, hi in mine), \
                            (pattern, n, i, j)
        # the launch orders (longest tiles first) are permutations of every tile
        for (order, _), tiles in ((_dkdv_items_on(pattern, n, block_n, 16, "cpu")[2], len(ptr) - 1),
                                  (_query_order_on(pattern, n, 16, block_n, "cpu"), sigma * -(-(-(-pattern.Lq // sigma)) // 16))):
            assert sorted(order.tolist()) == list(range(tiles))


def test_t1_chunks_and_key_table(monkeypatch):
    """Small chunks (cutting through row groups, one row at a time at the extreme) give the same
    answer; the key table lists exactly each row's keys."""
    import torch

    import tiers.t1_torch.sparse_attention as t1

    pattern = ACSR.from_mask(_bigbird(np.random.default_rng(3), 50, 50, 8, 5, 2, 2) & (np.arange(50) % 7 != 2)[:, None])
    idx, valid = t1.key_table(pattern)
    assert idx.shape == (50, pattern.row_counts().max())
    for i in range(50):
        np.testing.assert_array_equal(np.sort(idx[i][valid[i]].numpy()), pattern.row_keys(i))
    rng = np.random.default_rng(7)
    q, k, v = (torch.tensor(randn(rng, 1, 2, 50, 16)) for _ in range(3))
    full = t1.sparse_attention(q, k, v, pattern)
    for budget in (5000, 1):
        monkeypatch.setattr(t1, "_CHUNK_ELEMENTS", budget)
        chunks = t1._chunks(pattern, 2 * 16)
        assert len(chunks) > 3 and chunks[0][0] == 0 and chunks[-1][1] == 50
        assert_close(t1.sparse_attention(q, k, v, pattern), full, "float64")


def test_t3_starts_long_tiles_first_only_when_they_dominate():
    """The global rows of a Longformer pattern make one query tile (and one key tile) far longer
    than the rest: t3 then launches longest first (LPT); a sliding window keeps natural order.
    The gradient case 'longformer-long-tiles-first' below runs that path at the interpreter's tiles."""
    from tiers.t3_triton_fused.sparse_attention import _dkdv_items_on, _query_order_on

    for pattern, lpt in ((ACSR.global_local(150, 7, 3), True), (ACSR.sliding_window(150, 7), False)):
        assert _query_order_on(pattern, 0, 16, 16, "cpu")[1] is lpt
        assert _dkdv_items_on(pattern, 0, 16, 16, "cpu")[2][1] is lpt


GRAD_PATTERNS = [
    ("strided", lambda: ACSR.strided(29, 4, 5), 29),
    ("longformer", lambda: ACSR.global_local(31, 6, 2), 31),
    ("longformer-long-tiles-first", lambda: ACSR.global_local(150, 7, 3), 150),
    ("dilated-causal", lambda: ACSR.dilated_window(30, 4, 3, causal=True), 30),
    ("empty-rows", lambda: ACSR.from_mask(_empty_rows_mask(30, 44)), 44),
    ("blocked", lambda: ACSR.blocked(43, 8), 43),
    ("uneven-blocks-cross", lambda: ACSR.from_mask(_uneven_blocks()), 61),
]


def _uneven_blocks():
    """Block diagonal with Lq ≠ Lk: rows 0–6 see keys 0–19, rows 7–11 none, rows 12–49 keys 20–60
    (a block of 38 rows spans several tiles and ends inside one)."""
    mask = np.zeros((50, 61), dtype=bool)
    mask[:7, :20] = True
    mask[12:, 20:] = True
    return mask


@pytest.fixture
def small_dense_view(monkeypatch):
    """Blocks of 16 and more take t3's dense-view path (512 and more outside this test)."""
    from tiers.t3_triton_fused import sparse_attention as t3

    monkeypatch.setattr(t3, "_DENSE_VIEW_MIN", 16)
    t3._uniform_block.cache_clear()
    yield t3
    t3._uniform_block.cache_clear()


def test_t3_finds_uniform_blocks(small_dense_view):
    """uniform_block accepts exactly the block-diagonal patterns of equal square blocks of at least
    _DENSE_VIEW_MIN tiling Lq = Lk: those are a batch of dense attentions."""
    uniform_block = small_dense_view.uniform_block
    assert uniform_block(ACSR.blocked(64, 16)) == 16
    assert uniform_block(ACSR.blocked(48, 48)) == 48                # one block: dense attention itself
    assert uniform_block(ACSR.from_mask(np.kron(np.eye(3, dtype=bool), np.ones((20, 20), dtype=bool)))) == 20
    swapped = np.zeros((32, 32), dtype=bool)
    swapped[:16, 16:] = swapped[16:, :16] = True       # blocks of keys, but not on the diagonal
    overlap = np.zeros((32, 32), dtype=bool)
    overlap[:16, :18] = overlap[16:, 14:] = True
    gap = np.zeros((32, 32), dtype=bool)
    gap[:16, :14] = gap[16:, 16:] = True                # keys 14, 15 belong to no block
    causal = np.kron(np.eye(2, dtype=bool), np.tri(16, dtype=bool))
    for p in (ACSR.blocked(65, 16), ACSR.blocked(64, 8), ACSR.from_mask(_uneven_blocks()),
              ACSR.from_mask(np.ones((32, 33), dtype=bool)), ACSR.sliding_window(64, 16), ACSR.from_mask(swapped),
              ACSR.from_mask(overlap), ACSR.from_mask(gap), ACSR.from_mask(causal),
              ACSR.from_mask(np.zeros((32, 32), dtype=bool))):
        assert uniform_block(p) is None, p


@pytest.mark.parametrize("dtype", dtypes_for("t3_triton_fused"))
@pytest.mark.parametrize("build", [lambda: ACSR.blocked(64, 16), lambda: ACSR.from_mask(np.kron(
    np.eye(2, dtype=bool), np.ones((24, 24), dtype=bool)))], ids=["blocked", "from-mask"])
def test_t3_uniform_blocks_run_as_dense_attention_over_a_view(small_dense_view, dtype, build):
    """Forward and gradients of the dense-view path against the spec."""
    import torch

    t3, pattern = small_dense_view, build()
    assert t3._uniform_block(pattern) in (16, 24)
    rng = np.random.default_rng(_seed("view", dtype, pattern.Lq))
    tq, tk, tv = (to_tier(randn(rng, 2, 3, pattern.Lq, 16), "t3_triton_fused", dtype, requires_grad=True)
                  for _ in range(3))
    tdo = to_tier(randn(rng, 2, 3, pattern.Lq, 16), "t3_triton_fused", dtype)
    out = t3.sparse_attention(tq, tk, tv, pattern)
    exact = [t.detach().double().cpu().numpy() for t in (tq, tk, tv, tdo)]
    assert_close(out, spec(*exact[:3], pattern), dtype)
    (out * tdo).sum().backward()
    for name, t, ref in zip("qkv", (tq, tk, tv), spec_backward(*exact[:3], pattern, exact[3])):
        assert torch.isfinite(t.grad).all()
        assert_close(t.grad, ref, dtype, what=f"d{name}")


def _diagonal_mask(sizes):
    mask = np.zeros((sum(sizes),) * 2, dtype=bool)
    for r0, r1 in zip(np.cumsum([0, *sizes[:-1]]), np.cumsum(sizes)):
        mask[r0:r1, r0:r1] = True
    return mask


def test_t3_finds_diagonal_blocks():
    """diagonal_blocks accepts exactly the patterns whose row groups see their own rows (any sizes,
    Lq = Lk): those run on the block kernels when no block exceeds _SMALL_BLOCKS_MAX rows."""
    from tiers.t3_triton_fused.sparse_attention import _SMALL_BLOCKS_MAX, _small_blocks_on, diagonal_blocks

    np.testing.assert_array_equal(diagonal_blocks(ACSR.blocked(43, 8)), [0, 8, 16, 24, 32, 40, 43])
    np.testing.assert_array_equal(diagonal_blocks(ACSR.from_mask(_diagonal_mask([5, 33, 1, 16]))),
                                  [0, 5, 38, 39, 55])
    assert _small_blocks_on(ACSR.blocked(600, _SMALL_BLOCKS_MAX), torch.device("cpu")) is not None
    assert _small_blocks_on(ACSR.blocked(600, _SMALL_BLOCKS_MAX + 1), torch.device("cpu")) is None
    swapped = np.zeros((32, 32), dtype=bool)
    swapped[:16, 16:] = swapped[16:, :16] = True
    gap = np.zeros((32, 32), dtype=bool)
    gap[:16, :14] = gap[16:, 16:] = True
    for p in (ACSR.from_mask(_uneven_blocks()), ACSR.from_mask(swapped), ACSR.from_mask(gap),
              ACSR.from_mask(np.kron(np.eye(2, dtype=bool), np.tri(16, dtype=bool))), ACSR.sliding_window(40, 8),
              ACSR.from_mask(np.zeros((32, 32), dtype=bool)), ACSR.from_mask(np.ones((32, 33), dtype=bool))):
        assert diagonal_blocks(p) is None, p


def test_block_tiles_cover_every_row_once():
    """The programs of the block kernels: every row of every block in exactly one tile, tiles
    starting at their block's first row and every `size` rows after it."""
    from tiers.t3_triton_fused.sparse_attention import block_tiles

    rows = [0, 5, 38, 39, 55, 103]
    tiles = block_tiles(rows, 16)
    np.testing.assert_array_equal(tiles[:4], [[0, 0, 5], [5, 5, 38], [21, 5, 38], [37, 5, 38]])
    covered = np.concatenate([np.arange(t, min(t + 16, r1)) for t, _, r1 in tiles])
    np.testing.assert_array_equal(covered, np.arange(103))
    assert all(r0 <= t < r1 and (t - r0) % 16 == 0 for t, r0, r1 in tiles)


BLOCK_PATHS = {  # how t3 runs small diagonal blocks: (forward on the block kernel, backward plan)
    "blocks-one-pass": (True, ("one_pass", (16, 16, 4, 1))),
    "blocks-split": (True, ("split", (16, 16, 4, 1), (16, 16, 4, 1))),
    "general": (False, None),
}


@pytest.mark.parametrize("path", list(BLOCK_PATHS))
@pytest.mark.parametrize("dtype", dtypes_for("t3_triton_fused"))
@pytest.mark.parametrize("build", [lambda: ACSR.blocked(70, 40), lambda: ACSR.blocked(64, 32),
                                   lambda: ACSR.from_mask(_diagonal_mask([5, 33, 1, 16, 48]))],
                         ids=["ragged", "aligned", "uneven"])
def test_t3_diagonal_blocks_every_path(monkeypatch, path, dtype, build):
    """Output and gradients of small diagonal blocks on each way t3 can run them — the block
    forward, the one-pass backward (dQ summed over key tiles in a scratch), the split backward,
    and the general kernels — against the spec, on blocks of one, two and three key tiles,
    ragged and aligned."""
    from tiers.t3_triton_fused import sparse_attention as t3

    pattern = build()
    assert t3._small_blocks_on(pattern, torch.device("cpu")) is not None
    fwd, bwd = BLOCK_PATHS[path]
    monkeypatch.setitem(t3._BLOCKS_FWD, 16, (16, 16, 4, 1) if fwd else None)
    monkeypatch.setitem(t3._BLOCKS_BWD, 16, bwd)
    rng = np.random.default_rng(_seed("blocks", path, dtype, pattern.Lq))
    inputs = [randn(rng, 2, 3, pattern.Lq, 16) for _ in range(4)]
    exact = [x.astype(np.float64) for x in inputs]
    tq, tk, tv = (to_tier(x, "t3_triton_fused", dtype, requires_grad=True) for x in inputs[:3])
    out = t3.sparse_attention(tq, tk, tv, pattern)
    assert_close(out, spec(*exact[:3], pattern), dtype)
    (out * to_tier(inputs[3], "t3_triton_fused", dtype)).sum().backward()
    for name, t, ref in zip("qkv", (tq, tk, tv), spec_backward(*exact[:3], pattern, exact[3])):
        assert torch.isfinite(t.grad).all()
        assert_close(t.grad, ref, dtype, what=f"d{name}")


def _dense_masked_torch(q, k, v, mask, scale):
    """Float64 dense masked attention written in torch (autograd reference), zeros for empty rows."""
    import torch

    scores = (q @ k.transpose(-1, -2)) * scale
    scores = scores.masked_fill(~mask, float("-inf"))
    p = torch.softmax(scores.masked_fill(~mask.any(-1, keepdim=True), 0), dim=-1) * mask
    return p @ v


@pytest.mark.parametrize("pid,build,Lk", GRAD_PATTERNS, ids=[g[0] for g in GRAD_PATTERNS])
@pytest.mark.parametrize("tier,dtype", GRAD_CASES)
def test_gradients_match_spec(tier, dtype, pid, build, Lk):
    import torch

    pattern = build()
    Lq = pattern.Lq
    rng = np.random.default_rng(_seed("grad", tier, dtype, pid))
    shapes = ((1, 2, Lq, 16), (1, 2, Lk, 16), (1, 2, Lk, 16))
    tq, tk, tv = (to_tier(randn(rng, *s), tier, dtype, requires_grad=True) for s in shapes)
    tdo = to_tier(randn(rng, 1, 2, Lq, 16), tier, dtype)
    (_impl(tier)(tq, tk, tv, pattern) * tdo).sum().backward()
    exact = [t.detach().double().cpu() for t in (tq, tk, tv, tdo)]
    refs = spec_backward(*(t.numpy() for t in exact[:3]), pattern, exact[3].numpy())
    # the spec's formulas against float64 autograd of a dense masked softmax
    aq, ak, av = (t.clone().requires_grad_(True) for t in exact[:3])
    mask = torch.tensor(pattern.to_mask())
    (_dense_masked_torch(aq, ak, av, mask, 1 / 4) * exact[3]).sum().backward()
    for name, t, ref, auto in zip("qkv", (tq, tk, tv), refs, (aq, ak, av)):
        assert_close(auto.grad, ref, "float64", what=f"autograd d{name}")
        assert_close(t.grad, ref, dtype, what=f"d{name}")
        assert torch.isfinite(t.grad).all()


@pytest.mark.parametrize("tier", BACKWARD)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=_tier_problems(), seed=st.integers(0, 2**31))
@example(problem=(ACSR(Lq=7, Lk=7, row_bounds=[0, 4, 5, 7], seg_ptr=[0, 1, 2, 2],   # rows of one key and a
                       segs=[[2, 4, 1, 0, 1], [0, 0, 6, 0, 2]]), (1, 1, 7, 32)),   # saturated row: it failed
         seed=56739)                                                              # by ‖ref‖ (spec_magnitudes)
def test_gradient_property_sweep(tier, problem, seed):
    """Every constructor and random masks (t3 inverts each segment's band to find the queries of
    a key tile, so odd slopes and edge groups must be covered)."""
    pattern, (B, H, L, D) = problem
    rng = np.random.default_rng(seed)
    tq, tk, tv = (to_tier(randn(rng, B, H, L, D), tier, "float32", requires_grad=True) for _ in range(3))
    tdo = to_tier(randn(rng, B, H, L, D), tier, "float32")
    (_impl(tier)(tq, tk, tv, pattern) * tdo).sum().backward()
    exact = [t.detach().double().cpu().numpy() for t in (tq, tk, tv, tdo)]
    refs, scales = spec_backward(*exact[:3], pattern, exact[3]), spec_magnitudes(*exact[:3], pattern, exact[3])
    for name, t, ref, scale in zip("qkv", (tq, tk, tv), refs, scales):
        assert_close(t.grad, ref, "float32", what=f"d{name}", scale=scale)


@pytest.mark.parametrize("tier", BACKWARD)
def test_sum_backward_runs(tier):
    """out.sum().backward() works, also when no row has a key (zero gradients, not NaN)."""
    import torch

    rng = np.random.default_rng(3)
    for pattern in (ACSR.dilated_window(20, 4, 2, causal=True), ACSR.from_mask(np.zeros((20, 20), dtype=bool))):
        q, k, v = (to_tier(randn(rng, 1, 1, 20, 16), tier, "float32", requires_grad=True) for _ in range(3))
        _impl(tier)(q, k, v, pattern).sum().backward()
        ref = spec_backward(*(t.detach().double().cpu().numpy() for t in (q, k, v)), pattern, np.ones((1, 1, 20, 16)))
        for name, t, r in zip("qkv", (q, k, v), ref):
            assert torch.isfinite(t.grad).all()
            assert_close(t.grad, r, "float32", what=f"d{name}")


# (id, variant, pattern, exception, message)
TIER_ERRORS = [
    ("not-acsr", "ok", lambda: np.ones((12, 12), dtype=bool), TypeError,
     r"pattern must be a tiers.acsr.ACSR, got ndarray \(ACSR.from_mask"),
    ("lq", "ok", lambda: ACSR.sliding_window(11, 3), ValueError, "pattern has Lq = 11 query rows but q has length 12"),
    ("lk", "ok", lambda: ACSR.from_mask(np.ones((12, 13), dtype=bool)), ValueError,
     "pattern has Lk = 13 key columns but k has length 12"),
    ("rank", "rank", lambda: ACSR.sliding_window(12, 3), ValueError, r"q must have rank 4 \[B, H, L, D\]"),
    ("heads", "heads", lambda: ACSR.sliding_window(12, 3), ValueError, "k has 2 heads but q has 1"),
    ("v-length", "v_length", lambda: ACSR.sliding_window(12, 3), ValueError, "v has length 11 but k has 12"),
    ("dtype", "dtype", lambda: ACSR.sliding_window(12, 3), TypeError, "dtypes must match"),
]


def _variants(q, k, v):
    q, k, v = (x.astype(np.float32) for x in (q, k, v))
    return {"ok": (q, k, v), "rank": (q[0], k, v), "heads": (q, np.concatenate([k, k], 1), v),
            "v_length": (q, k, v[:, :, :-1]), "dtype": (q, k.astype(np.float64), v)}


@pytest.mark.parametrize("case", TIER_ERRORS, ids=[e[0] for e in TIER_ERRORS])
@pytest.mark.parametrize("tier", TIERS)
def test_invalid_arguments(tier, case):
    _, variant, build, exc, match = case
    rng = np.random.default_rng(0)
    q, k, v = _variants(*(randn(rng, 1, 1, 12, 16) for _ in range(3)))[variant]
    args = (x if tier == "t0_numpy" else to_tier(x, "t1_torch", str(x.dtype)) for x in (q, k, v))
    with pytest.raises(exc, match=match):
        _impl(tier)(*args, build())


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("scale,exc,match", [(-1.0, ValueError, "scale must be a positive"),
                                             ("0.5", TypeError, "scale must be a float")])
def test_invalid_scale(tier, scale, exc, match):
    rng = np.random.default_rng(0)
    q = to_tier(randn(rng, 1, 1, 12, 16), tier, "float32")
    with pytest.raises(exc, match=match):
        _impl(tier)(q, q, q, ACSR.sliding_window(12, 3), scale=scale)


def test_t0_wrong_array_kind_and_dout():
    import torch

    q = torch.randn(1, 1, 12, 16, dtype=torch.float64)
    with pytest.raises(TypeError, match="q must be a numpy.ndarray"):
        spec(q, q, q, ACSR.sliding_window(12, 3))
    x = np.ones((1, 1, 12, 16))
    with pytest.raises(ValueError, match="dout has shape"):
        spec_backward(x, x, x, ACSR.sliding_window(12, 3), np.ones((1, 1, 11, 16)))


@pytest.mark.parametrize("pid,build,shape,Lk", TIER_PATTERNS, ids=[t[0] for t in TIER_PATTERNS])
def test_flex_mask_mod_of_the_benchmark_is_the_pattern(pid, build, shape, Lk):
    """The FlexAttention anchor gets exactly the pattern the tiers compute."""
    import torch

    from tiers.bench.sparse_attention import acsr_mask_mod

    pattern = build()
    i, j = torch.meshgrid(torch.arange(pattern.Lq), torch.arange(pattern.Lk), indexing="ij")
    assert np.array_equal(acsr_mask_mod(pattern)(0, 0, i, j).numpy(), pattern.to_mask())


def test_short_classes_get_tiles_of_their_residues():
    """A class whose residues hold at most half a tile of query rows gets a tile of their size."""
    from tiers.t3_triton_fused.sparse_attention import _class_tiles

    table = (64, 64, 4, 3)
    assert _class_tiles(table, 128, 2048) == (16, 16, 2, 1)     # 16 rows a residue
    assert _class_tiles(table, 128, 3000) == (32, 32, 2, 2)     # 24
    assert _class_tiles(table, 128, 4096) == (32, 32, 2, 2)     # 32
    assert _class_tiles(table, 128, 8192) == table              # 64: the table's tile fits
    assert _class_tiles(table, 1, 100) == table
    assert _class_tiles((64, 32, 4, 2), 64, 100) == (16, 16, 2, 1)


def test_t3_with_short_class_tiles_matches_t0(monkeypatch):
    """The strided class of strided(300, 8, 16) (19 rows a residue) on its own 32-row tiles, the
    local class on 64-row tiles, against the definition."""
    import tiers.t3_triton_fused.sparse_attention as t3

    monkeypatch.setattr(t3, "_tiles", lambda head_block, dtype, backward: (64, 64, 4, 1))
    pattern = ACSR.strided(300, 8, 16)
    assert [t3._class_tiles((64, 64, 4, 1), c.sigma, 300) for c in t3._plan(pattern, DEVICE)[3]] == \
        [(64, 64, 4, 1), (32, 32, 2, 2)]
    rng = np.random.default_rng(zlib.crc32(b"short class"))
    q, k, v = (randn(rng, 1, 2, 300, 16) for _ in range(3))
    with torch.no_grad():
        out = t3.sparse_attention(*(to_tier(x, "t3_triton_fused", "float32") for x in (q, k, v)), pattern)
    ref = spec(q, k, v, pattern)
    assert_close(out, ref, "float32")


def test_floor_of_flops_and_bytes():
    """The benchmark's floor: bytes decide a sparse pattern, FLOPs a dense one."""
    from tiers.bench.sparse_attention import floor_ms

    ceilings = {"gemm_fp16_tflops": 700.0, "copy_TBps": 3.0}
    row = dict(B=4, H=16, L=8192, D=64, mode="fwd", nnz=8192 * 160)
    assert floor_ms(row, ceilings) == pytest.approx(4 * 4 * 16 * 8192 * 64 * 2 / 3e9)
    dense = dict(row, nnz=8192 * 8192)
    assert floor_ms(dense, ceilings) == pytest.approx(4 * 4 * 16 * 64 * 8192 * 8192 / 700e9)
    assert floor_ms(dict(row, mode="fwd_bwd"), ceilings) == pytest.approx(3 * floor_ms(row, ceilings))


def test_strided_parts_split_the_pattern():
    from tiers.bench.tune_sparse_attention import strided_parts

    parts = strided_parts(300, 8, 16)
    local, strided = parts["local"].to_mask(), parts["strided"].to_mask()
    assert not (local & strided).any()
    assert np.array_equal(local | strided, parts["full"].to_mask())


@pytest.mark.parametrize("name", ["dilated_w512_d4", "strided_l128_s128", "longformer_w512_g64", "blocked_256"])
def test_definition_mask_mod_of_the_benchmark_is_the_pattern(name):
    """The hand-written FlexAttention mask of each benchmark pattern (the fast anchor) is exactly
    the pattern, at a length where every part of it (edges, globals, several blocks) shows."""
    from tiers.bench.sparse_attention import definition_mask_mod, pattern

    p = pattern(name, 1500)
    i, j = torch.meshgrid(torch.arange(p.Lq), torch.arange(p.Lk), indexing="ij")
    assert np.array_equal(definition_mask_mod(name)(0, 0, i, j).numpy(), p.to_mask())
