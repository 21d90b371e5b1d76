"""Compile t3's dataflow kernel for sm_90 on a CPU, as a prepared vector-pair call would launch it.

A developer's tool, not package code: with Triton 3.6 (the lent GPU's) and no GPU, prepare a
vector pair on the bench's matrix, catch the launches _run_dataflow would make (a GPU with
programmatic dependent launches and 132 SMs assumed; the programs an SM holds taken as 8), compile
the kernel's launch for sm_90 and print its registers, spills and SASS instruction count, and
write its SASS, PTX and TTGIR beside OUT. How the compiled loop orders a poll, its check and the
row sums was read this way (figures/data/sums_ab_*: SUMS, sums_each_poll).

    python dev/sparse_fusion/sm90_dataflow.py poisson3d27:64:sptrsv_spmv[:float32][:SUMS] OUT

needs a Triton 3.6 environment (e.g. pip install torch==2.13.0 triton==3.6.0 "numpy<2.3" scipy)
and the repository on PYTHONPATH; SUMS overrides the runner's `sums` (sums_each_poll's choice).
`--stamped` compiles flow_stamps.py's stamped copy of the kernel too (registers, spills,
instructions; written beside OUT as OUT_stamped.*), the check its inline PTX needs before GPU time.
"""
import os
import subprocess
import sys

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

import tiers.validation as validation
from sm90_registers import BIN, TYPES, usage
from tiers import fusion_schedules as fs
from tiers.bench import sparse_fusion as bench
from tiers.kernels.sparse_fusion_executors import launch
from tiers.t3_triton_fused import sparse_fusion as sf


class Caught:
    """Stands for launch.Bound: keeps what a launch would have been given, launches nothing."""
    calls = []

    def __init__(self, kernel, grid, kwargs, varying=None):
        self.kernel, self.grid, self.kwargs = kernel, grid, kwargs

    def __call__(self, *args):
        Caught.calls.append((self.kernel, self.grid, self.kwargs, args))


def compile_sm90(fn, args, meta):
    """triton.compile of fn for sm_90: tensors typed from `args`, ints in `meta` that are not
    constexprs (SPLIT_AT, SHARE0) and such ints left at their defaults as i32, constexprs from
    `meta` or their defaults."""
    meta, sig, const, it = dict(meta), {}, {}, iter(args)
    num_warps = meta.pop("num_warps", 1)
    for p in fn.params:
        if p.is_constexpr:
            sig[p.name], const[p.name] = "constexpr", meta.get(p.name, p.default)
        else:
            a = meta[p.name] if p.name in meta else next(it, None)
            sig[p.name] = "*" + TYPES[a.dtype] if isinstance(a, torch.Tensor) else "i32"
    return triton.compile(ASTSource(fn, sig, const), target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps})


def main():
    stamped = "--stamped" in sys.argv
    case, out = [a for a in sys.argv[1:] if a != "--stamped"]
    name, size, pair, *rest = case.split(":")
    dtype = getattr(torch, rest.pop(0)) if rest and not rest[0].isdigit() else torch.float64
    validation.check_triton_device = lambda *a, **k: None    # CPU tensors stand for the GPU's here
    sf.uses_pdl, sf.interpreting, launch.interpreting = (lambda d: True), (lambda: False), (lambda: False)
    launch._sm_count = lambda d: 132
    sf.Bound = sf.jit_launch = Caught
    A = bench.make_matrix(name, int(size))
    mats = bench.operands(pair, A)
    v = (torch.rand(A.shape[0], dtype=torch.float64) + 0.5).to(dtype)
    run = sf.prepare(pair, *mats, like=v, schedule=fs.inspect(pair, *mats, kind="sparse_fusion"), executor="dataflow")
    run.resident = 8
    if rest:
        run.sums = int(rest[0])
    sf._run_dataflow(run, run.values, torch.empty(run.tables.vec_len, dtype=dtype), v)
    kernel, grid, kwargs, args = next(c for c in Caught.calls if c[0] in (sf._dataflow, sf._flat))
    meta = {k: v for k, v in kwargs.items() if not k.startswith("launch_")}
    print(case, "grid", grid, meta, flush=True)
    k = compile_sm90(kernel, args, meta)
    for ext in ("ptx", "ttgir"):
        with open(f"{out}.{ext}", "w") as f:
            f.write(k.asm[ext])
    print(*usage(k, out + ".cubin"))
    sass = subprocess.run([os.path.join(BIN, "cuobjdump"), "-sass", out + ".cubin"], capture_output=True, text=True)
    with open(out + ".sass", "w") as f:
        f.write(sass.stdout)
    if stamped and kernel is sf._dataflow:
        import flow_stamps
        clk = torch.empty(run.plan[0] * flow_stamps.STAMPS, dtype=torch.int64)
        ks = compile_sm90(flow_stamps.stamped_module()._dataflow_clk, (clk,) + tuple(args), meta)
        print("stamped", *usage(ks, out + "_stamped.cubin"))


if __name__ == "__main__":
    main()
