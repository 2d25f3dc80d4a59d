# Sourced by scripts/setup.sh and scripts/test.sh: compile through ccache when it is installed.
# CCACHE_BASEDIR makes the repository's absolute paths relative in what ccache hashes, so that two
# clones in different directories share the cache; CCACHE_NOHASHDIR keeps the build directory out
# of the hash of builds with debug info. Sets CCACHE_PIP_ARGS (scikit-build-core options) and
# CCACHE_CMAKE_ARGS (plain CMake options); both are empty without ccache.
CCACHE_PIP_ARGS=()
CCACHE_CMAKE_ARGS=()
if command -v ccache >/dev/null 2>&1 && [[ ${TRAINPROF_NO_CCACHE:-0} != 1 ]]; then
  export CCACHE_BASEDIR="$(pwd)" CCACHE_NOHASHDIR=1
  CCACHE_PIP_ARGS=(-Ccmake.define.CMAKE_C_COMPILER_LAUNCHER=ccache
    -Ccmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache)
  CCACHE_CMAKE_ARGS=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
