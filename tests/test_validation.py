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


def _grad_calls():
    """(algorithm, tier, call with inputs that require grad) for every torch tier whose algorithm
    the registry lists without a backward there."""
    import torch

    from tiers.acsr import ACSR
    from tiers import sparse_matrices as sm

    def qkv(shape):
        return [torch.randn(*shape, device=DEVICE, requires_grad=True) for _ in range(3)]

    A = sm.poisson2d(3)
    makers = {
        "attention": lambda f: lambda: f(*qkv((1, 2, 8, 16))),
        "neighborhood": lambda f: lambda: f(*qkv((1, 8, 2, 16)), kernel_size=3),
        "sparse_attention": lambda f: lambda: f(*qkv((1, 2, 8, 16)), ACSR.dilated_window(8, 3, 1, causal=True)),
        "sparse_fusion": lambda f: lambda: f(sm.tril_csr(A), A, torch.rand(9, dtype=torch.float64, device=DEVICE,
                                                                          requires_grad=True)),
    }
    return [pytest.param(name, tier, makers[name], id=f"{name}-{tier}")
            for name, alg in registry.ALGORITHMS.items() for tier in alg.tiers
            if tier != "t0_numpy" and tier not in alg.backward]


@pytest.mark.parametrize("name,tier,make", _grad_calls())
def test_tiers_without_backward_refuse_inputs_that_require_grad(name, tier, make):
    """Their outputs would come back without a graph (or, in sparse fusion, with a slice's), so a
    loss adding other terms would silently lose this one's gradient: refused while grad is on,
    run under no_grad."""
    import torch

    f = registry.get(name, tier)
    with pytest.raises(ValueError, match="requires grad, but .* no backward"):
        make(f)()
    with torch.no_grad():
        out = make(f)()
    outs = out if isinstance(out, tuple) else (out,)
    assert not any(o.requires_grad for o in outs)


def test_every_torch_tier_without_backward_is_covered():
    """The registry's tiers without a backward are exactly t2 for the three attention algorithms,
    and t2 and t3 for sparse fusion: the test above meets each of them."""
    ids = {(p.values[0], p.values[1]) for p in _grad_calls()}
    assert ids == {("attention", "t2_triton_unfused"), ("neighborhood", "t2_triton_unfused"),
                   ("sparse_attention", "t2_triton_unfused"), ("sparse_fusion", "t2_triton_unfused"),
                   ("sparse_fusion", "t3_triton_fused")}


def test_attention_with_lse_is_forward_only_and_says_so():
    """t3's attention_with_lse has no backward (t3's attention has): inputs that require grad
    are refused while grad is on, naming attention(); detached or under no_grad it runs."""
    import torch

    from tiers.t3_triton_fused.attention import attention_with_lse

    q, k, v = (torch.randn(1, 2, 8, 16, device=DEVICE, requires_grad=i == 1) for i in range(3))
    with pytest.raises(ValueError, match=r"k requires grad, but attention_with_lse has no backward: use attention\(\)"):
        attention_with_lse(q, k, v)
    with torch.no_grad():
        o, lse = attention_with_lse(q, k, v, causal=True)
    o2, lse2 = attention_with_lse(q, k.detach(), v)
    assert not (o.requires_grad or lse.requires_grad or o2.requires_grad)
    assert torch.isfinite(lse).all() and torch.isfinite(lse2).all()
