#!/usr/bin/env bash
# docs/fleet.md's fleet queries in Spark SQL (pyspark, local[2]) and in DuckDB over the same
# `trainprof export parquet` of a generated fleet (issue 21): the same rows from both engines,
# and both engines' times (bench/spark_sql.py reads the queries out of the docs' ```sql blocks).
# pyspark is the bench venv's (.venv-bench, installed here when missing, like the other
# sections' peers); Java (17 or later) is the machine's: when it is missing, it is installed
# from Debian (openjdk-17-jre-headless) only as root, with apt-get, and without BENCH_SKIP_SETUP;
# otherwise the section exits 77 (skipped) with the reason as its last line. Quick mode: 8 runs,
# one repeat.
set -euo pipefail
OUT=$1
cd "$(dirname "$0")/../.."
R="python3 bench/lib/results.py"
skip() {
  for f in spark.queries_differing spark.duckdb_s spark.spark_start_s; do
    $R skip --figure $f --reason "$*"
  done
  echo "$*"
  exit 77
}
if ! command -v java >/dev/null && [[ -z ${JAVA_HOME:-} ]]; then
  if [[ ${BENCH_SKIP_SETUP:-0} == 1 || $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
    skip "no Java: Spark SQL not checked (apt-get install openjdk-17-jre-headless, or run" \
      "as root without BENCH_SKIP_SETUP)"
  fi
  echo "installing Java (openjdk-17-jre-headless; log: $OUT/apt-java.log)"
  if ! { apt-get install -y -q openjdk-17-jre-headless ||
    { apt-get update -q && apt-get install -y -q openjdk-17-jre-headless; }; } \
    >"$OUT/apt-java.log" 2>&1; then
    skip "Java did not install: $(tail -1 "$OUT/apt-java.log" | cut -c1-120)"
  fi
fi
if [[ ! -x .venv-bench/bin/python ]]; then
  skip "no .venv-bench (made by bench/run_all.sh without BENCH_SKIP_BUILD): Spark SQL not checked"
fi
if ! .venv-bench/bin/python -c "import pyspark" 2>/dev/null; then
  echo "installing pyspark into .venv-bench (log: $OUT/pip-pyspark.log)"
  .venv-bench/bin/pip install -q "pyspark>=4,<5" >"$OUT/pip-pyspark.log" 2>&1 ||
    skip "pyspark did not install: $(tail -1 "$OUT/pip-pyspark.log" | cut -c1-120)"
fi
ARGS=(--runs 16 --repeat 3)
[[ ${BENCH_QUICK:-0} == 1 ]] && ARGS=(--runs 8 --repeat 1)
TRAINPROF_BIN=$(.venv/bin/python -c 'import trainprof.cli as c; print(c.native_executable())')
export TRAINPROF_BIN
mkdir -p "$OUT/spark"
.venv/bin/python bench/spark_sql.py "${ARGS[@]}" --keep "$OUT/spark"
