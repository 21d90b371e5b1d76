"""Neighborhood attention benchmark.

Two suites, one run:
  paper  — Faster Neighborhood Attention's view: speedup of the GEMM-based unfused tier (t2) and
           the fused tier (t3) over the naive PyTorch tier (t1), 1D and 2D, across kernel sizes,
           fp32 and fp16, forward.
  field  — NATTEN's published H100 problems (B=1, 24 heads, D=128, fp16): 1D 32768 tokens window
           2048; 2D 256×256 window 80×80; 3D 30×48×80 window 18×24×24; t3 beside dense SDPA
           (cuDNN, FLASH) and FlexAttention given the same neighbourhood mask; forward and
           forward+backward.
Useful FLOPs count only neighbour pairs: 4·B·H·D·Σ_q |N(q)| (3.5× that for forward+backward).
"""
from __future__ import annotations

import math

import numpy as np

from tiers.bench.common import anchor_call, environment, measure, measure_ceilings, write_rows
from tiers.neighborhood_windows import axis_windows, is_neighbor

FIELD = [
    dict(case="1d_32768_w2048", spatial=(32768,), kernel=(2048,)),
    dict(case="2d_256x256_w80x80", spatial=(256, 256), kernel=(80, 80)),
    dict(case="3d_30x48x80_w18x24x24", spatial=(30, 48, 80), kernel=(18, 24, 24)),
]
PAPER = [dict(case=f"1d_8192_k{k}", spatial=(8192,), kernel=(k,)) for k in (7, 31, 63, 127)] + \
        [dict(case=f"2d_64x64_k{k}", spatial=(64, 64), kernel=(k, k)) for k in (3, 7, 13, 21)]
FIELD_PROVIDERS = ("t3_triton_fused", "t2_triton_unfused", "flex", "sdpa_cudnn", "sdpa_flash")
PAPER_PROVIDERS = ("t1_torch", "t2_triton_unfused", "t3_triton_fused")


def neighbor_pairs(spatial, kernel, stride=None, dilation=None, causal=None) -> int:
    """Σ over queries of the neighbourhood size (product of per-axis window sizes)."""
    r = len(spatial)
    total = 1
    for L, K, s, d, c in zip(spatial, kernel, stride or (1,) * r, dilation or (1,) * r, causal or (False,) * r):
        _, lo, hi = axis_windows(L, K, d, s, c)
        total *= int((hi - lo).sum())
    return total


def flex_na_mask(spatial, kernel):
    """FlexAttention block mask for the same neighbourhoods, from the shared window formula."""
    import torch
    from torch.nn.attention.flex_attention import create_block_mask

    strides = [int(np.prod(spatial[a + 1:])) for a in range(len(spatial))]

    def mask_mod(b, h, qi, ki):
        ok = qi >= 0
        for a, (L, K) in enumerate(zip(spatial, kernel)):
            ok = ok & is_neighbor((qi // strides[a]) % L, (ki // strides[a]) % L, L, K, 1, 1, False, xp=torch)
        return ok
    N = int(np.prod(spatial))
    return create_block_mask(mask_mod, None, None, N, N, device="cuda", _compile=True)


def _na_call(tier, rank, kernel):
    from tiers import registry
    f = registry.get("neighborhood", tier, f"na{rank}d")
    return lambda q, k, v: f(q, k, v, kernel)


def _inputs(B, spatial, H, D, dtype, seed):
    import torch
    g = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(B, *spatial, H, D, device="cuda", dtype=dtype, generator=g) for _ in range(3)]


def _heads_first(x):
    """[B, *spatial, H, D] -> contiguous [B, H, N, D] for SDPA and FlexAttention."""
    B, H, D = x.shape[0], x.shape[-2], x.shape[-1]
    return x.reshape(B, -1, H, D).transpose(1, 2).contiguous()


def run(suites=("paper", "field"), modes=("fwd", "fwd_bwd"), out_dir=None, progress=True, append=False,
        field_cases=None):
    import torch
    from tqdm import tqdm

    if not torch.cuda.is_available():
        raise SystemExit("the neighborhood benchmark needs a CUDA GPU; `python -m tiers figures` redraws recorded data")
    env = environment()
    ceilings = measure_ceilings()
    todo = []
    if "paper" in suites:
        todo += [("paper", c, dt, "fwd", p) for c in PAPER for dt in ("float32", "float16") for p in PAPER_PROVIDERS]
    if "field" in suites:
        cases = [c for c in FIELD if field_cases is None or c["case"] in field_cases]
        todo += [("field", c, "float16", m, p) for c in cases for m in modes for p in FIELD_PROVIDERS
                 if not (p == "t2_triton_unfused" and m == "fwd_bwd")]
    rows, masks = [], {}
    bar = tqdm(todo, disable=not progress, desc="neighborhood")
    for suite, case, dtype, mode, prov in bar:
        bar.set_postfix_str(f"{case['case']} {prov} {dtype} {mode}")
        spatial, kernel = case["spatial"], case["kernel"]
        rank = len(spatial)
        B, H, D = (1, 24, 128) if suite == "field" else (2, 8, 64)
        flops = 4 * B * H * D * neighbor_pairs(spatial, kernel) * (3.5 if mode == "fwd_bwd" else 1.0)
        row = dict(suite=suite, case=case["case"], rank=rank, spatial="x".join(map(str, spatial)),
                   kernel="x".join(map(str, kernel)), B=B, H=H, D=D, dtype=dtype, mode=mode, provider=prov)
        if prov == "t2_triton_unfused":  # fp32 weights [B, H, N, Kmax] must fit beside everything else
            need = 4 * B * H * int(np.prod(spatial)) * int(np.prod(kernel))
            if need > 0.8 * torch.cuda.get_device_properties(0).total_memory:
                rows.append(dict(row, ms=math.nan, useful_tflops=math.nan, peak_mem_mb=math.nan,
                                 status=f"not run: its weights need {need / 2**30:.0f} GiB"))
                continue
        q, k, v = _inputs(B, spatial, H, D, getattr(torch, dtype), seed=len(rows))
        if prov in ("t1_torch", "t2_triton_unfused", "t3_triton_fused"):
            call, inputs = _na_call(prov, rank, kernel), [q, k, v]
        else:
            if prov == "flex" and case["case"] not in masks:
                masks[case["case"]] = flex_na_mask(spatial, kernel)
            call, inputs = anchor_call(prov, masks.get(case["case"])), [_heads_first(x) for x in (q, k, v)]
        row.update(measure(call, inputs, mode))
        row["useful_tflops"] = flops / row["ms"] / 1e9
        if suite == "field" and mode == "fwd" and prov == "t3_triton_fused" and row["status"] == "ok":
            row["rel_err_vs_flex"] = _agreement(call, q, k, v, spatial, kernel, masks)
        rows.append(row)
        q = k = v = inputs = None
        torch.cuda.empty_cache()
    paths = write_rows(rows, "neighborhood", env, out_dir, extra={"ceilings": ceilings}, append=append,
                       case_keys=("suite", "case", "dtype", "mode", "provider"))
    return env, ceilings, rows, paths


def _agreement(call, q, k, v, spatial, kernel, masks):
    """‖t3 − Flex‖ / ‖Flex‖ on the benchmark inputs (both fp16, fp32 accumulation)."""
    import torch
    key = "x".join(map(str, spatial)) + "/" + "x".join(map(str, kernel))
    if key not in masks:
        masks[key] = flex_na_mask(spatial, kernel)
    with torch.no_grad():
        ours = _heads_first(call(q, k, v)).float()
        ref = anchor_call("flex", masks[key])(*(_heads_first(x) for x in (q, k, v))).float()
    return float((ours - ref).norm() / ref.norm())


def summary(rows) -> str:
    lines = []
    by = {}
    for r in rows:
        by.setdefault((r["suite"], r["case"], r["dtype"], r["mode"]), {})[r["provider"]] = r
    for (suite, case, dtype, mode), cells in sorted(by.items()):
        base = cells.get("t1_torch" if suite == "paper" else "sdpa_cudnn", {}).get("ms", math.nan)
        parts = [f"{p}: {c['ms']:.3f} ms ({base / c['ms']:.2f}x, {c['useful_tflops']:.0f} TF/s)"
                 if c["status"] == "ok" else f"{p}: {c['status'][:20]}" for p, c in cells.items()]
        lines.append(f"{suite:5} {case:24} {dtype:8} {mode:7} | " + " | ".join(parts))
    return "\n".join(lines)
