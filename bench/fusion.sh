#!/usr/bin/env bash
# fusion.sh [RATE|shm] [RANKS] [ROUNDS] -- extra fusion_bench arguments
#
# The fusion benchmark side by side (docs/performance.md): the same
# ResNet-50-like backward pass of MPI_Iallreduce calls (bench/fusion_bench.cc)
#   plain     without SlimReduce's compression (SLIMREDUCE_COMPRESSOR=none),
#   unfused   fp16, each call reduced at once (SLIMREDUCE_FUSION_THRESHOLD=0),
#   fused     fp16, queued and fused (the default threshold, 64 MiB),
# alternated for ROUNDS rounds, over an emulated link of RATE (bench/netem.sh:
# every rank behind one shared link) or over shared memory (`shm`). Prints
# each run's median step time and the medians' ratios. FUSION_MIN_BYTES sets
# SLIMREDUCE_MIN_BYTES (default 64K); FUSION_COMPRESSOR the compressor of the
# unfused and fused runs (default fp16; powersgd, bf16, topk, int8).
# Run from the repository root after ./scripts/setup.sh (build/).
set -euo pipefail
rate=${1:-1gbit}
ranks=${2:-4}
rounds=${3:-2}
shift $(( $# < 3 ? $# : 3 ))
[[ ${1:-} == -- ]] && shift
extra=("$@")
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
lib=$root/build/interpose/libslimreduce.so
bench=$root/build/bench/fusion_bench
[[ -x $bench && -f $lib ]] || { echo "fusion.sh: build first (./scripts/setup.sh)" >&2; exit 2; }

source "$root/bench/run_ranks.sh"
compressor=${FUSION_COMPRESSOR:-fp16}

run() {  # run NAME VAR=VALUE...: one run, its median in ms on stdout
  local name=$1; shift
  local exports=(-x LD_PRELOAD="$lib" -x SLIMREDUCE_MIN_BYTES="${FUSION_MIN_BYTES:-64K}")
  for setting in "$@"; do exports+=(-x "$setting"); done
  local out
  out=$(run_ranks "$rate" "$ranks" "${exports[@]}" "$bench" "${extra[@]}")
  echo "$out" | sed "s/^/# $name: /" >&2
  echo "$out" | sed -n 's/^median_ms \([0-9.]*\).*/\1/p'
}

declare -A times
for round in $(seq "$rounds"); do
  times[plain]+=" $(run plain SLIMREDUCE_COMPRESSOR=none)"
  times[unfused]+=" $(run unfused SLIMREDUCE_COMPRESSOR="$compressor" SLIMREDUCE_FUSION_THRESHOLD=0)"
  times[fused]+=" $(run fused SLIMREDUCE_COMPRESSOR="$compressor")"
done
plain=$(median <<<"${times[plain]}")
unfused=$(median <<<"${times[unfused]}")
fused=$(median <<<"${times[fused]}")
echo "# fusion.sh: $ranks ranks over $rate, $rounds rounds alternated; median step time (ms) per run:"
for name in plain unfused fused; do echo "#   $name:${times[$name]}"; done
awk -v p="$plain" -v u="$unfused" -v f="$fused" -v c="$compressor" 'BEGIN {
  printf "plain %.1f ms  unfused %s %.1f ms  fused %s %.1f ms\n", p, c, u, c, f
  printf "fused vs plain %.2fx  fused vs unfused %.2fx  unfused vs plain %.2fx\n", p / f, u / f, p / u }'
