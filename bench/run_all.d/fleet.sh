#!/usr/bin/env bash
# `trainprof fleet DIR --json` over 10 000 generated run summaries (issue 21: <= 5 s), the total
# checked against the generated truth: bench/fleet_bench.py with the installed package's native
# executable (fleet hands over to its Python module). Quick mode: one timed run, not three.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPEAT=3
[[ ${BENCH_QUICK:-0} == 1 ]] && REPEAT=1
TRAINPROF_BIN=$(.venv/bin/python -c 'import trainprof.cli as c; print(c.native_executable())')
export TRAINPROF_BIN
.venv/bin/python bench/fleet_bench.py --runs 10000 --repeat $REPEAT
