"""Tier 1: vectorized PyTorch (CPU or CUDA); autograd works."""

