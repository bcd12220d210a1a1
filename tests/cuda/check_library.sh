#!/usr/bin/env bash
# libslimreduce.so of a CUDA build: exports the NCCL entry points it
# intercepts, keeps the CUDA runtime it carries private, and needs neither the
# CUDA driver, the CUDA runtime nor NCCL to load.
set -euo pipefail
lib=$1
status=0
exports=$(nm -D --defined-only "$lib" | awk '{print $3}')
for symbol in ncclAllReduce ncclGroupStart ncclGroupEnd ncclCommInitRank ncclCommInitRankConfig \
              ncclCommInitRankScalable ncclCommInitAll ncclCommSplit ncclCommShrink \
              ncclCommDestroy ncclCommAbort ncclCommFinalize slimreduce_nccl_get_counters \
              MPI_Allreduce; do
  grep -qx "$symbol" <<<"$exports" || { echo "not exported: $symbol"; status=1; }
done
# The static CUDA runtime inside must not interpose the job's own.
if grep -E '^(cuda|cu)[A-Z]' <<<"$exports"; then
  echo "CUDA runtime or driver symbols leak from the library"
  status=1
fi
needed=$(readelf -d "$lib" | awk '/NEEDED/ {print $5}')
if grep -E 'libcuda|libcudart|libnccl' <<<"$needed"; then
  echo "load-time dependency on CUDA or NCCL"
  status=1
fi
[ $status -eq 0 ] && echo "ok: NCCL symbols exported; NEEDED: $(tr '\n' ' ' <<<"$needed")"
exit $status
