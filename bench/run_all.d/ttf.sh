#!/usr/bin/env bash
# Time to finding (issue 19): planted problems in real PyTorch (CPU) jobs recorded with live
# rules every second (bench/time_to_finding.py); seconds from each onset to its finding, and
# findings on a healthy run (10 minutes; quick mode: the test command's short version, leak, low
# GPU, GPU memory and recompilation with 30 s of healthy run, all at once).
set -euo pipefail
OUT=$1
cd "$(dirname "$0")/../.."
# The installed package's native executable: its Python hooks (the zero-code capture that the
# rules read steps, losses and compiles from) are found beside it. The bench build's CLI has no
# package beside it, so its jobs ran uninstrumented: no steps, and every rule but
# MaxInitializationTime silent (the section's 2026-12-04 evening run).
if [[ -z ${TRAINPROF_BIN:-} ]]; then
  TRAINPROF_BIN=$(.venv/bin/python -c 'import trainprof.cli as c; print(c.native_executable())')
  export TRAINPROF_BIN
fi
if [[ ${BENCH_QUICK:-0} == 1 ]]; then
  .venv/bin/python bench/time_to_finding.py --quick --json "$OUT/ttf.json" || true
else
  .venv/bin/python bench/time_to_finding.py --healthy-seconds 600 --json "$OUT/ttf.json" || true
fi
test -s "$OUT/ttf.json" # the figures were measured (NOT met is a result, not an error)
