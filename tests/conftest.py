"""Test-wide setup. Must run before triton is imported anywhere:
- without a GPU, Triton kernels run in the interpreter on CPU tensors;
- every Triton output buffer is poisoned with NaN, so unwritten elements fail;
- the fused tier uses its fixed tiles rather than autotuning each test shape.
"""
import os

import pytest


def _has_cuda() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


if not _has_cuda():
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("TIERS_POISON", "1")
# fixed tiles per head dim: autotuning every test shape would take the GPU pass minutes
os.environ.setdefault("TIERS_AUTOTUNE", "0")

DEVICE = "cuda" if _has_cuda() else "cpu"

if os.environ.get("PYTEST_XDIST_WORKER") and DEVICE == "cpu":
    # the README runs one xdist worker per core: more torch threads per worker would only contend
    import torch
    torch.set_num_threads(1)


@pytest.fixture
def device():
    return DEVICE
