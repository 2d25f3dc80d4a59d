#!/usr/bin/env bash
# How long a user's `pip install trainprof` from the sdist takes to build here (issue 17: under
# 8 minutes on this 2-core machine; it took 17 before the dependencies were vendored).
# Builds the sdist, then a wheel from it in a clean temporary directory with build isolation
# (scikit-build-core, pybind11, cmake and ninja from the package index or its cache, as a user
# gets them), and prints the seconds of each step with met / NOT met against the goal.
# Not part of scripts/test.sh (it compiles everything once more, minutes of both cores).
#   bash bench/sdist_build_time.sh [GOAL_SECONDS]
# Under bench/run_all.sh (section sdist, $BENCH_RESULTS set) the seconds also go to its results
# file (sdist.sdist_s, sdist.wheel_s, sdist.build_s; the goal there is bench/targets.toml's).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
GOAL=${1:-480}
PY=${PYTHON:-$ROOT/.venv/bin/python}
TMP=$(mktemp -d /tmp/tp-sdist.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

t0=$(date +%s.%N)
"$PY" -m pip install -q "build>=1.2" >/dev/null 2>&1 || true
if "$PY" -c "import build" 2>/dev/null; then
  "$PY" -m build --sdist --outdir "$TMP/dist" . >"$TMP/sdist.log" 2>&1
else
  # Without `build`: scikit-build-core's own sdist hook, through pip's PEP 517 frontend.
  "$PY" -c "import scikit_build_core.build as b; print(b.build_sdist('$TMP/dist'))" \
    >"$TMP/sdist.log" 2>&1
fi
t1=$(date +%s.%N)
SDIST=$(ls "$TMP"/dist/trainprof-*.tar.gz)
mkdir -p "$TMP/src" "$TMP/wheel"
tar -C "$TMP/src" -xzf "$SDIST"
cd "$TMP/src"/trainprof-*
# A clean build: fresh build directory, isolated build environment, tests off (what pip does).
"$PY" -m pip wheel . --no-deps -w "$TMP/wheel" -Cbuild-dir="$TMP/build" >"$TMP/wheel.log" 2>&1 ||
  { tail -40 "$TMP/wheel.log"; exit 1; }
t2=$(date +%s.%N)

calc() { "$PY" -c "print($1)"; }
sdist_s=$(calc "$t1 - $t0")
wheel_s=$(calc "$t2 - $t1")
total_s=$(calc "$t2 - $t0")
printf 'sdist: %s (%.0f KiB) in %.1f s\n' "$(basename "$SDIST")" \
  "$(($(stat -c %s "$SDIST") / 1024))" "$sdist_s"
printf 'wheel from the sdist (clean, %s cores): %s in %.1f s\n' "$(nproc)" \
  "$(basename "$(ls "$TMP"/wheel/*.whl)")" "$wheel_s"
if [[ $(calc "int($total_s < $GOAL)") == 1 ]]; then verdict=met; else verdict="NOT met"; fi
printf 'sdist build time: %.1f s (goal < %d s): %s\n' "$total_s" "$GOAL" "$verdict"
if [[ -n ${BENCH_RESULTS:-} ]]; then
  R="python3 $ROOT/bench/lib/results.py"
  $R add --name sdist.sdist_s --value "$sdist_s"
  $R add --name sdist.wheel_s --value "$wheel_s"
  $R add --name sdist.build_s --value "$total_s"
fi
