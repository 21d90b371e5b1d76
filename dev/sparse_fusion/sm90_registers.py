"""Compile t3's factor-pair kernel for sm_90 on a CPU and print what ptxas made of it.

A developer's tool, not package code: with Triton 3.6 (the lent GPU's; its ptxas and cuobjdump
come in the wheel) and no GPU, compile `_syncfree` as the dataflow executor launches it for a
factor pair — one program per block — on a small matrix of the same shape class, optionally
with register caps (maxnreg), and print registers, stack (spills) and SASS instructions. Kernel
changes that should change nothing can be checked this way before any GPU time is spent, and a
cap's spills seen before it is timed (GRID_REGISTERS' were chosen so).

    python dev/sparse_fusion/sm90_registers.py poisson3d27:8:spilu0_sptrsv:sparse_fusion[:float32][:128:96],...

needs a Triton 3.6 environment (e.g. pip install torch==2.13.0 triton==3.6.0 "numpy<2.3" scipy)
and the repository on PYTHONPATH; `--stamped` compiles dev/sparse_fusion/stamps.py's copy too,
`--fuse-rows=true|false` prepares with that fuse_rows instead of the package's rule,
`--no-late-look` compiles staged rows without their late operands read at their pivots' polls
(t3's looks_late, LATE_LOOKS, on in the package), `--no-short-fetch` without held rows' tables
read in fewer rounds (t3's fetches_short, FETCH_SHORT, on in the package).
"""
import os
import re
import subprocess
import sys

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

import tiers.validation as validation
from tiers import fusion_schedules as fs
from tiers.bench import sparse_fusion as bench
from tiers.t3_triton_fused import sparse_fusion as sf

validation.check_triton_device = lambda *a, **k: None    # CPU tensors stand for the GPU's here
BIN = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
TYPES = {torch.float64: "fp64", torch.float32: "fp32", torch.int32: "i32", torch.int64: "i64", torch.int8: "i8"}


def compile_sm90(fn, args, meta, maxnreg=None):
    """triton.compile of the JIT function fn for sm_90, its non-constexpr arguments typed from
    `args` and then `meta` by name (tensors: pointers; ints: i32; one left out: its default, None,
    a constexpr) and its constexprs from `meta` (one left out: its default)."""
    meta = dict(meta)
    num_warps = meta.pop("num_warps", 1)
    signature, constants, it = {}, {}, iter(args)
    for i, name in enumerate(fn.arg_names):
        if fn.params[i].is_constexpr:
            signature[name], constants[name] = "constexpr", meta.get(name, fn.params[i].default)
            continue
        a = next(it, meta.get(name, fn.params[i].default))
        if a is None:
            signature[name], constants[name] = "constexpr", None
        else:
            signature[name] = "*" + TYPES[a.dtype] if isinstance(a, torch.Tensor) else "i32"
    options = {"num_warps": num_warps, **({"maxnreg": maxnreg} if maxnreg else {})}
    return triton.compile(ASTSource(fn, signature, constants), target=GPUTarget("cuda", 90, 32), options=options)


def usage(kernel, path):
    """(registers and stack as cuobjdump says them, SASS instructions, shared memory in bytes: with
    the registers, what bounds the programs an SM holds)."""
    with open(path, "wb") as f:
        f.write(kernel.asm["cubin"])
    res = subprocess.run([os.path.join(BIN, "cuobjdump"), "--dump-resource-usage", path],
                         capture_output=True, text=True).stdout
    sass = subprocess.run([os.path.join(BIN, "cuobjdump"), "-sass", path], capture_output=True, text=True).stdout
    return (re.search(r"REG:\d+ STACK:\d+", res).group(0),
            sum(1 for line in sass.splitlines() if re.match(r"\s+/\*[0-9a-f]{4,6}\*/", line)),
            f"shared={kernel.metadata.shared}")


def launch_args(run, val, vec, own, extra=()):
    """The package's DATA launch (syncfree_launch), one program per block, without its register
    cap (compile_sm90 takes the cap to try)."""
    args, meta = sf.syncfree_launch(run, val, vec, own)
    meta.pop("maxnreg", None)
    return args + tuple(extra), dict(meta, LOOP=False, NAP=0, STRIDE=False)


def main():
    stamped = "--stamped" in sys.argv
    sf.LATE_LOOKS = "--no-late-look" not in sys.argv
    sf.FETCH_SHORT = "--no-short-fetch" not in sys.argv
    fuse = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--fuse-rows=")]
    if fuse and fuse[0] not in ("true", "false"):
        raise SystemExit(f"--fuse-rows takes true or false, got {fuse[0]!r}")
    fuse_rows = fuse[0] == "true" if fuse else None
    cases = [a for a in sys.argv[1:] if not a.startswith("--")][0].split(",")
    if stamped:
        sys.path.insert(0, os.path.dirname(__file__))
        import stamps
        module = stamps.stamped_module()
    for case in cases:
        parts = case.split(":")
        name, size, pair, kind = parts[:4]
        rest = parts[4:]
        dtype = getattr(torch, rest.pop(0)) if rest and not rest[0].isdigit() else torch.float64
        A = bench.make_matrix(name, int(size))
        mats = bench.operands(pair, A)
        v = (torch.rand(A.shape[0], dtype=torch.float64) + 0.5).to(dtype)
        run = sf.prepare(pair, *mats, like=v, schedule=fs.inspect(pair, *mats, kind=kind), executor="dataflow",
                         fuse_rows=fuse_rows)
        val, own, vec = run.values.clone(), run.values, torch.empty(run.tables.vec_len, dtype=dtype)
        W = run.tables.held(run.block_rows)[0]
        default = sf.register_cap(run.tables, W, True) or None
        for cap in dict.fromkeys([None, default] + [int(c) for c in rest]):
            args, meta = launch_args(run, val, vec, own)
            k = compile_sm90(sf._syncfree, args, meta, cap)
            print(case, "package", f"maxnreg={cap}", *usage(k, "/tmp/sm90_package.cubin"), flush=True)
            if stamped:
                args, meta = launch_args(run, val, vec, own, (torch.zeros(8, dtype=torch.int64),))
                k = compile_sm90(module._syncfree_clk, args, meta, cap)
                print(case, "stamped", f"maxnreg={cap}", *usage(k, "/tmp/sm90_stamped.cubin"), flush=True)


if __name__ == "__main__":
    main()
