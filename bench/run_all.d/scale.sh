#!/usr/bin/env bash
# Scale of analysis (issue 20): rules, report and analyze of a generated 512-rank run (64 nodes
# x 8 ranks, 200 steps, one planted straggler checked against the truth) within 60 s and 4 GB:
# bench/scale_bench.py with the installed package's native executable. Quick mode: 100 steps.
set -euo pipefail
cd "$(dirname "$0")/../.."
STEPS=200
[[ ${BENCH_QUICK:-0} == 1 ]] && STEPS=100
TRAINPROF_BIN=$(.venv/bin/python -c 'import trainprof.cli as c; print(c.native_executable())')
export TRAINPROF_BIN
.venv/bin/python bench/scale_bench.py --ranks 512 --steps $STEPS
