#!/usr/bin/env bash
# Instrumentation (issue 4): C++ span cost, Python span cost against its peers, and a real
# training loop instrumented automatically vs bare.
set -euo pipefail
OUT=$1
build/bench/bench/instrument_bench "$OUT"
.venv/bin/python bench/instrument_overhead.py
