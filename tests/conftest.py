"""Test-wide setup. Must run before triton is imported anywhere:
- without a GPU, Triton kernels run in the interpreter on CPU tensors;
- every Triton output buffer is poisoned with NaN, so unwritten elements fail;
- the fused tier uses its fixed tiles rather than autotuning each test shape.
"""
import os

import pytest


def _has_cuda() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


if not _has_cuda():
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("TIERS_POISON", "1")
# fixed tiles per head dim: autotuning every test shape would take the GPU pass minutes
os.environ.setdefault("TIERS_AUTOTUNE", "0")

DEVICE = "cuda" if _has_cuda() else "cpu"


def _cache_interpreter_builtins():
    """Triton's interpreter re-patches triton.language on every call of a @triton.jit helper from
    a kernel, and most of that is inspect.getmembers over the whole module each time: over half of
    a sync-free kernel's interpreted time (cProfile, triton 3.9). Listing each package's builtins
    once and patching the same names the same way leaves what runs unchanged. Skipped where the
    interpreter's internals differ from what this expects."""
    import inspect

    import triton.language as tl
    from triton.runtime import interpreter as interp

    patch_attr = getattr(interp, "_patch_attr", None)
    original = getattr(interp, "_patch_builtin", None)
    if patch_attr is None or original is None or list(inspect.signature(original).parameters) != [
            "pkg", "builder", "scope"]:
        return
    names = {}

    def patch_builtin(pkg, builder, scope):
        if id(pkg) not in names:
            names[id(pkg)] = (pkg, [n for n, m in inspect.getmembers(pkg) if tl.core.is_builtin(m)])
        listed = names[id(pkg)][1]
        if listed and not tl.core.is_builtin(getattr(pkg, listed[0])):
            return      # patched already: a package's builtins are patched, and restored, all together
        for name in listed:
            member = getattr(pkg, name)
            if tl.core.is_builtin(member):
                patch_attr(pkg, name, member, builder, scope)

    interp._patch_builtin = patch_builtin


if DEVICE == "cpu":
    _cache_interpreter_builtins()

if os.environ.get("PYTEST_XDIST_WORKER") and DEVICE == "cpu":
    # the README runs one xdist worker per core: more torch threads per worker would only contend
    import torch
    torch.set_num_threads(1)


@pytest.fixture
def device():
    return DEVICE
