#!/usr/bin/env bash
# Builds the benchmarks and prints every figure with its ratio against the named peers.
# Not part of the test run. Peers that install from PyPI go into a separate venv (.venv-bench)
# so that their pins never touch the project's environment.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
bash scripts/setup.sh >/dev/null
OUT=${BENCH_OUT:-$ROOT/bench/out}
mkdir -p "$OUT"

cmake -S . -B build/bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRAINPROF_BUILD_BENCH=ON \
  -DTRAINPROF_BUILD_TESTS=OFF >/dev/null
cmake --build build/bench -j"$(nproc)" >/dev/null

if [[ ! -x .venv-bench/bin/python ]]; then
  python3 -m venv .venv-bench
  .venv-bench/bin/pip install -q smdebug requests pandas numpy psutil || echo "(some peers failed to install)"
fi
# The bench venv sees the project's package through the main venv's site-packages.
SITE=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
BENCH_PY() { PYTHONPATH="$SITE" .venv-bench/bin/python "$@"; }

echo "== store (issue 2)"
build/bench/bench/store_bench "$OUT" --minutes 60 --smdebug-minutes 10
BENCH_PY bench/store_read_bench.py "$OUT/store-bench-run" "$OUT/smdebug-profiler-output"

# Other benchmarks register themselves below, one block each.
for extra in bench/run_*.d/*.sh; do
  [[ -e "$extra" ]] || continue
  echo; echo "== $(basename "$extra" .sh)"
  bash "$extra" "$OUT"
done
