#!/usr/bin/env bash
# The main job on its embedded default: set everything up, then profile a real training job end
# to end — a small ResNet trained on generated images (CPU), recorded with no change to its
# code — and show what trainprof found: the run, its steps, the rules, the cost, the report.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source .venv/bin/activate
RUN="trainprof-runs/resnet-$(date -u +%Y%m%dT%H%M%SZ)"
trainprof record --out "$RUN" --name resnet-synthetic --instance-type ml.m5.xlarge \
  --detail-steps 10-11 -- \
  python examples/train_resnet_synthetic.py --steps 40 --eval-batches 5 --workers 1
trainprof show "$RUN"
for cmd in rules cost analyze; do   # analyze: the operator detail of steps 10-11
  echo; echo "== trainprof $cmd $RUN"
  trainprof "$cmd" "$RUN" || echo "(trainprof $cmd: see the message above)"
done
trainprof export chrome-trace "$RUN" --out "$RUN/trace.json.gz"
if [[ -f "$RUN/report.html" ]]; then
  echo; echo "report: $RUN/report.html   trace for Perfetto: $RUN/trace.json.gz"
fi
trainprof ls trainprof-runs
