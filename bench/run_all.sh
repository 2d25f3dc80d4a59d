#!/usr/bin/env bash
# Builds the benchmarks, runs every section (bench/run_all.d/*.sh) and writes all figures to one
# file, bench/out/results.json, checked against bench/targets.toml; ends with a summary table
# (figure, value, spread, peer, ratio, target, met / NOT met) that names the machine, its load
# before and after, and reference measurements of it (gzip -dc, memory copy). Not part of the
# test run. Peers that install from PyPI go into a separate venv (.venv-bench) so that their pins
# never touch the project's environment. docs/benchmarks.md explains the output.
#
#   bash bench/run_all.sh > bench.log 2>&1     the whole log, then the summary
#   BENCH_QUICK=1 bash bench/run_all.sh        smaller inputs and fewer repeats (a few minutes)
#   BENCH_SECTIONS="store import" ...          only these sections (spaces or commas between)
#   BENCH_OUT=DIR ...                          results elsewhere (default bench/out)
#   BENCH_SKIP_SETUP=1 / BENCH_SKIP_BUILD=1    use the environment and build as they are
#   BENCH_REFERENCE=0                          no reference measurements
#   python3 bench/compare.py OLD.json NEW.json what got faster or slower between two runs
#
# Exit status: 0 when every section ran (targets NOT met are results, not errors), 1 when a
# section failed, 2 when the results could not be written. A section that exits 77 skipped
# itself (e.g. sdist in quick mode): it is recorded as skipped, its last line the reason.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
export PYTHONUNBUFFERED=1 # Python's prints keep their place in a redirected log
OUT=${BENCH_OUT:-$ROOT/bench/out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export BENCH_OUT=$OUT
export BENCH_RESULTS=$OUT/results.jsonl
export BENCH_QUICK=${BENCH_QUICK:-0}
SECTIONS_DIR=${BENCH_SECTIONS_DIR:-$ROOT/bench/run_all.d}
# Builds of this tree serialize on one lock (the one the project's build helpers take).
LOCK=${BENCH_BUILD_LOCK:-/tmp/tp-build.lock}
rm -f "$BENCH_RESULTS" "$OUT/results.json"
RESULTS() { python3 "$ROOT/bench/lib/results.py" "$@"; }

echo "trainprof benchmarks: $(date -u +%Y-%m-%dT%H:%M:%SZ), results in $OUT/results.json"
if [[ $BENCH_QUICK == 1 ]]; then
  echo "QUICK mode: smaller inputs and fewer repeats"
  RESULTS meta --mode quick
fi

# The environment and the bench build. A failure here fails every section (with the reason).
BROKEN=""
if [[ ${BENCH_SKIP_SETUP:-0} != 1 ]]; then
  echo "== setup (scripts/setup.sh; log: $OUT/setup.log)"
  if ! flock "$LOCK" bash scripts/setup.sh >"$OUT/setup.log" 2>&1; then
    tail -5 "$OUT/setup.log"
    echo "(setup failed: the sections run with the environment as it is)"
  fi
fi
if [[ ${BENCH_SKIP_BUILD:-0} != 1 ]]; then
  # The bench programs and the CLI the sections run (build/bench/src/cli/trainprof).
  TARGETS="store_bench collect_bench instrument_bench import_bench report_bench span_load_native soak_recorder nvml_replay trainprof"
  echo "== build (build/bench, Release: $TARGETS; log: $OUT/build.log)"
  if ! flock "$LOCK" bash -c "cmake -S . -B build/bench -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DTRAINPROF_BUILD_BENCH=ON -DTRAINPROF_BUILD_TESTS=OFF &&
      cmake --build build/bench -j$(nproc) --target $TARGETS" >"$OUT/build.log" 2>&1; then
    tail -20 "$OUT/build.log"
    BROKEN="the bench build failed (see $OUT/build.log)"
  fi
  if [[ -z $BROKEN && ! -x .venv-bench/bin/python ]]; then
    echo "== peers (.venv-bench: smdebug, pandas, numpy, psutil)"
    python3 -m venv .venv-bench
    for p in smdebug requests pandas numpy psutil; do # one by one: one missing stops no other
      .venv-bench/bin/pip install -q $p >"$OUT/pip-$p.log" 2>&1 ||
        echo "($p did not install: $(tail -1 "$OUT/pip-$p.log" | cut -c1-150))"
    done
  fi
fi

RESULTS machine --when before
if [[ ${BENCH_REFERENCE:-1} != 0 ]]; then
  echo; echo "== reference (this machine: gzip -dc and memory copy)"
  RESULTS reference --dir "$OUT" --repeat 3 || echo "(reference measurement failed)"
fi

FAILED=0
WANTED=${BENCH_SECTIONS:-}
WANTED=" ${WANTED//,/ } " # spaces or commas between the names
for script in "$SECTIONS_DIR"/*.sh; do
  [[ -e $script ]] || continue
  name=$(basename "$script" .sh)
  if [[ -n ${BENCH_SECTIONS:-} && $WANTED != *" $name "* ]]; then
    RESULTS section --name "$name" --status skipped --reason "not in BENCH_SECTIONS"
    continue
  fi
  echo; echo "== $name (load average $(cut -d' ' -f1-3 /proc/loadavg))"
  if [[ -n $BROKEN ]]; then
    echo "skipped: $BROKEN"
    RESULTS section --name "$name" --status failed --reason "$BROKEN"
    FAILED=1
    continue
  fi
  start=$SECONDS
  # Through tee to a file of its own (no reopening of our stdout: a redirected log stays whole),
  # so that a failure can be reported with the section's last words.
  bash "$script" "$OUT" 2>&1 | tee "$OUT/section-$name.log"
  rc=${PIPESTATUS[0]}
  if [[ $rc -eq 0 ]]; then
    RESULTS section --name "$name" --status ok --seconds $((SECONDS - start))
  elif [[ $rc -eq 77 ]]; then
    last=$(grep -v '^[[:space:]]*$' "$OUT/section-$name.log" | tail -1 | cut -c1-200)
    echo "section $name skipped"
    RESULTS section --name "$name" --status skipped --seconds $((SECONDS - start)) \
      --reason "${last:-skipped by the section}"
  else
    last=$(grep -v '^[[:space:]]*$' "$OUT/section-$name.log" | tail -1 | cut -c1-200)
    echo "section $name FAILED (exit $rc)"
    RESULTS section --name "$name" --status failed --seconds $((SECONDS - start)) \
      --reason "exit $rc: ${last:-no output}"
    FAILED=1
  fi
done

if [[ ${BENCH_REFERENCE:-1} != 0 ]]; then
  echo; echo "== reference again (a change of the machine during the run shows in its spread)"
  RESULTS reference --dir "$OUT" --repeat 3 || echo "(reference measurement failed)"
fi
RESULTS machine --when after
echo
RESULTS finish || exit 2
exit $FAILED
