#!/usr/bin/env bash
# The portable build (docs/install.md): TRAINPROF_COLLECTORS=OFF with the POSIX platform layer
# (src/base/platform_posix.cc, what macOS uses) forced on Linux, so that the fallback is
# compiled and exercised here. Builds the reader, import, rules, cost and report tests and the
# CLI (nothing of src/collect's samplers, src/agent or src/instrument exists in this build),
# runs those tests, then the CLI on a trace: import, rules, cost, report work; record, agent
# and mark say that recording needs Linux and exit 1.
#   bash scripts/portable_check.sh [build|test|all] [BUILD_DIR]   (default: all build/portable)
# scripts/test.sh runs `build` in the background at low priority while its single-threaded steps
# (fuzzing) leave a core idle, then `test`.
# -O1 without debug info: the quickest build whose tests still run fast.
set -euo pipefail
cd "$(dirname "$0")/.."
STEP=${1:-all}
BUILD=${2:-build/portable}
JOBS=${JOBS:-$(nproc)}
TESTS=(base_test model_test store_test importers_test rules_test cost_test report_test)
if [[ $STEP == build || $STEP == all ]]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O1 \
    -DCMAKE_C_FLAGS_DEBUG=-O1 -DTRAINPROF_COLLECTORS=OFF -DTRAINPROF_PLATFORM=posix \
    -DTRAINPROF_WERROR=ON -DTRAINPROF_BUILD_TESTS=ON -DTRAINPROF_BUILD_PYTHON=OFF >/dev/null
  cmake --build "$BUILD" -j"$JOBS" --target "${TESTS[@]}" store_crash_writer trainprof \
    >"$BUILD/portable-build.log" 2>&1 || { tail -40 "$BUILD/portable-build.log"; exit 1; }
  for lib in trainprof_collect trainprof_agent trainprof_instrument; do
    if ninja -C "$BUILD" -t targets all | grep -qE "(^|/)lib$lib\.a:"; then
      echo "portable build: $lib is part of it" >&2
      exit 1
    fi
  done
fi
[[ $STEP == build ]] && exit 0

labels=$(IFS='|'; echo "${TESTS[*]%_test}")
# The platform_apis_check script test is the main build's; here the compiled tests only.
ctest --test-dir "$BUILD" -j"$JOBS" -L "^(${labels})$" -E '^platform_apis_check$' \
  --output-on-failure --timeout 300 | tail -4

BIN=$BUILD/src/cli/trainprof
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$BIN" import kineto fuzz/corpus/kineto/after_fix_trace.json --out "$tmp/run" >"$tmp/log" 2>&1 ||
  { cat "$tmp/log"; exit 1; }
"$BIN" rules "$tmp/run" >>"$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
"$BIN" cost "$tmp/run" --instance-type ml.p3.2xlarge >>"$tmp/log" 2>&1 ||
  { cat "$tmp/log"; exit 1; }
"$BIN" report "$tmp/run" >>"$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
test -s "$tmp/run/report.html" && test -s "$tmp/run/report.json"
for cmd in "record --out $tmp/rec -- true" "agent --interval 1s" "mark step_start"; do
  rc=0
  # shellcheck disable=SC2086
  "$BIN" $cmd >"$tmp/out" 2>&1 || rc=$?
  if [[ $rc -ne 1 ]] || ! grep -q "recording needs Linux" "$tmp/out"; then
    echo "portable build: 'trainprof $cmd' exited $rc without saying recording needs Linux:" >&2
    cat "$tmp/out" >&2
    exit 1
  fi
done
test ! -e "$tmp/rec"
echo "portable build ok: ${TESTS[*]} passed on the POSIX platform layer; import, rules, cost," \
  "report ran; record/agent/mark say recording needs Linux"
