#!/usr/bin/env bash
# The README's test command: set up (install, build), then run every test
# (unit, multi-rank under mpirun, whole jobs under LD_PRELOAD) through ctest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
./scripts/setup.sh
cd build
ctest --output-on-failure -j"$(nproc)" "$@"
