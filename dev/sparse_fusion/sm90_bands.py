"""Compile t3's bands kernel for sm_90 on a CPU, as prepare(..., executor="bands") would launch it
on the benchmark matrices, and print registers, stack (spills) and SASS instructions.

    python dev/sparse_fusion/sm90_bands.py OUT_DIR [matrix:pair[:float32],...]

needs a Triton 3.6 environment (sm90_registers.py's) and the repository on PYTHONPATH.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from sm90_registers import compile_sm90, usage  # noqa: E402

from tiers import sparse_dags as dags  # noqa: E402
from tiers.bench import sparse_fusion as bench  # noqa: E402
from tiers.kernels.sparse_fusion_executors import bands  # noqa: E402
from tiers.kernels.sparse_rows import SENTINEL  # noqa: E402

DEFAULT = ",".join(f"{m}:{p}" for m in ("poisson3d27", "poisson3d", "poisson2d") for p in bands.PAIRS)


def main(out, cases=DEFAULT):
    os.makedirs(out, exist_ok=True)
    for case in cases.split(","):
        name, pair, *dt = case.split(":")
        dtype = getattr(torch, dt[0]) if dt else torch.float64
        mats = [dags.csr(M) for M in bench.operands(pair, bench.make_matrix(name, bench.MATRICES[name][0]))]
        plan = bands.band_plan(pair, mats)
        dev = bands.device_bands(plan, bands.pair_values(mats, dtype, "cpu"), bands.PREFETCH)
        (C1, K1), (C2, K2) = dev.metas
        X = torch.empty(3, dtype=bands.SENTINEL_BITS[dtype])
        meta = dict(LANES=dev.lanes, C1=C1, K1=K1, C2=C2, K2=K2, PF=bands.PREFETCH, SENT=SENTINEL[dtype], SLEEP=bands.BAND_NAP,
                    num_warps=bands.band_warps(dev.lanes))
        k = compile_sm90(bands._bands, (X, *dev.tables[0], *dev.tables[1], 1, 2), meta)
        path = os.path.join(out, f"bands_{name}_{pair}_{str(dtype)[6:]}")
        regs, sass = usage(k, path + ".cubin")
        print(case, {k: v for k, v in meta.items() if k != "SENT"}, "bands", dev.P, regs, "SASS", sass, flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
