"""Tile sweep for the fused neighborhood kernels on the GPU: which (query tile, key tile, warps,
stages) each rank should use, and what skipping the mask on interior key tiles buys.

    python -m tiers.bench.tune_neighborhood [--out DIR] [--bwd]

Writes na_tune_<device>_<date>.csv; the chosen tiles go by hand into the tables of
tiers/t3_triton_fused/neighborhood.py (the sweep is a development tool, not a result).
"""
from __future__ import annotations

import argparse
import itertools

from tiers.bench.common import environment, measure, write_rows
from tiers.bench.neighborhood import FIELD, _inputs, neighbor_pairs

FWD = {  # the first entry of each rank is the table's current choice
    1: [((1, 1, t), (1, 1, n), w, 3) for t, n, w in itertools.product((128, 64), (64, 128), (8, 4))],
    2: [((1, tx, ty), (1, nx, ny), 8, 3) for (tx, ty), (nx, ny) in itertools.product(
        ((8, 16), (16, 8), (16, 16)), ((8, 8), (4, 16), (8, 16)))] + [((1, 8, 16), (1, 8, 8), 8, 2),
                                                                     ((1, 8, 8), (1, 8, 8), 4, 3)],
    3: [(t, n, 8, 3) for t, n in itertools.product(((2, 8, 8), (1, 8, 16), (4, 4, 8)),
                                                   ((2, 4, 8), (1, 8, 8), (1, 4, 16)))] + [((2, 8, 8), (2, 4, 8), 8, 2)],
}
BWD = {  # (query tile, key tile): dQ walks key tiles per query tile, dK/dV query tiles per key tile
    1: [((1, 1, t), (1, 1, n), w, s) for t, n, w, s in [(64, 64, 4, 2), (64, 128, 8, 2), (128, 64, 8, 2),
                                                        (64, 64, 4, 3), (32, 128, 4, 2), (128, 128, 8, 2)]],
    2: [((1, tx, ty), (1, nx, ny), w, s) for (tx, ty), (nx, ny), w, s in [
        ((8, 8), (8, 8), 4, 2), ((8, 8), (8, 16), 8, 2), ((8, 16), (8, 8), 8, 2), ((8, 8), (8, 8), 4, 3),
        ((4, 16), (8, 16), 8, 2), ((8, 16), (8, 16), 8, 2), ((8, 8), (8, 8), 8, 2)]],
    3: [(t, n, w, s) for t, n, w, s in [((2, 4, 8), (2, 4, 8), 4, 2), ((2, 4, 8), (2, 8, 8), 8, 2),
                                        ((2, 8, 8), (2, 4, 8), 8, 2), ((2, 4, 8), (2, 4, 8), 4, 3),
                                        ((1, 8, 8), (2, 8, 8), 8, 2), ((2, 8, 8), (2, 8, 8), 8, 2)]],
}


def run(out_dir=None, backward=False, split=(True, False)):
    """Time each tile configuration on the three field problems; the first configuration of a
    rank is timed with the split both ways, the others with split[0]."""
    import torch

    from tiers import registry
    from tiers.t3_triton_fused import neighborhood as t3

    env = environment()
    rows = []
    for case in FIELD:
        spatial, kernel = case["spatial"], case["kernel"]
        rank = len(spatial)
        f = registry.get("neighborhood", "t3_triton_fused", f"na{rank}d")
        q, k, v = _inputs(1, spatial, 24, 128, torch.float16, seed=0)
        mode = "fwd_bwd" if backward else "fwd"
        flops = 4 * 24 * 128 * neighbor_pairs(spatial, kernel) * (3.5 if backward else 1.0)
        table = t3._TILES_BWD if backward else t3._TILES
        saved = table[rank]
        for n_cfg, cfg in enumerate((BWD if backward else FWD)[rank]):
            for sp in split if n_cfg == 0 else split[:1]:
                table[rank] = (*cfg, sp)
                res = measure(lambda a, b, c: f(a, b, c, kernel), [q, k, v], mode)
                row = dict(case=case["case"], mode=mode, T="x".join(map(str, cfg[0])), N="x".join(map(str, cfg[1])),
                           warps=cfg[2], stages=cfg[3], split=sp, **res, tflops=flops / res["ms"] / 1e9)
                print(row, flush=True)
                rows.append(row)
        table[rank] = saved
        q = k = v = None
        torch.cuda.empty_cache()
    for case in FIELD:
        best = min((r for r in rows if r["case"] == case["case"] and r["status"] == "ok"), key=lambda r: r["ms"],
                   default=None)
        print("best", case["case"], best)
    return write_rows(rows, "na_tune_bwd" if backward else "na_tune", env, out_dir)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m tiers.bench.tune_neighborhood")
    p.add_argument("--out", default=None)
    p.add_argument("--bwd", action="store_true", help="sweep the backward tiles (times forward+backward)")
    p.add_argument("--split-first", choices=("on", "off"), default="on",
                   help="split setting for every configuration but the first (timed both ways)")
    a = p.parse_args(argv)
    print(*run(a.out, a.bwd, (True, False) if a.split_first == "on" else (False, True)))


if __name__ == "__main__":
    main()
