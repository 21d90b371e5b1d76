"""Dense attention: every tier in the registry against the float64 NumPy spec."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import DEVICE
from tests.helpers import dtypes_for, randn, to_tier
from tiers import registry
from tiers.t0_numpy.attention import attention as spec, attention_backward as spec_backward
from tiers.tolerances import assert_close, compare

ALG = registry.ALGORITHMS["attention"]
# t0 in float64 is the reference itself, so t0 is checked in float32 only
CASES = [(tier, dt) for tier in ALG.tiers for dt in dtypes_for(tier) if (tier, dt) != ("t0_numpy", "float64")]
GRAD_CASES = [(tier, dt) for tier in ALG.backward for dt in dtypes_for(tier)]
# (B, H, Lq, Lk, D): odd lengths, a single token, Lq != Lk both ways, head dims 16..128 and 24
SHAPES = [(1, 1, 1, 1, 16), (2, 3, 37, 37, 32), (1, 2, 129, 129, 64), (2, 1, 37, 70, 128),
          (1, 2, 70, 37, 16), (1, 1, 50, 50, 24)]


def _inputs(rng, B, H, Lq, Lk, D):
    return randn(rng, B, H, Lq, D), randn(rng, B, H, Lk, D), randn(rng, B, H, Lk, D)


def _check_forward(tier, dtype, shape, causal, scale, rng):
    q, k, v = _inputs(rng, *shape)
    # the reference sees exactly the rounded inputs the tier sees
    rounded = [np.asarray(to_tier(x, "t1_torch", dtype).double().cpu()) if dtype in ("float16", "bfloat16")
               else x.astype(dtype).astype(np.float64) for x in (q, k, v)]
    ref = spec(*rounded, causal=causal, scale=scale)
    out = registry.get("attention", tier)(*(to_tier(x, tier, dtype) for x in (q, k, v)),
                                           causal=causal, scale=scale)
    assert tuple(out.shape) == tuple(shape[:3]) + (shape[4],)
    assert str(out.dtype).replace("torch.", "") == dtype
    assert_close(out, ref, dtype)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("tier,dtype", CASES)
def test_forward_matches_spec(tier, dtype, shape, causal):
    _check_forward(tier, dtype, shape, causal, None, np.random.default_rng(hash((tier, shape, causal)) % 2**32))


@pytest.mark.parametrize("tier", ALG.tiers)
def test_explicit_scale(tier):
    dtype = dtypes_for(tier)[-1 if tier != "t0_numpy" else 1]
    _check_forward(tier, "float32" if tier != "t0_numpy" else dtype, (1, 2, 33, 41, 32), True, 0.37,
                   np.random.default_rng(7))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tier=st.sampled_from(ALG.tiers[1:]), B=st.integers(1, 2), H=st.integers(1, 2),
       Lq=st.integers(1, 80), Lk=st.integers(1, 80), D=st.sampled_from([16, 20, 32, 64]),
       causal=st.booleans(), seed=st.integers(0, 2**31))
def test_forward_property_sweep(tier, B, H, Lq, Lk, D, causal, seed):
    _check_forward(tier, "float32", (B, H, Lq, Lk, D), causal, None, np.random.default_rng(seed))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [(1, 2, 37, 37, 32), (2, 1, 45, 29, 64), (1, 1, 29, 45, 16)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("tier,dtype", GRAD_CASES)
def test_gradients_match_spec(tier, dtype, shape, causal):
    rng = np.random.default_rng(hash((tier, dtype, shape, causal)) % 2**32)
    q, k, v = _inputs(rng, *shape)
    do = randn(rng, *shape[:3], shape[4])
    tq, tk, tv = (to_tier(x, tier, dtype, requires_grad=True) for x in (q, k, v))
    tdo = to_tier(do, tier, dtype)
    out = registry.get("attention", tier)(tq, tk, tv, causal=causal)
    (out * tdo).sum().backward()
    rounded = [t.detach().double().cpu().numpy() for t in (tq, tk, tv, tdo)]
    refs = spec_backward(*rounded, causal=causal)
    for name, t, ref in zip("qkv", (tq, tk, tv), refs):
        assert_close(t.grad, ref, dtype, what=f"d{name}")


@pytest.mark.parametrize("tier", ALG.backward)
def test_sum_backward_runs(tier):
    """out.sum().backward() (a broadcast, zero-stride upstream gradient) works."""
    rng = np.random.default_rng(3)
    q, k, v = (to_tier(x, tier, "float32", requires_grad=True) for x in _inputs(rng, 1, 1, 20, 20, 16))
    registry.get("attention", tier)(q, k, v, causal=True).sum().backward()
    ref = spec_backward(*(t.detach().double().cpu().numpy() for t in (q, k, v)), np.ones((1, 1, 20, 16)), causal=True)
    assert_close(q.grad, ref[0], "float32", what="dq")


def test_spec_matches_torch_sdpa():
    """The spec itself agrees with the real library's attention (SDPA math, float64)."""
    import torch
    rng = np.random.default_rng(11)
    q, k, v = _inputs(rng, 2, 3, 19, 23, 16)
    for causal in (False, True):
        ref = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(x) for x in (q, k, v)),
                                                               is_causal=causal)
        assert_close(spec(q, k, v, causal=causal), ref.numpy(), "float64")


def test_comparison_fails_on_wrong_answer():
    """The harness can fail: a perturbed output, a NaN and a dropped element are all rejected."""
    rng = np.random.default_rng(5)
    q, k, v = _inputs(rng, 1, 1, 16, 16, 16)
    ref = spec(q, k, v)
    bad = ref.copy()
    bad[0, 0, 3, 4] += 1e-3
    assert not compare(bad, ref, "float32")["ok"]
    bad = ref.copy()
    bad[0, 0, 0, 0] = np.nan
    assert not compare(bad, ref, "float16")["ok"]
    assert not compare(spec(q, k, v, causal=True), ref, "bfloat16")["ok"]


def test_comparison_scale_judges_a_cancelling_result():
    """With `scale` (the terms' magnitudes) round-off of a result that cancels passes, a wrong
    answer still fails, and a scale below |ref| is refused."""
    ref, scale = np.array([1e-3, 0.0, 2.0]), np.array([10.0, 10.0, 2.0])
    rounded = ref + np.array([5e-5, -3e-5, 0.0])
    assert not compare(rounded, ref, "float32")["ok"]
    assert compare(rounded, ref, "float32", scale)["ok"]
    assert not compare(ref + np.array([1e-2, 0.0, 0.0]), ref, "float32", scale)["ok"]
    with pytest.raises(ValueError, match="at least"):
        compare(ref, ref, "float32", np.ones(3))


@pytest.mark.skipif(DEVICE != "cuda", reason="autotuning runs only on a GPU")
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_autotuned_path(dtype, monkeypatch):
    """The benchmark's path: every autotuned tile shape must give the same answer."""
    monkeypatch.setenv("TIERS_AUTOTUNE", "1")
    _check_forward("t3_triton_fused", dtype, (1, 2, 200, 200, 64), True, None, np.random.default_rng(2))
    rng = np.random.default_rng(4)
    q, k, v = (to_tier(x, "t3_triton_fused", dtype, requires_grad=True) for x in _inputs(rng, 1, 2, 150, 150, 64))
    do = to_tier(randn(rng, 1, 2, 150, 64), "t3_triton_fused", dtype)
    registry.get("attention", "t3_triton_fused")(q, k, v, causal=True).backward(do)
    refs = spec_backward(*(t.detach().double().cpu().numpy() for t in (q, k, v, do)), causal=True)
    for name, t, ref in zip("qkv", (q, k, v), refs):
        assert_close(t.grad, ref, dtype, what=f"d{name}")


def test_block_d_pads_the_head_dim_like_triton():
    import triton

    from tiers.kernels.gemm import block_d
    assert [block_d(D) for D in range(1, 300)] == [max(16, triton.next_power_of_2(D)) for D in range(1, 300)]
