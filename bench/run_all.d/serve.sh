#!/usr/bin/env bash
# The live dashboard (issue 18). Load: 50 clients on a live run's nodes page and stream for
# 90 s while a torch job trains under `record --serve` (bench/serve_load.py: the job's step-time
# change <= 2 %, API p99 <= 100 ms). Large runs: the nodes page of a 24-hour, 8-GPU, 100 ms run
# (the report section's generated run, made here when missing) in <= 1 s (bench/serve_large.py).
# Load: clients switched on and off in 5-s windows of one job (A/B pairs, a bootstrap interval),
# the job pinned to its own core; 45 s of clients a repeat, two repeats: 18 pairs (12 left the
# interval about +-3 % wide around a change near 0, too wide to judge 2 %). Quick mode: 15 s of
# clients, one repeat each.
set -euo pipefail
OUT=$1
cd "$(dirname "$0")/../.."
REPEATS=3 CLIENTS_S=45 LOAD_REPEATS=2
[[ ${BENCH_QUICK:-0} == 1 ]] && REPEATS=1 CLIENTS_S=15 LOAD_REPEATS=1
.venv/bin/python bench/serve_load.py --clients 50 --clients-s $CLIENTS_S --repeats $LOAD_REPEATS
RUN=$OUT/report_bench/24h
if [[ ! -f $RUN/run.json ]]; then
  build/bench/bench/report_bench --dir "$OUT/report_bench" --only 24h --reps 1
fi
.venv/bin/python bench/serve_large.py "$RUN" --repeats $REPEATS
