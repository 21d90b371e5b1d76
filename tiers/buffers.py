"""Output allocation for the Triton tiers. With TIERS_POISON=1 (set by the test suite) every
fresh output is filled with NaN before the kernel runs, so an element a kernel forgets to
write fails the comparison instead of passing by luck. `poisoned` overrides the variable inside
a block: the benchmarks check a call with poisoned outputs and time calls without the fill,
which is part of the check, not of the kernel's cost."""
import contextlib
import os

_FORCED = None


def poisoning() -> bool:
    if _FORCED is not None:
        return _FORCED
    return os.environ.get("TIERS_POISON", "0") not in ("", "0")


@contextlib.contextmanager
def poisoned(on: bool):
    """Inside the block fresh outputs are poisoned (on) or not, whatever TIERS_POISON says."""
    global _FORCED
    before, _FORCED = _FORCED, bool(on)
    try:
        yield
    finally:
        _FORCED = before


def empty(shape, *, dtype, device):
    import torch

    out = torch.empty(shape, dtype=dtype, device=device)
    if poisoning():
        out.fill_(float("nan"))
    return out


def empty_like(x):
    return empty(x.shape, dtype=x.dtype, device=x.device)
