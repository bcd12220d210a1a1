#!/usr/bin/env bash
# -DSLIMREDUCE_ALSO_MPI_ABI (cmake/SlimReduceOtherAbi.cmake) refused at
# configure time, with a message naming the setting: a value that is no MPI
# family, and the family this build is already for.
# Usage: check_other_abi_refused.sh SOURCE_DIR SCRATCH_DIR OWN_ABI
set -uo pipefail
src=$1 dir=$2 own=$3
status=0
refused() {  # VALUE TEXT: configuring with the value fails and says TEXT
  rm -rf "$dir"
  local out
  out=$(cmake -S "$src" -B "$dir" -DSLIMREDUCE_CUDA=OFF -DSLIMREDUCE_BUILD_TESTS=OFF \
    -DSLIMREDUCE_BUILD_BENCH=OFF -DSLIMREDUCE_ALSO_MPI_ABI="$1" 2>&1)
  if [ $? -ne 0 ] && grep -q "$2" <<<"$out"; then
    echo "ok: SLIMREDUCE_ALSO_MPI_ABI=$1 refused: $2"
  else
    echo "$out" | tail -20
    echo "FAIL: SLIMREDUCE_ALSO_MPI_ABI=$1 was not refused with \"$2\""
    status=1
  fi
}
refused bogus "SLIMREDUCE_ALSO_MPI_ABI='bogus' is not accepted; expected openmpi or mpich"
refused "$own" "SLIMREDUCE_ALSO_MPI_ABI=$own is this build's own family"
rm -rf "$dir"
exit $status
