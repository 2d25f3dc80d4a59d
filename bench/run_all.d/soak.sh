#!/usr/bin/env bash
# Issue 20: a 24-hour, 8-GPU, 100 ms recording at accelerated speed (bench/soak_bench.py drives
# tests/soak/soak_recorder: the recorder's collectors, NVML replay with 8 generated GPUs,
# sampling loop, store writer, live rules, dashboard reads): recorder memory flat, live rules and
# reader as fast at the end as at the start. The run goes on /dev/shm when there is room (the
# writer's fsync each simulated second would otherwise measure the disk, 86 400 times).
# About 20 minutes on the shared 2-core VM. Quick mode: 4 simulated hours.
set -euo pipefail
cd "$(dirname "$0")/../.."
HOURS=24
[[ ${BENCH_QUICK:-0} == 1 ]] && HOURS=4
if [[ ! -x build/bench/tests/soak/soak_recorder ]]; then
  flock "${BENCH_BUILD_LOCK:-/tmp/tp-build.lock}" cmake --build build/bench --target soak_recorder \
    nvml_replay >/dev/null
fi
BASE=/tmp
[[ -d /dev/shm && $(df -Pk /dev/shm | awk 'NR==2 {print $4}') -gt 4000000 ]] && BASE=/dev/shm
DIR=$(mktemp -d "$BASE/soak-bench-XXXXXX")
trap 'rm -rf "$DIR"' EXIT
TRAINPROF_BIN=$(.venv/bin/python -c 'import trainprof.cli as c; print(c.native_executable())')
.venv/bin/python bench/soak_bench.py --hours $HOURS --keep "$DIR" \
  --recorder build/bench/tests/soak/soak_recorder \
  --replay build/bench/tests/nvml_replay/libnvml_replay.so --trainprof "$TRAINPROF_BIN"
