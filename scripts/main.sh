#!/usr/bin/env bash
# The main job on its embedded default: set everything up, then run the demo job, which
# writes a run and reads it back. (Becomes a real profiled training run once `record` lands.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source .venv/bin/activate
trainprof demo --out "trainprof-runs/demo-$(date -u +%Y%m%dT%H%M%SZ)"
trainprof ls trainprof-runs
