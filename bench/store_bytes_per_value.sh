#!/usr/bin/env bash
# Stored bytes per value of system metrics, recorded against imported from SageMaker Debugger
# (issue 16, item 3): bench/store_bench writes one node's samples the way the recorder does and
# the same samples in smdebug's JSON-lines format; `trainprof import smdebug` imports that copy.
# Both carry jittered timestamps as real ones do (each tick read up to 0.9 ms late, stamped in
# ns by the recorder; in SageMaker's copy each metric type of a tick in us, up to 0.3 ms apart).
# Prints one line each (whole store file bytes / values) and whether the target
# (<= 2 bytes/value) is met.
#
#   bash bench/store_bytes_per_value.sh [OUT_DIR] [MINUTES]
#   STORE_BENCH=path/to/store_bench TRAINPROF=path/to/trainprof bash bench/store_bytes_per_value.sh
#
# Defaults: the bench build (build/bench, see bench/run_all.sh) for store_bench, the CLI of
# build/bench or else build/py, a 10-minute node (100 ms, 32 cores, 8 GPUs).
# Under bench/run_all.sh (section store_bytes, $BENCH_RESULTS set) both figures also go to its
# results file, each with the smdebug JSON-lines copy's bytes/value as the peer.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-$(mktemp -d /tmp/tp_bytes_per_value.XXXXXX)}
MINUTES=${2:-10}
STORE_BENCH=${STORE_BENCH:-build/bench/bench/store_bench}
if [[ -z ${TRAINPROF:-} ]]; then
  for t in build/bench/src/cli/trainprof build/py/src/cli/trainprof; do
    [[ -x $t ]] && TRAINPROF=$t && break
  done
fi
[[ -x $STORE_BENCH ]] || { echo "store_bench not built: $STORE_BENCH" >&2; exit 1; }
[[ -x ${TRAINPROF:-} ]] || { echo "trainprof CLI not built" >&2; exit 1; }
mkdir -p "$OUT"
rm -rf "$OUT/store-bench-run" "$OUT/smdebug-profiler-output" "$OUT/imported"

# BENCH_RESULTS empty: store_bench's own figures belong to the store section, not this one.
log=$(BENCH_RESULTS= "$STORE_BENCH" "$OUT" --minutes "$MINUTES" --smdebug-minutes "$MINUTES" --repeat 1)
recorded=$(sed -n 's/.*= \([0-9.]*\) bytes\/value.*/\1/p' <<<"$log")
values=$(sed -n 's/^smdebug-format copy: [0-9]* min, \([0-9]*\) values.*/\1/p' <<<"$log")
smdebug=$(sed -n 's/^smdebug-format copy: .*: \([0-9.]*\) bytes\/value.*/\1/p' <<<"$log")
[[ -n $recorded && -n $values && -n $smdebug ]] ||
  { printf '%s\n' "$log"; echo "store_bench printed no bytes/value line" >&2; exit 1; }
"$TRAINPROF" import smdebug "$OUT/smdebug-profiler-output" --out "$OUT/imported" >/dev/null
bytes=$(find "$OUT/imported/nodes" -name 'store.sqlite*' -printf '%s\n' | awk '{s += $1} END {print s}')

verdict() { awk -v v="$1" 'BEGIN { print (v <= 2.0 ? "met" : "NOT met") }'; }
imported=$(awk -v b="$bytes" -v n="$values" 'BEGIN { printf "%.3f", b / n }')
echo "store bytes/value, recorded system metrics ($MINUTES min node): $recorded (target <= 2: $(verdict "$recorded"))"
echo "store bytes/value, imported SageMaker system metrics (same samples, $values values): $imported (target <= 2: $(verdict "$imported"))"
echo "smdebug JSON lines of the same samples: $smdebug bytes/value"
if [[ -n ${BENCH_RESULTS:-} ]]; then
  R="python3 bench/lib/results.py"
  $R add --name store_bytes.recorded_bytes_per_value --value "$recorded"
  $R add --name store_bytes.imported_bytes_per_value --value "$imported"
  for f in store_bytes.recorded_bytes_per_value store_bytes.imported_bytes_per_value; do
    $R peer --figure $f --value "$smdebug" --detail "smdebug JSON lines, $MINUTES min"
  done
fi
