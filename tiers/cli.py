"""`python -m tiers bench attention` measures on a GPU; `python -m tiers figures` redraws the
figures from recorded data and `python -m tiers table sparse_fusion` prints the README's table
from it, neither needing a GPU."""
from __future__ import annotations

import argparse


def _ints(text):
    return tuple(int(x) for x in text.split(","))


def _switches(text):
    """'on,off' → (True, False)."""
    words = {"on": True, "off": False}
    bad = [w for w in text.split(",") if w not in words]
    if bad:
        raise SystemExit(f"expected on or off, got {', '.join(bad)}")
    return tuple(words[w] for w in text.split(","))


def _options(text):
    """'slack=0.2,packing=separated' -> {'slack': 0.2, 'packing': 'separated'} (numbers parsed)."""
    out = {}
    for item in filter(None, (text or "").split(",")):
        key, _, value = item.partition("=")
        try:
            out[key] = int(value)
        except ValueError:
            try:
                out[key] = float(value)
            except ValueError:
                out[key] = value
    return out


def _strided_pattern():
    from tiers.acsr import ACSR
    return dict(pattern=ACSR.strided(45, 6, 8))


# one small problem per algorithm: (entry, q/k/v shape, keyword arguments or a function making them)
_CHECKS = {
    "attention": ("attention", (1, 2, 45, 32), dict(causal=True)),
    "neighborhood": ("na2d", (1, 9, 11, 2, 16), dict(kernel_size=(3, 4), dilation=(2, 1), is_causal=(False, True))),
    "sparse_attention": ("sparse_attention", (1, 2, 45, 16), _strided_pattern),
}


def _check_sparse_fusion(device, seed) -> list[str]:
    """Every tier of sparse_fusion on one small SPD matrix (a 5×5 Poisson grid), every pair with
    the sparse-fusion schedule, float32 vectors, against t0 in float64; one line per tier with
    its worst error over the pairs and their outputs."""
    import numpy as np
    import torch

    from tiers import registry
    from tiers.bench.sparse_fusion import PAIRS, as_values, operands
    from tiers.fusion_schedules import inspect
    from tiers.sparse_matrices import poisson2d
    from tiers.tolerances import compare

    A = poisson2d(5)
    b = np.random.default_rng(seed).standard_normal(A.shape[0]).astype(np.float32).astype(np.float64)
    cases = []
    for pair in PAIRS:
        mats = operands(pair, A)
        ref = registry.get("sparse_fusion", "t0_numpy", pair)(*mats, b)
        cases.append((pair, mats, inspect(pair, *mats, kind="sparse_fusion"), ref))
    lines = []
    for tier in registry.ALGORITHMS["sparse_fusion"].tiers[1:]:
        worst, ok = 0.0, True
        for pair, mats, schedule, ref in cases:
            outs = registry.get("sparse_fusion", tier, pair)(*mats, torch.tensor(b, dtype=torch.float32, device=device),
                                                              schedule=schedule)
            for o, r in zip(outs, ref):
                res = compare(as_values(o), as_values(r), "float32")
                worst, ok = max(worst, res["rel"]), ok and res["ok"]
        lines.append(f"  {'sparse_fusion':<16} {f'{len(cases)} pairs':<16} {tier:<18} rel err {worst:.1e}  "
                     f"{'ok' if ok else 'FAILED'}")
    return lines


def self_check(seed=0) -> str:
    """Run every tier of every algorithm on one small random problem and report its error
    against t0 (Triton tiers in the interpreter when there is no GPU)."""
    import os

    import numpy as np
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from tiers import registry
    from tiers.tolerances import compare

    rng = np.random.default_rng(seed)
    lines = [f"self-check on {device}: every tier against t0 (float64), float32 inputs"]
    for name, alg in registry.ALGORITHMS.items():
        if name == "sparse_fusion":   # matrices and a vector, not q, k, v
            lines += _check_sparse_fusion(device, seed)
            continue
        entry, shape, kwargs = _CHECKS[name]
        kwargs = kwargs() if callable(kwargs) else kwargs
        q, k, v = (rng.standard_normal(shape).astype(np.float32).astype(np.float64) for _ in range(3))
        ref = registry.get(name, "t0_numpy", entry)(q, k, v, **kwargs)
        for tier in alg.tiers[1:]:
            args = (torch.tensor(x, dtype=torch.float32, device=device) for x in (q, k, v))
            res = compare(registry.get(name, tier, entry)(*args, **kwargs), ref, "float32")
            lines.append(f"  {name:<16} {entry:<16} {tier:<18} rel err {res['rel']:.1e}  {'ok' if res['ok'] else 'FAILED'}")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(prog="tiers")
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bench", help="time every tier and the anchors on the GPU, write figures/data/")
    b.add_argument("algorithm", choices=["attention", "neighborhood", "sparse_attention", "sparse_fusion"])
    b.add_argument("--lengths", type=_ints, default=(1024, 2048, 4096, 8192, 16384))
    b.add_argument("--head-dims", type=_ints, default=(64, 128))
    b.add_argument("--modes", default="fwd,fwd_bwd")
    b.add_argument("--providers", default=None, help="comma list; default all (attention, sparse_attention)")
    b.add_argument("--suites", default=None,
                   help="neighborhood: paper,field (default both); sparse_attention: main,sweep (default main)")
    b.add_argument("--patterns", default=None, help="sparse_attention: comma list of pattern names")
    b.add_argument("--cases", default=None, help="neighborhood: comma list of field case names")
    b.add_argument("--matrices", default=None,
                   help="sparse_fusion: comma list of poisson2d,poisson3d,poisson3d27,powerlaw (default all) "
                        "and Matrix Market files (*.mtx, *.mtx.gz), each at its own size")
    b.add_argument("--sizes", default=None,
                   help="sparse_fusion: size overrides, e.g. poisson2d=500,powerlaw=200000 (grid side or nodes)")
    b.add_argument("--pairs", default=None, help="sparse_fusion: comma list of kernel pairs (default all five)")
    b.add_argument("--ordering", default="natural", help="sparse_fusion: natural,rcm (default natural)")
    b.add_argument("--schedules", default=None, help="sparse_fusion: wavefront,lbc,sparse_fusion (default all)")
    b.add_argument("--dtype", default="float64", help="sparse_fusion: float64, float32 or both (comma list)")
    b.add_argument("--workers", default=None, help="sparse_fusion: comma list passed to the inspector (a sweep)")
    b.add_argument("--inspector-options", default=None,
                   help="sparse_fusion: more inspector options, e.g. slack=0.2,packing=separated")
    b.add_argument("--executors", default=None,
                   help="sparse_fusion: t3 executors to time (default levels,syncfree,dataflow,chains,segments where the "
                        "pair allows)")
    b.add_argument("--block-rows", default=None,
                   help="sparse_fusion: comma list of iterations per block for t3's sync-free executors (a sweep)")
    b.add_argument("--nap-ns", default=None,
                   help="sparse_fusion: comma list of sleeps between polls for t3's sync-free executors "
                        "(a sweep)")
    b.add_argument("--chain-steps", default=None,
                   help="sparse_fusion: comma list of links per block for t3's chain and segment executors (a sweep)")
    b.add_argument("--programs-per-sm", default=None,
                   help="sparse_fusion: comma list of persistent programs per SM for t3's sync-free executors "
                        "(0: one program per block; a sweep)")
    b.add_argument("--tickets", default=None,
                   help="sparse_fusion: comma list of block orders for t3's dataflow and flag executors (a sweep)")
    b.add_argument("--tickets-ahead", default=None,
                   help="sparse_fusion: comma list of tickets a persistent program of t3's dataflow executor holds "
                        "beyond its block (0, 1, 2; a sweep)")
    b.add_argument("--claim", default=None,
                   help="sparse_fusion: comma list of ways a persistent program of t3's flag or dataflow executor "
                        "finds its next block (counter, stride; a sweep)")
    b.add_argument("--fuse-rows", default=None,
                   help="sparse_fusion: comma list of on/off: whether t3's flag executor runs a factor pair's solve "
                        "rows inside their factor rows' blocks where the schedule allows (a sweep)")
    b.add_argument("--quick", action="store_true", help="sparse_fusion: tiny matrices, runs on a CPU (interpreter)")
    b.add_argument("--reps", type=int, default=1,
                   help="sparse_attention, sparse_fusion: rounds each case is measured in, interleaved (rows keep "
                        "the median)")
    b.add_argument("--out", default=None, help="output folder (default figures/data)")
    b.add_argument("--append", action="store_true", help="merge into that day's file instead of replacing it")
    t = sub.add_parser("table", help="print the README's table of the newest recorded sparse_fusion data")
    t.add_argument("algorithm", choices=["sparse_fusion"])
    t.add_argument("--dtype", default="float64", help="float64 or float32")
    t.add_argument("--brief", action="store_true", help="without CuPy, SciPy, inspector and payoff columns")
    t.add_argument("--data", default=None,
                   help="folder of the recorded data, whose newest file is taken (default figures/data), or one file")
    f = sub.add_parser("figures", help="redraw every figure under figures/ from figures/data/")
    f.add_argument("--out", default=None)
    f.add_argument("--no-check", action="store_true", help="skip running every tier on a small problem first")
    args = p.parse_args(argv)

    if args.cmd == "bench" and args.algorithm == "attention":
        from tiers.bench import attention as bench

        providers = tuple(args.providers.split(",")) if args.providers else bench.PROVIDERS
        env, ceilings, rows, paths = bench.run(args.lengths, args.head_dims, tuple(args.modes.split(",")),
                                               providers, out_dir=args.out, append=args.append)
        print(env)
        print(bench.summary(rows, ceilings))
        print("wrote", *paths)
    elif args.cmd == "bench" and args.algorithm == "neighborhood":
        from tiers.bench import neighborhood as bench

        env, ceilings, rows, paths = bench.run(tuple((args.suites or "paper,field").split(",")),
                                               tuple(args.modes.split(",")),
                                               out_dir=args.out, append=args.append,
                                               field_cases=args.cases.split(",") if args.cases else None)
        print(env, ceilings)
        print(bench.summary(rows))
        print("wrote", *paths)
    elif args.cmd == "bench" and args.algorithm == "sparse_attention":
        from tiers.bench import sparse_attention as bench

        env, ceilings, rows, paths = bench.run(tuple((args.suites or "main").split(",")), out_dir=args.out,
                                               append=args.append,
                                               patterns=args.patterns.split(",") if args.patterns else None,
                                               providers=args.providers.split(",") if args.providers else None,
                                               modes=tuple(args.modes.split(",")), reps=args.reps)
        print(env, ceilings)
        print(bench.summary(rows))
        print("wrote", *paths)
    elif args.cmd == "bench" and args.algorithm == "sparse_fusion":
        import os

        if args.quick:
            try:
                import torch
                if not torch.cuda.is_available():
                    os.environ.setdefault("TRITON_INTERPRET", "1")   # before any tier imports triton
            except ImportError:
                pass
        from tiers.bench import sparse_fusion as bench

        sizes = dict((k, int(v)) for k, v in (x.split("=") for x in args.sizes.split(","))) if args.sizes else None
        env, ceilings, rows, paths = bench.run(
            matrices=tuple(args.matrices.split(",")) if args.matrices else tuple(bench.MATRICES),
            pairs=tuple(args.pairs.split(",")) if args.pairs else bench.PAIRS,
            providers=tuple(args.providers.split(",")) if args.providers else bench.PROVIDERS,
            orderings=tuple(args.ordering.split(",")), dtypes=tuple(args.dtype.split(",")), sizes=sizes, quick=args.quick,
            workers=_ints(args.workers) if args.workers else (None,),
            options=_options(args.inspector_options), out_dir=args.out,
            append=args.append, kinds=tuple(args.schedules.split(",")) if args.schedules else bench.KINDS,
            executors=tuple(args.executors.split(",")) if args.executors else None,
            block_rows=_ints(args.block_rows) if args.block_rows else (None,),
            nap_ns=_ints(args.nap_ns) if args.nap_ns else (None,),
            chain_steps=_ints(args.chain_steps) if args.chain_steps else (None,),
            programs_per_sm=_ints(args.programs_per_sm) if args.programs_per_sm else (None,),
            tickets=tuple(args.tickets.split(",")) if args.tickets else (None,),
            tickets_ahead=_ints(args.tickets_ahead) if args.tickets_ahead else (None,),
            claim=tuple(args.claim.split(",")) if args.claim else (None,),
            fuse_rows=_switches(args.fuse_rows) if args.fuse_rows else (None,), reps=args.reps)
        print(env, ceilings)
        print(bench.summary(rows))
        print("wrote", *paths)
    elif args.cmd == "table":
        from tiers.bench import sparse_fusion as bench
        from tiers.bench.common import load_rows

        print(bench.markdown_table(load_rows("sparse_fusion", args.data)[1], args.dtype, full=not args.brief))
    elif args.cmd == "figures":
        from tiers import figures

        if not args.no_check:
            print(self_check())
        for path in figures.draw_all(args.out):
            print("wrote", path)


if __name__ == "__main__":
    main()
