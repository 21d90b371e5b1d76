"""Tile sweep for the fused sparse-attention kernels on the GPU (a development tool behind the
tile tables of tiers/t3_triton_fused/sparse_attention.py, not a result).

    python -m tiers.bench.tune_sparse_attention [--out DIR] [--bwd] [--patterns P] [--head-dims D]
        [--dq-configs "BM,BN,W,S;..."] [--kv-configs "..."] [--reps N]
    python -m tiers.bench.tune_sparse_attention --blocks [--head-dims D]
    python -m tiers.bench.tune_sparse_attention --small-blocks [--head-dims D] [--block-sizes B] [--reps N]
    python -m tiers.bench.tune_sparse_attention --classes [--lengths L] [--head-dims D] [--fwd-configs C]

Each (pattern, head dim) also times FlexAttention on the same mask in the same run (kernel
"flex"; the benchmark's mask written from the pattern's definition, where the pattern is one of
the benchmark's, else the mask read from its segments, which on blocked patterns is as fast), so a
candidate tile can be read against the anchor it has to beat. `--blocks` times
blocked(8192, b) for b = 64…1024 on the general kernels and as dense attention over a view,
beside Flex: the measurement behind t3's _DENSE_VIEW_MIN. `--small-blocks` times blocked(8192, b)
on each way t3 can run small diagonal blocks — forward: the block kernel for each tile of
SMALL_FWD or the general kernel; backward: one-pass or split block kernels for each plan of
SMALL_BWD or the general kernels — beside Flex: the measurement behind _BLOCKS_FWD and _BLOCKS_BWD.
`--classes` times the local and the strided class of strided(L, 128, 128) as patterns of their
own, the strided one under each tile of CLASS_FWD: the measurement behind _class_tiles.
(The sparse_tune_one_pass files of 2026-11-25 come from this sweep's predecessor, which timed the
one-pass backward alone, after the general forward.)
"""
from __future__ import annotations

import argparse

from tiers.bench.common import environment, measure, write_rows
from tiers.bench.sparse_attention import B, H, PATTERNS, pattern

FWD = [(128, 64, 8, 3), (128, 64, 4, 3), (128, 128, 8, 3), (64, 64, 4, 3), (128, 32, 4, 3), (64, 128, 4, 3)]
# backward: the dQ and dK/dV kernels are swept one at a time, the other held at the table's entry
BWD_DQ = [(64, 64, 4, 2), (128, 64, 8, 2), (128, 32, 4, 2), (64, 32, 4, 2), (128, 64, 4, 2)]
BWD_KV = [(64, 64, 4, 2), (32, 64, 4, 2), (64, 128, 8, 2), (32, 128, 4, 2), (64, 128, 4, 2)]
BLOCK_SIZES = (64, 128, 256, 512, 1024)
# The lists hold the candidates of the last sweep (2026-11-25); those an earlier sweep of that day
# timed and dropped, in ms at blocked(8192, 256), medians of three interleaved runs (data
# sparse_tune_small_blocks_pass1_*):
#   forward D = 64: (64, 64, 4, 2) 0.148, (64, 128, 4, 2) 0.175, (64, 256, 8, 1) 0.361, (32, 64, 4, 3)
#     0.277 against 0.133–0.138 for the four kept; D = 128: (64, 64, 4, 2) 0.300, (128, 64, 8, 3) 0.282,
#     (64, 128, 8, 2) 0.428, (32, 64, 4, 3) 0.514 against 0.247–0.257;
#   forward+backward D = 64: one-pass (64, 64, 4, 2) 0.888, split (128, 64, 8, 2) + (64, 128, 8, 2) 0.847
#     against 0.637–0.650; D = 128: one-pass (64, 64, 8, 2) 2.06, (32, 64, 4, 2) 1.90, (64, 64, 4, 2)
#     2.75, split (64, 64, 4, 2) with dK/dV (32, 64, 4, 2) 1.19, (32, 128, 8, 2) 1.31, (64, 64, 8, 2)
#     1.59, split (128, 64, 8, 2) + (64, 128, 8, 2) 1.29, (128, 32, 8, 2) + (32, 64, 4, 2) 1.41
#     against 1.11 for split (64, 32, 4, 3) + (32, 64, 4, 3).
SMALL_FWD = {64: [(128, 64, 8, 3), (64, 64, 4, 3), (128, 64, 4, 3), (128, 32, 4, 3)],
             128: [(128, 32, 4, 3), (64, 64, 4, 3), (128, 32, 8, 3), (64, 32, 4, 3)]}
SMALL_BWD = {64: [("one_pass", (64, 128, 8, 2)), ("split", (64, 64, 4, 2), (32, 64, 4, 2)),
                  ("split", (64, 32, 4, 3), (32, 64, 4, 3)), ("split", (64, 64, 4, 3), (32, 64, 4, 2))],
             128: [("one_pass", (64, 128, 8, 2)), ("split", (64, 32, 4, 3), (32, 64, 4, 3)),
                   ("split", (64, 32, 4, 3), (32, 64, 4, 2)), ("split", (64, 32, 4, 2), (32, 64, 4, 3)),
                   ("split", (128, 32, 4, 3), (32, 64, 4, 3)), ("split", (64, 32, 8, 3), (32, 64, 4, 3)),
                   ("split", (64, 32, 4, 3), (64, 64, 8, 3))]}


def _rel_err(call, ref, inputs, mode):
    """Largest ‖x − ref‖/‖ref‖ over the output ('fwd') or the three gradients ('fwd_bwd')."""
    import torch

    def grads(f):
        xs = [x.detach().clone().requires_grad_(mode == "fwd_bwd") for x in inputs]
        out = f(*xs)
        if mode == "fwd":
            return [out.float()]
        out.backward(torch.ones_like(out) + torch.arange(out.shape[-1], device=out.device) / out.shape[-1])
        return [x.grad.float() for x in xs]
    return max(float((a - b).norm() / b.norm()) for a, b in zip(grads(call), grads(ref)))


def _recorder(name, out_dir):
    """add(row): keep the row, print it, and rewrite the <name> file with every row so far (a run
    cut short keeps what it measured); returns the written paths."""
    env, rows = environment(), []

    def add(row):
        rows.append(row)
        print({k: (round(x, 4) if isinstance(x, float) else x) for k, x in row.items()}, flush=True)
        return write_rows(rows, name, env, out_dir)
    return add


def _blocked_problems(L, head_dims, block_sizes):
    """(D, block, pattern, Flex call, [q, k, v]) for blocked(L, block) at every head dim: the
    cases of the block sweeps, inputs made once per head dim."""
    import torch

    from tiers.acsr import ACSR
    from tiers.bench.sparse_attention import _call, flex_mask

    for D in head_dims:
        inputs = [torch.randn(B, H, L, D, device="cuda", dtype=torch.float16) for _ in range(3)]
        for block in block_sizes:
            p = ACSR.blocked(L, block)
            yield D, block, p, _call("flex", p, flex_mask(p)), inputs


def _timed(call, flex, inputs, mode, checked):
    """measure()'s row for call, with its largest error against Flex when `checked`."""
    row = measure(call, inputs, mode)
    if checked and row["status"] == "ok":
        row["rel_err_vs_flex"] = _rel_err(call, flex, inputs, mode)
    return row


def run_blocks(out_dir=None, L=8192, head_dims=(64, 128), reps=3):
    """blocked(L, b), b = 64…1024, forward and forward+backward, on the general kernels ("general")
    and as dense attention over a [B, H·L/b, b, D] view ("view"), beside FlexAttention; each case
    `reps` times interleaved, since timings on the lent GPU drift between minutes."""
    from tiers.t3_triton_fused import sparse_attention as t3

    add = _recorder("sparse_tune_blocks", out_dir)
    uniform, view_min = t3._uniform_block, t3._DENSE_VIEW_MIN

    def path(name):
        t3._uniform_block = uniform if name == "view" else (lambda pattern: None)
        t3._DENSE_VIEW_MIN = 1
        uniform.cache_clear()
    try:
        for D, block, p, flex, inputs in _blocked_problems(L, head_dims, BLOCK_SIZES):
            for rep in range(reps):
                for mode in ("fwd", "fwd_bwd"):
                    for kernel in ("view", "general", "flex"):
                        path(kernel)
                        call = flex if kernel == "flex" else (lambda a, b, c: t3.sparse_attention(a, b, c, p))
                        paths = add(dict(sweep="block_size", block=block, L=L, D=D, mode=mode, kernel=kernel, rep=rep,
                                         **_timed(call, flex, inputs, mode, rep == 0 and kernel != "flex")))
    finally:
        t3._uniform_block, t3._DENSE_VIEW_MIN = uniform, view_min
        uniform.cache_clear()
    return paths


def run_small_blocks(out_dir=None, L=8192, head_dims=(64, 128), block_sizes=(256,), reps=3):
    """blocked(L, b): the forward on the block kernel for each tile of SMALL_FWD and on the general
    kernel ("general"); forward+backward (forward as the table has it) with each backward plan of
    SMALL_BWD and with the general kernels ("general"); Flex beside both; interleaved `reps` times.
    Blocks larger than t3 takes on the block kernels (_SMALL_BLOCKS_MAX, or the dense view from
    _DENSE_VIEW_MIN) are measured on them all the same, so a sweep can move those limits."""
    from tiers.t3_triton_fused import sparse_attention as t3

    add = _recorder("sparse_tune_small_blocks", out_dir)
    tables = dict(t3._BLOCKS_FWD), dict(t3._BLOCKS_BWD)
    limits = t3._SMALL_BLOCKS_MAX, t3._DENSE_VIEW_MIN
    try:
        for D, block, p, flex, inputs in _blocked_problems(L, head_dims, block_sizes):
            bd = max(16, D)
            t3._SMALL_BLOCKS_MAX, t3._DENSE_VIEW_MIN = max(limits[0], block), max(limits[1], block + 1)
            t3._small_blocks_on.cache_clear()
            t3._uniform_block.cache_clear()
            cases = ([("fwd", "blocks", cfg, tables[1][bd]) for cfg in SMALL_FWD[bd]]
                     + [("fwd", "general", None, tables[1][bd]), ("fwd", "flex", None, None)]
                     + [("fwd_bwd", plan[0], tables[0][bd], plan) for plan in SMALL_BWD[bd]]
                     + [("fwd_bwd", "general", tables[0][bd], None), ("fwd_bwd", "flex", None, None)])
            for rep in range(reps):
                for mode, kernel, fwd, bwd in cases:
                    t3._BLOCKS_FWD[bd], t3._BLOCKS_BWD[bd] = fwd, bwd
                    call = flex if kernel == "flex" else (lambda a, b, c: t3.sparse_attention(a, b, c, p))
                    row = dict(block=block, L=L, D=D, mode=mode, kernel=kernel, rep=rep,
                               tiles=str(fwd if mode == "fwd" else bwd),
                               **_timed(call, flex, inputs, mode, rep == 0 and kernel != "flex"))
                    paths = add(row)
    finally:
        t3._BLOCKS_FWD.update(tables[0])
        t3._BLOCKS_BWD.update(tables[1])
        t3._SMALL_BLOCKS_MAX, t3._DENSE_VIEW_MIN = limits
        t3._small_blocks_on.cache_clear()
        t3._uniform_block.cache_clear()
    return paths


# --classes: forward tiles for the strided class of strided(L, 128, 128), whose residues hold L/128
# query rows each (16 at L = 2048): the measurement behind t3's _class_tiles
CLASS_FWD = [(16, 16, 2, 1), (16, 32, 2, 1), (32, 32, 2, 1), (32, 32, 2, 2), (32, 32, 4, 1), (32, 64, 4, 1),
             (64, 32, 4, 1), (64, 64, 4, 2), (64, 64, 4, 3)]


def strided_parts(L, local=128, stride=128):
    """strided(L, local, stride) and its two classes as patterns of their own: the local band and
    the strided part (the segments of ACSR.strided, one each)."""
    from tiers.acsr import ACSR

    full = ACSR.strided(L, local, stride)
    return {"full": full, **{part: ACSR.from_groups(L, L, [(0, L, [tuple(int(x) for x in seg)])])
                             for part, seg in zip(("local", "strided"), full.groups()[0].segments)}}


def run_classes(out_dir=None, lengths=(2048, 3000, 4096, 8192, 16384), head_dims=(64, 128), configs=None, reps=1):
    """Each part of strided(L, 128, 128) (strided_parts) with t3's own tiles ("auto"), and the
    strided part with each tile of CLASS_FWD forced on it; interleaved `reps` times."""
    import torch

    from tiers.bench.sparse_attention import _call, flex_mask
    from tiers.t3_triton_fused import sparse_attention as t3

    add = _recorder("sparse_tune_short_class", out_dir)
    auto = t3._class_tiles
    try:
        for D in head_dims:
            for L in lengths:
                parts = strided_parts(L)
                inputs = [torch.randn(B, H, L, D, device="cuda", dtype=torch.float16) for _ in range(3)]
                cases = [(part, None) for part in parts] + [("strided", cfg) for cfg in configs or CLASS_FWD]
                flex = {part: _call("flex", p, flex_mask(p)) for part, p in parts.items()}
                for rep in range(reps):
                    for part, cfg in cases:
                        t3._class_tiles = auto if cfg is None else (lambda tiles, sigma, Lq, cfg=cfg: cfg)
                        p = parts[part]
                        row = dict(part=part, L=L, D=D, tiles=str(cfg or "auto"), rep=rep,
                                   **_timed(lambda a, b, c, p=p: t3.sparse_attention(a, b, c, p), flex[part], inputs,
                                            "fwd", rep == 0))
                        paths = add(row)
    finally:
        t3._class_tiles = auto
    return paths


def run(out_dir=None, backward=False, L=8192, head_dims=(64, 128), patterns=None, dq_configs=None, kv_configs=None,
        reps=1):
    import torch

    from tiers.bench.sparse_attention import _call, definition_mask_mod, flex_mask
    from tiers.t3_triton_fused import sparse_attention as t3

    env, rows = environment(), []
    name_out = "sparse_tune_bwd" if backward else "sparse_tune"

    def add(row):      # written after every row: a run cut short keeps what it measured
        rows.append(row)
        print(row, flush=True)
        return write_rows(rows, name_out, env, out_dir)
    for D in head_dims:
        block_d = max(16, D)
        for name in patterns or PATTERNS:
            p = pattern(name, L)
            table = t3._TILES_BWD if backward else t3._TILES
            saved = table.get(block_d)
            q, k, v = (torch.randn(B, H, L, D, device="cuda", dtype=torch.float16) for _ in range(3))
            if backward:
                dq0, kv0 = saved
                cases = ([("dq", (cfg, kv0), cfg) for cfg in dq_configs or BWD_DQ]
                         + [("dkdv", (dq0, cfg), cfg) for cfg in kv_configs or BWD_KV])
            else:
                cases = [("fwd", cfg, cfg) for cfg in FWD]
            mode = "fwd_bwd" if backward else "fwd"
            flex = _call("flex", p, flex_mask(p, definition_mask_mod(name)))
            for rep in range(reps):     # interleaved: timings on the lent GPU drift between minutes
                for kernel, entry, cfg in cases:
                    table[block_d] = entry
                    call = lambda a, b, c: t3.sparse_attention(a, b, c, p)  # noqa: E731
                    row = dict(pattern=name, L=L, D=D, kernel=kernel, BM=cfg[0], BN=cfg[1], warps=cfg[2],
                               stages=cfg[3], rep=rep, **measure(call, [q, k, v], mode))
                    if rep == 0:     # a tile that computes something else must not win
                        row["rel_err_vs_flex"] = _rel_err(call, flex, [q, k, v], mode)
                    paths = add(row)
                table[block_d] = saved
                paths = add(dict(pattern=name, L=L, D=D, kernel="flex", rep=rep, **measure(flex, [q, k, v], mode)))
    return paths


def main(argv=None):
    a = argparse.ArgumentParser(prog="python -m tiers.bench.tune_sparse_attention")
    a.add_argument("--out", default=None)
    a.add_argument("--bwd", action="store_true")
    a.add_argument("--blocks", action="store_true", help="blocked patterns: general kernels vs dense attention over a view")
    a.add_argument("--small-blocks", action="store_true", help="blocked patterns: tiles and plans of the block kernels")
    a.add_argument("--block-sizes", default="256", help="--small-blocks: comma list of block sizes")
    a.add_argument("--classes", action="store_true",
                   help="strided(L, 128, 128): its two classes alone, the strided one under each tile of CLASS_FWD")
    a.add_argument("--lengths", default="2048,3000,4096,8192,16384", help="--classes: comma list of L")
    a.add_argument("--fwd-configs", default=None, help='--classes: tiles "BM,BN,warps,stages;..." (default CLASS_FWD)')
    a.add_argument("--patterns", default=None, help="comma list (default: every benchmark pattern)")
    a.add_argument("--head-dims", default="64,128")
    a.add_argument("--dq-configs", default=None, help='backward dQ tiles "BM,BN,warps,stages;..." (default BWD_DQ)')
    a.add_argument("--kv-configs", default=None, help="backward dK/dV tiles, same form (default BWD_KV)")
    a.add_argument("--reps", type=int, default=1, help="times each case is measured, interleaved")
    args = a.parse_args(argv)

    def configs(text):
        return [tuple(int(x) for x in c.split(",")) for c in text.split(";")] if text else None

    if args.classes:
        print(*run_classes(args.out, tuple(int(x) for x in args.lengths.split(",")),
                           tuple(int(x) for x in args.head_dims.split(",")), configs(args.fwd_configs), args.reps))
        return
    if args.small_blocks:
        print(*run_small_blocks(args.out, head_dims=tuple(int(x) for x in args.head_dims.split(",")),
                            block_sizes=tuple(int(x) for x in args.block_sizes.split(",")), reps=args.reps))
        return
    if args.blocks:
        print(*run_blocks(args.out, head_dims=tuple(int(x) for x in args.head_dims.split(","))))
        return
    print(*run(args.out, args.bwd, head_dims=tuple(int(x) for x in args.head_dims.split(",")),
               patterns=args.patterns.split(",") if args.patterns else None,
               dq_configs=configs(args.dq_configs), kv_configs=configs(args.kv_configs), reps=args.reps))


if __name__ == "__main__":
    main()
