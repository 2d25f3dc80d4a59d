#!/usr/bin/env bash
# Kineto import speed and memory per event, and HTA on the same file in the same run when it
# installs from PyPI (issue 5): three pairs, each trainprof then HTA on the same trace; quote
# the median ratio.
set -euo pipefail
OUT=$1
EVENTS=${IMPORT_BENCH_EVENTS:-500000}
if ! .venv-bench/bin/pip install -q holistictraceanalysis >/dev/null 2>&1; then
  echo "HTA peer: not installable here"
fi
for i in 1 2 3; do
  line=$(build/bench/bench/import_bench "$EVENTS" "$OUT" | tee /dev/stderr | tail -1)
  args=${line#*import_bench_hta.py }
  # HTA reads stdin (and would eat the loop's); its progress output goes to /dev/null.
  # shellcheck disable=SC2086
  .venv-bench/bin/python bench/import_bench_hta.py $args </dev/null 2>/dev/null |
    grep -aE "HTA|ratio" || echo "HTA peer failed"
done
