#!/usr/bin/env bash
# Report build time and memory for generated 30-minute and 24-hour runs (issue 7), and how long
# the 24-hour report takes to open in headless Chromium.
set -euo pipefail
OUT=$1
cd "$(dirname "$0")/../.."
REPS=3 OPEN_REPS=5
[[ ${BENCH_QUICK:-0} == 1 ]] && REPS=1 OPEN_REPS=2
build/bench/bench/report_bench --dir "$OUT/report_bench" --reps $REPS
.venv/bin/python bench/report_open_time.py "$OUT/report_bench/24h.html" --reps $OPEN_REPS \
  --figure report.24h_open_s
