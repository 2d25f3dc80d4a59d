#!/usr/bin/env bash
# Report build time and memory for generated 30-minute and 24-hour runs (issue 7).
set -euo pipefail
build/bench/bench/report_bench --reps 3
# How long the 24-hour report takes to open in headless Chromium (budget: under 2 s).
.venv/bin/python bench/report_open_time.py bench/out/report_bench/24h.html --reps 5
