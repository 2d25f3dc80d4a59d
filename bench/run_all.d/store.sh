#!/usr/bin/env bash
# Store write/read throughput and bytes per value for one node at 100 ms over an hour (issue 2);
# smdebug's reader on the same samples in its own JSON format, in the same run.
set -euo pipefail
OUT=$1
cd "$(dirname "$0")/../.."
MINUTES=60 SMDEBUG_MINUTES=10 REPEAT=5
[[ ${BENCH_QUICK:-0} == 1 ]] && MINUTES=10 SMDEBUG_MINUTES=2 REPEAT=3
build/bench/bench/store_bench "$OUT" --minutes $MINUTES --smdebug-minutes $SMDEBUG_MINUTES \
  --repeat $REPEAT
# The bench venv sees the project's package through the main venv's site-packages.
SITE=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
PY=.venv/bin/python
[[ -x .venv-bench/bin/python ]] && PY=.venv-bench/bin/python
PYTHONPATH="$SITE" "$PY" bench/store_read_bench.py "$OUT/store-bench-run" \
  "$OUT/smdebug-profiler-output" --repeat $REPEAT
