"""A/B in one process: t3's dataflow runners of one working tree, prepared with different options.

A developer's probe, not package code (needs a CUDA GPU; on a CPU it only checks the results). Each
variant is `label=` followed by `key:value` items joined by "+": a keyword of `prepare`
(programs_per_sm, block_rows, tickets, tickets_ahead, nap_ns, claim, fuse_rows, lean; integers and
true / false where they parse), or `early:0` / `early:1`, which overrides the software-pipeline
rule (looks_early) on the prepared runner (reads_every_slot then applies as it would), or
`direct:0` / `direct:1`, which overrides writes_row_order (the kernel's stores in row order as
it goes, or a gather after the kernel), or `slot_bytes:N`, the bytes of output slots a dataflow
block takes at least in place of slot_stride's sector (128: a cache line), or `pair_bytes:N`,
the bytes from one lean row's pair to the next's in place of lean_defaults', or `spmv_share:N`,
the share of 256 striding dataflow programs that run an SpMV's blocks apart (SPMV_SHARE for
both pairs in place of its defaults, spmv_share), or `sums:N`, which blocks take their sums at
every poll (_dataflow's SUMS in place of sums_each_poll's; set before the first call). An empty
variant is the package's defaults. Every runner of a case shares the case's schedule; the checks
and rotated rounds are ab_commit.py's (check_and_time). Writes OUT.json (one row per case, with
each runner's R, programs per SM, pipeline, claim, fuse_rows, lean, direct, programs resident
per SM, slot stride, pair stride, SpMV share, late_look, relook, whether the plan stages the held
rows' steps and whether it fetches them short) and prints each row. `late_look:1` /
`late_look:0`: a staged factor row reads its late operands at its pivots' polls, or not,
whatever LATE_LOOKS says (t3's looks_late). `relook:1` / `relook:0`: a staged row reads its
missing x_j again after its late operands, or not, whatever relooks' rule says. `short_fetch:1` /
`short_fetch:0` prepares with FETCH_SHORT on / off whatever the package's default (held rows'
tables read in fewer rounds, t3's fetches_short; patched around prepare). (`late_sets:N` ran
LATE_SETS, removed after its A/B of 2026-12-05, figures/data/ab_late_sets_*; `late_ahead:N`,
LATE_AHEAD, removed after its A/B the same day, figures/data/ahead_*.)

    python dev/sparse_fusion/ab_options.py OUT.json poisson3d27:64:sptrsv_spmv:sparse_fusion,... \\
        "rule=;off=early:0;p6=programs_per_sm:6"

Data of 2026-12-02 (H200): figures/data/early_f32_27pt_*, pps_f32_27pt_*, pps_f64_27pt_*, f32_3d_*
(and early_27pt_*, early_2d_*, early_pps_27pt_* from its first form); of 2026-12-03: direct_ab_*,
own_back_ab_* (with an own_back override, for the patch beside that data), line_slots_ab_* (its
"line" runner as slot_bytes:128 gives it, run by a scratch probe, slot_stride_ab.py, folded in
here since); of 2026-12-04: sums_ab_* (its first A/B, with the GPU-scope polls of the diff beside it,
as poll:N).
"""
import sys

import torch

from ab_commit import check_and_time, operands_and_vectors, parse_options, run_header, save_row   # its checks, rounds
from tiers import fusion_schedules as fs
from tiers.bench import sparse_fusion as bench
from tiers.kernels.sparse_fusion_executors.lean import pair_stride
from tiers.t3_triton_fused import sparse_fusion as sf


def main():
    out, cases, variants = sys.argv[1], sys.argv[2].split(","), parse_options(sys.argv[3])
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    res = run_header(dev, variants=sys.argv[3])
    for case in cases:
        pair, kind, dtype, mats, v64, v, v2 = operands_and_vectors(case, dev)
        s = fs.inspect(pair, *mats, kind=kind)
        runs = {}
        for label, (kw, sets) in variants.items():
            kw = dict(kw)
            sector, pair_bytes = kw.pop("slot_bytes", None), kw.pop("pair_bytes", None)
            share = kw.pop("spmv_share", None)
            short = kw.pop("short_fetch", None)
            rule, shares, short_rule = sf.slot_stride, sf.SPMV_SHARE, sf.FETCH_SHORT
            sf.FETCH_SHORT = short_rule if short is None else bool(short)
            if sector:                             # the plan is made in prepare: patched around it
                sf.slot_stride = lambda R, dt, b=sector: max(R, b // dt.itemsize)
            if share is not None:
                sf.SPMV_SHARE = {p: share for p in ("sptrsv_spmv", "spmv_sptrsv")}
            try:
                runs[label] = sf.prepare(pair, *mats, like=v, schedule=s, executor="dataflow", **kw)
            finally:
                sf.slot_stride, sf.SPMV_SHARE, sf.FETCH_SHORT = rule, shares, short_rule
            for key, value in sets.items():
                setattr(runs[label], key, value)
            if pair_bytes:                         # read by each call (lean_slots, launch_lean)
                runs[label].pair_stride = pair_stride(pair_bytes, v.dtype)
        row = check_and_time(case, runs, list(variants), bench.reference(pair, mats, v64.numpy()), v, v2, dtype)
        row["shape"] = {label: [r.block_rows, r.programs_per_sm, bool(getattr(r, "early", False)), r.claim,
                                 r.fuse_rows, bool(getattr(r, "lean", False)), bool(getattr(r, "direct", False)),
                                 r.resident, getattr(r, "slot_stride", None), getattr(r, "pair_stride", None),
                                 r.spmv_share, r.late_look, r.relook,
                                 r.plan[3] if getattr(r, "data", False) and len(r.plan) == 4 else None,
                                 bool(getattr(r, "data", False)
                                      and sf.fetches_short(r, r.tables.held(r.block_rows)[0]))]
                        for label, r in runs.items()}
        del runs
        save_row(res, row, out)


if __name__ == "__main__":
    main()
