"""Tier 2: Triton kernels launched one stage at a time, intermediates written to memory."""

