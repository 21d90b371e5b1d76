"""Bad input fails early with a message naming the argument, in every tier."""
import numpy as np
import pytest

from tests.conftest import DEVICE
from tests.helpers import to_tier
from tiers import registry

ALG = registry.ALGORITHMS["attention"]


def _qkv(tier, shapes=((1, 2, 8, 16),) * 3, dtype="float32"):
    rng = np.random.default_rng(0)
    return [to_tier(rng.standard_normal(s), tier, dtype) for s in shapes]


BAD_SHAPES = [
    (((2, 8, 16), (1, 2, 8, 16), (1, 2, 8, 16)), "q must have rank 4"),
    (((1, 2, 8, 16), (2, 2, 8, 16), (2, 2, 8, 16)), "k has batch 2 but q has 1"),
    (((1, 2, 8, 16), (1, 3, 8, 16), (1, 2, 8, 16)), "k has 3 heads but q has 2"),
    (((1, 2, 8, 16), (1, 2, 8, 32), (1, 2, 8, 16)), "k has head dim 32 but q has 16"),
    (((1, 2, 8, 16), (1, 2, 8, 16), (1, 2, 9, 16)), "v has length 9 but k has 8"),
    (((1, 2, 0, 16), (1, 2, 8, 16), (1, 2, 8, 16)), "q length must be at least 1"),
]


@pytest.mark.parametrize("shapes,message", BAD_SHAPES, ids=[m for _, m in BAD_SHAPES])
@pytest.mark.parametrize("tier", ALG.tiers)
def test_bad_shapes(tier, shapes, message):
    with pytest.raises(ValueError, match=message):
        registry.get("attention", tier)(*_qkv(tier, shapes))


@pytest.mark.parametrize("tier", ALG.tiers)
@pytest.mark.parametrize("scale,err,message", [(0.0, ValueError, "scale must be a positive"),
                                               (-1.0, ValueError, "scale must be a positive"),
                                               (float("nan"), ValueError, "scale must be a positive"),
                                               ("0.5", TypeError, "scale must be a float")])
def test_bad_scale(tier, scale, err, message):
    with pytest.raises(err, match=message):
        registry.get("attention", tier)(*_qkv(tier), scale=scale)


@pytest.mark.parametrize("tier", ALG.tiers)
def test_bad_causal_type(tier):
    with pytest.raises(TypeError, match="causal must be a bool"):
        registry.get("attention", tier)(*_qkv(tier), causal=1)


@pytest.mark.parametrize("tier", ALG.tiers)
def test_dtype_mismatch(tier):
    q, k, v = _qkv(tier)
    k = k.astype(np.float64) if tier == "t0_numpy" else k.double()
    with pytest.raises(TypeError, match="k has dtype .* but q has"):
        registry.get("attention", tier)(q, k, v)


@pytest.mark.parametrize("tier", ALG.tiers[1:])
def test_wrong_array_kind(tier):
    q, k, v = _qkv("t0_numpy")
    with pytest.raises(TypeError, match="q must be a torch.Tensor"):
        registry.get("attention", tier)(q, k, v)


def test_t0_rejects_tensors():
    q, k, v = _qkv("t1_torch")
    with pytest.raises(TypeError, match="q must be a numpy.ndarray"):
        registry.get("attention", "t0_numpy")(q, k, v)


@pytest.mark.parametrize("tier", ["t2_triton_unfused", "t3_triton_fused"])
def test_triton_rejects_float64(tier):
    with pytest.raises(TypeError, match="q has dtype torch.float64; supported"):
        registry.get("attention", tier)(*_qkv(tier, dtype="float64"))


@pytest.mark.parametrize("tier", ALG.tiers[1:])
def test_device_mismatch(tier):
    q, k, v = _qkv(tier)
    with pytest.raises(ValueError, match="k is on meta but q is on"):
        registry.get("attention", tier)(q, k.to("meta"), v)


@pytest.mark.skipif(DEVICE == "cuda", reason="CPU-only machine behaviour")
@pytest.mark.parametrize("tier", ["t2_triton_unfused", "t3_triton_fused"])
def test_triton_needs_cuda_or_interpreter(tier, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ValueError, match="Triton tiers need CUDA tensors"):
        registry.get("attention", tier)(*_qkv(tier))


@pytest.mark.skipif(DEVICE != "cuda", reason="needs a GPU machine")
@pytest.mark.parametrize("tier", ["t2_triton_unfused", "t3_triton_fused"])
def test_triton_rejects_cpu_tensors_on_gpu_machine(tier, monkeypatch):
    import torch
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    q, k, v = (torch.randn(1, 1, 8, 16) for _ in range(3))
    with pytest.raises(ValueError, match="Triton tiers need CUDA tensors"):
        registry.get("attention", tier)(q, k, v)
