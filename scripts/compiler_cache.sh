# Sourced by scripts/setup.sh and scripts/test.sh: a compiler cache (ccache,
# installed by setup.sh) for every build tree of the suite: the main build and
# the trees the tests make (AddressSanitizer, ThreadSanitizer, the CPU-only and
# NCCL-only variants, the host simulation's ThreadSanitizer tree). A machine
# that ran the suite before builds from the cache, whatever folder the clone
# is in: paths under the clone are hashed relative to it (CCACHE_BASEDIR), and
# not the build folder (CCACHE_NOHASHDIR). CMake (3.17 and later) reads the
# launcher variables for each new tree; `compiler_launchers` gives them as
# -D options for a tree configured before. SLIMREDUCE_NO_CCACHE=1 turns it off.
compiler_launchers=()
if [ "${SLIMREDUCE_NO_CCACHE:-0}" != 1 ] && command -v ccache >/dev/null 2>&1; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
  export CMAKE_CUDA_COMPILER_LAUNCHER=ccache
  CCACHE_BASEDIR=$(pwd)
  export CCACHE_BASEDIR CCACHE_NOHASHDIR=true CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-12G}
  compiler_launchers=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
                      -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
