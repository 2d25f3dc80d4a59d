#!/bin/sh
# Fuzzes each importer target for a few seconds on its seed corpus (total under 60 s).
# Needs a clang build: cmake -S . -B build/fuzz -G Ninja -DCMAKE_C_COMPILER=clang-14
#   -DCMAKE_CXX_COMPILER=clang++-14 -DTRAINPROF_BUILD_FUZZ=ON && ninja -C build/fuzz
set -e
BUILD=${1:-build/fuzz}
SECONDS_EACH=${FUZZ_SECONDS:-15}
HERE=$(dirname "$0")
for t in kineto_import:kineto smdebug_import:smdebug json_text:json_text; do
  name=fuzz_${t%%:*}; corpus=${t##*:}
  work=$(mktemp -d)
  cp -r "$HERE/corpus/$corpus/." "$work/"
  "$BUILD/fuzz/$name" -max_total_time="$SECONDS_EACH" -max_len=65536 "$work"
  rm -rf "$work"
done
