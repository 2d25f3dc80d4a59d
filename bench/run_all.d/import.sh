#!/usr/bin/env bash
# Kineto import speed and memory per event, and HTA in the same run when installed (issue 5).
set -euo pipefail
OUT=$1
line=$(build/bench/bench/import_bench 2000000 "$OUT" | tee /dev/stderr | tail -1)
if .venv-bench/bin/pip install -q holistictraceanalysis >/dev/null 2>&1; then
  .venv-bench/bin/python bench/import_bench_hta.py "$line" || true
else
  echo "HTA peer: not installable here"
fi
