#!/usr/bin/env bash
# Configures and builds one of the library's other build shapes in a scratch
# folder, so that a change that breaks it fails here and not on a user's
# machine: `cpu-only` (no CUDA: libslimreduce.so alone) or `nccl-only` (CUDA
# but no MPI: libslimreduce_nccl.so alone, with no trace of MPI).
# Usage: check_build_variant.sh SOURCE_DIR SCRATCH_DIR cpu-only|nccl-only
set -euo pipefail
src=$1 dir=$2 variant=$3
common=(-DCMAKE_BUILD_TYPE=Release -DSLIMREDUCE_BUILD_TESTS=OFF -DSLIMREDUCE_BUILD_BENCH=OFF)
case $variant in
  cpu-only)
    args=(-DSLIMREDUCE_CUDA=OFF) target=slimreduce lib=libslimreduce.so absent=libslimreduce_nccl.so ;;
  nccl-only)
    args=(-DCMAKE_DISABLE_FIND_PACKAGE_MPI=TRUE -DCMAKE_CUDA_ARCHITECTURES=90)
    target=slimreduce_nccl lib=libslimreduce_nccl.so absent=libslimreduce.so ;;
  *) echo "unknown variant: $variant" >&2; exit 2 ;;
esac
rm -rf "$dir"
cmake -S "$src" -B "$dir" "${common[@]}" "${args[@]}" >"$dir.configure.log" 2>&1 ||
  { cat "$dir.configure.log"; exit 1; }
cmake --build "$dir" -j2 --target "$target" >"$dir.build.log" 2>&1 || { tail -40 "$dir.build.log"; exit 1; }
[ -f "$dir/interpose/$lib" ] || { echo "$lib was not built"; exit 1; }
if [ "$variant" = nccl-only ]; then
  # CMake must have taken the NCCL-only shape: no MPI library target at all.
  cmake --build "$dir" --target slimreduce >/dev/null 2>&1 && { echo "libslimreduce.so was buildable without MPI"; exit 1; }
  "$src/tests/cuda/check_library.sh" "$dir/interpose/$lib" --nccl-only
fi
[ ! -e "$dir/interpose/$absent" ] || { echo "$absent should not be here"; exit 1; }
echo "ok: $variant build made $lib"
