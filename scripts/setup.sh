#!/usr/bin/env bash
# Sets up everything trainprof needs on a fresh Debian machine, idempotently:
# system packages, a virtual environment in .venv, Python dependencies, and the package itself
# built by scikit-build-core from the one CMake build (tests included, warnings as errors) into
# build/py, which later runs rebuild incrementally.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

log() { printf '\n== %s\n' "$*"; }

# 1. System packages (only the missing ones; apt-get update once when something is missing).
missing=()
while read -r pkg; do
  [[ -z "$pkg" || "$pkg" == \#* ]] && continue
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done < scripts/system-packages.txt
if ((${#missing[@]})); then
  log "installing system packages: ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# 2. Virtual environment and Python dependencies.
if [[ ! -x .venv/bin/python ]]; then
  log "creating .venv"
  python3 -m venv .venv
fi
PY="$ROOT/.venv/bin/python"
if ! "$PY" -c "import scikit_build_core, pybind11, pytest, pandas, numpy, torch, pytorch_lightning, transformers, accelerate, keras, tensorflow, playwright, psutil, mypy, hta, auditwheel, build, pyarrow, duckdb, moto, optuna, yaml" 2>/dev/null; then
  log "installing Python dependencies"
  "$PY" -m pip install -q --upgrade pip
  "$PY" -m pip install -q -r scripts/requirements-dev.txt
fi
# smdebug, the oracle of the SageMaker differential tests, without its dependencies (see
# scripts/requirements-dev.txt).
if ! "$PY" -c "import boto3, smdebug.profiler" 2>/dev/null; then
  "$PY" -m pip install -q boto3==1.44.8
  "$PY" -m pip install -q --no-deps smdebug==1.0.34
fi

# 3. Build and install trainprof (C++ core, CLI, Python extension, C++ tests) in one build.
# Through ccache when it is there (scripts/ccache-env.sh): a fresh clone on a machine that has
# built trainprof before compiles only the files that changed; the build is otherwise the same.
source scripts/ccache-env.sh
log "building trainprof"
"$PY" -m pip install -q --no-build-isolation --no-deps \
  -Cbuild-dir=build/py \
  "${CCACHE_PIP_ARGS[@]}" \
  -Ccmake.define.TRAINPROF_BUILD_TESTS=ON \
  -Ccmake.define.TRAINPROF_WERROR=ON \
  -Ccmake.build-type=Release \
  .
