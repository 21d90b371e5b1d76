"""Shared test helpers: which dtypes each tier is tested in on this machine, and conversions."""
import numpy as np

from tests.conftest import DEVICE


def dtypes_for(tier: str) -> list[str]:
    if tier == "t0_numpy":
        return ["float64", "float32"]
    if tier == "t1_torch":
        return ["float64", "float32"] + (["float16", "bfloat16"] if DEVICE == "cuda" else [])
    # Triton tiers: the interpreter runs float32 (and float16, emulated by NumPy);
    # on a GPU every tensor-core dtype
    return ["float32", "float16", "bfloat16"] if DEVICE == "cuda" else ["float32", "float16"]


def to_tier(x: np.ndarray, tier: str, dtype: str, requires_grad=False):
    if tier == "t0_numpy":
        return x.astype(dtype)
    import torch

    t = torch.tensor(x, dtype=getattr(torch, dtype), device=DEVICE)
    return t.requires_grad_(requires_grad)


def randn(rng, *shape):
    return rng.standard_normal(shape)
