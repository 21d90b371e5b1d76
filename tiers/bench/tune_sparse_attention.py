"""Tile sweep for the fused sparse-attention kernels on the GPU (a development tool behind the
tile tables of tiers/t3_triton_fused/sparse_attention.py, not a result).

    python -m tiers.bench.tune_sparse_attention [--out DIR] [--bwd] [--patterns P] [--head-dims D]
        [--dq-configs "BM,BN,W,S;..."] [--kv-configs "..."] [--reps N]
    python -m tiers.bench.tune_sparse_attention --blocks [--head-dims D]
    python -m tiers.bench.tune_sparse_attention --one-pass [--head-dims D] [--block-sizes B] [--reps N]

Each (pattern, head dim) also times FlexAttention on the same mask in the same run (kernel
"flex"), so a candidate tile can be read against the anchor it has to beat. `--blocks` times
blocked(8192, b) for b = 64…1024 on the general kernels and as dense attention over a view,
beside Flex: the measurement behind t3's _DENSE_VIEW_MIN. `--one-pass` times forward+backward of
blocked(8192, b) with the one-pass backward of diagonal blocks for each tile of ONE_PASS, with the
general backward kernels, and Flex: the measurement behind _TILES_BLOCKS.
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
ONE_PASS = {64: [(64, 128, 8, 2), (64, 128, 8, 3), (64, 256, 8, 2), (64, 256, 16, 2), (32, 256, 8, 2),
                 (64, 128, 16, 2), (128, 128, 8, 2)],
            128: [(64, 128, 8, 2), (64, 128, 16, 2), (32, 128, 16, 2), (64, 128, 8, 1), (16, 128, 8, 2),
                  (32, 128, 8, 2)]}


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
    if checked:
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


def run_one_pass(out_dir=None, L=8192, head_dims=(64, 128), block_sizes=(256,), reps=3):
    """blocked(L, b) forward+backward: t3 with the one-pass backward for each tile of ONE_PASS,
    t3 with the general backward kernels ("general"), and Flex, interleaved `reps` times."""
    from tiers.t3_triton_fused import sparse_attention as t3

    add = _recorder("sparse_tune_one_pass", out_dir)
    table, limit = dict(t3._TILES_BLOCKS), t3._BLOCKS_BWD_MAX
    try:
        for D, block, p, flex, inputs in _blocked_problems(L, head_dims, block_sizes):
            cases = [("one_pass", cfg) for cfg in ONE_PASS[max(16, D)]] + [("general", None), ("flex", None)]
            for rep in range(reps):
                for kernel, cfg in cases:
                    t3._BLOCKS_BWD_MAX = 0 if kernel == "general" else max(limit, block)
                    t3._small_blocks_on.cache_clear()
                    if cfg:
                        t3._TILES_BLOCKS[max(16, D)] = cfg
                    call = flex if kernel == "flex" else (lambda a, b, c: t3.sparse_attention(a, b, c, p))
                    row = dict(block=block, L=L, D=D, kernel=kernel, rep=rep,
                               **_timed(call, flex, inputs, "fwd_bwd", rep == 0 and kernel != "flex"))
                    if cfg:
                        row.update(BM=cfg[0], BN=cfg[1], warps=cfg[2], stages=cfg[3])
                    paths = add(row)
    finally:
        t3._TILES_BLOCKS.clear()
        t3._TILES_BLOCKS.update(table)
        t3._BLOCKS_BWD_MAX = limit
        t3._small_blocks_on.cache_clear()
    return paths


def run(out_dir=None, backward=False, L=8192, head_dims=(64, 128), patterns=None, dq_configs=None, kv_configs=None,
        reps=1):
    import torch

    from tiers.bench.sparse_attention import _call, flex_mask
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
            flex = _call("flex", p, flex_mask(p))
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
    a.add_argument("--one-pass", action="store_true", help="blocked patterns: tiles of the one-pass backward")
    a.add_argument("--block-sizes", default="256", help="--one-pass: comma list of block sizes")
    a.add_argument("--patterns", default=None, help="comma list (default: every benchmark pattern)")
    a.add_argument("--head-dims", default="64,128")
    a.add_argument("--dq-configs", default=None, help='backward dQ tiles "BM,BN,warps,stages;..." (default BWD_DQ)')
    a.add_argument("--kv-configs", default=None, help="backward dK/dV tiles, same form (default BWD_KV)")
    a.add_argument("--reps", type=int, default=1, help="times each case is measured, interleaved")
    args = a.parse_args(argv)

    def configs(text):
        return [tuple(int(x) for x in c.split(",")) for c in text.split(";")] if text else None

    if args.one_pass:
        print(*run_one_pass(args.out, head_dims=tuple(int(x) for x in args.head_dims.split(",")),
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
