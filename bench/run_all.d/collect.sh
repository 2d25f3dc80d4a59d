#!/usr/bin/env bash
# Issue 3: cost of one node sample, trainprof vs psutil (run by bench/run_all.sh after the
# bench build; psutil comes from .venv-bench).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=python3
if [[ -x .venv-bench/bin/python ]]; then
  PY=.venv-bench/bin/python
  .venv-bench/bin/pip install -q psutil >/dev/null 2>&1 || echo "(psutil did not install)"
fi
BATCHES=15 PER_BATCH=200
[[ ${BENCH_QUICK:-0} == 1 ]] && BATCHES=7 PER_BATCH=100
"$PY" bench/collect_psutil_peer.py --cpp build/bench/bench/collect_bench --batches $BATCHES \
  --per-batch $PER_BATCH
