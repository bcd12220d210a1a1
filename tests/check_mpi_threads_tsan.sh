#!/usr/bin/env bash
# The MPI path under threads, built with ThreadSanitizer (CPU path only) in a
# scratch folder: several threads reducing on their own communicators while
# another makes and frees communicators (test_mpi_threads, fp16 and top-k),
# the pipeline's helper thread under MPI_THREAD_MULTIPLE (test_mpi_pipeline),
# and queued MPI_Iallreduce calls (test_mpi_iallreduce). A data race in the
# shim, the engine, the counters or the pipeline fails this even when the
# results come out right. Open MPI is not instrumented: its own locking is
# not ours to check (ignore_noninstrumented_modules; without it Open MPI's
# TCP transport reports a lock-order inversion inside itself at start-up).
# Usage: check_mpi_threads_tsan.sh SOURCE_DIR SCRATCH_DIR MPIEXEC
set -euo pipefail
src=$1 dir=$2 mpiexec=$3
rm -rf "$dir"
tsan=-fsanitize=thread
cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLIMREDUCE_CUDA=OFF \
  -DSLIMREDUCE_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS=$tsan -DCMAKE_C_FLAGS=$tsan \
  -DCMAKE_EXE_LINKER_FLAGS=$tsan -DCMAKE_SHARED_LINKER_FLAGS=$tsan \
  >"$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
cmake --build "$dir" -j2 --target slimreduce test_mpi_threads test_mpi_pipeline \
  test_mpi_iallreduce >"$dir.build.log" 2>&1 || { tail -40 "$dir.build.log"; exit 1; }
tests=$dir/tests/mpi
source "$src/tests/tsan_case.sh"
options="$tsan_options ignore_noninstrumented_modules=1"
# NAME RANKS [SETTING=VALUE ...] -- PROGRAM ARGS...
run_case() {
  local name=$1 ranks=$2 exports=()
  shift 2
  while [ "$1" != -- ]; do exports+=(-x "$1"); shift; done
  shift
  launch() {
    timeout 600 "$mpiexec" --allow-run-as-root --oversubscribe --mca btl_vader_single_copy_mechanism none --mca pml ob1 \
      -np "$ranks" -x LD_PRELOAD="$dir/interpose/libslimreduce.so" -x TSAN_OPTIONS="$options" \
      "${exports[@]}" "${tsan_wrap[@]}" "$@"
  }
  local out=$dir/$name.log
  tsan_case "$out" "$name" launch "$@"
  echo "ok: $name: $(grep -a -E 'PASSED|tests ran' "$out" | tail -1 | sed 's/\x1b\[[0-9;]*m//g'), no race reported"
}
run_case threads_fp16_np2 2 SLIMREDUCE_COMPRESSOR=fp16 -- "$tests/test_mpi_threads"
run_case threads_topk_np3 3 SLIMREDUCE_COMPRESSOR=topk -- "$tests/test_mpi_threads"
run_case pipeline_multiple_np3 3 -- "$tests/test_mpi_pipeline" multiple
run_case iallreduce_fp16_np2 2 SLIMREDUCE_COMPRESSOR=fp16 SLIMREDUCE_MIN_BYTES=4096 \
  SLIMREDUCE_ERROR_FEEDBACK=1 -- "$tests/test_mpi_iallreduce" --gtest_filter=-Priority.*
run_case iallreduce_topk_sparse_np3 3 SLIMREDUCE_COMPRESSOR=topk SLIMREDUCE_MIN_BYTES=4096 \
  SLIMREDUCE_TOPK_RATIO=0.01 -- "$tests/test_mpi_iallreduce" \
  --gtest_filter=Iallreduce.FusedResults*:Iallreduce.Counts*:Iallreduce.RanksThat*
