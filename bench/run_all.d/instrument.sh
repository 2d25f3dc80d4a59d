#!/usr/bin/env bash
# Instrumentation (issue 4): C++ span cost (steady and in one long burst), Python span cost
# against its peers, start-up, the hooks' cost per step, and a real training loop instrumented
# automatically vs bare, with the attributable cost and py-spy's sampled share beside it.
set -euo pipefail
OUT=$1
build/bench/bench/instrument_bench "$OUT" --spans 20000 --repeat 9
build/bench/bench/instrument_bench "$OUT" --spans 300000 --repeat 5
.venv-bench/bin/pip install -q py-spy >/dev/null 2>&1 || echo "(py-spy not installable: sampled share skipped)"
PATH="$PWD/.venv-bench/bin:$PATH" .venv/bin/python bench/instrument_overhead.py --spans 50000 --repeat 5
