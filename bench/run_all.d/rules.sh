#!/usr/bin/env bash
# Built-in rules on a stored run (1 node x 30 min, 2 nodes x 60 min; 32 cores, 8 GPUs, 500 ms)
# against smdebug on the same data exported to its profiler layout, in the same run (issue 6).
# The synthetic runs come from report_synthetic_run, which only builds with tests: the bench
# takes it from build/dev or build/py (or --generator PATH).
set -euo pipefail
OUT=$1
cd "$(dirname "$0")/../.."
if [[ -x .venv-bench/bin/python ]]; then
  for p in smdebug pandas requests psutil; do # one by one: one missing does not stop the rest
    .venv-bench/bin/pip install -q $p >/dev/null 2>&1 || echo "(smdebug peer: $p did not install)"
  done
fi
if [[ ${BENCH_QUICK:-0} == 1 ]]; then
  python3 bench/rules_bench.py --out "$OUT" --reps 3 --smdebug-reps 1 --no-trial-open
  .venv/bin/python bench/live_rules_overhead.py --seconds 10 --reps 1
else
  python3 bench/rules_bench.py --out "$OUT" --reps 7 --smdebug-reps 3
  .venv/bin/python bench/live_rules_overhead.py --seconds 30 --reps 3
fi
