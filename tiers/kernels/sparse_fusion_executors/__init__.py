"""The kernels of t3's sparse fusion, one module per executor, and what they share: how the
sync-free executors order their blocks (tickets) and launch (launch). The pair functions, the
choice of executor and of its shape, and `prepare` are tiers/t3_triton_fused/sparse_fusion.py,
which reads top to bottom as the overview."""
