"""Whether a CUDA graph would speed up a vector pair's call, as it does a factor pair's (t3's GRAPHS):
the prepared call eager, its graph replayed (outputs left in the graph's buffers: the bound), and
replayed plus a copy of its outputs (what a call returning fresh tensors would pay), 5 rotated
rounds of do_bench medians in one process; every output checked first, the graph's after its
outputs were set to NaN. A developer's probe, not package code (needs a CUDA GPU).

    python dev/sparse_fusion/vector_graph.py OUT.json poisson3d:100:sptrsv_spmv:sparse_fusion,...

Data of 2026-12-03 (H200): figures/data/vector_graph_* — the graph was slower (3D sptrsv_spmv
0.256 ms against 0.228 eager, 27-point 0.298 against 0.297), so vector pairs stay eager.
"""
import json
import sys

import numpy as np
import torch
from triton.testing import do_bench
from ab_commit import operands_and_vectors, run_header
from tiers import fusion_schedules as fs
from tiers.bench import sparse_fusion as bench
from tiers.t3_triton_fused import sparse_fusion as sf

out, cases = sys.argv[1], sys.argv[2].split(",")
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
res = run_header(dev, probe="vector_graph")
for case in cases:
    pair, kind, dtype, mats, v64, v, v2 = operands_and_vectors(case, dev)
    s = fs.inspect(pair, *mats, kind=kind)
    run = sf.prepare(pair, *mats, like=v, schedule=s, executor="dataflow")
    refs = bench.reference(pair, mats, v64.numpy())
    row = {"case": case}
    for _ in range(3):
        o = run(v)
    row["eager_ok"] = bool(bench.check(o, refs, dtype)[0])
    if dev.type == "cpu":
        print(row); continue
    try:
        st = torch.cuda.Stream()
        st.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(st):
            run(v)
        torch.cuda.current_stream().wait_stream(st)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            gouts = run(v)
        for t in gouts:
            t.fill_(float("nan"))
        g.replay(); torch.cuda.synchronize()
        row["graph_ok"] = bool(bench.check(tuple(t.clone() for t in gouts), refs, dtype)[0])
    except Exception as e:
        row["graph_error"] = repr(e)[:400]
        g = None
    fns = {"eager": lambda: run(v)}
    if g is not None and row.get("graph_ok"):
        fns["graph"] = g.replay
        fns["graph_copy"] = lambda: (g.replay(), [t.clone() for t in gouts])
    labels = list(fns)
    rounds = {k: [] for k in labels}
    for rd in range(5):
        k = rd % len(labels)
        for label in labels[k:] + labels[:k]:
            rounds[label].append(round(do_bench(fns[label], warmup=25, rep=250, return_mode="median"), 4))
    row["rounds"] = rounds
    row["ms"] = {k: float(np.median(x)) for k, x in rounds.items()}
    print(json.dumps(row), flush=True)
    res["rows"].append(row)
    json.dump(res, open(out, "w"), indent=1)
    torch.cuda.empty_cache()
