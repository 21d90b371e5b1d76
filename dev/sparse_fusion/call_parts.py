"""What each part of a replayed factor-pair call costs: the call with one part left out at a time.

A developer's probe, not package code (needs a CUDA GPU). t3's factor pairs replay a CUDA graph
(`_graphed`) and must read the breakdown flag before they return, so the host's work on each side
of that read is on the call's path. For each case this times, with do_bench medians in rotated
rounds in one process, the prepared call and copies of `_graphed` with one part left out (the
check of the vector, the sparse tensor, the flag's read), the replay and `factor_out` alone (no
sync: the GPU's own time), and `_factor_out` alone at other block sizes. A left-out part's cost
is its variant's time below the call's. Every variant that returns results is checked against
the prepared call's first.

    python dev/sparse_fusion/call_parts.py OUT.json poisson3d:100:spilu0_sptrsv[:float32],...

Data of 2026-12-03 (H200): figures/data/call_parts_* at commit d0fdd96, whose calls also copied
the input into the graph's buffer and cloned x after factor_out (variants no_copy and no_clone
then) and `_factor_out` launched directly, not through rows.factor_out (which also allocates its
output and zeroes a flag); call_parts_after_* at 5183594, likewise.
"""
import json
import sys

import torch
from triton.testing import do_bench

from tiers import fusion_schedules as fs
from tiers.bench import sparse_fusion as bench
from tiers.kernels import sparse_rows as rows
from tiers.t3_triton_fused import sparse_fusion as sf


def variants(run, v):
    t = run.tables

    def call(check=True, sparse=True, sync=True):
        def f():
            if check:
                run.check(v)
            val, flag, outs, ready = sf._replay(run, v.contiguous())
            if sparse and sync:
                return rows.results(t, run.dev, val, outs, flag=flag, ready=ready)
            if sync:
                if ready is not None:
                    ready.synchronize()
                rows.raise_flagged(t, val, flag)
            return (val,) + outs
        return f

    return {"call": lambda: run(v), "inline": call(), "no_check": call(check=False),
            "no_sparse": call(sparse=False), "no_sync": call(sync=False),
            "none_of_them": call(check=False, sparse=False),
            "gpu_only": call(check=False, sparse=False, sync=False)}


def factor_out_shapes(run, factor):
    """rows.factor_out alone on a copy of a finished factor, at each (BLOCK, num_warps) as
    rows.FACTOR_OUT_SHAPE; with marks that name no pivot, since the copy's pivots hold the
    sentinel after the first launch (a real call finds none to flag, so it makes no atomics
    either)."""
    g, t = run.graph, run.tables
    val = factor.values().clone()
    marks = g.marks & (0xFF ^ rows.PIVOT)

    def at_shape(shape):
        def f():
            kept, rows.FACTOR_OUT_SHAPE = rows.FACTOR_OUT_SHAPE, shape
            try:
                rows.factor_out(t, val, marks, reset=g.resets, test=not g.tests_pivots)    # as the call
            finally:
                rows.FACTOR_OUT_SHAPE = kept
        return f

    res = {f"B{B}_w{w}": at_shape((B, w)) for B in (1024, 2048, 4096, 8192) for w in (4, 8)}
    out = torch.empty_like(val)
    res["plain_copy"] = lambda: out.copy_(val)
    return res, val.numel() * val.element_size()


def same(a, b):
    a, b = (x.values() if x.layout == torch.sparse_csr else x for x in (a, b))
    return bool(torch.equal(a, b))


def main():
    out, cases = sys.argv[1], sys.argv[2].split(",")
    res = []
    for case in cases:
        name, size, pair, *rest = case.split(":")
        dtype = getattr(torch, rest[0]) if rest else torch.float64
        A = bench.make_matrix(name, int(size))
        mats = bench.operands(pair, A)
        v = (torch.rand(A.shape[0], dtype=torch.float64) + 0.5).to("cuda", dtype)
        run = sf.prepare(pair, *mats, like=v, schedule=fs.inspect(pair, *mats, kind="sparse_fusion"))
        for _ in range(3):
            ref = run(v)
        assert run.graph is not None, "this case does not replay a graph"
        torch.cuda.synchronize()
        fns = variants(run, v)
        for k in ("inline", "no_check", "no_sparse", "no_sync", "none_of_them"):
            got = fns[k]()
            ok = all(same(a, b) for a, b in zip(ref, got))
            assert ok, f"{case} {k}: results differ from the call's"
        fo, nbytes = factor_out_shapes(run, ref[0])
        fns.update({f"factor_out_{k}": f for k, f in fo.items()})
        names = list(fns)
        times = {k: [] for k in names}
        for r in range(5):
            for k in names[r % len(names):] + names[:r % len(names)]:
                times[k].append(do_bench(fns[k], warmup=25, rep=200, return_mode="median"))
        med = {k: sorted(x)[len(x) // 2] for k, x in times.items()}
        row = {"case": case, "ms": med, "rounds": times, "factor_bytes": nbytes,
               "us_below_call": {k: round(1e3 * (med["call"] - med[k]), 1) for k in names}}
        print(json.dumps({"case": case, "ms": {k: round(x, 4) for k, x in med.items()},
                          "us_below_call": row["us_below_call"]}), flush=True)
        res.append(row)
        del run
        torch.cuda.empty_cache()
    json.dump(res, open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
