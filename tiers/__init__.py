"""tiers: attention and sparse kernels, each written four times — NumPy spec, PyTorch,
unfused Triton, fused Triton — with one signature and one test suite."""
__version__ = "0.1.0"
