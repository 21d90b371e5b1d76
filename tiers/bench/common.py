"""What every benchmark shares: the environment tag, the timer, the measured ceilings, the writer."""
from __future__ import annotations

import csv
import datetime as _dt
import json
import platform
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parents[2] / "figures" / "data"


def environment() -> dict:
    import torch
    import triton

    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else platform.processor() or "cpu"
    return {
        "device": gpu,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda or "",
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d"),
    }


def time_ms(fn, *, warmup=25, rep=100) -> float:
    """Median milliseconds of fn() by CUDA events (triton.testing.do_bench), with fresh outputs not
    poisoned (buffers.poisoned): the NaN fill belongs to a check, not to what is timed."""
    import triton.testing

    from tiers.buffers import poisoned

    with poisoned(False):
        return float(triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))


def measure_ceilings() -> dict:
    """The fp16 matrix-product rate and the device-copy bandwidth of this GPU, measured now."""
    import torch

    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    gemm_ms = time_ms(lambda: a @ b)
    src = torch.randn(256 * 2**20, device="cuda")  # 1 GiB
    dst = torch.empty_like(src)
    copy_ms = time_ms(lambda: dst.copy_(src))
    return {"gemm_fp16_tflops": 2 * n**3 / gemm_ms / 1e9,
            "copy_TBps": 2 * src.numel() * 4 / copy_ms / 1e9}


def slug(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text).strip("_").lower()


def write_rows(rows: list[dict], name: str, env: dict, out_dir: Path | None = None, extra: dict | None = None,
               append: bool = False, case_keys: tuple = ()):
    """Write rows as CSV and JSON named <name>_<device>_<date>; returns the two paths.

    With `append`, rows already in that file whose `case_keys` values differ from every new
    row are kept, so one benchmark can be measured over several device calls."""
    out_dir = Path(out_dir or DATA_DIR)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{name}_{slug(env['device'])}_{env['date']}"
    csv_path, json_path = out_dir / f"{stem}.csv", out_dir / f"{stem}.json"
    if append and json_path.exists():  # keep earlier rows of other cases, replace re-measured ones
        new_keys = {tuple(r.get(k) for k in case_keys) for r in rows}
        old = json.loads(json_path.read_text())["rows"]
        rows = [r for r in old if tuple(r.get(k) for k in case_keys) not in new_keys] + rows
    keys = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with open(csv_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    with open(json_path, "w") as f:
        json.dump({"environment": env, **(extra or {}), "rows": rows}, f, indent=1)
    return csv_path, json_path


def load_rows(name: str, data_dir: Path | None = None) -> tuple[dict, list[dict]]:
    """Newest recorded JSON for benchmark `name` in a folder, or the recorded file `data_dir` names:
    (header, rows). Files of one day are taken in name order, so the choice never depends on the
    file system's listing. Raises FileNotFoundError."""
    data_dir = Path(data_dir or DATA_DIR)
    if data_dir.is_file():
        files = [data_dir]
    else:
        files = sorted(data_dir.glob(f"{name}_*.json"), key=lambda p: (p.stem.rsplit("_", 1)[-1], p.name))
    if not files:
        raise FileNotFoundError(f"no recorded data for {name!r} in {data_dir}")
    blob = json.loads(files[-1].read_text())
    rows = blob.pop("rows")
    return blob, rows


def measure(call, inputs, mode: str) -> dict:
    """Time call(*inputs) ('fwd') or call(*inputs).backward(dO) ('fwd_bwd') with do_bench; for the
    forward also the peak device memory one call allocates beyond its inputs. Out-of-memory and
    other failures are recorded in 'status', never raised: one missing provider must not lose a run."""
    import math

    import torch

    res = {"ms": math.nan, "peak_mem_mb": math.nan, "status": "ok"}
    try:
        if mode == "fwd":
            with torch.no_grad():
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                call(*inputs)
                torch.cuda.synchronize()
                res["peak_mem_mb"] = (torch.cuda.max_memory_allocated() - base) / 2**20
                res["ms"] = time_ms(lambda: call(*inputs))
        else:
            for x in inputs:
                x.requires_grad_(True)
            do = torch.randn_like(call(*inputs))

            def step():
                for x in inputs:
                    x.grad = None
                call(*inputs).backward(do)
            res["ms"] = time_ms(step)
    except torch.cuda.OutOfMemoryError:
        res["status"] = "oom"
    except Exception as e:  # recorded, so a provider missing from this build does not end the run
        res["status"] = f"error: {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
    finally:
        for x in inputs:
            x.grad = None
            x.requires_grad_(False)
        torch.cuda.empty_cache()
    return res


def raise_dynamo_limits():
    """FlexAttention recompiles per shape and grad mode; past Dynamo's default limit of 8 it
    silently falls back to an unfused implementation, which would not be the anchor."""
    import torch._dynamo

    for knob in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, knob):
            setattr(torch._dynamo.config, knob, 1024)


def anchor_call(name: str, block_mask=None):
    """(q, k, v) -> out for an anchor on [B, H, L, D] inputs: FlexAttention given `block_mask`,
    or dense SDPA pinned to its FLASH or cuDNN backend."""
    import torch
    import torch.nn.functional as F

    if name == "flex":
        from torch.nn.attention.flex_attention import flex_attention
        raise_dynamo_limits()
        compiled = torch.compile(flex_attention, dynamic=False)
        return lambda q, k, v: compiled(q, k, v, block_mask=block_mask)
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backend = {"sdpa_flash": SDPBackend.FLASH_ATTENTION, "sdpa_cudnn": SDPBackend.CUDNN_ATTENTION}[name]

    def dense(q, k, v):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v)
    return dense
