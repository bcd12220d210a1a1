#!/usr/bin/env bash
# The README's test command: set up (install, build), then run every test
# (unit, multi-rank under mpirun, whole jobs under LD_PRELOAD, fuzz targets)
# through ctest; its last lines say which suites did not run, and why.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
./scripts/setup.sh
source scripts/compiler_cache.sh  # the trees the tests build use it too
cd build
status=0
ctest --output-on-failure -j"$(nproc)" "$@" 2>&1 | tee ctest-output.log || status=$?
../scripts/not_run.sh CMakeCache.txt ctest-output.log
exit "$status"
