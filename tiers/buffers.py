"""Outputs of the torch tiers. Allocation for the Triton tiers: with TIERS_POISON=1 (set by the test suite) every
fresh output is filled with NaN before the kernel runs, so an element a kernel forgets to
write fails the comparison instead of passing by luck. `poisoned` overrides the variable inside
a block: the benchmarks check a call with poisoned outputs and time calls without the fill,
which is part of the check, not of the kernel's cost. Sparse factors (sparse fusion's ILU(0)
and IC(0), t1–t3) as torch sparse CSR tensors: sparse_csr."""
import contextlib
import os
import warnings

_FORCED = None
_CSR_NOTICED = []


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


def sparse_csr(crow, col, values, size):
    """A torch sparse CSR tensor over index arrays a tier built itself, so without torch's
    invariant checks (opting out also silences their warning). torch's one-off "sparse CSR
    support is in beta" notice is silenced on the first call; the later ones skip the warnings
    filter, which would cost every call host time (torch gives the notice once per process)."""
    import torch

    def make():
        return torch.sparse_csr_tensor(crow, col, values, size=size, check_invariants=False)

    if _CSR_NOTICED:
        return make()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        out = make()
    _CSR_NOTICED.append(True)
    return out
