#!/usr/bin/env bash
# Kineto import speed and memory per event, and HTA on the same file in the same run when it
# installs from PyPI (issue 5): three pairs, each trainprof (median of 3 imports) then HTA on
# the same trace; quote the median ratio. Then the real traces of ../shared/data together.
set -euo pipefail
OUT=$1
EVENTS=${IMPORT_BENCH_EVENTS:-500000}
if ! .venv-bench/bin/pip install -q holistictraceanalysis >/dev/null 2>&1; then
  echo "HTA peer: not installable here"
fi
for i in 1 2 3; do
  line=$(build/bench/bench/import_bench "$EVENTS" "$OUT" --repeat 3 --reuse | tee /dev/stderr | tail -1)
  args=${line#*import_bench_hta.py }
  # HTA reads stdin (and would eat the loop's); its progress output goes to /dev/null.
  # shellcheck disable=SC2086
  .venv-bench/bin/python bench/import_bench_hta.py $args </dev/null 2>/dev/null |
    grep -aE "HTA|ratio" || echo "HTA peer failed"
done
T=../shared/data/traces
build/bench/bench/import_bench --real "$OUT" --repeat 5 \
  $T/HolisticTraceAnalysis/tests/data/df_index_resolver/df_index_resolver.json.gz \
  $T/HolisticTraceAnalysis/tests/data/mtia_trace_single_rank/mtia_rank_0.json.gz \
  $T/HolisticTraceAnalysis/tests/data/trace_diff/control/control.json.gz \
  $T/HolisticTraceAnalysis/tests/data/negative_queue_length_values_check/rank0.json.gz \
  $T/kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143566756.pt.trace.json.gz \
  $T/HolisticTraceAnalysis/tests/data/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz \
  $T/HolisticTraceAnalysis/tests/data/nccl_parser_config/nccl_data.json.gz
