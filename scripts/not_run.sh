#!/usr/bin/env bash
# not_run.sh CMAKE_CACHE CTEST_OUTPUT: what a test run left out, and why: the
# suites the build did not make (no CUDA toolkit, no clang) and the tests
# that skipped themselves (no GPU, no Horovod). ctest's "100% passed" counts
# neither, so scripts/test.sh ends with this.
set -euo pipefail
cache=$1
output=$2
echo "== Not run, and why"
lines=0
say() { echo "  $*"; lines=$((lines + 1)); }
if [[ $(sed -n 's/^SLIMREDUCE_CUDA:[A-Z]*=//p' "$cache") != ON ]] ||
   ! grep -q '^SLIMREDUCE_NCCL_INCLUDE_DIR:PATH=/' "$cache"; then
  say "GPU path suites (labels cuda, hostsim: the NCCL shim, the device path, the host" \
      "simulation of 1-4 ranks): not built, no CUDA toolkit with nccl.h found (docs/gpu.md)"
fi
if ! grep -q '^SLIMREDUCE_CLANGXX:FILEPATH=/' "$cache"; then
  say "fuzz targets (tests/fuzz): not built, no clang++ (apt-get install clang libclang-rt-14-dev)"
fi
while read -r name; do
  case $name in
    cuda_*) why="needs a GPU (none on this machine)" ;;
    horovod*) why="needs Horovod built with MPI and PyTorch (from PyPI)" ;;
    tools_pip_install) why="needs PyPI for pip's build requirements (scikit-build-core)" ;;
    *) why="skipped itself: its output in Testing/Temporary/LastTest.log says why" ;;
  esac
  say "$name: $why"
done < <(sed -n 's/^[[:space:]]*[0-9]* - \(.*\) (Skipped)$/\1/p' "$output")
[[ $lines -gt 0 ]] || echo "  nothing: every suite was built and every test ran"
