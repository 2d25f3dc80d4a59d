#!/usr/bin/env bash
# Instrumentation (issue 4): C++ span cost (steady and in one long burst), Python span cost
# against its peers, start-up, the hooks' cost per step, and a real training loop instrumented
# automatically vs bare, with the attributable cost and py-spy's sampled share beside it.
set -euo pipefail
OUT=$1
cd "$(dirname "$0")/../.."
if [[ ${BENCH_QUICK:-0} == 1 ]]; then
  STEADY="--spans 20000 --repeat 5" BURST="--spans 300000 --repeat 3"
  PY_ARGS="--spans 20000 --repeat 3 --train-runs 2 --train-steps 20 --tiny-steps 2000"
else
  STEADY="--spans 20000 --repeat 9" BURST="--spans 300000 --repeat 5"
  PY_ARGS="--spans 50000 --repeat 5"
fi
# shellcheck disable=SC2086
build/bench/bench/instrument_bench "$OUT" $STEADY --figure instrument.cpp_span_ns
# shellcheck disable=SC2086
build/bench/bench/instrument_bench "$OUT" $BURST --figure instrument.cpp_span_burst_ns
if [[ -x .venv-bench/bin/pip ]]; then
  .venv-bench/bin/pip install -q py-spy >/dev/null 2>&1 ||
    echo "(py-spy not installable: sampled share skipped)"
fi
# shellcheck disable=SC2086
PATH="$PWD/.venv-bench/bin:$PATH" .venv/bin/python bench/instrument_overhead.py $PY_ARGS
