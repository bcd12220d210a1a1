#!/usr/bin/env bash
# priority.sh [RATE|shm] [RANKS] [ROUNDS] [COMPRESSOR]
#
# Priority order side by side (docs/performance.md, "Priority"): the fusion
# benchmark's ResNet-50-like backward pass (bench/fusion_bench.cc: 161
# MPI_Iallreduce calls, the last layer's first, then a wait for the first
# layer's result and one for the rest), everything queued until the waits
# (SLIMREDUCE_FUSION_THRESHOLD=1G), with SLIMREDUCE_PRIORITY=fifo and
# reverse alternately for ROUNDS rounds, over RATE (bench/netem.sh) or shared
# memory (`shm`). Prints the medians of the time to the first layer's result
# and of the whole step, and their ratios.
# Run from the repository root after ./scripts/setup.sh (build/).
set -euo pipefail
rate=${1:-1gbit}
ranks=${2:-4}
rounds=${3:-3}
compressor=${4:-fp16}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
lib=$root/build/interpose/libslimreduce.so
bench=$root/build/bench/fusion_bench
[[ -x $bench && -f $lib ]] || { echo "priority.sh: build first (./scripts/setup.sh)" >&2; exit 2; }
source "$root/bench/run_ranks.sh"

declare -A first step
for round in $(seq "$rounds"); do
  for order in fifo reverse; do
    out=$(run_ranks "$rate" "$ranks" -x LD_PRELOAD="$lib" -x SLIMREDUCE_COMPRESSOR="$compressor" \
          -x SLIMREDUCE_FUSION_THRESHOLD=1G -x SLIMREDUCE_PRIORITY="$order" \
          "$bench" --tensors 161 --steps 3)
    echo "$out" | sed "s/^/# $order: /" >&2
    first[$order]+=" $(echo "$out" | sed -n 's/^first_layer_ms \([0-9.]*\).*/\1/p')"
    step[$order]+=" $(echo "$out" | sed -n 's/^median_ms \([0-9.]*\).*/\1/p')"
  done
done
echo "# priority.sh: $ranks ranks over $rate, $compressor, $rounds rounds alternated"
for order in fifo reverse; do
  echo "#   $order: first layer (ms):${first[$order]}  step (ms):${step[$order]}"
done
ff=$(median <<<"${first[fifo]}"); fr=$(median <<<"${first[reverse]}")
sf=$(median <<<"${step[fifo]}"); sr=$(median <<<"${step[reverse]}")
awk -v ff="$ff" -v fr="$fr" -v sf="$sf" -v sr="$sr" 'BEGIN {
  printf "first layer: fifo %.1f ms  reverse %.1f ms  (%.1fx sooner)\n", ff, fr, ff / fr
  printf "whole step:  fifo %.1f ms  reverse %.1f ms  (reverse/fifo %.2f)\n", sf, sr, sr / sf }'
