#!/usr/bin/env bash
# Report build time and memory for generated 30-minute and 24-hour runs (issue 7).
set -euo pipefail
build/bench/bench/report_bench --reps 3
