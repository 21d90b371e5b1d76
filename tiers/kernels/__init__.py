"""Reusable Triton building blocks (a batched GEMM, a row softmax) that the unfused tier
composes stage by stage, the way a library of kernels is used; the rows of sparse fusion that both
Triton tiers run (sparse_rows); and the kernels of the fused tier's sparse-fusion executors
(sparse_fusion_executors/), kept outside tiers/t3_triton_fused/ so that the four tier folders
hold the same modules."""
