#!/usr/bin/env bash
# End-to-end overhead of `trainprof record` on a CPU-bound command (issue 3).
set -euo pipefail
cd "$(dirname "$0")/../.."
ARGS="--runs 7"
[[ ${BENCH_QUICK:-0} == 1 ]] && ARGS="--runs 3 --work 1.5"
# shellcheck disable=SC2086
.venv/bin/python bench/record_overhead.py $ARGS
