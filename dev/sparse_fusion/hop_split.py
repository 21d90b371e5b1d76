"""Where a factor row's hop goes: stamps.py's per-block stamps, split by how long before its latest
factor predecessor's store the row had its first-stage operands in.

A developer's probe, not package code; it runs on a CPU (TRITON_INTERPRET=1, for t3's prepare),
from the stamps.npz that `dev/sparse_fusion/stamps.py` wrote on a GPU (T0…T5 per block, 10-ns
units), rebuilding each case's plan and joint DAG the same way:

    TRITON_INTERPRET=1 PYTHONPATH=. python dev/sparse_fusion/hop_split.py STAMPS.npz OUT.json

Per case: the lead of a row's T2 (first-stage operands in) over its latest factor predecessor's T4
(that row stored), and in bins of that lead the factor hop (T3, the late operands in, against that
T4) and the row's own T2 → T3. A row whose lead is below 0 had its first stage's operands only
after the store, so its late operands' first read, made with the first stage's, left before it;
a row with a long lead was polling when the store came, so its hop is the poll's own latency.
Data of 2026-12-05 (the H100's stamps_h100_2026-12-05_28e4af2.*): hop_split_h100_2026-12-05.json.
"""
import json
import sys

import numpy as np
import torch

from tiers import fusion_schedules as fs
from tiers.bench import sparse_fusion as bench
from tiers.t3_triton_fused import sparse_fusion as sf

import stamps as st

LEADS_NS = [(-np.inf, 0), (0, 1000), (1000, 2000), (2000, 4000), (4000, np.inf)]


def split(key, T):
    """The hop's split for one case of stamps.npz (key matrix_size_pair_schedule, T in ns)."""
    parts = key.split("_")
    name, size, pair, kind = parts[0], int(parts[1]), "_".join(parts[2:4]), "_".join(parts[4:])
    A = bench.make_matrix(name, size)
    mats = bench.operands(pair, A)
    sched = fs.inspect(pair, *mats, kind=kind)
    run = sf.prepare(pair, *mats, like=torch.rand(A.shape[0], dtype=torch.float64), schedule=sched,
                     executor="dataflow")
    blocks = run.plan[0]
    assert T.shape[0] == blocks, f"{key}: {T.shape[0]} stamped blocks, the plan has {blocks}"
    n1, _, u, w, bu, bw, _ = st.block_edges(run, sched, mats)
    keep = (u < n1) & (w < n1)                      # a factor row's dependences on factor rows
    done = st.done_at(T, u, bu, n1, run.tables.walked_iterations)[keep]
    f_done, _ = st.latest_producers(blocks, bw[keep], bu[keep], done)
    h = f_done >= 0
    lead, hop, own = f_done[h] - T[h, 2], T[h, 3] - f_done[h], T[h, 3] - T[h, 2]
    res = {"rows_with_factor_pred": int(h.sum()), "lead_T2_before_pred_T4": st.pct(lead), "by_lead": []}
    for lo, hi in LEADS_NS:
        m = (lead >= lo) & (lead < hi)
        res["by_lead"].append({"lead_us": [None if np.isinf(lo) else lo / 1e3, None if np.isinf(hi) else hi / 1e3],
                               "frac": round(float(m.mean()), 3), "hop_T3_minus_pred_T4": st.pct(hop[m]),
                               "own_T2_T3": st.pct(own[m])})
    res["own_T2_T3_pred_done_3us_before_T2"] = st.pct(own[lead < -3000])
    return res


def main():
    npz, out = np.load(sys.argv[1]), {}
    for key in npz.files:
        out[key] = split(key, npz[key].astype(np.int64) * 10)
        print(key, json.dumps(out[key]), flush=True)
    json.dump(out, open(sys.argv[2], "w"), indent=1)


if __name__ == "__main__":
    main()
