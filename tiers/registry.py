"""Which algorithm exists in which tier. Tests, benchmarks and notebooks are driven from here,
so adding a tier or an algorithm adds its tests."""
from __future__ import annotations

import importlib
from dataclasses import dataclass

TIERS = ("t0_numpy", "t1_torch", "t2_triton_unfused", "t3_triton_fused")


@dataclass(frozen=True)
class Algorithm:
    name: str          # module name inside each tier folder
    entries: tuple     # public functions of that module, same signature in every tier
    tiers: tuple       # tiers that implement it
    backward: tuple    # tiers whose output supports autograd backward
    paper: str


ALGORITHMS = {
    "attention": Algorithm(
        name="attention",
        entries=("attention",),
        tiers=TIERS,
        backward=("t1_torch", "t3_triton_fused"),
        paper="Dao, FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning (2023)",
    ),
    "neighborhood": Algorithm(
        name="neighborhood",
        entries=("na1d", "na2d", "na3d"),
        tiers=TIERS,
        backward=("t1_torch", "t3_triton_fused"),
        paper="Hassani et al., Faster Neighborhood Attention: Reducing the O(n^2) Cost of Self Attention "
              "at the Threadblock Level (NeurIPS 2024)",
    ),
    "sparse_attention": Algorithm(
        name="sparse_attention",
        entries=("sparse_attention",),
        tiers=TIERS,
        backward=("t1_torch", "t3_triton_fused"),
        paper="Gupta et al., SPLAT: A Framework for Optimised GPU Code-Generation for SParse reguLar "
              "ATtention (2024)",
    ),
    "sparse_fusion": Algorithm(
        name="sparse_fusion",
        entries=("sptrsv_spmv", "spmv_sptrsv", "sptrsv_sptrsv", "spilu0_sptrsv", "spic0_sptrsv"),
        tiers=TIERS,
        backward=("t1_torch",),         # with respect to the vector (t2/t3 refuse one that requires grad)
        paper="Cheshmi, Strout, Mehri Dehnavi, Runtime Composition of Iterations for Fusing Loop-Carried "
              "Sparse Dependence (SC'23)",
    ),
}


def get(algorithm: str, tier: str, entry: str | None = None):
    """The callable `tiers.<tier>.<algorithm>.<entry>` (default: the first entry), imported on first use."""
    alg = ALGORITHMS[algorithm]
    if tier not in alg.tiers:
        raise KeyError(f"{algorithm} has no {tier} tier (has: {', '.join(alg.tiers)})")
    entry = entry or alg.entries[0]
    if entry not in alg.entries:
        raise KeyError(f"{algorithm} has no entry {entry!r} (has: {', '.join(alg.entries)})")
    module = importlib.import_module(f"tiers.{tier}.{alg.name}")
    return getattr(module, entry)

