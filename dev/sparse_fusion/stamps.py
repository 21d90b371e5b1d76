"""Per-block clock stamps of t3's factor-pair kernel: where a row's time goes.

A developer's probe, not package code; it needs a CUDA GPU (inline PTX reads %globaltimer, which
Triton's interpreter cannot run). It copies t3's `_syncfree` and `sparse_rows.held_finish` from
the package, adds six stamps a block — T0 claimed, T1 tables read, T2 first-stage operands there,
T3 late operands there, T4 factor row stored, T5 block done — writes the copy to a temporary
module, launches it on the package's own plan and buffers, and relates each block to its
latest-finishing predecessor in the joint DAG. The copy is made by text substitution: when the
package's kernels change, the anchors may need to follow (an AssertionError names the one).

    python dev/sparse_fusion/stamps.py OUTDIR matrix:size:pair:schedule[:programs_per_sm][:key=value...],...

e.g. poisson3d27:64:spilu0_sptrsv:sparse_fusion; key=value items are `prepare` keywords
(powerlaw:1000000:spilu0_sptrsv:sparse_fusion:fuse_rows=true). Without a GPU, `TRITON_INTERPRET=1 python
dev/sparse_fusion/stamps.py OUTDIR poisson3d27:5:spilu0_sptrsv:sparse_fusion` runs the same copy in
Triton's interpreter with stand-ins for the timer and SM id (a block's program id): it checks the
anchors, the launch and the analysis, and times nothing — what to run before spending GPU time
on it. Writes OUTDIR/stamps.json (per case: the package's and the stamped kernel's ms,
percentiles in µs of every segment, of the start and finish relative to the block's latest
predecessor, and the same along the critical path) and OUTDIR/stamps.npz (the first three
cases' stamps, in 10-ns units). The two chains apart too: a block's T3 against its factor
predecessors' T4 (f_hop_*), its T5 against its solve predecessors' T5 (x_hop_*), and those
against its own T4 (x_pred_T5_minus_own_T4: below 0, the x_j were in before the factor row was
stored). The factor hop against how many blocks were polling when its
predecessor stored (f_hop_by_pollers), and how many of the critical path's hops run through a
solve edge (path.via_solve_frac). Blocks holding a walked factor row apart (walked): a walked
row's steps and its copy to VAL run after the held rows' T4 (factor_rows), so their segment is
T4–T5, beside the solve; and their share of the critical path. How the span splits (phases):
programs in flight and blocks started per tenth of it, and when each wavefront level's blocks
were done (checked offline on the power-law stamps of 2026-12-06 and the plan rebuilt on the
CPU). Data of 2026-12-01 (H200): figures/data/clk_probe_*; of 2026-12-02 (commit 861c91c, every held row a grid):
clk_probe_grid_*; (a variant of b896f67, with the chains apart): clk_probe_relook_*; of
2026-12-03: clk_probe_pollers_*, clk_probe_path_*; of 2026-12-06 (H100, the power-law ILU(0),
its walked section in a first form that read T3–T4): stamps_powerlaw_ilu_h100_*.
"""
import importlib
import inspect
import json
import os
import sys
import tempfile
import textwrap
import time

import numpy as np
import torch

from ab_commit import option_value
from tiers import fusion_schedules as fs
from tiers.bench import sparse_fusion as bench
from tiers.kernels import sparse_rows as rows
from tiers.t3_triton_fused import sparse_fusion as sf
from tiers.kernels.sparse_fusion_executors import launch


def _source(fn):
    return textwrap.dedent(inspect.getsource(fn.fn))


def sub(s, old, new, every=False):
    """s with `old` replaced by `new` once (or wherever it stands, with `every`); an
    AssertionError where the package's kernel no longer has `old`."""
    assert old in s, f"the package's kernel changed; anchor not found: {old[:80]!r}"
    return s.replace(old, new, -1 if every else 1)


def stamped_module():
    """The stamped copy of _syncfree (`_syncfree_clk`: one more argument, CLK, after N_IN; eight
    int64 a block) and of held_finish, imported from a temporary module."""
    sfree = _source(sf._syncfree)
    hf = _source(rows.held_finish)
    # held_finish: return the stamps after the first and the second awaits
    hf = sub(hf, "def held_finish(", "def held_finish_clk(")
    hf = sub(hf, "        ext = vec_await_entries(ext, VAL + other, other, om & first_x, 0, SENT, NAP)\n",
             "        ext = vec_await_entries(ext, VAL + other, other, om & first_x, 0, SENT, NAP)\n"
             "        c2 = _gt(_dep(piv) + _dep(ext))\n")
    hf = sub(hf, "            x = vec_relook(x, VEC, x_at, x_at >= 0, N_IN, SENT)\n        if GRID:\n            ext = tl.permute(ext, (1, 2, 0))\n",
             "            x = vec_relook(x, VEC, x_at, x_at >= 0, N_IN, SENT)\n        c3 = _gt(_dep(piv) + _dep(ext))\n        if GRID:\n            ext = tl.permute(ext, (1, 2, 0))\n")
    hf = sub(hf, "        if GRID:\n            ext = tl.permute(ext, (1, 2, 0))                   # [R, S, W]",
             "        c2 = _gt(_dep(piv) + _dep(ext))\n        c3 = c2\n"
             "        if GRID:\n            ext = tl.permute(ext, (1, 2, 0))                   # [R, S, W]")
    hf = sub(hf, "    tl.store(VAL + at, w, mask=inrow)\n    return w, x", "    tl.store(VAL + at, w, mask=inrow)\n    return w, x, c2, c3")

    s = sub(sfree, "def _syncfree(", "def _syncfree_clk(")
    s = sub(s, "LATE, N_IN,", "LATE, N_IN, CLK,")
    s = sub(s, "    while t < N_BLK:\n", "    while t < N_BLK:\n        c0 = _gt(t)\n        c1 = c0\n        c2 = c0\n        c3 = c0\n        c4 = c0\n")
    s = sub(s, "            late = tl.load(LATE + v, mask=hold, other=0) if STAGED else 0\n",
            "            late = tl.load(LATE + v, mask=hold, other=0) if STAGED else 0\n"
            "            c1 = _gt(_dep(other) + _dep(aux) + _dep(row0))\n")
    s = sub(s, "            w, x_j = held_finish(w_at,", "            w, x_j, c2, c3 = held_finish_clk(w_at,")
    s = sub(s, "            if FUSED:\n                rd = held_divisor(", "            c4 = _gt(_dep(w))\n            if FUSED:\n                rd = held_divisor(")
    s = sub(s, "                tl.store(VEC + dst2, held_solve(w, x_at, x_j, b2, rd), mask=two_held)\n",
            "                xs = held_solve(w, x_at, x_j, b2, rd)\n                tl.store(VEC + dst2, xs, mask=two_held)\n")
    s = sub(s, "        if not DATA:\n            tl.debug_barrier()             # every thread's stores issued",
            "        c5 = _gt(c0.to(tl.int32))\n        base = CLK + t.to(tl.int64) * 8\n"
            "        tl.store(base + 0, c0)\n        tl.store(base + 1, c1)\n        tl.store(base + 2, c2)\n"
            "        tl.store(base + 3, c3)\n        tl.store(base + 4, c4)\n        tl.store(base + 5, c5)\n"
            "        tl.store(base + 6, _smid(c0.to(tl.int32)).to(tl.int64))\n"
            "        if not DATA:\n            tl.debug_barrier()             # every thread's stores issued")

    return import_source("tiers_stamped", head() + hf + "\n\n" + s)


def import_source(name, text):
    """The module `name` made of `text`, written to a temporary folder and imported (Triton's jit
    reads a kernel's source from its file, so a stamped copy needs one)."""
    folder = tempfile.mkdtemp(prefix=name + "_")
    with open(os.path.join(folder, name + ".py"), "w") as f:
        f.write(text)
    sys.path.insert(0, folder)
    return importlib.import_module(name)


HEAD = '''"""generated by dev/sparse_fusion/stamps.py"""
import triton
import triton.language as tl
from tiers.t3_triton_fused import sparse_fusion as _sf
from tiers.kernels.sparse_fusion_executors import launch as _launch, syncfree as _free
from tiers.kernels import sparse_rows as _rows
for _m in (_rows, _launch, _free, _sf):
    globals().update({k: v for k, v in vars(_m).items() if not k.startswith("__")})


@triton.jit
def _gt(dep):
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [dep], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _smid(dep):
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [dep], dtype=tl.int32, is_pure=False, pack=1)
{STANDINS}

@triton.jit
def _dep(x):
    """a scalar int32 that exists only once every element of x is there"""
    if x.dtype.is_floating():
        return (tl.sum(tl.ravel(x).to(tl.float32)) == 1.2345e-7).to(tl.int32)
    else:
        return (tl.sum(tl.ravel(x).to(tl.int32)) == -123457).to(tl.int32)


'''


STANDINS = '''

# Triton's interpreter runs no inline PTX: a check run's stand-ins (stamps.py's docstring)
@triton.jit
def _gt(dep):
    return dep.to(tl.int64) + tl.program_id(0).to(tl.int64)


@triton.jit
def _smid(dep):
    return dep.to(tl.int32) * 0 + tl.program_id(0)
'''


def head():
    """HEAD as the copies start, with the interpreter's stand-ins for the timer and SM id where
    TRITON_INTERPRET is set."""
    return HEAD.replace("{STANDINS}", STANDINS if os.environ.get("TRITON_INTERPRET") == "1" else "")


CK = None       # the stamped module, made by main


def clk_args(run, val, vec, own):
    """The package's launch (syncfree_launch) with the stamps' buffer CLK appended."""
    args, meta = sf.syncfree_launch(run, val, vec, own)
    clk = torch.zeros(run.plan[0] * 8, dtype=torch.int64, device=val.device)
    return args + (clk,), meta, clk


def call_clk(run, v, keep):
    run.check(v)
    val, own, vec = sf._data_buffers(run, v)
    args, meta, clk = clk_args(run, val, vec, own)
    saved = run.resident
    run.resident = getattr(run, "resident_clk", None)
    sf._launch_claimed(CK._syncfree_clk, run, run.plan[0], args, meta)
    run.resident_clk, run.resident = run.resident, saved
    keep.append(clk)
    return rows.results(run.tables, run.dev, val, rows.vector_outs(run.tables, vec))


def pct(x):
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return None
    return {p: round(float(np.percentile(x, p)) / 1e3, 3) for p in (10, 50, 90)} | {"mean": round(float(x.mean()) / 1e3, 3)}


def latest_producers(blocks, consumer, producer, done):
    """Per block, the latest `done` time among the blocks it reads from (pairs consumer ←
    producer, each with the producer's done time) and that producer: (pred_done, argpred), −1
    where a block reads from none."""
    order = np.lexsort((done, consumer))
    last = np.ones(len(order), bool)
    last[:-1] = consumer[order][1:] != consumer[order][:-1]
    pred_done = np.full(blocks, -1, dtype=np.int64)
    argpred = np.full(blocks, -1, dtype=np.int64)
    pred_done[consumer[order][last]] = done[order][last]
    argpred[consumer[order][last]] = producer[order][last]
    return pred_done, argpred


def critical_path(argpred, last_block):
    """The blocks from the first to `last_block`, each one's latest producer before it."""
    path, b = [], last_block
    while b >= 0 and len(path) < 1_000_000:
        path.append(b)
        b = int(argpred[b])
    return np.array(path[::-1])


def hop_by_pollers(T, f_done, f_arg, sm_id):
    """The factor hop (a block's T3 against its latest factor predecessor's T4) against how many
    blocks were polling (between their T1 and T3) when that predecessor stored, in quartiles of
    that count, and apart for a predecessor on the same SM or another: whether the pollers' own
    traffic, or the path between SMs, sets the hop."""
    h = f_done >= 0
    if not h.any():
        return None
    hop = T[h, 3] - f_done[h]
    t = f_done[h]
    polling = np.searchsorted(np.sort(T[:, 1]), t, "right") - np.searchsorted(np.sort(T[:, 3]), t, "right")
    edges = np.unique(np.percentile(polling, [0, 25, 50, 75, 100]))
    out = {"pollers": {p: int(np.percentile(polling, p)) for p in (10, 50, 90)}, "by_quartile": []}
    for lo, hi in zip(edges[:-1], edges[1:]):
        m = (polling >= lo) & ((polling < hi) | (hi == edges[-1]))
        out["by_quartile"].append({"pollers": [int(lo), int(hi)], "n": int(m.sum()), "hop": pct(hop[m])})
    same = sm_id[np.nonzero(h)[0]] == sm_id[f_arg[h]]
    out["same_sm"] = {"frac": round(float(same.mean()), 3), "hop": pct(hop[same])}
    out["other_sm"] = {"hop": pct(hop[~same])}
    return out


def phases(T, block_level, windows=10):
    """How the span splits: per tenth of it, the programs in flight on average and the blocks
    that started; per wavefront level of the joint DAG (a block's highest), its blocks and when
    they were done (median and last, µs). Where few blocks are in flight the dependences set the
    rate (the power-law ILU(0)'s hub chain); where the slots stay full and blocks start long after
    their predecessors, the slots do."""
    t0, t5 = T[:, 0], T[:, 5]
    edges = np.linspace(t0.min(), t5.max(), windows + 1)
    flight = [{"from_us": round(float(a) / 1e3, 1),
               "in_flight": int(round(float((np.minimum(t5, b) - np.maximum(t0, a)).clip(0).sum()) / max(b - a, 1))),
               "started": int(((t0 >= a) & (t0 < b)).sum())} for a, b in zip(edges[:-1], edges[1:])]
    levels = []
    for lv in range(int(block_level.max()) + 1):
        d = t5[block_level == lv]
        if d.size:
            levels.append([lv, int(d.size), round(float(np.median(d)) / 1e3, 1), round(float(d.max()) / 1e3, 1)])
    return {"windows": flight, "levels_blocks_median_last_us": levels}


def block_edges(run, sched, mats):
    """(n1, level, u, w, bu, bw, blk_of): the joint DAG's dependences u → w between two blocks of
    the run's plan, bu and bw their blocks (a fused solve row in its factor row's block), n1
    kernel 1's rows, level the DAG's wavefront levels, blk_of every iteration's block (−1: none)."""
    blocks, sdev = run.plan[0], run.plan[1]
    blk_ptr, blk_iter, fuse = (sdev[k].cpu().numpy().astype(np.int64) for k in ("blk_ptr", "blk_iter", "fuse"))
    dag, level = sf._joint(sched, mats)
    blk_of = np.full(dag.n, -1, dtype=np.int64)
    blk_of[blk_iter] = np.repeat(np.arange(blocks), np.diff(blk_ptr))
    if fuse.size == dag.n:
        f = np.flatnonzero(fuse >= 0)
        blk_of[fuse[f]] = blk_of[f]
    u, w = (x.astype(np.int64) for x in dag.sources())
    bu, bw = blk_of[u], blk_of[w]
    keep = (bu >= 0) & (bw >= 0) & (bu != bw)
    return dag.n1, level, u[keep], w[keep], bu[keep], bw[keep], blk_of


def done_at(T, u, bu, n1, walked):
    """When iteration u (in block bu) is there for the rows that read it: a held factor row at its
    block's T4, a walked one (its steps and copy after T4, factor_rows) and a solve row at T5."""
    return np.where((u < n1) & ~walked[u], T[bu, 4], T[bu, 5])


def analyze(run, sched, mats, clk, programs):
    blocks = run.plan[0]
    T = clk.cpu().numpy().reshape(blocks, 8).astype(np.int64)
    sm_id = T[:, 6].copy()
    T = T[:, :6]
    T = T - T[:, 0].min()
    n1, level, u, _, bu, bw, blk_of = block_edges(run, sched, mats)
    walked = run.tables.walked_iterations
    done_u = done_at(T, u, bu, n1, walked)
    pred_done, argpred = latest_producers(blocks, bw, bu, done_u)
    has = argpred >= 0
    res = {"blocks": int(blocks), "programs": int(programs), "depth": int(level.max() + 1),
           "span_us": round(float(T[:, 5].max()) / 1e3, 1),
           "per_level_us": round(float(T[:, 5].max()) / 1e3 / (level.max() + 1), 3),
           "timer_step_ns": int(np.diff(np.unique(T[:, 0]))[:100000].min()) if blocks > 1 else 0,
           "sms_seen": int(np.unique(sm_id).size)}
    d = lambda a, b: T[:, b] - T[:, a]
    res["fetch_T0_T1"] = pct(d(0, 1))
    res["await1_T1_T2"] = pct(d(1, 2))
    res["steps1_await2_T2_T3"] = pct(d(2, 3))
    res["steps2_store_T3_T4"] = pct(d(3, 4))
    res["solve_T4_T5"] = pct(d(4, 5))
    res["block_T0_T5"] = pct(d(0, 5))
    res["start_gap_T0_minus_pred"] = pct(T[has, 0] - pred_done[has])
    res["ready_lag_T3_minus_pred"] = pct(T[has, 3] - pred_done[has])
    res["done_lag_T4_minus_pred"] = pct(T[has, 4] - pred_done[has])
    res["late_start_frac"] = round(float(np.mean(T[has, 1] > pred_done[has])), 3)
    # the two chains apart: a factor row's operands against its factor predecessors' stores (T4),
    # a solve row's finish against its solve predecessors' (T5) and its own factor row's store
    fk = u < n1
    f_done, f_arg = latest_producers(blocks, bw[fk], bu[fk], T[bu[fk], 4])
    x_done, _ = latest_producers(blocks, bw[~fk], bu[~fk], T[bu[~fk], 5])
    hf, hx = f_done >= 0, x_done >= 0
    res["f_hop_T3_minus_factor_pred_T4"] = pct(T[hf, 3] - f_done[hf])
    res["f_hop_by_pollers"] = hop_by_pollers(T, f_done, f_arg, sm_id)
    res["x_hop_T5_minus_solve_pred_T5"] = pct(T[hx, 5] - x_done[hx])
    res["x_pred_T5_minus_own_T4"] = pct(x_done[hx] - T[hx, 4])
    # previous block of the same striding program
    prev = np.arange(blocks) - programs
    pv = prev >= 0
    res["program_gap_T0_minus_prevT5"] = pct(T[pv, 0] - T[prev[pv], 5])
    # critical path back from the last block to finish
    path = critical_path(argpred, int(np.argmax(T[:, 5])))
    ph = path[1:]
    pd_ = pred_done[ph]
    res["path"] = {
        "hops": int(len(path)),
        "first_start_us": round(float(T[path[0], 0]) / 1e3, 2),
        "late_start_frac": round(float(np.mean(T[ph, 1] > pd_)), 3) if len(ph) else None,
        "start_gap": pct(T[ph, 0] - pd_),
        "fetch": pct(T[ph, 1] - T[ph, 0]),
        "ready_lag_T3": pct(T[ph, 3] - pd_),
        "await2_from_max_T2_pred": pct(T[ph, 3] - np.maximum(T[ph, 2], pd_)),
        "steps2_store": pct(T[ph, 4] - T[ph, 3]),
        "done_lag_T4": pct(T[ph, 4] - pd_),
        "via_solve_frac": round(float(np.mean(pd_ == T[argpred[ph], 5])), 3) if len(ph) else None,
        "program_gap": pct(T[ph, 0] - np.where(ph >= programs, T[np.maximum(ph - programs, 0), 5], 0)),
    }
    # blocks holding a walked factor row (RowTables.walked): their walk (T4-T5, after the held
    # rows' store) apart, and their share of the critical path, to tell whether the walks set the span
    placed = blk_of >= 0
    wb = np.zeros(blocks, dtype=bool)
    wb[blk_of[walked & placed]] = True
    on_path = wb[ph]
    res["walked"] = {
        "blocks": int(wb.sum()),
        "walk_solve_T4_T5": pct(d(4, 5)[wb]) if wb.any() else None,
        "other_solve_T4_T5": pct(d(4, 5)[~wb]),
        "path_blocks": int(on_path.sum()),
        "path_walk_solve_us": round(float((T[ph, 5] - T[ph, 4])[on_path].sum()) / 1e3, 1),
        "path_wait_us": round(float((T[ph, 3] - pd_)[on_path].sum()) / 1e3, 1),
        "path_all_store_us": round(float((T[ph, 4] - T[ph, 3]).sum()) / 1e3, 1),
        "path_all_wait_us": round(float((T[ph, 3] - pd_).sum()) / 1e3, 1),
        "path_all_solve_us": round(float((T[ph, 5] - T[ph, 4]).sum()) / 1e3, 1),
    }
    block_level = np.zeros(blocks, dtype=np.int64)
    np.maximum.at(block_level, blk_of[placed], level[placed])
    res["phases"] = phases(T, block_level)
    # where the late starts come from: rows per level a program covers
    res["levels_per_program_round"] = round(programs / (blocks / (level.max() + 1)), 2)
    return res, T


def main():
    global CK
    CK = stamped_module()
    out_dir, cases = sys.argv[1], sys.argv[2].split(",")
    os.makedirs(out_dir, exist_ok=True)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")    # cpu: a check run (docstring)
    timed = dev.type == "cuda"
    results = {"device": torch.cuda.get_device_properties(dev).name if timed else "cpu (interpreter: not timed)",
               "torch": torch.__version__, "triton": __import__("triton").__version__,
               "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "cases": []}
    from triton.testing import do_bench
    saved_T = {}
    for case in cases:
        parts = case.split(":")
        name, size, pair, kind = parts[0], int(parts[1]), parts[2], parts[3]
        pps = next((int(p) for p in parts[4:] if "=" not in p), None)
        given = dict(p.split("=", 1) for p in parts[4:] if "=" in p)     # prepare keywords, e.g. fuse_rows=true
        t0 = time.time()
        A = bench.make_matrix(name, size)
        mats = bench.operands(pair, A)
        gen = torch.Generator().manual_seed(1)
        v = torch.rand(A.shape[0], generator=gen, dtype=torch.float64).to(dev) + 0.5
        sched = fs.inspect(pair, *mats, kind=kind)
        kw = {} if pps is None else {"programs_per_sm": pps}
        kw.update({k: option_value(x) for k, x in given.items()})
        run = sf.prepare(pair, *mats, like=v, schedule=sched, executor="dataflow", **kw)
        refs = bench.reference(pair, mats, v.cpu().numpy())
        ok, err, msg = bench.check(run(v), refs, "float64")
        keep = []
        ok2, err2, msg2 = bench.check(call_clk(run, v, keep), refs, "float64")
        base = lambda: run(v)
        inst = lambda: call_clk(run, v, [])
        tb, ti = [], []
        for _ in range(3 if timed else 0):
            tb.append(do_bench(base, warmup=25, rep=200, return_mode="median"))
            ti.append(do_bench(inst, warmup=25, rep=200, return_mode="median"))
        keep.clear()
        call_clk(run, v, keep)
        if timed:
            torch.cuda.synchronize()
        programs = launch._programs(run.plan[0], min(run.programs_per_sm, run.resident_clk or 999), dev)
        res, T = analyze(run, sched, mats, keep[0], programs)
        row = {"case": case, "ok": ok, "err": err, "ok_clk": ok2, "err_clk": err2, "msg": msg or msg2,
               "block_rows": run.block_rows, "programs_per_sm": run.programs_per_sm,
               "resident": run.resident, "resident_clk": run.resident_clk,
               "ms": round(float(np.median(tb)), 4) if tb else None,
               "ms_clk": round(float(np.median(ti)), 4) if ti else None,
               "rounds": [round(x, 4) for x in tb], "rounds_clk": [round(x, 4) for x in ti],
               "wall_s": round(time.time() - t0, 1), **res}
        print(json.dumps(row), flush=True)
        results["cases"].append(row)
        if len(saved_T) < 3:
            saved_T[case.replace(":", "_")] = (T // 10).astype(np.int32)   # 10-ns units
        json.dump(results, open(os.path.join(out_dir, "stamps.json"), "w"), indent=1)
    np.savez_compressed(os.path.join(out_dir, "stamps.npz"), **saved_T)


if __name__ == "__main__":
    main()
