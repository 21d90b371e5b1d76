"""Output allocation for the Triton tiers. With TIERS_POISON=1 (set by the test suite) every
fresh output is filled with NaN before the kernel runs, so an element a kernel forgets to
write fails the comparison instead of passing by luck."""
import os


def poisoning() -> bool:
    return os.environ.get("TIERS_POISON", "0") not in ("", "0")


def empty(shape, *, dtype, device):
    import torch

    out = torch.empty(shape, dtype=dtype, device=device)
    if poisoning():
        out.fill_(float("nan"))
    return out


def empty_like(x):
    return empty(x.shape, dtype=x.dtype, device=x.device)
