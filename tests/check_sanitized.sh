#!/usr/bin/env bash
# An AddressSanitizer + UndefinedBehaviorSanitizer build of the CPU path
# (-DSLIMREDUCE_SANITIZE=ON, no CUDA, no benchmarks) in a scratch folder, and
# in it a subset of the suite (docs/reliability.md says which): every unit
# test, with LeakSanitizer on, and the multi-rank tests of each data path
# (dense casts, top-k, queued and fused calls, partitions and the pipeline's
# helper thread, hierarchical reduction, sharded top-k and int8, the memory
# job), with the sanitized library preloaded after the ASan runtime. Any report fails it.
# Usage: check_sanitized.sh SOURCE_DIR SCRATCH_DIR
set -euo pipefail
src=$1 dir=$2
rm -rf "$dir"
cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLIMREDUCE_CUDA=OFF \
  -DSLIMREDUCE_BUILD_BENCH=OFF -DSLIMREDUCE_SANITIZE=ON >"$dir.configure.log" 2>&1 ||
  { cat "$dir.configure.log"; exit 1; }
cmake --build "$dir" -j2 >"$dir.build.log" 2>&1 || { tail -40 "$dir.build.log"; exit 1; }
cd "$dir"
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Unit tests: no MPI in them, so leaks are ours. Left out: the preload into a
# process without MPI (the ASan runtime must come first there).
ASAN_OPTIONS=detect_leaks=1 ctest -j2 --output-on-failure \
  -LE "mpi|cuda|hostsim|job|golden|horovod|integration|build|tools|fuzz|bench" \
  -E "library_exports|docs_configuration|preload_into_non_mpi_process" \
  >unit.log 2>&1 || { tail -60 unit.log; exit 1; }
units=$(sed -n 's/.*tests passed, 0 tests failed out of \([0-9]*\)/\1/p' unit.log)
# Multi-rank: Open MPI's own allocations outlive MPI_Finalize, so no leak
# check; nor the memory job (ASan's quarantine holds freed memory by design).
ASAN_OPTIONS=detect_leaks=0 ctest -j2 --output-on-failure -R \
  "^(mpi_dense_(fp16|bf16)_np3|mpi_topk_np3|mpi_iallreduce_(fp16|topk)_np2|mpi_fused_np3|mpi_pipeline_multiple_np3|mpi_topk_partitioned_pipeline1_np3|mpi_hierarchical_fp16_np4_l2|mpi_sharded_np3|mpi_fused_powersgd_np3)$" \
  >mpi.log 2>&1 || { tail -80 mpi.log; exit 1; }
ranked=$(sed -n 's/.*tests passed, 0 tests failed out of \([0-9]*\)/\1/p' mpi.log)
echo "ok: address,undefined: $units unit tests (leaks checked) and $ranked multi-rank tests, no report"
