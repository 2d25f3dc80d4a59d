#!/usr/bin/env bash
# Kineto import speed and memory per event, and HTA on the same file in the same run when it
# installs from PyPI (issue 5).
set -euo pipefail
OUT=$1
line=$(build/bench/bench/import_bench 2000000 "$OUT" | tee /dev/stderr | tail -1)
args=${line#*import_bench_hta.py }
if .venv-bench/bin/pip install -q holistictraceanalysis >/dev/null 2>&1; then
  # shellcheck disable=SC2086
  .venv-bench/bin/python bench/import_bench_hta.py $args || echo "HTA peer failed"
else
  echo "HTA peer: not installable here"
fi
