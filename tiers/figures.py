"""Paper-style figures, drawn from the measured rows in figures/data/ (no GPU needed).

Each function returns a matplotlib Figure; `draw_all` writes every figure under figures/.
The notebooks call the same functions, so a figure in a notebook is the figure in the repo.
"""
from __future__ import annotations

from pathlib import Path

from tiers.bench.common import DATA_DIR, load_rows
from tiers.bench.sparse_attention import recorded_floor_ms

FIG_DIR = DATA_DIR.parent
STYLE = {  # provider: (label, color, marker)
    "t1_torch": ("t1 PyTorch", "#9e9e9e", "v"),
    "t2_triton_unfused": ("t2 Triton unfused", "#ff9800", "s"),
    "t3_triton_fused": ("t3 Triton fused (ours)", "#d62728", "o"),
    "sdpa_flash": ("SDPA FLASH", "#1f77b4", "^"),
    "sdpa_cudnn": ("SDPA cuDNN", "#2ca02c", "D"),
    "flex": ("FlexAttention", "#9467bd", "P"),
}


def _title(header, rows=()):
    """Device, versions and date of a recorded file; where its rows say when each was measured
    (a merged table's rows come from several runs), the dates of the rows drawn instead."""
    env = header["environment"]
    days = sorted({r["measured_utc"][:10] for r in rows if r.get("measured_utc")})
    when = env["date"] if not days else days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}"
    return f"{env['device']} · torch {env['torch']} · triton {env['triton']} · {when}"


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


def _bars(ax, groups, series, values, colors, ylabel, log=False, headroom=1.6, show=()):
    """Grouped bars: values[(group, series)] -> height (missing or NaN bars are left out). On a
    log axis the limits come from the bars drawn, `headroom` times above the tallest, and take in
    the levels `show` (a speedup's 1): autoscaling bars that start at 0 had cut off the tallest."""
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
        drawn = [values.get((g, name), float("nan")) for g in groups for name in series]
        finite = [v for v in drawn if v == v and v > 0] + list(show)
        if finite:
            ax.set_ylim(min(finite) / 1.5, max(finite) * headroom)
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
            if (p, "sdpa_cudnn") in ms and (p, "t3_triton_fused") in ms:
                t3 = ms[(p, "t3_triton_fused")]
                floor = recorded_floor_ms(t3, header["ceilings"])
                ax.hlines(ms[(p, "sdpa_cudnn")]["ms"] / floor, i - 0.45, i + 0.45, colors="k", linestyles=":", lw=1.2)
        ax.axhline(1, color="gray", lw=0.8)
        ax.set_title(f"D={D}, {'forward' if mode == 'fwd' else 'forward + backward'}\n"
                     "(dashed: FLOP bound; dotted: floor of FLOPs and bytes)", fontsize=8)
        ax.legend(fontsize=6)
    fig.suptitle("SPLAT sparse attention, fp16 B=4 H=16 L=8192 — " + _title(header), fontsize=9)
    fig.tight_layout()
    return fig


def sparse_attention_sweep(data_dir=None):
    """Forward over L = 2K…16K (fp16, B4 H16): per pattern, t3's speedup over FlexAttention given
    the same mask (top) and over dense cuDNN, with the floor of FLOPs and bytes dotted (bottom)."""
    import matplotlib.pyplot as plt

    header, rows = load_rows("sparse_attention", data_dir)
    rows = [r for r in rows if r["mode"] == "fwd" and r["status"] == "ok"
            and (r["suite"] == "sweep" or r["L"] == 8192)]
    ms = {(r["pattern"], r["L"], r["D"], r["provider"]): r for r in rows}
    dims = sorted({r["D"] for r in rows if r["suite"] == "sweep"})
    pats = list(dict.fromkeys(r["pattern"] for r in rows))
    colors = dict(zip(pats, ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd")))
    fig, axes = plt.subplots(2, len(dims), figsize=(4.6 * len(dims), 6.4), squeeze=False, sharex=True)
    for col, D in enumerate(dims):
        for p in pats:
            Ls = sorted(L for (q, L, d, prov) in ms if q == p and d == D and prov == "t3_triton_fused")
            t3 = {L: ms[(p, L, D, "t3_triton_fused")] for L in Ls}
            for ax, anchor in ((axes[0][col], "flex"), (axes[1][col], "sdpa_cudnn")):
                xs = [L for L in Ls if (p, L, D, anchor) in ms]
                ax.plot(xs, [ms[(p, L, D, anchor)]["ms"] / t3[L]["ms"] for L in xs], "o-", color=colors[p], label=p)
                if anchor == "sdpa_cudnn":
                    floors = [recorded_floor_ms(t3[L], header["ceilings"]) for L in xs]
                    ax.plot(xs, [ms[(p, L, D, anchor)]["ms"] / f for L, f in zip(xs, floors)], ":",
                            color=colors[p], lw=1.2)
        axes[0][col].set_title(f"D={D}: t3 over FlexAttention (same mask)", fontsize=8)
        axes[1][col].set_title(f"D={D}: t3 over dense cuDNN (dotted: floor of FLOPs and bytes)", fontsize=8)
        for ax in axes[:, col]:
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.axhline(1, color="gray", lw=0.8)
            ax.set_ylabel("speedup", fontsize=8)
        axes[1][col].set_xlabel("sequence length L", fontsize=8)
        axes[0][col].legend(fontsize=6)
    fig.suptitle("SPLAT sparse attention over L, forward fp16 B=4 H=16 — " + _title(header), fontsize=9)
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


# Sparse fusion: the measured speedups, and pictures of DAGs and schedules (no data; the
# notebook draws them for a small matrix).

KERNEL_COLORS = ("#1f77b4", "#ff7f0e")   # kernel 1, kernel 2 of a pair


def sparse_fusion_speedup(data_dir=None):
    """The sparse-fusion paper's plot: per matrix, for each kernel pair, the speedup of t3 under
    the sparse-fusion schedule (its best executor) over the best unfused code (the faster of t2
    and cuSPARSE) and over the same fused code under the wavefront and LBC schedules."""
    import matplotlib.pyplot as plt

    from tiers.bench.sparse_fusion import PAIRS, speedups

    header, rows = load_rows("sparse_fusion", data_dir)
    table = speedups(rows)
    dtype = "float64" if any(k[2] == "float64" for k in table) else "float32"
    panels = list(dict.fromkeys((k[0], k[1]) for k in table if k[2] == dtype))
    from tiers.bench.sparse_fusion import UNFUSED

    # name in the legend only the unfused providers that have a measured (ok) row
    measured = [p for p in UNFUSED if any(r["provider"] == p and r.get("status") == "ok" for r in rows)]
    names = {"t2_triton_unfused": "t2", "cusparse": "cuSPARSE", "cupyx": "CuPy"}
    series = [("over_unfused", f"over best unfused ({', '.join(names[p] for p in measured) or 'none measured'})",
               STYLE["sdpa_cudnn"][1]),
              ("over_wavefront", "over t3 + wavefront schedule", STYLE["t2_triton_unfused"][1]),
              ("over_lbc", "over t3 + LBC schedule", STYLE["flex"][1])]
    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(4.4 * max(1, len(panels)), 3.8), squeeze=False)
    for ax, (matrix, ordering) in zip(axes[0], panels):
        pairs = [p for p in PAIRS if (matrix, ordering, dtype, p) in table]
        vals = {(p, label): table[(matrix, ordering, dtype, p)][key] for p in pairs for key, label, _ in series}
        _bars(ax, pairs, [label for _, label, _ in series], vals, [c for _, _, c in series],
              "speedup of t3 + sparse fusion", log=True, headroom=3, show=(1,))     # room for the legend
        ax.axhline(1, color="k", lw=0.8)
        first = next(r for r in rows if r["matrix"] == matrix and r["ordering"] == ordering)
        ax.set_title(f"{matrix} ({ordering}), n={first['n']:,}, nnz={first['nnz']:,}", fontsize=8)
        ax.legend(fontsize=6)
    fig.suptitle(f"Sparse fusion, {dtype} — " + _title(header, [r for r in rows if r["dtype"] == dtype]), fontsize=9)
    fig.tight_layout()
    return fig


def draw_dag(dag, ax=None, labels=None, title=None):
    """A dependence DAG (`tiers.sparse_dags.DAG`: iteration v depends on idx[ptr[v]:ptr[v+1]])
    laid out by wavefront level, left to right: every vertex of a column can run at once. A
    pair's joint DAG (n2 > 0) colours kernel 2's iterations apart and numbers each kernel's rows
    from 0. Returns the Axes."""
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.collections import LineCollection

    from tiers.sparse_dags import wavefront_levels

    ptr, idx = np.asarray(dag.ptr, dtype=np.int64), np.asarray(dag.idx, dtype=np.int64)
    n = len(ptr) - 1
    n1 = dag.n1 if dag.n2 else None
    level = wavefront_levels(dag)
    row = np.zeros(n, dtype=np.int64)
    for lv in np.unique(level):
        members = np.flatnonzero(level == lv)
        row[members] = np.arange(len(members))
    height = np.bincount(level).max() if n else 1
    y = -(row - (np.bincount(level)[level] - 1) / 2)   # each column centred
    if ax is None:
        ax = plt.subplots(figsize=(min(14, 1.5 + 0.45 * (level.max() + 1 if n else 1)), min(8, 1 + 0.3 * height)))[1]
    src = np.repeat(np.arange(n), np.diff(ptr))
    keep = idx != src
    segs = np.stack([np.stack([level[idx[keep]], y[idx[keep]]], 1), np.stack([level[src[keep]], y[src[keep]]], 1)], 1)
    ax.add_collection(LineCollection(segs, colors="#b0b0b0", lw=0.6, zorder=1))
    kernel = (np.arange(n) >= n1).astype(int) if n1 is not None else np.zeros(n, dtype=int)
    colors = np.array(KERNEL_COLORS)[kernel]
    ax.scatter(level, y, s=90 if n <= 120 else 20, c=colors, edgecolors="k", linewidths=0.4, zorder=2)
    if labels if labels is not None else n <= 120:
        for v in range(n):
            ax.annotate(str(v if n1 is None or v < n1 else v - n1), (level[v], y[v]), ha="center", va="center",
                        fontsize=5, color="white", zorder=3)
    if n1 is not None:
        for k, name in enumerate(("kernel 1", "kernel 2")):
            ax.scatter([], [], s=40, c=KERNEL_COLORS[k], edgecolors="k", linewidths=0.4, label=name)
        ax.legend(fontsize=7, loc="upper right")
    ax.set_xlabel("wavefront level")
    ax.set_yticks([])
    ax.set_xlim(-0.7, (level.max() if n else 0) + 0.7)
    ax.set_ylim(y.min() - 0.7 if n else -1, y.max() + 0.7 if n else 1)
    ax.set_title(title or f"{n} iterations, {int(keep.sum())} dependences, {(level.max() + 1) if n else 0} levels",
                 fontsize=8)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    return ax


def draw_schedule(schedule, ax=None, labels=None, title=None):
    """A schedule as levels (top to bottom, a synchronisation between consecutive ones) of
    partitions (boxes side by side, independent of each other), each partition's iterations in
    their order left to right, coloured by kernel; numbers are iteration ids within their kernel.
    Returns the Axes."""
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.patches import Rectangle

    lp, pp, order = (np.asarray(a, dtype=np.int64) for a in (schedule.level_ptr, schedule.part_ptr, schedule.order))
    n1 = schedule.n1
    levels = len(lp) - 1
    widths = [sum(pp[p + 1] - pp[p] for p in range(lp[s], lp[s + 1])) + 0.6 * (lp[s + 1] - lp[s] - 1)
              for s in range(levels)]
    width = max(widths, default=1)
    if ax is None:
        ax = plt.subplots(figsize=(min(14, 1.5 + 0.22 * width), min(9, 1 + 0.45 * levels)))[1]
    show_ids = labels if labels is not None else len(order) <= 200
    for s in range(levels):
        x = 0.0
        for p in range(lp[s], lp[s + 1]):
            its = order[pp[p]:pp[p + 1]]
            for k, v in enumerate(its):
                ax.add_patch(Rectangle((x + k, -s - 0.4), 1, 0.8, facecolor=KERNEL_COLORS[int(v >= n1)],
                                       edgecolor="white", lw=0.3))
                if show_ids:
                    ax.annotate(str(v if v < n1 else v - n1), (x + k + 0.5, -s), ha="center", va="center",
                                fontsize=4.5, color="white")
            ax.add_patch(Rectangle((x, -s - 0.4), len(its), 0.8, fill=False, edgecolor="k", lw=0.8))
            x += len(its) + 0.6
    for k, name in enumerate(("kernel 1", "kernel 2")):
        ax.add_patch(Rectangle((0, 0), 0, 0, facecolor=KERNEL_COLORS[k], label=name))
    ax.legend(fontsize=7, loc="lower right")
    ax.set_xlim(-0.5, width + 0.5)
    ax.set_ylim(-levels + 0.4, 0.6)
    ax.set_yticks(range(0, -levels, -1) if levels <= 40 else [])
    ax.set_yticklabels([f"level {s}" for s in range(levels)] if levels <= 40 else [], fontsize=6)
    ax.set_xticks([])
    packing = f", {schedule.packing}" if schedule.packing else ""
    ax.set_title(title or f"{schedule.kind}{packing}: {levels} levels, {len(pp) - 1} partitions, "
                 f"{len(order)} iterations", fontsize=8)
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)
    return ax


def draw_bands(plan, nx, kernel=0, ax=None, title=None):
    """One kernel of a bands plan (tiers.kernels.sparse_fusion_executors.bands.band_plan) on a 2D
    grid of nx columns in natural order: every row a cell at (i mod nx, i div nx), coloured by
    its band, numbered by its step within the band (the steps a program walks, a barrier between
    each); lines are its dependences on rows of the same kernel: grey inside a band, red across
    bands (polled through L2). Returns the Axes."""
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.collections import LineCollection

    from tiers.kernels.sparse_fusion_executors.bands import APART, OWN, slot_words

    p, n, lanes = plan.kernels[kernel], plan.n, plan.lanes
    at = n * (kernel + 1)                                  # X = [input | out₁ | out₂]
    rows = p.row.reshape(p.steps, lanes)
    step_band = np.repeat(np.arange(p.P), np.diff(p.SP))
    step_in_band = np.arange(p.steps) - p.SP[step_band]
    live = rows >= 0
    i = rows[live] - at
    band, step = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    band[i] = np.broadcast_to(step_band[:, None], rows.shape)[live]
    step[i] = np.broadcast_to(step_in_band[:, None], rows.shape)[live]
    ny = -(-n // nx)
    if ax is None:
        ax = plt.subplots(figsize=(min(12, 1 + 0.42 * nx), min(9, 1 + 0.42 * ny)))[1]
    word = p.word.reshape(p.steps, p.C, lanes)
    reader = np.broadcast_to(rows[:, None, :], word.shape)
    kind, pos = slot_words(word)
    for k, color, lw in ((OWN, "#b0b0b0", 0.7), (APART, "#d62728", 1.1)):
        m = (kind == k) & (pos >= at) & (pos < at + n) & (reader >= 0)
        u, v = pos[m] - at, reader[m] - at
        segs = np.stack([np.stack([u % nx, u // nx], 1), np.stack([v % nx, v // nx], 1)], 1)
        ax.add_collection(LineCollection(segs, colors=color, lw=lw, zorder=1))
    cmap = plt.get_cmap("tab10")
    cells = np.arange(n)
    ax.scatter(cells % nx, cells // nx, s=260, c=[cmap(b % 10) for b in band], edgecolors="k", linewidths=0.4,
               zorder=2)
    for r in cells:
        ax.annotate(str(step[r]), (r % nx, r // nx), ha="center", va="center", fontsize=6, zorder=3)
    ax.set_aspect("equal")
    ax.invert_yaxis()
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title or f"{p.P} bands of at most {int(np.bincount(band).max())} rows and {int(step.max()) + 1} "
                 f"steps; {p.edges_own} dependences inside a band, {p.edges_apart} outside it", fontsize=8)
    return ax


def draw_dataflow_blocks(run, nx, axes=None, title=None):
    """How t3's dataflow executor runs a vector pair (`run`: `prepare(..., executor="dataflow")` of
    a pair whose blocks are records, on a 2D grid of nx columns in natural order): one panel per
    kernel, every row a cell at (i mod nx, i div nx), coloured and numbered by its block — the
    order in which the programs take the blocks; lines are the dependences between blocks inside
    the kernel (records.record_reads), each a value one block stores and another polls. Kernel 2's
    reads of kernel 1 are counted in its panel's title. Returns the two Axes."""
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.collections import LineCollection

    from tiers.kernels.sparse_fusion_executors.records import record_reads

    count, dev = run.plan
    R, n, out = run.block_rows, run.tables.n1, run.tables.out_at
    dst = dev["dst"].cpu().numpy().astype(np.int64)
    lanes = np.flatnonzero(dst >= 0)
    kernel = (dst[lanes] >= out[1]).astype(int)
    row = dst[lanes] - np.asarray(out)[kernel]
    t, j, pt, pj = record_reads(dev, count, R, run.slot_stride, n)
    reader, writer = t * R + j, pt * R + pj
    k_of = np.full(len(dst), -1)
    k_of[lanes] = kernel
    row_of = np.full(len(dst), -1)
    row_of[lanes] = row
    ny = -(-n // nx)
    if axes is None:
        axes = plt.subplots(1, 2, figsize=(min(14, 1 + 1.0 * nx), min(8, 1.2 + 0.5 * ny)))[1]
    cmap = plt.get_cmap("viridis")
    for k, ax in enumerate(axes):
        mine = kernel == k
        cells, blocks = row[mine], lanes[mine] // R
        inside = (k_of[reader] == k) & (k_of[writer] == k)
        u, v = row_of[writer[inside]], row_of[reader[inside]]
        segs = np.stack([np.stack([u % nx, u // nx], 1), np.stack([v % nx, v // nx], 1)], 1)
        ax.add_collection(LineCollection(segs, colors="#b0b0b0", lw=0.7, zorder=1))
        ax.scatter(cells % nx, cells // nx, s=300, c=[cmap(b / max(count - 1, 1)) for b in blocks],
                   edgecolors="k", linewidths=0.4, zorder=2)
        for r, b in zip(cells, blocks):
            ax.annotate(str(b), (r % nx, r // nx), ha="center", va="center", fontsize=6, zorder=3,
                        color="white" if b < 0.6 * count else "black")
        ax.set_aspect("equal")
        ax.invert_yaxis()
        ax.set_xticks([])
        ax.set_yticks([])
        across = int(((k_of[reader] == k) & (k_of[writer] != k)).sum())
        ax.set_title(f"kernel {k + 1}: {len(np.unique(blocks))} blocks of up to {R} rows\n{int(inside.sum())} reads "
                     f"between its blocks" + (f", {across} of kernel 1's results" if across else ""), fontsize=8)
    if title:
        axes[0].figure.suptitle(title, fontsize=9)
    return axes


FIGURES = {"attention_throughput": attention_throughput, "attention_memory": attention_memory,
           "neighborhood_paper": neighborhood_paper, "neighborhood_field": neighborhood_field,
           "neighborhood_memory": neighborhood_memory, "sparse_attention_speedup": sparse_attention_speedup,
           "sparse_attention_sweep": sparse_attention_sweep, "sparse_attention_metadata": sparse_attention_metadata,
           "sparse_fusion_speedup": sparse_fusion_speedup}


def recorded(data_dir=None) -> list[str]:
    """The names in FIGURES whose benchmark (the name up to its last '_') has recorded data."""
    data_dir = Path(data_dir or DATA_DIR)
    return [name for name in FIGURES if any(data_dir.glob(f"{name.rsplit('_', 1)[0]}_*.json"))]


def draw_all(out_dir=None, data_dir=None):
    """Write every figure as PNG under figures/ (or out_dir); returns the paths. A figure whose
    benchmark has no recorded data is skipped with a message, never drawn from other numbers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir or FIG_DIR)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, draw in FIGURES.items():
        try:
            fig = draw(data_dir)
        except FileNotFoundError as e:
            print(f"skipped {name}: {e} (not measured yet)")
            continue
        path = out / f"{name}.png"
        fig.savefig(path, dpi=130)
        plt.close(fig)
        paths.append(path)
    return paths
