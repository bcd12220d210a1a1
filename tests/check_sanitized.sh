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
# Every sanitizer report in LOG but LeakSanitizer's (judged apart where Open MPI's
# own leaks are expected): a test's exit code alone can miss one, e.g. a rank that
# reports in teardown after mpirun has its verdict, or a report without a halt.
other_reports() {
  grep -a -n -E "(ERROR|WARNING): AddressSanitizer|runtime error:|SUMMARY: UndefinedBehaviorSanitizer|AddressSanitizer: (CHECK|nested bug)" "$1"
}
# Fails with the first reports of LOG (a ctest run's, output of every test included).
no_reports_in() {
  local log=$1 what=$2
  if other_reports "$log" | head -5 | grep . ||
    { [ "${3:-}" = leaks ] && grep -a -n -m5 "ERROR: LeakSanitizer" "$log"; }; then
    echo "FAIL: a sanitizer report in $what (full log: $dir/$log)"
    exit 1
  fi
}
# Unit tests: no MPI in them, so leaks are ours. Left out: the preload into a
# process without MPI (the ASan runtime must come first there). The cases ctest
# selects, each test binary run once over them (tests/run_gtest_grouped.py):
# a sanitized process's start and leak check cost more than most cases.
ASAN_OPTIONS=detect_leaks=1 python3 "$src/tests/run_gtest_grouped.py" "$dir" unit.log -j 2 \
  -LE "mpi|cuda|hostsim|job|golden|horovod|integration|build|tools|fuzz|bench" \
  -E "library_exports|docs_configuration|preload_into_non_mpi_process" \
  >unit.summary 2>&1 || { tail -60 unit.log; cat unit.summary; exit 1; }
units=$(sed -n 's/^\([0-9]*\) tests passed.*/\1/p' unit.summary)
no_reports_in unit.log "the unit tests" leaks
# Multi-rank: Open MPI's own allocations outlive MPI_Finalize, so no leak
# check; nor the memory job (ASan's quarantine holds freed memory by design).
ASAN_OPTIONS=detect_leaks=0 ctest -j2 -V --output-on-failure -R \
  "^(mpi_dense_(fp16|bf16)_np3|mpi_topk_np3|mpi_iallreduce_(fp16|topk)_np2|mpi_fused_np3|mpi_pipeline_multiple_np3|mpi_topk_partitioned_pipeline1_np3|mpi_hierarchical_fp16_np4_l2|mpi_sharded_np3|mpi_fused_powersgd_np3)$" \
  >mpi.log 2>&1 || { tail -80 mpi.log; exit 1; }
ranked=$(sed -n 's/.*tests passed, 0 tests failed out of \([0-9]*\)/\1/p' mpi.log)
no_reports_in mpi.log "the multi-rank tests"
# The memory job under LeakSanitizer: Open MPI's own allocations outlive MPI_Finalize, some
# from components it has unloaded by then (no module to suppress by), so the check is that no
# leaked block was allocated on a stack through SlimReduce. Its resident-set limit is off
# (ASan's quarantine), and so it runs 100 communicator cycles and 1,000 calls of changing
# sizes, not 1,000 and 10,000: a leak is reported however few times its path ran, and these
# take every path (the top-k run still warns that its 8 MiB residual cap was reached), in a
# tenth of the time.
asan_runtime=$(c++ -print-file-name=libasan.so)
leaks_of() {  # COMPRESSOR RANKS [SETTING=VALUE ...]: the job's log in leaks_COMPRESSOR.log
  local compressor=$1 ranks=$2 exports=()
  shift 2
  for setting in "$@"; do exports+=(-x "$setting"); done
  local log=leaks_$compressor.log rc=0
  # Open MPI's leaks end each rank with the sanitizers' exit code, 86 here; any
  # other failure (a signal, the job's own 1) has another.
  timeout 900 mpiexec --allow-run-as-root --oversubscribe --mca btl_vader_single_copy_mechanism none --mca pml ob1 \
    -np "$ranks" -x LD_PRELOAD="$asan_runtime:$dir/interpose/libslimreduce.so" \
    -x ASAN_OPTIONS=detect_leaks=1:exitcode=86 -x SLIMREDUCE_COMPRESSOR="$compressor" \
    "${exports[@]}" tests/mpi/memory_job 1000000000 100 1000 >"$log" 2>&1 || rc=$?
  no_reports_in "$log" "the memory job ($compressor)"
  local finalized
  finalized=$(grep -a -c "^memory_job: rank [0-9]* finalized" "$log" || true)
  if { [ "$rc" != 0 ] && [ "$rc" != 86 ]; } || [ "$finalized" != "$ranks" ] ||
    ! grep -q "^memory_job: RSS" "$log" || grep -q "wrong values" "$log"; then
    tail -40 "$log"
    echo "FAIL: the memory job under LeakSanitizer ($compressor: exit $rc, $finalized of $ranks ranks finalized)"
    exit 1
  fi
  # Each leak report whose stack passes through our code (tests/leaks_through.py says
  # how it tells: a frame symbolized into our sources, or an address inside our
  # library's code segments; not one LeakSanitizer merely names our library for).
  if ! python3 "$src/tests/leaks_through.py" "$log" "$dir/interpose/libslimreduce.so" "$src"; then
    echo "FAIL: memory allocated through SlimReduce leaked ($compressor; full log: $dir/$log)"
    exit 1
  fi
}
leaks_of fp16 2
leaks_of topk 3 SLIMREDUCE_TOPK_RATIO=1 SLIMREDUCE_EF_MAX_BYTES=8M
echo "ok: address,undefined: $units unit tests (leaks checked), $ranked multi-rank tests and the memory job (fp16, top-k; no leak through SlimReduce), no report"
