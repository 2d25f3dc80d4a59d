#!/usr/bin/env bash
# How long `pip install trainprof` from the sdist takes to build (issue 17: <= 480 s on the
# 2-core machine): bench/sdist_build_time.sh, a clean isolated build of everything (about 6
# minutes of both cores). Not in quick mode: its figures are recorded as skipped (quick mode)
# and the section exits 77, which run_all.sh records as skipped.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [[ ${BENCH_QUICK:-0} == 1 ]]; then
  for f in sdist.sdist_s sdist.wheel_s sdist.build_s; do
    python3 bench/lib/results.py skip --figure $f --reason "quick mode"
  done
  echo "quick mode: the sdist build (about 6 minutes) runs only in the full run"
  exit 77
fi
bash bench/sdist_build_time.sh
