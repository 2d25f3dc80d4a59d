#!/usr/bin/env bash
# Kineto import speed and memory per event, and HTA on the same file in the same run when it
# installs from PyPI (issue 5): three pairs, each trainprof (median of 3 imports) then HTA on
# the same trace; all repeats go to the results file. Then the real traces of ../shared/data.
set -euo pipefail
OUT=$1
cd "$(dirname "$0")/../.."
R="python3 bench/lib/results.py"
EVENTS=${IMPORT_BENCH_EVENTS:-500000}
PAIRS=3 REPEAT=3 REAL_REPEAT=5
[[ ${BENCH_QUICK:-0} == 1 ]] && PAIRS=1 REPEAT=3 REAL_REPEAT=3
HTA=yes
if [[ ! -x .venv-bench/bin/python ]]; then
  HTA="no .venv-bench"
elif ! err=$(.venv-bench/bin/pip install -q holistictraceanalysis 2>&1); then
  HTA="HolisticTraceAnalysis did not install: $(tail -1 <<<"$err" | cut -c1-150)"
fi
if [[ $HTA != yes ]]; then
  echo "HTA peer: not available ($HTA)"
  for f in import.synthetic_events_per_s import.synthetic_bytes_per_event; do
    $R peer --figure $f --skipped "$HTA"
  done
fi
for ((i = 1; i <= PAIRS; i++)); do
  # Captured, then printed: no `tee /dev/stderr`, which reopens (and truncates) a redirected log.
  out=$(build/bench/bench/import_bench "$EVENTS" "$OUT" --repeat $REPEAT --reuse)
  printf '%s\n' "$out"
  [[ $HTA == yes ]] || continue
  args=${out##*import_bench_hta.py }
  # HTA reads stdin (and would eat the loop's); its progress output goes to /dev/null.
  # shellcheck disable=SC2086
  .venv-bench/bin/python bench/import_bench_hta.py $args </dev/null 2>/dev/null |
    grep -aE "HTA|ratio" || echo "HTA peer failed"
done
T=../shared/data/traces
REAL=(
  $T/HolisticTraceAnalysis/tests/data/df_index_resolver/df_index_resolver.json.gz
  $T/HolisticTraceAnalysis/tests/data/mtia_trace_single_rank/mtia_rank_0.json.gz
  $T/HolisticTraceAnalysis/tests/data/trace_diff/control/control.json.gz
  $T/HolisticTraceAnalysis/tests/data/negative_queue_length_values_check/rank0.json.gz
  $T/kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143566756.pt.trace.json.gz
  $T/HolisticTraceAnalysis/tests/data/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz
  $T/HolisticTraceAnalysis/tests/data/nccl_parser_config/nccl_data.json.gz
)
missing=()
for f in "${REAL[@]}"; do [[ -f $f ]] || missing+=("$f"); done
if ((${#missing[@]})); then
  echo "real traces: ${#missing[@]} of ${#REAL[@]} not found (first: ${missing[0]})"
  for f in import.real_events_per_s import.real_gzip_events_per_s import.two_core_ratio \
    import.two_core_ratio_one_job; do
    $R skip --figure $f --reason "real traces not found under $T"
  done
else
  build/bench/bench/import_bench --real "$OUT" --repeat $REAL_REPEAT "${REAL[@]}"
fi
