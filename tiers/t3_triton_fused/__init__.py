"""Tier 3: one fused Triton kernel per algorithm, with backward where training needs it."""

