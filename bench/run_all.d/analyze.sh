#!/usr/bin/env bash
# `trainprof analyze RUN --json` of 8 imported synthetic Kineto rank traces (1 M events), whole
# process, events per second of wall and CPU/wall (issue 19 speed: >= 5 M events/s):
# bench/analyze_bench.py with the installed package's native executable. Quick mode: 3 repeats.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPS=7
[[ ${BENCH_QUICK:-0} == 1 ]] && REPS=3
TRAINPROF_BIN=$(.venv/bin/python -c 'import trainprof.cli as c; print(c.native_executable())')
export TRAINPROF_BIN
.venv/bin/python bench/analyze_bench.py --ranks 8 --launches 25000 --reps $REPS
