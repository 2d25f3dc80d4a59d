#!/usr/bin/env bash
# Builds the release wheels (manylinux_2_28, x86_64 and aarch64, CPython 3.10-3.13) and the sdist
# with cibuildwheel, into dist/. Needs docker or podman and network access to pull the
# manylinux images (quay.io/pypa/manylinux_2_28_*): run it on a release machine or in CI, not on
# the development machines (docs/install.md).
#   bash scripts/build_wheels.sh            # the host's architecture
#   ARCHS="x86_64 aarch64" bash scripts/build_wheels.sh   # aarch64 through QEMU (slow)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
ARCHS=${ARCHS:-$(uname -m)}

if ! command -v docker >/dev/null && ! command -v podman >/dev/null; then
  echo "error: cibuildwheel needs docker or podman (neither is installed)" >&2
  exit 1
fi
"$PY" -m pip install -q "cibuildwheel==2.23.3" "build>=1.2"

# Every setting is here (not in pyproject.toml) so that a plain `pip install .` stays simple.
export CIBW_BUILD="cp310-* cp311-* cp312-* cp313-*"
export CIBW_SKIP="*-musllinux_*"
export CIBW_ARCHS_LINUX="$ARCHS"
export CIBW_MANYLINUX_X86_64_IMAGE=manylinux_2_28
export CIBW_MANYLINUX_AARCH64_IMAGE=manylinux_2_28
# Nothing to install in the image: every C/C++ dependency is in third_party/ (the image's GCC 12+
# toolset compiles C++20). ISA-L stays optional at run time (dlopen).
export CIBW_BUILD_VERBOSITY=1
export CIBW_CONFIG_SETTINGS="cmake.define.TRAINPROF_STATIC_DEPS=ON"
# auditwheel must find nothing to graft: a grafted library would mean a new link dependency.
export CIBW_REPAIR_WHEEL_COMMAND_LINUX='auditwheel show {wheel} && auditwheel repair --only-plat -w {dest_dir} {wheel}'
# The installed wheel runs the CLI end to end in the image (no -dev package there).
export CIBW_TEST_COMMAND='trainprof demo --out /tmp/tp-demo && trainprof report /tmp/tp-demo && python -c "import trainprof; print(trainprof.open(\"/tmp/tp-demo\"))"'

"$PY" -m cibuildwheel --platform linux --output-dir dist .
"$PY" -m build --sdist --outdir dist .
ls -l dist
