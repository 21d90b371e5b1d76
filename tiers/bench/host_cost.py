"""Host time against GPU time of short sparse-attention calls (t3 and FlexAttention).

A call is bound by its host when the Python work and the kernel launches take longer than the
kernels: do_bench then measures part of the host time (its cache flush hides only about as much
host time as the flush takes). Per case this prints and writes
  host_us     host time of one call, from 2000 calls queued back to back without a sync;
  thru_us     wall time of one call in the same loop, after the final sync;
  do_bench    three do_bench medians (ms), as the benchmark takes them;
  graph       two medians of the call replayed from a CUDA graph (ms): the GPU time alone;
and for blocked patterns the parts of t3's host time: validation, the whole _forward, and
Triton's launch of _blocks_fwd with its arguments prepared.

    python -m tiers.bench.host_cost [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import time

CASES = (("blocked_256", 2048), ("blocked_256", 4096), ("dilated_w512_d4", 2048), ("strided_l128_s128", 2048))
B, H, D = 4, 16, 64


def host_us(fn, n=2000):
    """(host µs, wall µs) per call of fn over n calls queued without synchronising."""
    import torch

    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    host = time.perf_counter() - t
    torch.cuda.synchronize()
    return host / n * 1e6, (time.perf_counter() - t) / n * 1e6


def _blocked_parts(q, k, v, p):
    import torch

    import tiers.t3_triton_fused.sparse_attention as sa
    from tiers.kernels.gemm import block_d
    from tiers.t3_triton_fused.attention import LOG2E

    shape = sa.validate_sparse_attention(q, k, v, p, None, tier="t3_triton_fused")
    BM, BN, warps, stages = sa._BLOCKS_FWD[block_d(D)]
    o = torch.empty_like(q)
    lse = torch.empty(B * H, p.Lq, device=q.device, dtype=torch.float32)
    tiles = sa._block_tiles_on(p, BM, q.device)
    args = (q, k, v, o, lse, tiles, shape.scale * LOG2E, p.Lq)
    meta = dict(HEAD_DIM=D, BLOCK_D=block_d(D), IEEE=False, BLOCK_M=BM, BLOCK_N=BN,
                num_warps=warps, num_stages=stages)
    grid = (len(tiles), B * H)
    return {"validate_us": host_us(lambda: sa.validate_sparse_attention(q, k, v, p, None, tier="t3_triton_fused"))[0],
            "forward_us": host_us(lambda: sa._forward(q, k, v, shape, p))[0],
            "launch_us": host_us(lambda: sa._blocks_fwd[grid](*args, **meta))[0]}


def run(out_dir=None):
    import torch
    from triton.testing import do_bench, do_bench_cudagraph

    from tiers.bench import sparse_attention as bsa
    from tiers.bench.common import environment, write_rows

    if not torch.cuda.is_available():
        raise SystemExit("host_cost measures launches on a CUDA GPU")
    env, rows = environment(), []
    for name, L in CASES:
        p = bsa.pattern(name, L)
        q, k, v = (torch.randn(B, H, L, D, device="cuda", dtype=torch.float16) for _ in range(3))
        calls = {"t3": bsa._call("t3_triton_fused", p, None), "flex": bsa._call("flex", p, bsa.flex_mask(p, bsa.definition_mask_mod(name)))}
        row = {"pattern": name, "L": L, "B": B, "H": H, "D": D, "dtype": "float16"}
        with torch.no_grad():
            ref = calls["flex"](q, k, v).float()
            row["rel_err_vs_flex"] = float((calls["t3"](q, k, v).float() - ref).norm() / ref.norm())
            for prov, call in calls.items():
                def fn(call=call):
                    return call(q, k, v)
                row[prov + "_host_us"], row[prov + "_thru_us"] = host_us(fn)
                row[prov + "_do_bench_ms"] = [do_bench(fn, return_mode="median") for _ in range(3)]
                row[prov + "_graph_ms"] = [do_bench_cudagraph(fn, return_mode="median") for _ in range(2)]
            if name.startswith("blocked"):
                row.update(_blocked_parts(q, k, v, p))
        rows.append(row)
        print(json.dumps(row), flush=True)
        paths = write_rows(rows, "host_cost_sparse_attention", env, out_dir)
    print("wrote", *paths)
    return env, rows


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    run(ap.parse_args().out)
