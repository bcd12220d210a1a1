#!/usr/bin/env bash
# libslimreduce.so of a CUDA build: exports the NCCL entry points it
# intercepts, keeps the CUDA runtime it carries private, and needs neither the
# CUDA driver, the CUDA runtime nor NCCL to load.
# With --nccl-only (libslimreduce_nccl.so): the same, and no MPI at all, neither
# an MPI entry point nor a load-time dependency on libmpi.
# Usage: check_library.sh LIB [--nccl-only]
set -euo pipefail
lib=$1
nccl_only=$([ "${2:-}" = --nccl-only ] && echo 1 || echo 0)
status=0
exports=$(nm -D --defined-only "$lib" | awk '{print $3}')
wanted=(ncclAllReduce ncclAllReduceConfig ncclGroupStart ncclGroupEnd ncclCommInitRank ncclCommInitRankConfig
        ncclCommInitRankScalable ncclCommInitAll ncclCommSplit ncclCommShrink ncclCommGrow
        ncclCommDestroy ncclCommAbort ncclCommFinalize ncclGroupSimulateEnd slimreduce_nccl_get_counters
        slimreduce_get_counters slimreduce_get_counter slimreduce_set_compressor)
[ "$nccl_only" = 0 ] && wanted+=(MPI_Allreduce)
for symbol in "${wanted[@]}"; do
  grep -qx "$symbol" <<<"$exports" || { echo "not exported: $symbol"; status=1; }
done
if [ "$nccl_only" = 1 ]; then
  if grep -iE '^(mpi|pmpi)_' <<<"$exports"; then
    echo "MPI entry points in the NCCL-only library"
    status=1
  fi
  if nm -D --undefined-only "$lib" | grep -iE ' (p?mpi_|ompi_)'; then
    echo "the NCCL-only library refers to MPI"
    status=1
  fi
fi
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
if [ "$nccl_only" = 1 ] && grep -E 'libmpi|libopen-' <<<"$needed"; then
  echo "load-time dependency on MPI in the NCCL-only library"
  status=1
fi
[ $status -eq 0 ] && echo "ok: NCCL symbols exported; NEEDED: $(tr '\n' ' ' <<<"$needed")"
exit $status
