"""Which algorithm exists in which tier. Tests, benchmarks and notebooks are driven from here,
so adding a tier or an algorithm adds its tests."""
from __future__ import annotations

import importlib
from dataclasses import dataclass

TIERS = ("t0_numpy", "t1_torch", "t2_triton_unfused", "t3_triton_fused")


@dataclass(frozen=True)
class Algorithm:
    name: str          # module name inside each tier folder
    entry: str         # function name inside that module
    tiers: tuple       # tiers that implement it
    backward: tuple    # tiers whose output supports autograd backward
    paper: str


ALGORITHMS = {
    "attention": Algorithm(
        name="attention",
        entry="attention",
        tiers=TIERS,
        backward=("t1_torch", "t3_triton_fused"),
        paper="Dao, FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning (2023)",
    ),
}


def get(algorithm: str, tier: str):
    """The callable `tiers.<tier>.<algorithm>.<entry>`, imported on first use."""
    alg = ALGORITHMS[algorithm]
    if tier not in alg.tiers:
        raise KeyError(f"{algorithm} has no {tier} tier (has: {', '.join(alg.tiers)})")
    module = importlib.import_module(f"tiers.{tier}.{alg.name}")
    return getattr(module, alg.entry)

