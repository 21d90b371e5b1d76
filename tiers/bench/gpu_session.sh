#!/usr/bin/env bash
# One lent-GPU session: the test suite on CUDA, then the benchmarks, logs and data under $OUT.
# usage: bash tiers/bench/gpu_session.sh [tests] [bench ARGS...]
set -uo pipefail
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/tiers_out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.total --format=csv | tee "$OUT/gpu.txt"
python3 -c 'import torch, triton, numpy; print(torch.__version__, triton.__version__, numpy.__version__)' | tee -a "$OUT/gpu.txt"
if [ "${1:-}" = tests ]; then
  shift
  python3 -m pytest tests -q -x --ignore=tests/test_notebooks.py -p no:cacheprovider 2>&1 | tee "$OUT/gpu_tests.log" | tail -25
fi
if [ "${1:-}" = bench ]; then
  shift
  python3 -m tiers bench "$@" --out "$OUT" 2>&1 | tee "$OUT/bench.log" | grep -v '%|' | tail -70
fi
