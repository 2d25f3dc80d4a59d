#!/usr/bin/env bash
# Issue 20: 16 processes x 8 threads emitting spans for 30 s into one run directory
# (bench/span_load.py): the longest record_span call and how the slow ones split between
# blocking, preemption and page faults beside a no-op control, also from C++ threads without
# the GIL (bench/span_load_native, built with the benches); stored + dropped = emitted
# exactly; the recorder's memory. Quick mode: 8 x 4 x 5 s.
set -euo pipefail
cd "$(dirname "$0")/../.."
native=()
for b in build/bench/bench/span_load_native build/dev/bench/span_load_native; do
  if [[ -x $b ]]; then native=(--native "$b"); break; fi
done
if [[ ${BENCH_QUICK:-0} == 1 ]]; then
  .venv/bin/python bench/span_load.py --procs 8 --threads 4 --seconds 5 --record "${native[@]}"
else
  .venv/bin/python bench/span_load.py --procs 16 --threads 8 --seconds 30 --record "${native[@]}"
fi
