#!/usr/bin/env bash
# `trainprof tune` on the planted job: the share of its wall time spent outside its trials
# (issue 22: <= 5 %), bench/tune_overhead.py with the installed package. A 90 s budget; 45 s in
# quick mode (the fixed start-up weighs more there: the share is, if anything, overstated).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUDGET=90s
[[ ${BENCH_QUICK:-0} == 1 ]] && BUDGET=45s
.venv/bin/python bench/tune_overhead.py --budget $BUDGET
