"""Per-block clock stamps of t3's dataflow kernel (the vector pairs): where a dependence hop goes.

A developer's probe, not package code; it needs a CUDA GPU (inline PTX reads %globaltimer). Like
stamps.py for the factor kernel, it copies the package's `_dataflow` and the functions it calls
per block (`_pipelined`, `_half`, `_finish`), adds three stamps a block — T0 when the block's
turn comes (before its wait), T1 once everything it reads is there and its row sums are taken
(with sums at every poll they come with the last poll), T2 once its results are computed and
their stores issued — and the SM it ran on, launches the copy on the package's own plan and
buffers (its launches made afresh, not the call's kept ones), and relates each block to the
block that wrote the last value it read (the latest T2 among its producers, found from the
record's positions, each stream's records at their own width where the two streams' differ:
STREAM_CHUNKS). Along the critical path (back from the last block to finish, producer by
producer) each step is split into the hop (T1 minus the producer's T2: the store reaching L2,
the polls that see it, or the program still busy with earlier blocks when T0 is later than the
producer's T2) and the block's own work (T2 − T1).
In the pipelined loop (_pipelined) each block's half is stamped twice more: TA as it starts and
TB once it has issued the next blocks' loads (STAMPS).

    python dev/sparse_fusion/flow_stamps.py OUTDIR matrix:size:pair:schedule,...

e.g. poisson3d:100:sptrsv_spmv:sparse_fusion. Without a GPU, with TRITON_INTERPRET=1 and small
sizes, it runs the copy in Triton's interpreter with stand-ins for the timer (stamps.py): a check
of the anchors, the launch and the analysis before GPU time is spent on it. Writes
OUTDIR/flow_stamps.json (per case the package's and the stamped kernel's ms, percentiles in µs,
the critical path's split) and OUTDIR/flow_stamps.npz (per case and block T0, T1, T2 in 10-ns
units and the block that wrote the last value it read, −1 for none).
"""
import json
import os
import sys
import time

import numpy as np
import torch

from stamps import head as stamps_head       # the timer, SM id and dependence helpers of stamps.py
from stamps import _source, critical_path, import_source, latest_producers, pct, sub
from tiers import fusion_schedules as fs
from tiers.bench import sparse_fusion as bench
from tiers.kernels.sparse_fusion_executors import launch, records
from tiers.t3_triton_fused import sparse_fusion as sf


STAMPS = 7
"""int64 stamps a block: T0, T1, T2, SM, TR (the loop that reads its records itself) and TA, TB
(_pipelined's half, _half: as it starts, and once it has issued the next blocks' loads, before the
block's _finish)."""

HEAD = f'''
from tiers.kernels.sparse_fusion_executors import records as _records
globals().update({{k: v for k, v in vars(_records).items() if not k.startswith("__")}})
STAMPS = tl.constexpr({STAMPS})


'''


def stamped_module():
    """The stamped copies (`_dataflow_clk` and the functions it calls: one more argument, CLK,
    first; STAMPS int64 a block: T0, T1, T2, SM, and where the loop reads the records itself (not
    _pipelined) TR, when the block's record has arrived, where it is _pipelined TA and TB, when
    the block's half starts and when it has issued its loads), imported from a temporary module."""
    fin = _source(records._finish)
    fin = sub(fin, "def _finish(", "def _finish_clk(CLK, ")
    fin = sub(fin, "    xp, rp = _at(", "    c0 = _gt(t)\n    xp, rp = _at(")
    fin = sub(fin, "    if TAIL:\n", "    c1 = _gt(_dep(r))\n    if TAIL:\n")
    fin = sub(fin, "        tl.store(OUT + dst, q, mask=dst >= 0)\n",
              "        tl.store(OUT + dst, q, mask=dst >= 0)\n"
              "    c2 = _gt(_dep(q))\n    here = t < N_BLK\n    base = CLK + t.to(tl.int64) * STAMPS\n"
              "    tl.store(base + 0, c0, mask=here)\n    tl.store(base + 1, c1, mask=here)\n"
              "    tl.store(base + 2, c2, mask=here)\n"
              "    tl.store(base + 3, _smid(c0.to(tl.int32)).to(tl.int64), mask=here)\n")
    half = _source(records._half)
    half = sub(half, "def _half(", "def _half_clk(CLK, ")
    half = sub(half, "    qb = _positions(", "    ta = _gt(t)\n    qb = _positions(")
    half = sub(half, "    _finish(t, spec, px,",
               "    tb = _gt(t)\n    at = CLK + t.to(tl.int64) * STAMPS\n"
               "    tl.store(at + 5, ta, mask=t < N_BLK)\n    tl.store(at + 6, tb, mask=t < N_BLK)\n"
               "    _finish_clk(CLK, t, spec, px,")
    pipe = _source(records._pipelined)
    pipe = sub(pipe, "def _pipelined(", "def _pipelined_clk(CLK, ")
    pipe = sub(sub(pipe, "= _half(", "= _half_clk(CLK, "), "= _half(", "= _half_clk(CLK, ")
    flow = _source(records._dataflow)
    flow = sub(flow, "def _dataflow(", "def _dataflow_clk(CLK, ")
    flow = sub(flow, "_pipelined(t, spec, P, WIDTH,", "_pipelined_clk(CLK, t, spec, P, WIDTH,", every=True)
    flow = sub(flow, "            _finish(t, spec, px,", "            _finish_clk(CLK, t, spec, px,")
    flow = sub(flow, "DIRECT, FOLD)\n            if LOOP and AHEAD > 0 and not STRIDE:",
               "DIRECT, FOLD)\n            tl.store(CLK + t.to(tl.int64) * STAMPS + 4, _gt(_dep(px) + _dep(a)))\n"
               "            if LOOP and AHEAD > 0 and not STRIDE:")
    return import_source("tiers_flow_stamped", stamps_head() + HEAD + "\n\n".join((fin, half, pipe, flow)))


def program_before(blocks, programs, meta):
    """Per block, the block its program ran before it (−1: its first): with STREAMS the first
    max(1, P·SHARE0 / 256) programs stride over blocks 0 … SPLIT_AT − 1 and the others over the
    rest (_dataflow), else every program strides by P (or takes tickets: then this is only the
    block P tickets earlier)."""
    t = np.arange(blocks)
    if not meta.get("STREAMS"):
        return np.where(t >= programs, t - programs, -1)
    split, P = meta["SPLIT_AT"], programs
    p0 = min(max(P * meta["SHARE0"] // 256, 1), P - 1)
    first = t < split
    prev = np.where(first, t - p0, t - (P - p0))
    return np.where(np.where(first, prev >= 0, prev >= split), prev, -1)


def analyze(run, clk, programs, meta):
    """Percentiles of each block's segments, and the critical path's split (module docstring)."""
    blocks, sdev = run.plan
    R, n = run.block_rows, run.tables.n1
    T = clk.cpu().numpy().reshape(blocks, STAMPS).astype(np.int64)
    sm_id, rec, half, clk_min = T[:, 3].copy(), T[:, 4], T[:, 5:7], T[:, 0].min()
    T = T[:, :3] - clk_min
    blk, _, prod, _ = records.record_reads(sdev, blocks, R, run.slot_stride, n)
    keep = prod != blk
    blk, prod = blk[keep], prod[keep]
    done = T[prod, 2]
    pred_done, argpred = latest_producers(blocks, blk, prod, done)
    has = argpred >= 0
    res = {"blocks": int(blocks), "programs": int(programs), "block_rows": R,
           "span_us": round(float(T[:, 2].max()) / 1e3, 1), "sms_seen": int(np.unique(sm_id).size),
           "wait_T0_T1": pct(T[:, 1] - T[:, 0]), "own_T1_T2": pct(T[:, 2] - T[:, 1]),
           "hop_T1_minus_pred": pct(T[has, 1] - pred_done[has]),
           "start_T0_minus_pred": pct(T[has, 0] - pred_done[has]),
           "late_start_frac": round(float(np.mean(T[has, 0] > pred_done[has])), 3)}
    prev = program_before(blocks, programs, meta)
    pv = prev >= 0
    res["program_gap_T0_minus_prevT2"] = pct(T[pv, 0] - T[prev[pv], 2])
    if (rec[pv] > 0).all():            # the records' arrival (TR), stamped where the loop reads them itself
        rec = rec - clk_min
        res["record_TR_minus_prevT2"] = pct(rec[pv] - T[prev[pv], 2])
        res["look_T0_minus_TR"] = pct(T[pv, 0] - rec[pv])
    if (half[pv] > 0).all():           # the pipelined loop's half (_half): TA as it starts, TB before _finish
        half = half - clk_min
        res["half_TA_minus_prevT2"] = pct(half[pv, 0] - T[prev[pv], 2])
        res["half_issue_TB_minus_TA"] = pct(half[pv, 1] - half[pv, 0])
        res["half_T0_minus_TB"] = pct(T[pv, 0] - half[pv, 1])
    path = critical_path(argpred, int(np.argmax(T[:, 2])))
    ph, pd_ = path[1:], pred_done[path[1:]]
    late = T[ph, 0] > pd_
    hop = T[ph, 1] - pd_
    res["path"] = {"steps": int(len(path)), "first_done_us": round(float(T[path[0], 2]) / 1e3, 2),
                   "late_start_frac": round(float(np.mean(late)), 3) if len(ph) else None,
                   "hop": pct(hop), "hop_waiting": pct(hop[~late]), "hop_late": pct(hop[late]),
                   "own": pct(T[ph, 2] - T[ph, 1]),
                   "sum_hop_us": round(float(hop.sum()) / 1e3, 1),
                   "sum_hop_late_us": round(float(hop[late].sum()) / 1e3, 1),
                   "sum_own_us": round(float((T[ph, 2] - T[ph, 1]).sum()) / 1e3, 1)}
    return res, T, argpred


class _WithClk:
    """The stamped kernel as _dataflow_launches takes a kernel: launched with CLK first."""

    def __init__(self, kernel, clk):
        self.kernel, self.clk = kernel, clk
        self.arg_names = kernel.arg_names

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.kernel[grid](self.clk, *args, **kwargs)


def call_clk(run, v, kernel, seen=None):
    """One call of the package's dataflow path with the stamped kernel in place of _dataflow, its
    launches made afresh through the JIT (not the call's kept ones, launch.Bound); `seen` (a dict)
    gets the launch's grid (programs) and constexprs."""
    clk = torch.zeros(run.plan[0] * STAMPS, dtype=torch.int64, device=v.device)
    saved = sf._dataflow, sf.claimed, run.binds, run.launches, run.resident
    run.resident = getattr(run, "resident_clk", None)

    def claimed_clk(k, r, count, args, meta, pdl=False):
        grid, kwargs = launch.claimed(k.kernel, r, count, (k.clk,) + tuple(args), meta, pdl)
        if seen is not None:
            seen.update(kwargs, programs=grid[0])
        return grid, kwargs
    sf._dataflow, sf.claimed, run.binds, run.launches = _WithClk(kernel, clk), claimed_clk, False, None
    try:
        out = run(v)
    finally:
        run.resident_clk = run.resident
        sf._dataflow, sf.claimed, run.binds, run.launches, run.resident = saved
    return out, clk


def main():
    ck = stamped_module()
    out_dir, cases = sys.argv[1], sys.argv[2].split(",")
    os.makedirs(out_dir, exist_ok=True)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")    # cpu: a check run (docstring)
    timed = dev.type == "cuda"
    from triton.testing import do_bench
    results = {"device": torch.cuda.get_device_name(dev) if timed else "cpu (interpreter: not timed)",
               "torch": torch.__version__,
               "triton": __import__("triton").__version__,
               "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "cases": []}
    saved = {}
    for case in cases:
        name, size, pair, kind = case.split(":")[:4]
        A = bench.make_matrix(name, int(size))
        mats = bench.operands(pair, A)
        v = torch.rand(A.shape[0], generator=torch.Generator().manual_seed(1), dtype=torch.float64).to(dev) + 0.5
        run = sf.prepare(pair, *mats, like=v, schedule=fs.inspect(pair, *mats, kind=kind), executor="dataflow")
        assert not run.flat, "flat records (the power-law graph) run _flat, which this probe does not stamp"
        refs = bench.reference(pair, mats, v.cpu().numpy())
        ok, err, msg = bench.check(run(v), refs, "float64")
        out, clk = call_clk(run, v, ck._dataflow_clk)
        ok2, err2, msg2 = bench.check(out, refs, "float64")
        tb, ti = [], []
        for _ in range(3 if timed else 0):
            tb.append(do_bench(lambda: run(v), warmup=25, rep=200, return_mode="median"))
            ti.append(do_bench(lambda: call_clk(run, v, ck._dataflow_clk), warmup=25, rep=200, return_mode="median"))
        seen = {}
        out, clk = call_clk(run, v, ck._dataflow_clk, seen)
        if timed:
            torch.cuda.synchronize()
        row = {"case": case, "ok": ok, "ok_clk": ok2, "err": max(err, err2), "msg": msg or msg2,
               "ms": round(float(np.median(tb)), 4) if tb else None,
               "ms_clk": round(float(np.median(ti)), 4) if ti else None,
               "early": bool(run.early), "claim": run.claim,
               "streams": {k: seen.get(k) for k in ("STREAMS", "SPLIT_AT", "SHARE0", "CHUNK0", "CHUNK1")}}
        res, T, argpred = analyze(run, clk, seen["programs"], seen)
        row.update(res)
        saved[case.replace(":", "_")] = np.concatenate([(T // 10).astype(np.int32), argpred[:, None].astype(np.int32)], 1)
        print(json.dumps(row), flush=True)
        results["cases"].append(row)
        json.dump(results, open(os.path.join(out_dir, "flow_stamps.json"), "w"), indent=1)
    np.savez_compressed(os.path.join(out_dir, "flow_stamps.npz"), **saved)


if __name__ == "__main__":
    main()
