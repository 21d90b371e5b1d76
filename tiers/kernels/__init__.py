"""Reusable Triton building blocks (a batched GEMM, a row softmax) that the unfused tier
composes stage by stage, the way a library of kernels is used."""
