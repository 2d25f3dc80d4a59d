#!/usr/bin/env bash
# Runs every test: formatting check, the C++ unit tests (ctest), the same tests under
# AddressSanitizer + UndefinedBehaviorSanitizer, the recorder's tests under ThreadSanitizer, a
# short libFuzzer run of each importer (FUZZ_SECONDS each, default 6; longer runs: fuzz/run_fuzz.sh), and the Python tests
# (pytest, last, so that its summary line closes the output). The ASan pass runs when
# TRAINPROF_SANITIZE=1, the portable build's tests (collectors off, POSIX platform layer:
# scripts/portable_check.sh, about 4 minutes more on 2 cores) when TRAINPROF_PORTABLE=1; the
# grep check that keeps Linux-only calls behind the platform layer (platform_apis_check) is
# always in the C++ tests:
#   TRAINPROF_SANITIZE=1 TRAINPROF_PORTABLE=1 bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
bash scripts/setup.sh
source .venv/bin/activate
source scripts/ccache-env.sh  # the sanitizer and fuzz builds below through ccache too
JOBS=$(nproc)
# Each section's heading says how long the run has taken so far (the 30-minute budget).
section() { echo; echo "== $* ($((SECONDS / 60)) min $((SECONDS % 60)) s in)"; }

section "clang-format check"
mapfile -t sources < <(git ls-files 'src/*.h' 'src/*.cc' 'include/*.h' 'tests/*.cc' 'tests/*.h' 'bench/*.cc' 'fuzz/*.cc')
if ((${#sources[@]})); then
  clang-format --dry-run --Werror "${sources[@]}"
fi
echo "formatting ok (${#sources[@]} files)"

section "the portable build (collectors off, POSIX platform layer): building in the background"
# scripts/portable_check.sh, what macOS builds. At the lowest priority, so that it takes only what
# the steps below leave idle (ctest's waits, the TSan run, the single-threaded fuzzing) and slows
# none of them; its tests run before the Python tests.
portable_pid=""
if [[ ${TRAINPROF_PORTABLE:-0} == 1 ]]; then
  nice -n 19 bash scripts/portable_check.sh build >build/portable-check.log 2>&1 &
  portable_pid=$!
  trap 'kill "$portable_pid" 2>/dev/null || true' EXIT
else
  echo "(skipped: TRAINPROF_PORTABLE=1 adds it)"
fi

section "C++ tests"
ctest --test-dir build/py -j"$JOBS" --output-on-failure --timeout 300

if [[ "${TRAINPROF_SANITIZE:-0}" == "1" ]]; then
  section "C++ tests under ASan + UBSan"
  # The modules that hold raw buffers, byte codecs, threads and dlopen'ed code: the store
  # (codecs, writer, reader), the samplers (procfs parsing, NVML), the in-process recorder and
  # the importers' tokenizers. (The whole suite under ASan would double CI's build time.)
  SAN_TESTS=(base_test model_test store_test collect_test instrument_test importers_test)
  cmake -S . -B build/asan -G Ninja "${CCACHE_CMAKE_ARGS[@]}" -DCMAKE_BUILD_TYPE=Debug -DTRAINPROF_SANITIZE=ON \
    -DTRAINPROF_WERROR=ON -DTRAINPROF_BUILD_TESTS=ON >/dev/null
  cmake --build build/asan -j"$JOBS" --target "${SAN_TESTS[@]}" store_crash_writer nvml_replay
  labels=$(IFS='|'; echo "${SAN_TESTS[*]%_test}")
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build/asan -j"$JOBS" -L "^(${labels})$" --output-on-failure --timeout 600
fi

section "the in-process recorder and the Kineto import's threads under ThreadSanitizer"
# Its threads hand records over through lock-free block chains (src/instrument/recorder.cc):
# TSan checks that hand-over, with threads appending while the flusher drains every 1 ms.
# TSan cannot follow a multi-threaded fork() (it refuses to start threads in the child), so the
# fork tests run in the plain ctest pass above only.
cmake -S . -B build/tsan -G Ninja "${CCACHE_CMAKE_ARGS[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRAINPROF_BUILD_TESTS=ON \
  -DCMAKE_CXX_FLAGS=-fsanitize=thread -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread >/dev/null
cmake --build build/tsan -j"$JOBS" --target instrument_test importers_test >/dev/null
# Files read at once (a thread each, two files of one node writing one store), the two-thread
# parse and batches written on a second thread.
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" build/tsan/src/importers/importers_test \
  --gtest_filter='KinetoFilesAtOnceTest.*:KinetoImporterTest.TwoThreadParseOfAGeneratedTraceGivesTheSameStore:KinetoImporterTest.BatchesWrittenOnASecondThreadGiveTheSameRun' \
  --gtest_brief=1
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" build/tsan/src/instrument/instrument_test \
  --gtest_filter=-RecorderTest.ForkedChildWritesItsOwnStoreAndNeverTheParents:RecorderTest.AForkedChildThatCannotStartAThreadRecordsOnAndWritesAtStop:RecorderTest.AForkedChildWithAFlusherButNoKeeperLosesNothing \
  --gtest_brief=1

section "fuzzing the importers (libFuzzer + ASan/UBSan, ${FUZZ_SECONDS:=6} s each)"
# A clang build of the fuzz targets only (the importers, store and model libraries they link,
# coverage-instrumented); the same targets' corpus replays ran in ctest above.
cmake -S . -B build/fuzz -G Ninja "${CCACHE_CMAKE_ARGS[@]}" -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRAINPROF_BUILD_FUZZ=ON -DTRAINPROF_BUILD_TESTS=OFF \
  -DTRAINPROF_BUILD_PYTHON=OFF >/dev/null
cmake --build build/fuzz -j"$JOBS" --target fuzz_kineto_import fuzz_smdebug_import fuzz_json_text \
  fuzz_control_message fuzz_store_chunks fuzz_horovod_import fuzz_store_reader >/dev/null
# A fixed libFuzzer seed: the same commit fuzzes the same way on every clean clone; exploring
# from new seeds for longer is `FUZZ_SECONDS=300 sh fuzz/run_fuzz.sh`.
FUZZ_SECONDS=$FUZZ_SECONDS FUZZ_SEED=${FUZZ_SEED:-20261203} sh fuzz/run_fuzz.sh build/fuzz

if [[ -n $portable_pid ]]; then
  section "the portable build: reader, import, rules, cost and report tests; record needs Linux"
  if ! wait "$portable_pid"; then
    cat build/portable-check.log
    exit 1
  fi
  bash scripts/portable_check.sh test
fi

section "Python tests"
python -m pytest tests/python -q --durations=15  # the slowest 15 listed: the command must stay under 30 minutes
