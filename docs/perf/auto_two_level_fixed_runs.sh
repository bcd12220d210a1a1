#!/bin/bash
# Two emulated nodes of 2 ranks (shared memory inside, 1 Gbit/s between), int8
# fixed: flat (SLIMREDUCE_HIERARCHICAL=0), two-level (=1), and flat or
# two-level measured for it alone (=auto; the bench's "set" leaves the
# compressor as the library started, so the choice is not ended by a switch).
# ROUNDS (default 2) rounds, the three alternated.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
lib=$PWD/build/interpose/libslimreduce.so
bench=$PWD/build/bench/slimreduce-bench
common="-b 1M -e 16M -f 4 -n 20 -w 16 -c 1 --compressors set --no-baseline"
for round in $(seq 1 "${ROUNDS:-2}"); do
  for hierarchical in 0 1 auto; do
    echo "== round $round int8, SLIMREDUCE_HIERARCHICAL=$hierarchical"
    bench/two_nodes.sh --shm 1gbit 2 -- mpirun --allow-run-as-root --oversubscribe -np 4 \
      $(bench/two_nodes.sh --shm-flags 2) -x LD_PRELOAD=$lib -x SLIMREDUCE_LOCAL_SIZE=2 \
      -x SLIMREDUCE_COMPRESSOR=int8 -x SLIMREDUCE_HIERARCHICAL=$hierarchical \
      $bench $common --json "${OUT:-/tmp}/int8_h${hierarchical}_$round.json"
  done
done
