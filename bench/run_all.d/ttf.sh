#!/usr/bin/env bash
# Time to finding (issue 19): planted problems in real PyTorch (CPU) jobs recorded with live
# rules every second (bench/time_to_finding.py); seconds from each onset to its finding, and
# findings on a healthy run (10 minutes; quick mode: the test command's short version, leak, low
# GPU, GPU memory and recompilation with 30 s of healthy run, all at once).
set -euo pipefail
OUT=$1
cd "$(dirname "$0")/../.."
# The bench build's CLI when there is one, else the one installed in .venv.
if [[ -z ${TRAINPROF_BIN:-} && -x build/bench/src/cli/trainprof ]]; then
  export TRAINPROF_BIN=$PWD/build/bench/src/cli/trainprof
fi
if [[ ${BENCH_QUICK:-0} == 1 ]]; then
  .venv/bin/python bench/time_to_finding.py --quick --json "$OUT/ttf.json" || true
else
  .venv/bin/python bench/time_to_finding.py --healthy-seconds 600 --json "$OUT/ttf.json" || true
fi
test -s "$OUT/ttf.json" # the figures were measured (NOT met is a result, not an error)
