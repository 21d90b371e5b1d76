#!/usr/bin/env bash
# The sparse-fusion calls a lent GPU owes, in the order to make them (a `run` takes one step or
# several; about 30 minutes of device time a session). Everything lands under $OUT with the environment it ran in.
# The calls made so far: docs/sparse_fusion_gpu_calls.md (to 2026-12-07 17:14 UTC), then docs/sparse_fusion_log.md.
# A warm machine answers each call within seconds; a cold one
# costs a minute or two of the session's 30, so the steps go in as few calls as fit in 600 s (the machine went
# back after 30 s idle that evening, and one call of 600 s brought nothing back when the machine stopped
# answering). A call that names nvidia-h200 may still get an H100.
# Owed: `scattered_short` (dev/sparse_fusion/scattered_short.py, checked under the interpreter; about 5 min with a
#   start): whether the dataflow executor's programs an SM suit short, scattered rows (docs/sparse_fusion_log.md,
#   2026-12-08). Then `tests`: the segments executor's scan now carries a head flag (2026-12-08; its
#   NaN test passed under the interpreter only), and a GPU has not compiled it yet.
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
    scattered_short)  # programs an SM (rule, 8/16/24/32) and 8-slot records on a random graph, the power-law diag pair
      PYTHONPATH="$PWD:$PWD/dev/sparse_fusion" timeout 400 python3 dev/sparse_fusion/scattered_short.py \
        "$OUT/scattered_short.json" random:1000000,powerlaw:1000000 float64 2>&1 | grep -v Warn \
        | tee "$OUT/scattered_short.log" | cut -c1-600 ;;
    tests)        # 2026-12-05: 157-196 s, then 26 s; since 2026-12-07 20:30 UTC four more (warnings, requires_grad)
      TIERS_POISON=1 timeout 300 python3 -m pytest -n 8 -p no:cacheprovider -q tests/test_sparse_fusion_executors.py \
        tests/test_sparse_fusion.py -k "not bench and not bands and (test_sparse_fusion_executors or ((tier_matches_t0 \
        or degenerate) and (t2 or t3)) or (test_invalid_input and t3) or warn_nothing or requires_grad)" 2>&1 \
        | tee "$OUT/gpu_tests.log" | tail -15
      # in a process of their own: a fault in a new kernel must not take the others' results with it
      TIERS_POISON=1 timeout 100 python3 -m pytest -n 4 -p no:cacheprovider -q tests/test_sparse_fusion_bands.py \
        tests/test_sparse_fusion_executors.py -k "bands" 2>&1 | tee "$OUT/gpu_tests_bands.log" | tail -15 ;;
    refresh)      # Prepared.refresh on a GPU: its tests (a factor pair's graph kept or dropped), then its cost
      TIERS_POISON=1 timeout 150 python3 -m pytest -n 8 -p no:cacheprovider -q tests/test_sparse_fusion_executors.py \
        -k "refresh" 2>&1 | tee "$OUT/gpu_tests_refresh.log" | tail -4
      timeout 300 python3 dev/sparse_fusion/refresh_cost.py "$OUT/refresh_cost.json" powerlaw:1000000:spilu0_sptrsv,\
powerlaw:1000000:spic0_sptrsv,poisson3d27:64:spilu0_sptrsv,poisson3d27:64:spic0_sptrsv,powerlaw:1000000:sptrsv_spmv \
        2>&1 | grep -v Warn | tee "$OUT/refresh_cost.log" | cut -c1-400 ;;
    once_ab)      # once_cost.py's A/B of a host-side change: the tiers/ under $OLD (carried, e.g.
                  # `git archive C tiers | tar -x -C .scratch/old`) against this tree's, one process per tree and
                  # round, rounds interleaved
      local cases=${ONCE_CASES:-poisson3d27:64:spilu0_sptrsv,poisson3d27:64:spic0_sptrsv,\
powerlaw:1000000:spilu0_sptrsv,powerlaw:1000000:spic0_sptrsv}
      for r in $(seq 1 "${ROUNDS:-3}"); do
        for t in old new; do
          echo "== round $r tree $t $(date -u +%T)"
          if [ $t = old ]; then tree=$(realpath "${OLD:?OLD names the old tree}"); else tree=$PWD; fi
          PYTHONPATH=$tree timeout 200 python3 dev/sparse_fusion/once_cost.py "$OUT/once_${t}_$r.json" "$cases" 2>&1 \
            | grep -v Warn
        done
      done 2>&1 | tee "$OUT/once_ab.log" ;;
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
