#!/bin/sh
# Fuzzes each importer target for a few seconds (FUZZ_SECONDS, default 15) on a copy of its seed
# corpus, from a random libFuzzer seed unless FUZZ_SEED names one (the test command fixes it, so
# a clean clone's short run is repeatable; a long run here explores from a new seed). A crash
# fails the script, with the input kept in $FUZZ_ARTIFACTS (default build/fuzz-artifacts): add
# it to fuzz/corpus/ once fixed, where the replay ctest keeps it.
# Needs the clang build that scripts/test.sh makes:
#   cmake -S . -B build/fuzz -G Ninja -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14
#     -DTRAINPROF_BUILD_FUZZ=ON -DTRAINPROF_BUILD_TESTS=OFF -DTRAINPROF_BUILD_PYTHON=OFF
#   cmake --build build/fuzz --target fuzz_kineto_import fuzz_smdebug_import fuzz_json_text \
#     fuzz_control_message fuzz_store_chunks fuzz_horovod_import fuzz_store_reader
set -e
BUILD=${1:-build/fuzz}
SECONDS_EACH=${FUZZ_SECONDS:-15}
ARTIFACTS=${FUZZ_ARTIFACTS:-build/fuzz-artifacts}
SEED=${FUZZ_SEED:-0}  # 0: libFuzzer picks one (and prints it in the log)
HERE=$(dirname "$0")
mkdir -p "$ARTIFACTS"
for t in kineto_import:kineto smdebug_import:smdebug json_text:json_text \
         control_message:control_message store_chunks:store_chunks horovod_import:horovod \
         store_reader:store_reader; do
  name=fuzz_${t%%:*}; corpus=${t##*:}
  work=$(mktemp -d)
  cp -r "$HERE/corpus/$corpus/." "$work/"
  log="$ARTIFACTS/$name.log"
  if ! "$BUILD/fuzz/$name" -max_total_time="$SECONDS_EACH" -max_len=65536 -timeout=20 \
       -seed="$SEED" -artifact_prefix="$ARTIFACTS/$name-" "$work" >"$log" 2>&1; then
    tail -60 "$log"; echo
    echo "$name: found a crash; the input is in $ARTIFACTS" >&2
    rm -rf "$work"
    exit 1
  fi
  echo "$name: $(grep -E '^Done [0-9]+ runs' "$log" || tail -1 "$log")"
  rm -rf "$work"
done
