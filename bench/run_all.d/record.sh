#!/usr/bin/env bash
# End-to-end overhead of `trainprof record` on a CPU-bound command (issue 3).
set -euo pipefail
.venv/bin/python bench/record_overhead.py --runs 7
