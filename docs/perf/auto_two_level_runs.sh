#!/bin/bash
# Two emulated nodes of 2 ranks (shared memory inside, 1 Gbit/s between):
# fixed fp16/int8 flat and two-level, and auto choosing flat or two-level.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
lib=$PWD/build/interpose/libslimreduce.so
bench=$PWD/build/bench/slimreduce-bench
common="-b 1M -e 16M -f 4 -n 20 -w 16 -c 1"
for round in 1 2; do
  echo "== round $round flat (SLIMREDUCE_HIERARCHICAL=0)"
  bench/two_nodes.sh --shm 1gbit 2 -- mpirun --allow-run-as-root --oversubscribe -np 4 \
    $(bench/two_nodes.sh --shm-flags 2) -x LD_PRELOAD=$lib -x SLIMREDUCE_LOCAL_SIZE=2 \
    -x SLIMREDUCE_HIERARCHICAL=0 $bench $common --compressors fp16,int8 --json ${OUT:-/tmp}/flat$round.json
  echo "== round $round two-level (SLIMREDUCE_HIERARCHICAL=auto: fixed compressors two-level, auto chooses)"
  bench/two_nodes.sh --shm 1gbit 2 -- mpirun --allow-run-as-root --oversubscribe -np 4 \
    $(bench/two_nodes.sh --shm-flags 2) -x LD_PRELOAD=$lib -x SLIMREDUCE_LOCAL_SIZE=2 \
    -x SLIMREDUCE_COMPRESSOR=auto -x SLIMREDUCE_HIERARCHICAL=auto -x SLIMREDUCE_LOG_LEVEL=info \
    $bench $common --compressors fp16,int8,auto --no-baseline --json ${OUT:-/tmp}/levels$round.json
done
