"""SPLAT sparse-attention benchmark: t1, t2, t3 beside dense SDPA (cuDNN, FLASH) and
FlexAttention given the same mask, fp16, [B, H, L, D] = [4, 16, L, D]. FlexAttention runs twice:
"flex" with the mask written from the pattern's definition (definition_mask_mod), "flex_acsr"
with the mask read from the ACSR segments (acsr_mask_mod), the same mask evaluated more slowly.

Patterns (tiers/acsr.py), as in the issue's H100 anchors at L = 8192:
  dilated   dilated_window(L, 512, 4)       Longformer  global_local(L, 512, 64)
  strided   strided(L, local=128, stride=128)   blocked  blocked(L, 256)
Suites: `main` — L = 8192, D 64 and 128, forward and forward+backward, every provider;
`sweep` — forward at L = 2K, 4K and 16K, D 64 and 128, every provider.
Useful FLOPs count allowed pairs only: 4·B·H·D·nnz (3.5× for forward+backward); the FLOP bound
of a pattern over dense attention is L² / nnz. A kernel must also move its tensors at least once
(q, k, v read and O written: 4·B·H·L·D elements; the backward reads q, k, v, O and dO again and
writes three gradients: 12 in all for forward+backward), so each row also holds `floor_ms`, the larger of
the useful FLOPs at the measured fp16 GEMM rate and those bytes at the measured copy bandwidth —
what no kernel of that row can beat on this GPU.
"""
from __future__ import annotations

import datetime
import math

from tiers.bench.common import anchor_call, environment, measure, measure_ceilings, write_rows

PATTERNS = {
    "dilated_w512_d4": ("dilated_window", dict(window=512, dilation=4)),
    "strided_l128_s128": ("strided", dict(local=128, stride=128)),
    "longformer_w512_g64": ("global_local", dict(window=512, n_global=64)),
    "blocked_256": ("blocked", dict(block=256)),
}
PROVIDERS = ("t3_triton_fused", "flex", "flex_acsr", "sdpa_cudnn", "sdpa_flash", "t2_triton_unfused", "t1_torch")
# t2 has no backward; t1's (gathered keys, recomputed per chunk) takes seconds a call at L = 8192
FORWARD_ONLY = {"t2_triton_unfused", "t1_torch"}
B, H = 4, 16


def pattern(name, L):
    from tiers.acsr import ACSR

    kind, kw = PATTERNS[name]
    return getattr(ACSR, kind)(L, **kw)


def acsr_mask_mod(p):
    """FlexAttention mask_mod(b, h, i, j) of an ACSR pattern, read from its segments (so the anchor
    is given exactly the pattern the tiers compute)."""
    groups = [(int(g.row0), int(g.row1), [tuple(int(x) for x in s) for s in g.segments])
              for g in p.groups() if g.segments]

    def mask_mod(b, h, i, j):
        ok = i < 0
        for r0, r1, segs in groups:
            in_group = (i >= r0) & (i < r1)
            for a, bs, s, ac, bc in segs:
                off = j - (a * i + bs)
                ok = ok | (in_group & (off >= 0) & (off % s == 0) & (off // s < ac * i + bc))
        return ok
    return mask_mod


def definition_mask_mod(name):
    """FlexAttention mask_mod(b, h, i, j) of benchmark pattern `name` written from its
    constructor's definition (tiers/acsr.py), as a FlexAttention user would write it: a few
    integer comparisons, where acsr_mask_mod loops over the segments. FlexAttention evaluates
    the mask_mod on every partially masked block, so this is the anchor at its fastest ("flex");
    the segment-reading one is kept as "flex_acsr"."""
    kind, kw = PATTERNS[name]
    if kind == "dilated_window":
        reach, d = kw["window"] // 2 * kw["dilation"], kw["dilation"]
        return lambda b, h, i, j: ((i - j) % d == 0) & ((i - j).abs() <= reach)
    if kind == "strided":
        local, stride = kw["local"], kw["stride"]
        return lambda b, h, i, j: (j <= i) & ((i - j < local) | ((i - j) % stride == 0))
    if kind == "global_local":
        half, g = kw["window"] // 2, kw["n_global"]
        return lambda b, h, i, j: ((i - j).abs() <= half) | (i < g) | (j < g)
    if kind == "blocked":
        block = kw["block"]
        return lambda b, h, i, j: i // block == j // block
    raise ValueError(f"no definition mask for pattern kind {kind!r}")


def flex_mask(p, mask_mod=None):
    """FlexAttention's block mask of pattern p, from `mask_mod` (default: read from p's segments)."""
    from torch.nn.attention.flex_attention import create_block_mask

    return create_block_mask(mask_mod or acsr_mask_mod(p), None, None, p.Lq, p.Lk, device="cuda", _compile=True)


def _block_mask(cache, name, p, kind):
    """FlexAttention's block mask of benchmark pattern `name` (instance p), built once per
    (name, L, kind): "flex" from definition_mask_mod, "flex_acsr" from the segments."""
    key = (name, p.Lq, kind)
    if key not in cache:
        cache[key] = flex_mask(p, definition_mask_mod(name) if kind == "flex" else None)
    return cache[key]


def _call(prov, p, block_mask):
    if prov in ("t1_torch", "t2_triton_unfused", "t3_triton_fused"):
        from tiers import registry
        f = registry.get("sparse_attention", prov)
        return lambda q, k, v: f(q, k, v, p)
    return anchor_call("flex" if prov == "flex_acsr" else prov, block_mask)


def todo(suites):
    jobs = []
    if "main" in suites:
        jobs += [("main", name, 8192, D, mode, prov) for name in PATTERNS for D in (64, 128)
                 for mode in ("fwd", "fwd_bwd") for prov in PROVIDERS
                 if not (mode == "fwd_bwd" and prov in FORWARD_ONLY)]
    if "sweep" in suites:
        jobs += [("sweep", name, L, D, "fwd", prov) for D in (64, 128) for name in PATTERNS
                 for L in (2048, 4096, 16384) for prov in PROVIDERS]
    return jobs


def run(suites=("main",), out_dir=None, progress=True, append=False, patterns=None, providers=None,
        modes=("fwd", "fwd_bwd"), reps=1):
    """Every job of `suites` (filtered), measured `reps` times in interleaved rounds — timings on
    the lent GPU drift between minutes — each row holding the median and every sample (ms_reps)."""
    import statistics

    import torch
    from tqdm import tqdm

    if not torch.cuda.is_available():
        raise SystemExit("the sparse-attention benchmark needs a CUDA GPU; `python -m tiers figures` redraws recorded data")
    env = environment()
    ceilings = measure_ceilings()
    jobs = [j for j in todo(suites) if (patterns is None or j[1] in patterns)
            and (providers is None or j[5] in providers) and j[4] in modes]
    rows, masks, pats = {}, {}, {}
    bar = tqdm([(rep, job) for rep in range(reps) for job in jobs], disable=not progress, desc="sparse attention")
    for rep, job in bar:
        suite, name, L, D, mode, prov = job
        bar.set_postfix_str(f"{name} L={L} D={D} {prov} {mode} rep {rep}")
        p = pats.setdefault((name, L), pattern(name, L))
        st = p.stats()
        g = torch.Generator(device="cuda").manual_seed(L + D)
        q, k, v = (torch.randn(B, H, L, D, device="cuda", dtype=torch.float16, generator=g) for _ in range(3))
        call = _call(prov, p, _block_mask(masks, name, p, prov) if prov in ("flex", "flex_acsr") else None)
        res = measure(call, [q, k, v], mode)
        if job not in rows:
            rows[job] = dict(suite=suite, pattern=name, L=L, B=B, H=H, D=D, dtype="float16", mode=mode, provider=prov,
                             nnz=st["nnz"], density=st["density"], flop_bound=1 / st["density"], groups=st["groups"],
                             segments=st["segments"], acsr_bytes=st["metadata_bytes"], csr_bytes=st["csr_bytes"],
                             dense_mask_bytes=st["dense_bytes"], ms_reps=[])
        row = rows[job]
        row["ms_reps"].append(res.pop("ms"))
        row.update(res, ms=statistics.median(row["ms_reps"]))
        # rows of several device calls may share a file (--append): each says when it was measured
        row["measured_utc"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        row["useful_tflops"] = 4 * B * H * D * st["nnz"] * (3.5 if mode == "fwd_bwd" else 1.0) / row["ms"] / 1e9
        row["floor_ms"] = floor_ms(row, ceilings)
        if rep == 0 and mode == "fwd" and prov == "t3_triton_fused" and row["status"] == "ok":
            with torch.no_grad():
                ours = call(q, k, v).float()
                ref = _call("flex", p, _block_mask(masks, name, p, "flex"))(q, k, v).float()
            row["rel_err_vs_flex"] = float((ours - ref).norm() / ref.norm())
        q = k = v = None
        torch.cuda.empty_cache()
        # written after every case, so a run cut short keeps what it measured
        paths = write_rows(list(rows.values()), "sparse_attention", env, out_dir, extra={"ceilings": ceilings},
                           append=append, case_keys=("suite", "pattern", "L", "D", "mode", "provider"))
    return env, ceilings, list(rows.values()), paths


def floor_ms(row, ceilings) -> float:
    """The least time any kernel needs for `row`'s case on the GPU whose `ceilings` were measured:
    its useful FLOPs at the fp16 GEMM rate or its compulsory bytes at the copy bandwidth, whichever
    is longer (module docstring)."""
    B_, H_, L, D = row["B"], row["H"], row["L"], row["D"]
    fwd_bwd = row["mode"] == "fwd_bwd"
    flops = 4 * B_ * H_ * D * row["nnz"] * (3.5 if fwd_bwd else 1.0)
    bytes_ = (12 if fwd_bwd else 4) * B_ * H_ * L * D * 2
    return max(flops / (ceilings["gemm_fp16_tflops"] * 1e9), bytes_ / (ceilings["copy_TBps"] * 1e9))


def recorded_floor_ms(row, ceilings) -> float:
    """A recorded row's floor: as the row holds it (from the ceilings of its own run), else from
    `ceilings` (rows measured before the benchmark recorded floors)."""
    return row.get("floor_ms") or floor_ms(row, ceilings)


def summary(rows) -> str:
    by = {}
    for r in rows:
        by.setdefault((r["suite"], r["pattern"], r["L"], r["D"], r["mode"]), {})[r["provider"]] = r
    lines = []
    for (suite, name, L, D, mode), cells in sorted(by.items()):
        base = cells.get("sdpa_cudnn", {}).get("ms", math.nan)
        parts = [f"{p}: {c['ms']:.3f} ms ({base / c['ms']:.2f}x, {c['useful_tflops']:.0f} TF/s)"
                 if c["status"] == "ok" else f"{p}: {c['status'][:30]}" for p, c in cells.items()]
        first = next(iter(cells.values()))
        floor = f", floor {base / first['floor_ms']:5.1f}x" if "floor_ms" in first else ""
        lines.append(f"{suite:5} {name:20} L={L:<5} D={D:<3} {mode:7} bound {first['flop_bound']:5.1f}x{floor} | "
                     + " | ".join(parts))
    return "\n".join(lines)
