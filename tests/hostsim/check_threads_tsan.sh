#!/usr/bin/env bash
# The NCCL path under threads (nccl_threads_app.cc on the host simulation),
# built with ThreadSanitizer in a scratch folder: a data race in the NCCL
# engine, the shim or the plans fails this even when the results come out
# right (as they mostly do with a race). Then, given MPIRUN..., nccl_abort_app.cc
# (ncclCommAbort from a watchdog thread during a compressed call) the same
# way, over shared memory alone (Open MPI's TCP transport has a lock-order
# inversion of its own at start-up), and the multi-rank programs whose streams
# meet through events: the NCCL pipeline (a side stream per call), the ranks
# app (sharded top-k, int8, PowerSGD after the group) and the hierarchical app,
# each with asynchronous streams, so a missing event wait is a reported race,
# not a matter of timing. A few minutes of CPU.
# Usage: check_threads_tsan.sh SOURCE_DIR SCRATCH_DIR [MPIRUN...]
set -euo pipefail
src=$1 dir=$2
shift 2
mpirun=("$@")
rm -rf "$dir"
tsan=-fsanitize=thread
cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLIMREDUCE_BUILD_BENCH=OFF \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CXX_FLAGS=$tsan -DCMAKE_EXE_LINKER_FLAGS=$tsan \
  -DCMAKE_SHARED_LINKER_FLAGS=$tsan >"$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
targets=(hostsim_nccl_threads_app)
[ ${#mpirun[@]} -gt 0 ] && targets+=(hostsim_nccl_abort_app hostsim_nccl_pipeline_app
  hostsim_nccl_ranks_app hostsim_nccl_hierarchical_app)
cmake --build "$dir" -j2 --target "${targets[@]}" >"$dir.build.log" 2>&1 ||
  { tail -40 "$dir.build.log"; exit 1; }
app=$dir/tests/hostsim/hostsim_nccl_threads_app
source "$src/tests/tsan_case.sh"
# Shadow ranges up to 16 MiB cleared by memset, not by mapping fresh pages over
# them (clear_shadow_mmap_threshold, 64 KiB by default): the first write to each
# fresh shadow page is a copy-on-write fault whose TLB flush interrupts the
# other cores, and the simulated streams' threads free and make buffers of a
# few MiB all the time. Measured on the threaded program (top-k): 24.6 s wall
# (25 s of it system time) against 11.8 s (3.7 s); its resident set 155 MB
# against 529 MB. The MPI path's ThreadSanitizer check gained nothing from it.
tsan_options+=" clear_shadow_mmap_threshold=16777216"
# The streams' work on threads of their own (as on a GPU), but "topk sync"
# (HOSTSIM_ASYNC=0: in place).
run() {
  local async=1
  [ "${1#* }" = sync ] && async=0
  SLIMREDUCE_COMPRESSOR=${1%% *} HOSTSIM_ASYNC=$async SLIMREDUCE_MIN_BYTES=64K \
    TSAN_OPTIONS="$tsan_options" "${tsan_wrap[@]}" "$app"
}
# The abort app: "compressor ranks async" (the variables reach the ranks through -x).
run_abort() {
  local settings
  read -r -a settings <<<"$1"
  SLIMREDUCE_COMPRESSOR=${settings[0]} HOSTSIM_ASYNC=${settings[2]} SLIMREDUCE_MIN_BYTES=64K \
    TSAN_OPTIONS="$tsan_options" "${mpirun[@]}" --mca btl self,vader \
    -np "${settings[1]}" -x SLIMREDUCE_COMPRESSOR -x HOSTSIM_ASYNC -x SLIMREDUCE_MIN_BYTES \
    -x TSAN_OPTIONS "${tsan_wrap[@]}" "$dir/tests/hostsim/hostsim_nccl_abort_app"
}
for compressor in fp16 topk "topk sync"; do
  out=$dir/threads_${compressor// /_}.log
  tsan_case "$out" "$compressor" run "$compressor"
  echo "ok: $compressor: $(tail -1 "$out"), no race reported"
done
[ ${#mpirun[@]} -gt 0 ] || exit 0
for run in "fp16 2 0" "topk 2 0" "fp16 2 1" "topk 3 1"; do
  out=$dir/abort_${run// /_}.log
  tsan_case "$out" "abort app ($run: compressor, ranks, async)" run_abort "$run"
  echo "ok: abort app ($run: compressor, ranks, async): $(grep -m1 PASSED "$out"), no race reported"
done
# The programs whose streams meet through events: "app ranks compressor [SETTING=value ...]".
run_ranks() {
  local settings exports=()
  read -r -a settings <<<"$1"
  for setting in "${settings[@]:3}"; do exports+=(-x "$setting"); done
  TSAN_OPTIONS="$tsan_options" "${mpirun[@]}" --mca btl self,vader \
    -np "${settings[1]}" -x SLIMREDUCE_COMPRESSOR="${settings[2]}" -x SLIMREDUCE_MIN_BYTES=64K \
    -x TSAN_OPTIONS "${exports[@]}" "${tsan_wrap[@]}" "$dir/tests/hostsim/hostsim_${settings[0]}_app"
}
for run in "nccl_pipeline 2 fp16 SLIMREDUCE_PARTITION_BYTES=64K" \
  "nccl_pipeline 2 topk SLIMREDUCE_PARTITION_BYTES=64K SLIMREDUCE_TOPK_ALGORITHM=gather" \
  "nccl_ranks 3 topk SLIMREDUCE_TOPK_ALGORITHM=sharded" "nccl_ranks 2 int8" \
  "nccl_ranks 2 powersgd" \
  "nccl_hierarchical 4 fp16 SLIMREDUCE_HIERARCHICAL=1 SLIMREDUCE_LOCAL_SIZE=2"; do
  out=$dir/ranks_${run// /_}.log
  tsan_case "$out" "$run" run_ranks "$run"
  echo "ok: $run: $(grep -a -m1 -E 'PASSED|passed' "$out" | head -c 200), no race reported"
done
