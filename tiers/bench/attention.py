"""Dense attention benchmark: t1, t2, t3 beside SDPA (FLASH, CUDNN backends) and FlexAttention.

Shapes follow FlashAttention-2's speed plots: batch·length = 16K tokens, hidden 2048
(H = 2048 / D), fp16. FLOPs: 4·B·H·Lq·Lk·D forward, halved when causal; backward is 2.5×
the forward, so forward+backward counts 3.5×.
"""
from __future__ import annotations

import math

from tiers.bench.common import environment, measure_ceilings, raise_dynamo_limits, time_ms, write_rows

PROVIDERS = ("t1_torch", "t2_triton_unfused", "t3_triton_fused", "sdpa_flash", "sdpa_cudnn", "flex")
FORWARD_ONLY = {"t2_triton_unfused"}


def flops(B, H, L, D, causal, mode):
    f = 4 * B * H * L * L * D * (0.5 if causal else 1.0)
    return f * (3.5 if mode == "fwd_bwd" else 1.0)


def _provider_fn(name, causal):
    """A callable (q, k, v) -> out for each provider, or None when unavailable here."""
    import torch
    import torch.nn.functional as F

    if name in ("t1_torch", "t2_triton_unfused", "t3_triton_fused"):
        from tiers import registry
        f = registry.get("attention", name)
        return lambda q, k, v: f(q, k, v, causal=causal)
    if name.startswith("sdpa_"):
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backend = {"sdpa_flash": SDPBackend.FLASH_ATTENTION, "sdpa_cudnn": SDPBackend.CUDNN_ATTENTION}[name]

        def run(q, k, v):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return run
    if name == "flex":
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        raise_dynamo_limits()
        compiled = torch.compile(flex_attention, dynamic=False)
        masks = {}

        def run(q, k, v):
            if not causal:
                return compiled(q, k, v)
            key = (q.shape[2], k.shape[2])
            if key not in masks:
                masks[key] = create_block_mask(lambda b, h, i, j: i >= j, None, None, key[0], key[1],
                                               device=q.device)
            return compiled(q, k, v, block_mask=masks[key])
        return run
    raise KeyError(name)


def _chosen_tiles(mode):
    """The tiles the autotuner picked for the last t3 call (forward, or forward and both backward kernels)."""
    from tiers.t3_triton_fused import attention as t3

    tuned = [t3._attn_fwd_tuned] + ([t3._bwd_dkdv_tuned, t3._bwd_dq_tuned] if mode == "fwd_bwd" else [])
    return " | ".join(str(getattr(k, "best_config", "")) for k in tuned)


def cases(lengths, head_dims, tokens=16384, hidden=2048):
    for D in head_dims:
        for L in lengths:
            for causal in (False, True):
                yield dict(B=max(1, tokens // L), H=hidden // D, L=L, D=D, causal=causal)


def run(lengths=(1024, 2048, 4096, 8192, 16384), head_dims=(64, 128), modes=("fwd", "fwd_bwd"),
        providers=PROVIDERS, dtype="float16", out_dir=None, progress=True, append=False):
    import torch
    from tqdm import tqdm

    if not torch.cuda.is_available():
        raise SystemExit("the attention benchmark needs a CUDA GPU; `python -m tiers figures` redraws recorded data")
    env = environment()
    ceilings = measure_ceilings()
    dt = getattr(torch, dtype)
    todo = [(c, m, p) for c in cases(lengths, head_dims) for m in modes for p in providers
            if not (m == "fwd_bwd" and p in FORWARD_ONLY)]
    rows, fns = [], {}
    bar = tqdm(todo, disable=not progress, desc="attention")
    for case, mode, prov in bar:
        bar.set_postfix_str(f"{prov} L={case['L']} D={case['D']} {'causal' if case['causal'] else 'full'} {mode}")
        B, H, L, D, causal = case["B"], case["H"], case["L"], case["D"], case["causal"]
        row = dict(case, mode=mode, provider=prov, dtype=dtype, ms=math.nan, tflops=math.nan,
                   peak_mem_mb=math.nan, rel_err_vs_flash=math.nan, status="ok")
        try:
            fn = fns.setdefault((prov, causal), _provider_fn(prov, causal))
            gen = torch.Generator(device="cuda").manual_seed(L + D)
            q, k, v = (torch.randn(B, H, L, D, device="cuda", dtype=dt, generator=gen,
                                   requires_grad=mode == "fwd_bwd") for _ in range(3))
            if mode == "fwd":
                with torch.no_grad():
                    out = fn(q, k, v)
                    ref = _provider_fn("sdpa_flash", causal)(q, k, v)
                    row["rel_err_vs_flash"] = float((out.float() - ref.float()).norm() / ref.float().norm())
                    del out, ref
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                    base = torch.cuda.memory_allocated()
                    fn(q, k, v)
                    torch.cuda.synchronize()
                    row["peak_mem_mb"] = (torch.cuda.max_memory_allocated() - base) / 2**20
                    ms = time_ms(lambda: fn(q, k, v))
            else:
                do = torch.randn_like(q)

                def step():
                    q.grad = k.grad = v.grad = None
                    fn(q, k, v).backward(do)
                ms = time_ms(step)
            row["ms"] = ms
            row["gemm_ceiling_tflops"] = ceilings["gemm_fp16_tflops"]
            if prov == "t3_triton_fused":
                row["config"] = _chosen_tiles(mode)
            row["tflops"] = flops(B, H, L, D, causal, mode) / ms / 1e9
        except torch.cuda.OutOfMemoryError:
            row["status"] = "oom"
        except Exception as e:  # an anchor missing from this torch build is recorded, not fatal
            row["status"] = f"error: {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
        finally:
            q = k = v = None
            torch.cuda.empty_cache()
        rows.append(row)
    paths = write_rows(rows, "attention", env, out_dir, extra={"ceilings": ceilings}, append=append,
                       case_keys=("provider", "mode", "dtype", "B", "H", "L", "D", "causal"))
    return env, ceilings, rows, paths


def summary(rows, ceilings) -> str:
    """A table: TFLOP/s per provider for each case, and t3's ratio to FLASH and CUDNN."""
    by = {}
    for r in rows:
        by.setdefault((r["D"], r["L"], r["causal"], r["mode"]), {})[r["provider"]] = r
    provs = [p for p in PROVIDERS if any(p in v for v in by.values())]
    head = f"{'D':>4} {'L':>6} {'causal':>6} {'mode':>7} " + " ".join(f"{p[:10]:>10}" for p in provs) + \
        "   t3/flash t3/cudnn"
    lines = [f"TFLOP/s ({'fp16 GEMM ceiling %.0f TFLOP/s' % ceilings['gemm_fp16_tflops']})", head]
    for key in sorted(by):
        cells = by[key]
        vals = [cells[p]["tflops"] if p in cells and cells[p]["status"] == "ok" else math.nan for p in provs]
        t3 = cells.get("t3_triton_fused", {}).get("tflops", math.nan)
        fl = cells.get("sdpa_flash", {}).get("tflops", math.nan)
        cu = cells.get("sdpa_cudnn", {}).get("tflops", math.nan)
        lines.append(f"{key[0]:>4} {key[1]:>6} {str(key[2]):>6} {key[3]:>7} " +
                     " ".join(f"{v:10.1f}" for v in vals) + f"   {t3 / fl:8.2f} {t3 / cu:8.2f}")
    return "\n".join(lines)
