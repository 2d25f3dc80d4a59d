#!/usr/bin/env bash
# The main job on its embedded default: set everything up, then profile a real training job end
# to end — a small ResNet trained on generated images (CPU), recorded with no change to its
# code — and show what trainprof found: the run, its steps, the rules, the cost, the report.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source .venv/bin/activate
RUN="trainprof-runs/resnet-$(date -u +%Y%m%dT%H%M%SZ)"
trainprof record --out "$RUN" --name resnet-synthetic --instance-type ml.m5.xlarge -- \
  python examples/train_resnet_synthetic.py --steps 40 --eval-batches 5
trainprof show "$RUN"
trainprof analyze "$RUN" 2>/dev/null || true   # operator traces only when --detail-steps ran
for cmd in rules cost; do
  echo; echo "== trainprof $cmd $RUN"
  trainprof "$cmd" "$RUN" || echo "(trainprof $cmd: see the message above)"
done
if [[ -f "$RUN/report.html" ]]; then
  echo; echo "report: $RUN/report.html"
fi
trainprof ls trainprof-runs
