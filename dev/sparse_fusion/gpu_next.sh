#!/usr/bin/env bash
# The sparse-fusion calls a lent GPU owes, in the order to make them (a `run` takes one step or
# several; about 30 minutes of device time a session). Everything lands under $OUT with the environment it ran in.
# Done on 2026-12-05 (figures/data/*_2026-12-05*): band_solve, tests (six times; last with the
# code of 28e4af2, FETCH_SHORT on, on an H100), cli poisson3d27 (every pair), cli poisson2d (every
# pair), cli powerlaw (every pair), spmv_cost, widths (twice), stamps (before and after LATE_LOOKS;
# again on an H100 with FETCH_SHORT), flow_stamps, late_sets (LATE_LOOKS on since, LATE_SETS
# removed), short_fetch on an H100 (FETCH_SHORT on since), the factor pairs' cli rows of
# poisson3d27 and powerlaw with FETCH_SHORT (on an H100, then on the H200 for the table), cli
# poisson3d (every pair, t2 keeping its launches); on an H100 after 17:18, LATE_AHEAD's A/B (by
# hand, ab_options late_ahead:1; removed since) and relook's (ILU(0) only); in the evening on an H100,
# LATE_REACH's A/B (by hand, ab_commit.py against 6e76762; reverted), tests (with the code of 6e76762)
# and the register caps' A/B (ab_commit.py with tars of other GRID_REGISTERS); at 22:33 UTC on an
# H100, tests with the files of dd3e94f (996 and 73), then cli powerlaw spilu0_sptrsv; at 23:41 UTC
# on an H100, tests with the code of 3452a75 (996 and 73); on 2026-12-06 00:52 UTC on the H200, the A/B
# of the walked rows' copy in wider trips (by hand, ab_commit.py; not kept), then cli powerlaw spilu0_sptrsv
# for the table (table_h200_bp); at 02:05 UTC on the H200, tests with the code of 65d25d8 (1000 and 73),
# then lane_copy (the walked rows' copy one lane at a time, 128 entries a trip: slower, not kept; the
# diff is figures/data/lane_copy_ab_h200_2026-12-06.diff); at 03:15 UTC on an H100, by hand, the A/B of
# a walked row copying only its rewritten entries (not kept) and stamps.py on the power-law ILU(0)
# (rew_copy_ab_h100_*, stamps_powerlaw_ilu_h100_*); at 04:31 UTC on an H100, walk_prefetch (the walked ILU(0)
# step's prefetch, the non-staged ILU(0) cap at 88 and padded blocks beside the package, on the power-law ILU(0) and
# IC(0): none outside the package's own spread, none kept, the step removed; walk_prefetch_ab_h100_*, the diffs beside
# it), then tests with the files of 1e45ff0 (1002 and 73); at 05:55 UTC on an H100, walk_alone (walked factor rows in
# blocks of their own: kept as WALK_ALONE; the rewritten-only copy beside it not kept; the step removed), tests with
# a0dde30 and both diffs (1002 and 73), cli powerlaw spilu0_sptrsv twice (calls naming nvidia-h200 that got H100s),
# and by hand two more A/Bs (alone_both_ab_h100_*, walk_alone_r_ab_h100_*); at 07:45 UTC on an H100, slot_time
# (padded blocks kept as BLK_PAD; blocks without tickets and fused solve rows not kept; the step removed), by hand the
# padded blocks' A/B on the grids (blk_pad_grids_ab_h100_*), tests with 40d223f (1004 and 73), and cli powerlaw
# spilu0_sptrsv,spic0_sptrsv (a call naming nvidia-h200 after give_back got an H100); at 08:14 UTC on an H100, by
# hand, the block records' A/B (blk_rec_ab_h100_*: kept as BLK_REC), then tests and cli powerlaw
# spilu0_sptrsv,spic0_sptrsv with them (1007 and 73); at 10:25 UTC on an H100, step_rec rec_grids (step and fused
# records kept as STEP_REC and FUSE_REC; the diffs, regenerated after fd5a0d4's mends, and the step removed), then tests with both on
# (1020 and 73) and cli powerlaw spilu0_sptrsv,spic0_sptrsv (a call naming nvidia-h200 kept the warm H100); by hand,
# stamps of the power-law factor pairs, the IC(0)'s caps (not kept) and OWN kept by the graph (OWN_WALKED, kept after
# a first form failed), whose tests were cut at 1011 of about 1021 (none failed); at 11:54 UTC on an H100 (a call
# naming nvidia-h200), tests with eddcd2b (1024 and 73) and cli powerlaw spilu0_sptrsv,spic0_sptrsv; by hand after
# 12:29 UTC on an H100, the A/B of OUT_THROUGH (not kept) with tests of its diff, call_profile.py on the power-law
# factor pairs, the A/B of PREP_AHEAD (every factor graph) and tests with it (1029; kept for IC(0) alone); at 13:51
# UTC on an H100, tests with c47ad0e (1 failed of 1029: a capture invalidated by a graph that Python's collector
# destroyed during it; _captured since) and prep_partial (PREP_AHEAD_PARTIAL not kept and removed, the step
# too; PREP_AHEAD on the 27-point IC(0) measured); at 14:49 UTC on an H100, by hand, test_capture_outlasts_dead_cycles
# with 73bcb79 and with c47ad0e's tiers/ (4 passed, 4 failed), then tests with 73bcb79 (1033 and 73); at 16:26 UTC
# on an H100 (after five refused starts), tests with de41d0c (be9d3fd's refactor; 1037 and 73), slots_ahead
# (no difference; SLOTS_AHEAD removed), own_copy twice (OWN_COPY_AT on since), call_parts, tests with OWN_COPY_AT on
# (1037 and 73) and cli powerlaw spilu0_sptrsv,spic0_sptrsv; the slots_ahead and own_copy steps removed since; at
# 18:42 UTC on an H100 (after five failed starts), tests with 43e97ba (1048 and 73) and wait_last (kept for the
# graphs that prepare ahead, the option dropped; the step and its helper `flagged` removed since), then at 18:53 UTC
# tests with a6233a7 (1042 and 73) and cli powerlaw spilu0_sptrsv,spic0_sptrsv (a call naming nvidia-h200); at 19:47
# UTC on an H100, tests with d24bbd8 (655fa78's _Ahead; 1042 and 73); at 20:07 UTC on an H100 (a call naming
# nvidia-h200), cli poisson3d27 spilu0_sptrsv,spic0_sptrsv; at 20:17 and 20:59 UTC on an H100, by hand, the A/Bs
# of EARLY_FLAG (early_flag_ab_h100_*: not kept; side_flag_ab_h100_*: kept, the read on a side stream), the latter
# with the graph and breakdown tests only (50) and cli powerlaw spilu0_sptrsv in float64; at 23:40 UTC on an H100
# (after eleven calls that did not start), by hand, the graph, replay and breakdown tests (48) with a92db89, then tests
# with it (1044 and 73), then by hand the A/B of EARLY_FLAG for the IC(0)'s graphs on the power-law IC(0) alone
# (early_ahead_ab_h100_*: not kept); on 2026-12-07 00:50 UTC on an H100 (a call naming nvidia-h200, after four that
# did not start), tests with 7ce9e7a (1044 and 73), then by hand the CLI on a Matrix Market file (mtx_cli_*); at 02:53
# UTC on an H100 (calls naming nvidia-h200), warm_anchor's first GPU run, by hand on the file and the generator's
# 27-point grid (warm_anchor_cli_*), then cli powerlaw spilu0_sptrsv,spic0_sptrsv (cli_warm_anchor_powerlaw_h100_*);
# at 04:37 UTC on an H100 (a call naming nvidia-h200), refresh and tests with 7ad5c75 (32, 1073 and 76;
# refresh_cost_h100_2026-12-07.*); at 07:54 UTC on an H100, refresh and tests with 277e9fb (38, 1079 and 76; the kept
# graph paid, REFRESH_KEEPS_GRAPH on since; refresh_cost_keep_h100_*), the graph, replay, breakdown and refresh tests
# with it on (65), cli powerlaw and cli poisson3d27 spilu0_sptrsv,spic0_sptrsv (cli_keep_*_h100_*) and band_pairs;
# at 08:54 UTC on an H100 (calls naming nvidia-h200 got H100s all session), cli powerlaw spilu0_sptrsv,spic0_sptrsv
# with 6d06f68 (cli_inspector_*), then by hand setup_profile.py twice and an inspector A/B (setup_profile_h100_*,
# inspector_ab_h100_*); at 10:08 UTC on an H100 (after three calls that found no machine), the README's table
# afresh with 4f3b4df's package code (EXECUTORS=dataflow; cli poisson2d, poisson3d, poisson3d27, powerlaw, every
# pair; table_h100_*), then tests with the tree of 9101a0d (1079 and 76); at 12:26 UTC on an H100, tests with 2983f30
# (1100 and 76), cli powerlaw and cli poisson3d27 spilu0_sptrsv,spic0_sptrsv (EXECUTORS=dataflow; cli_oneoff_*); at
# 13:08 UTC on an H100, by hand, once_cost.py's A/B of the symbolic structures on threads (once_ab_threads_h100_*),
# then tests with it (1100 and 76); at 14:57 UTC on an H100, tests with 1a94881 (1100 and 76) and cli powerlaw and cli
# poisson3d27 spilu0_sptrsv,spic0_sptrsv (EXECUTORS=dataflow; cli_steps_*): the payoff columns after the step pairs in
# pieces; at 15:44 UTC on an H100, tests with 120edc6 (1100 and 76), cli poisson3d27 spilu0_sptrsv,spic0_sptrsv (a
# slow host: cli_records_*) and by hand once_cost.py's A/B against e083e1c's tiers/ (once_ab_records_h100_*); at
# 17:14 UTC on an H200 (calls naming no kind), tests with bfb8564 (1100 and 76), then the whole table on the H200 with
# it: cli powerlaw spilu0_sptrsv,spic0_sptrsv, cli poisson2d, cli poisson3d, cli poisson3d27 and cli powerlaw
# sptrsv_spmv,spmv_sptrsv,sptrsv_sptrsv (table_h200_*_2026-12-07.*, docs/sparse_fusion_h200_table.md).
# A warm machine answers each call within seconds; a cold one
# costs a minute or two of the session's 30, so the steps go in as few calls as fit in 600 s (the machine went
# back after 30 s idle that evening, and one call of 600 s brought nothing back when the machine stopped
# answering). A call that names nvidia-h200 may still get an H100.
# Still owed: `tests` with 8d7d934 (b80e5a5's tril(A) taken once in an IC(0) inspection, 9252816's head-first
#   placement in two passes and 8d7d934's review mend: host-side inspector changes, every plan hashed identical,
#   tested on the CPU only), then
#   EXECUTORS=dataflow cli powerlaw and cli poisson3d27 spilu0_sptrsv,spic0_sptrsv on an H100 host as fast as the
#   14:57 UTC call's (cli_steps_*): the payoff columns after the merged DAG's edges once, the int32 pair lists, the
#   step records in pieces (the A/B on the host is once_ab_records_h100_*) and these two. The H200's host of 17:14
#   UTC compares with no H100 host; an A/B of once_cost.py against 120edc6's tiers/ in the same call would.
# With the next change to the kernels: `tests`, then the cli rows it touches.
# Each step has a timeout below the call's 600 s, so that a kernel that never ends (a new kernel
# that waits forever) costs that step, not the session; steps grouped in one call are cut by the
# call's own limit too, and what they wrote by then still comes back.
# The bands executor (tiers/kernels/sparse_fusion_executors/bands.py) runs only the vector pairs;
# `cli` asks for it beside dataflow, and the CLI skips it where a pair cannot take it.
set -uo pipefail
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/tiers_out}
mkdir -p "$OUT"

step() {    # one step: its name, then (cli) the matrix and the pairs
  {
    date -u '+%Y-%m-%d %H:%M:%S UTC'
    git rev-parse HEAD 2>/dev/null || true
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.total --format=csv
    python3 -c 'import torch, triton, numpy, scipy; print("torch", torch.__version__, "triton", triton.__version__,
"numpy", numpy.__version__, "scipy", scipy.__version__)'
    python3 -c 'import cupy; print("cupy", cupy.__version__)' 2>&1 | tail -1
  } > "$OUT/environment_$1${2:+_$2}.txt"
  case "$1" in
    band_solve | band_pairs)
      timeout 560 python3 dev/sparse_fusion/band_probe.py bench "$OUT/band_probe_${1#band_}.json" "${1#band_}" 2>&1 \
        | tee "$OUT/band_probe_${1#band_}.log" | tail -40 ;;
    spmv_cost)
      timeout 560 python3 dev/sparse_fusion/spmv_cost.py "$OUT/spmv_cost.json" poisson3d27:64,poisson3d:100 \
        float64,float32 2>&1 | tee "$OUT/spmv_cost.log" | tail -20 ;;
    widths)
      timeout 560 python3 dev/sparse_fusion/spmv_cost.py "$OUT/widths.json" poisson3d27:64 float64,float32 widths 2>&1 \
        | tee "$OUT/widths.log" | tail -20 ;;
    stamps)       # checked on the CPU first: TRITON_INTERPRET=1 at size 5 (stamps.py's docstring); about 2 min
      timeout 300 python3 dev/sparse_fusion/stamps.py "$OUT/stamps" poisson3d27:64:spilu0_sptrsv:sparse_fusion,\
poisson3d27:64:spic0_sptrsv:sparse_fusion,poisson3d27:64:spilu0_sptrsv:wavefront 2>&1 | tee "$OUT/stamps.log" \
        | cut -c1-600 | tail -20 ;;
    flow_stamps)  # checked on the CPU first: TRITON_INTERPRET=1 at size 4; sm90_dataflow.py --stamped; about 2 min
      timeout 300 python3 dev/sparse_fusion/flow_stamps.py "$OUT/flow_stamps" poisson3d27:64:sptrsv_spmv:sparse_fusion,\
poisson3d27:64:spmv_sptrsv:sparse_fusion,poisson3d27:64:sptrsv_sptrsv:sparse_fusion,poisson3d:100:sptrsv_spmv:sparse_fusion \
        2>&1 | tee "$OUT/flow_stamps.log" | cut -c1-600 | tail -20 ;;
    short_fetch)  # A/B of FETCH_SHORT (t3's fetches_short), on since 2026-12-05: held rows' tables in fewer rounds
      timeout 400 python3 dev/sparse_fusion/ab_options.py "$OUT/short_fetch_ab.json" \
poisson3d27:64:spilu0_sptrsv:sparse_fusion,poisson3d27:64:spic0_sptrsv:sparse_fusion,\
poisson3d27:64:spilu0_sptrsv:sparse_fusion:float32 \
        "pkg=;long=short_fetch:0" 2>&1 | tee "$OUT/short_fetch_ab.log" | cut -c1-400 | tail -12 ;;
    relook)       # A/B of relooks' rule (pkg: ILU(0) float64 rereads, IC(0) does not) against off and on everywhere
      timeout 400 python3 dev/sparse_fusion/ab_options.py "$OUT/relook_ab.json" \
poisson3d27:64:spilu0_sptrsv:sparse_fusion,poisson3d27:64:spic0_sptrsv:sparse_fusion \
        "pkg=;off=relook:0;on=relook:1" 2>&1 | tee "$OUT/relook_ab.log" | cut -c1-400 | tail -12 ;;
    call_parts)   # dev/sparse_fusion/call_parts.py on the power-law factor pairs: what each part of a call costs, and
                  # factor_out alone at 8 shapes against a plain copy (it ran at 2.3 TB/s there); about 3 min
      PYTHONPATH="$PWD:$PWD/dev/sparse_fusion" timeout 400 python3 dev/sparse_fusion/call_parts.py \
        "$OUT/call_parts_powerlaw.json" powerlaw:1000000:spilu0_sptrsv,powerlaw:1000000:spic0_sptrsv 2>&1 \
        | tee "$OUT/call_parts_powerlaw.log" | cut -c1-600 | tail -6 ;;
    tests)        # 2026-12-05: 157-196 s, then 26 s
      TIERS_POISON=1 timeout 300 python3 -m pytest -n 8 -p no:cacheprovider -q tests/test_sparse_fusion_executors.py \
        tests/test_sparse_fusion.py -k "not bench and not bands and (test_sparse_fusion_executors or ((tier_matches_t0 \
        or degenerate) and (t2 or t3)) or (test_invalid_input and t3))" 2>&1 | tee "$OUT/gpu_tests.log" | tail -15
      # in a process of their own: a fault in a new kernel must not take the others' results with it
      TIERS_POISON=1 timeout 100 python3 -m pytest -n 4 -p no:cacheprovider -q tests/test_sparse_fusion_bands.py \
        tests/test_sparse_fusion_executors.py -k "bands" 2>&1 | tee "$OUT/gpu_tests_bands.log" | tail -15 ;;
    refresh)      # Prepared.refresh on a GPU: its tests (a factor pair's graph kept or dropped), then its cost
      TIERS_POISON=1 timeout 150 python3 -m pytest -n 8 -p no:cacheprovider -q tests/test_sparse_fusion_executors.py \
        -k "refresh" 2>&1 | tee "$OUT/gpu_tests_refresh.log" | tail -4
      timeout 300 python3 dev/sparse_fusion/refresh_cost.py "$OUT/refresh_cost.json" powerlaw:1000000:spilu0_sptrsv,\
powerlaw:1000000:spic0_sptrsv,poisson3d27:64:spilu0_sptrsv,poisson3d27:64:spic0_sptrsv,powerlaw:1000000:sptrsv_spmv \
        2>&1 | grep -v Warn | tee "$OUT/refresh_cost.log" | cut -c1-400 ;;
    cli)
      timeout 560 python3 -m tiers bench sparse_fusion --matrices "$2" ${3:+--pairs "$3"} --dtype float64,float32 \
        --executors "${EXECUTORS:-dataflow,bands}" --reps 3 --out "$OUT/cli_$2" 2>&1 | tee "$OUT/cli_$2.log" | grep -v '%|' \
        | tail -40 ;;
    *)
      echo "unknown step $1" >&2; return 2 ;;
  esac
}

# `cli MATRIX [PAIRS]` as before; otherwise several steps one after another in one call, a cli
# step written cli:MATRIX[:PAIRS]
if [ "${1:-}" = cli ]; then
  step "$@"
else
  for s in "$@"; do
    IFS=: read -r name matrix pairs <<< "$s"
    step "$name" ${matrix:+"$matrix"} ${pairs:+"$pairs"}
  done
fi
