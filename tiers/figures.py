"""Paper-style figures, drawn from the measured rows in figures/data/ (no GPU needed).

Each function returns a matplotlib Figure; `draw_all` writes every figure under figures/.
The notebooks call the same functions, so a figure in a notebook is the figure in the repo.
"""
from __future__ import annotations

from pathlib import Path

from tiers.bench.common import DATA_DIR, load_rows

FIG_DIR = DATA_DIR.parent
STYLE = {  # provider: (label, color, marker)
    "t1_torch": ("t1 PyTorch", "#9e9e9e", "v"),
    "t2_triton_unfused": ("t2 Triton unfused", "#ff9800", "s"),
    "t3_triton_fused": ("t3 Triton fused (ours)", "#d62728", "o"),
    "sdpa_flash": ("SDPA FLASH", "#1f77b4", "^"),
    "sdpa_cudnn": ("SDPA cuDNN", "#2ca02c", "D"),
    "flex": ("FlexAttention", "#9467bd", "P"),
}


def _title(header):
    env = header["environment"]
    return f"{env['device']} · torch {env['torch']} · triton {env['triton']} · {env['date']}"


def attention_throughput(data_dir=None):
    """TFLOP/s against sequence length for every provider: forward (top) and forward+backward
    (bottom), for head dim 64 and 128, without and with the causal mask."""
    import matplotlib.pyplot as plt

    header, rows = load_rows("attention", data_dir)
    ok = [r for r in rows if r["status"] == "ok"]
    panels = sorted({(r["D"], r["causal"]) for r in ok})
    modes = [m for m in ("fwd", "fwd_bwd") if any(r["mode"] == m for r in ok)]
    fig, axes = plt.subplots(len(modes), len(panels), figsize=(3.6 * len(panels), 3.2 * len(modes)),
                             squeeze=False, sharey="row")
    ceiling = header.get("ceilings", {}).get("gemm_fp16_tflops")
    for i, mode in enumerate(modes):
        for j, (D, causal) in enumerate(panels):
            ax = axes[i][j]
            for prov, (label, color, marker) in STYLE.items():
                pts = sorted((r["L"], r["tflops"]) for r in ok
                             if r["provider"] == prov and r["mode"] == mode and r["D"] == D and r["causal"] == causal)
                if pts:
                    ax.plot(*zip(*pts), marker=marker, color=color, label=label, lw=1.6, ms=5)
            if ceiling:
                ax.axhline(ceiling, ls="--", color="k", lw=0.8)
                ax.annotate("fp16 GEMM ceiling (measured)", xy=(0.03, ceiling * 0.97), xycoords=("axes fraction", "data"),
                            fontsize=7, va="top")
            ax.set_xscale("log", base=2)
            ax.set_title(f"{'forward' if mode == 'fwd' else 'forward + backward'}, D={D}, "
                         f"{'causal' if causal else 'no mask'}", fontsize=9)
            ax.set_xlabel("sequence length")
            ax.grid(alpha=0.3)
            if j == 0:
                ax.set_ylabel("TFLOP/s")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8, frameon=False)
    fig.suptitle("Dense attention throughput, fp16, batch·length = 16K, hidden 2048 — " + _title(header),
                 fontsize=10)
    fig.tight_layout(rect=(0, 0.05, 1, 0.96))
    return fig


def attention_memory(data_dir=None):
    """Extra device memory one forward call allocates (beyond q, k, v): t2 holds the L² scores,
    t3 only its output and log-sum-exp."""
    import matplotlib.pyplot as plt

    header, rows = load_rows("attention", data_dir)
    ok = [r for r in rows if r["status"] == "ok" and r["mode"] == "fwd" and not r["causal"]
          and r.get("peak_mem_mb") == r.get("peak_mem_mb")]
    head_dims = sorted({r["D"] for r in ok})
    fig, axes = plt.subplots(1, len(head_dims), figsize=(4.2 * len(head_dims), 3.4), squeeze=False)
    for ax, D in zip(axes[0], head_dims):
        for prov in ("t1_torch", "t2_triton_unfused", "t3_triton_fused", "sdpa_flash"):
            label, color, marker = STYLE[prov]
            pts = sorted((r["L"], r["peak_mem_mb"]) for r in ok if r["provider"] == prov and r["D"] == D)
            if pts:
                ax.plot(*zip(*pts), marker=marker, color=color, label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length")
        ax.set_ylabel("peak extra memory, MiB")
        ax.set_title(f"forward, D={D}, batch·length = 16K", fontsize=9)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    fig.suptitle("Memory of one forward call — " + _title(header), fontsize=9)
    fig.tight_layout()
    return fig


def _bars(ax, groups, series, values, colors, ylabel, log=False):
    """Grouped bars: values[(group, series)] -> height (missing or NaN bars are left out)."""
    import numpy as np

    width = 0.8 / max(1, len(series))
    x = np.arange(len(groups))
    for i, name in enumerate(series):
        h = [values.get((g, name), float("nan")) for g in groups]
        bars = ax.bar(x + (i - (len(series) - 1) / 2) * width, h, width, label=name, color=colors[i])
        for b, val in zip(bars, h):
            if val == val:
                ax.annotate(f"{val:.1f}" if val < 100 else f"{val:.0f}", (b.get_x() + b.get_width() / 2, val),
                            ha="center", va="bottom", fontsize=6)
    ax.set_xticks(x, groups, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    ax.grid(alpha=0.3, axis="y")


def neighborhood_paper(data_dir=None):
    """Faster Neighborhood Attention's plot: speedup of the GEMM-based unfused tier (t2) and the
    fused tier (t3) over the naive PyTorch tier (t1), forward, 1D and 2D, across kernel sizes."""
    import matplotlib.pyplot as plt

    header, rows = load_rows("neighborhood", data_dir)
    rows = [r for r in rows if r["suite"] == "paper" and r["status"] == "ok"]
    dtypes = [d for d in ("float32", "float16") if any(r["dtype"] == d for r in rows)]
    fig, axes = plt.subplots(1, len(dtypes), figsize=(6 * len(dtypes), 3.6), squeeze=False)
    for ax, dt in zip(axes[0], dtypes):
        ms = {(r["case"], r["provider"]): r["ms"] for r in rows if r["dtype"] == dt}
        cases = list(dict.fromkeys(r["case"] for r in rows if r["dtype"] == dt))
        vals = {(c, lab): ms[(c, "t1_torch")] / ms[(c, p)] for c in cases
                for p, lab in (("t2_triton_unfused", "t2 GEMM-based (unfused)"), ("t3_triton_fused", "t3 fused"))
                if (c, p) in ms and (c, "t1_torch") in ms}
        _bars(ax, cases, ["t2 GEMM-based (unfused)", "t3 fused"], vals, [STYLE["t2_triton_unfused"][1],
              STYLE["t3_triton_fused"][1]], "speedup over t1 (naive PyTorch)", log=True)
        ax.set_title(f"{dt}, forward, B=2 H=8 D=64", fontsize=9)
        ax.legend(fontsize=8, loc="upper left")
    fig.suptitle("Neighborhood attention: unfused and fused over naive — " + _title(header), fontsize=9)
    fig.tight_layout()
    return fig


def neighborhood_field(data_dir=None):
    """NATTEN's H100 problems: speedup over dense SDPA cuDNN of t3, FlexAttention (same mask) and
    dense FLASH, with the FLOP bound (dense pairs / neighbour pairs) marked."""
    import matplotlib.pyplot as plt

    from tiers.bench.neighborhood import FIELD, neighbor_pairs

    header, rows = load_rows("neighborhood", data_dir)
    rows = [r for r in rows if r["suite"] == "field" and r["status"] == "ok"]
    modes = [m for m in ("fwd", "fwd_bwd") if any(r["mode"] == m for r in rows)]
    fig, axes = plt.subplots(1, len(modes), figsize=(6 * len(modes), 3.8), squeeze=False)
    provs = [("t3_triton_fused", "t3 fused (ours)"), ("flex", "FlexAttention, NA mask"), ("sdpa_flash", "dense FLASH")]
    for ax, mode in zip(axes[0], modes):
        ms = {(r["case"], r["provider"]): r["ms"] for r in rows if r["mode"] == mode}
        cases = [c["case"] for c in FIELD if (c["case"], "sdpa_cudnn") in ms]
        vals = {(c, lab): ms[(c, "sdpa_cudnn")] / ms[(c, p)] for c in cases for p, lab in provs if (c, p) in ms}
        _bars(ax, cases, [lab for _, lab in provs], vals, [STYLE[p][1] for p, _ in provs],
              "speedup over dense cuDNN", log=True)
        for i, c in enumerate(FIELD):
            if c["case"] in cases:
                n = 1
                for L in c["spatial"]:
                    n *= L
                bound = n * n / neighbor_pairs(c["spatial"], c["kernel"])
                ax.hlines(bound, cases.index(c["case"]) - 0.45, cases.index(c["case"]) + 0.45, colors="k",
                          linestyles="--", lw=1)
        ax.axhline(1, color="gray", lw=0.8)
        ax.set_title(f"{'forward' if mode == 'fwd' else 'forward + backward'}, fp16, B=1 H=24 D=128 "
                     "(dashed: FLOP bound)", fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle("Neighborhood attention vs the field — " + _title(header), fontsize=9)
    fig.tight_layout()
    return fig


def neighborhood_memory(data_dir=None):
    """Peak extra memory of one forward call: t2 materialises the [B, H, N, K] weights, t3 does not."""
    import matplotlib.pyplot as plt

    header, rows = load_rows("neighborhood", data_dir)
    rows = [r for r in rows if r["mode"] == "fwd" and r["status"] == "ok" and r["dtype"] == "float16"
            and r["provider"] in ("t1_torch", "t2_triton_unfused", "t3_triton_fused")]
    cases = list(dict.fromkeys(r["case"] for r in rows))
    vals = {(r["case"], STYLE[r["provider"]][0]): r["peak_mem_mb"] for r in rows}
    fig, ax = plt.subplots(figsize=(8, 3.6))
    provs = ["t1_torch", "t2_triton_unfused", "t3_triton_fused"]
    _bars(ax, cases, [STYLE[p][0] for p in provs], vals, [STYLE[p][1] for p in provs], "peak extra MiB", log=True)
    ax.legend(fontsize=8)
    ax.set_title("Neighborhood attention, extra memory of one fp16 forward (output included)\n" + _title(header),
                 fontsize=9)
    fig.tight_layout()
    return fig


# Pictures of the window formulas themselves (no data; the notebooks draw them).

_GROUP_COLORS = ("#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd")


def _window_label(K, s, d, causal):
    """'K=5, s=2, causal' with defaults left out; equal per-axis values given once."""
    parts = [f"K={K}"] + [f"{n}={x}" for n, x in (("s", s), ("d", d)) if x != 1]
    if causal is True:
        parts.append("causal")
    elif causal is not False:
        parts.append(f"causal={causal}")
    return ", ".join(parts)


def draw_axis_windows(L, K, d=1, s=1, causal=False, ax=None):
    """One axis's neighbourhoods as an [L, L] query × key grid (the shared `axis_neighbors`): a
    filled cell is a key the query attends to, coloured by the query's dilation group; a dot marks
    the query's own position. Returns the Axes."""
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import ListedColormap

    from tiers.neighborhood_windows import axis_neighbors

    img = np.where(axis_neighbors(L, K, d, s, causal), 1 + np.arange(L)[:, None] % d, 0)
    if ax is None:
        ax = plt.subplots(figsize=(2.8, 2.8))[1]
    colors = ["#f0f0f0"] + [_GROUP_COLORS[g % len(_GROUP_COLORS)] for g in range(d)]
    ax.imshow(img, cmap=ListedColormap(colors), vmin=-0.5, vmax=d + 0.5)
    ax.plot(range(L), range(L), ".", color="k", ms=3)
    ax.set_xticks(np.arange(-0.5, L), minor=True)
    ax.set_yticks(np.arange(-0.5, L), minor=True)
    ax.grid(which="minor", color="white", lw=0.6)
    ax.tick_params(which="both", length=0, labelsize=6)
    ax.set_xticks(range(0, L, 2))
    ax.set_yticks(range(0, L, 2))
    ax.set_xlabel("key j", fontsize=8)
    ax.set_ylabel("query i", fontsize=8)
    ax.set_title(f"L={L}, " + _window_label(K, s, d, causal), fontsize=8)
    return ax


def draw_neighborhood_2d(shape, query, kernel_size, stride=1, dilation=1, is_causal=False, ax=None):
    """The key grid of a 2D input with the neighbours of one query position highlighted (a row
    of the shared `neighbor_mask`); the query is marked ×. Per-axis arguments are ints or
    2-tuples. Returns the Axes."""
    import matplotlib.pyplot as plt
    import numpy as np

    from tiers.neighborhood_windows import neighbor_mask

    def pair(a):
        return tuple(a) if isinstance(a, (tuple, list)) else (a, a)

    X, Y = shape
    args = [pair(a) for a in (kernel_size, stride, dilation, is_causal)]
    seen = neighbor_mask(shape, *args)[query[0] * Y + query[1]].reshape(X, Y)
    if ax is None:
        ax = plt.subplots(figsize=(2.8, 2.8))[1]
    ax.imshow(seen, cmap="Reds", vmin=-0.15, vmax=1.6)
    ax.plot(query[1], query[0], "x", color="k", ms=7, mew=2)
    ax.set_xticks(np.arange(-0.5, Y), minor=True)
    ax.set_yticks(np.arange(-0.5, X), minor=True)
    ax.grid(which="minor", color="white", lw=0.6)
    ax.tick_params(which="both", length=0, labelsize=6)
    ax.set_xlabel("axis 1", fontsize=8)
    ax.set_ylabel("axis 0", fontsize=8)
    label = _window_label(*(a if a[0] != a[1] else a[0] for a in args))
    ax.set_title(f"query {tuple(query)}: {int(seen.sum())} keys\n{label}", fontsize=8)
    return ax


def sparse_attention_speedup(data_dir=None):
    """SPLAT's plot: per pattern at L = 8192 (fp16, B4 H16), speedup of t3 over the unfused t2,
    over FlexAttention given the same mask, and over dense cuDNN, with the FLOP bound marked."""
    import matplotlib.pyplot as plt

    header, rows = load_rows("sparse_attention", data_dir)
    rows = [r for r in rows if r["suite"] == "main" and r["status"] == "ok"]
    panels = [(D, m) for m in ("fwd", "fwd_bwd") for D in (64, 128)
              if any(r["D"] == D and r["mode"] == m for r in rows)]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.8), squeeze=False)
    series = [("t2_triton_unfused", "over t2 (unfused)"), ("flex", "over FlexAttention"),
              ("sdpa_cudnn", "over dense cuDNN")]
    for ax, (D, mode) in zip(axes[0], panels):
        ms = {(r["pattern"], r["provider"]): r for r in rows if r["D"] == D and r["mode"] == mode}
        pats = list(dict.fromkeys(r["pattern"] for r in rows if r["D"] == D and r["mode"] == mode))
        vals = {(p, lab): ms[(p, prov)]["ms"] / ms[(p, "t3_triton_fused")]["ms"] for p in pats
                for prov, lab in series if (p, prov) in ms and (p, "t3_triton_fused") in ms}
        _bars(ax, pats, [lab for _, lab in series], vals, [STYLE[p][1] for p, _ in series],
              "speedup of t3", log=True)
        for i, p in enumerate(pats):
            any_row = next(r for r in rows if r["pattern"] == p)
            ax.hlines(any_row["flop_bound"], i - 0.45, i + 0.45, colors="k", linestyles="--", lw=1)
        ax.axhline(1, color="gray", lw=0.8)
        ax.set_title(f"D={D}, {'forward' if mode == 'fwd' else 'forward + backward'} (dashed: FLOP bound)", fontsize=8)
        ax.legend(fontsize=6)
    fig.suptitle("SPLAT sparse attention, fp16 B=4 H=16 L=8192 — " + _title(header), fontsize=9)
    fig.tight_layout()
    return fig


def sparse_attention_metadata(data_dir=None):
    """Bytes to describe each pattern at L = 8192: ACSR (groups × segments) vs CSR vs a dense mask."""
    import matplotlib.pyplot as plt

    header, rows = load_rows("sparse_attention", data_dir)
    rows = [r for r in rows if r["suite"] == "main" and r["L"] == 8192]
    pats = list(dict.fromkeys(r["pattern"] for r in rows))
    first = {p: next(r for r in rows if r["pattern"] == p) for p in pats}
    kinds = [("acsr_bytes", "ACSR", STYLE["t3_triton_fused"][1]), ("csr_bytes", "CSR", STYLE["t2_triton_unfused"][1]),
             ("dense_mask_bytes", "dense bool mask", STYLE["t1_torch"][1])]
    vals = {(p, lab): first[p][key] for p in pats for key, lab, _ in kinds}
    fig, ax = plt.subplots(figsize=(7, 3.6))
    _bars(ax, pats, [lab for _, lab, _ in kinds], vals, [c for _, _, c in kinds], "bytes (int32 indices)", log=True)
    ax.legend(fontsize=8)
    ax.set_title("Pattern metadata at L = 8192 (ACSR is O(groups · segments), CSR O(nnz), dense O(L²))", fontsize=9)
    fig.tight_layout()
    return fig


FIGURES = {"attention_throughput": attention_throughput, "attention_memory": attention_memory,
           "neighborhood_paper": neighborhood_paper, "neighborhood_field": neighborhood_field,
           "neighborhood_memory": neighborhood_memory, "sparse_attention_speedup": sparse_attention_speedup,
           "sparse_attention_metadata": sparse_attention_metadata}


def draw_all(out_dir=None, data_dir=None):
    """Write every figure as PNG under figures/ (or out_dir); returns the paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir or FIG_DIR)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, draw in FIGURES.items():
        fig = draw(data_dir)
        path = out / f"{name}.png"
        fig.savefig(path, dpi=130)
        plt.close(fig)
        paths.append(path)
    return paths
