#!/usr/bin/env bash
# trainprof import + analyze --hta-compat against HolisticTraceAnalysis 0.5.0 on every trace set
# under ../shared/data/traces that HTA loads (issue 16 item 4: >= 10x on each): bench/hta_ratio.py.
# HTA is the project's pinned test dependency (scripts/requirements-dev.txt, in .venv); when it
# is missing the figures are recorded as skipped with the reason. Quick mode: 3 trace sets
# (one large, one middle, one small), one run each.
set -euo pipefail
cd "$(dirname "$0")/../.."
ARGS=(--repeat 3 --hta-repeat 2)
if [[ ${BENCH_QUICK:-0} == 1 ]]; then
  ARGS=(--repeat 1 --hta-repeat 1 --only resnet50_num_workers_0/worker0.1623143566756
    --only nccl_parser_config --only amd_trace)
fi
# HTA reads stdin (and would eat a caller's); its progress bars go to the log's stderr.
.venv/bin/python bench/hta_ratio.py "${ARGS[@]}" </dev/null
