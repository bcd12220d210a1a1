#!/usr/bin/env bash
# sharded.sh RATE|shm [RANKS...] -- [SIZE] [ROUNDS] [ITERS]
#
# Compression that scales with the rank count (docs/performance.md,
# "Sharded aggregation"): for each rank count (default 4 8 16), SIZE
# (default 16M) blocking MPI_Allreduce calls over an emulated link of RATE
# (bench/netem.sh; every rank behind one shared link) or shared memory, with
# top-k 0.01 gathered (SLIMREDUCE_TOPK_ALGORITHM=gather) and sharded
# (=sharded), and int8 beside fp16 and plain MPI_Allreduce (`none`), ROUNDS
# rounds (default 2) alternating the two algorithms, ITERS timed iterations
# each (default 5). Prints, per rank count, each one's median time and the
# bytes each rank handed to the transport per call (the report's wire_sent),
# and the ratios the issue asks about. Run from the repository root after
# ./scripts/setup.sh (build/).
set -euo pipefail
rate=${1:-1gbit}
shift || true
ranks_list=()
while [[ $# -gt 0 && $1 != -- ]]; do ranks_list+=("$1"); shift; done
[[ $# -gt 0 ]] && shift
[[ ${#ranks_list[@]} -gt 0 ]] || ranks_list=(4 8 16)
size=${1:-16M}
rounds=${2:-2}
iters=${3:-5}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
lib=$root/build/interpose/libslimreduce.so
bench=$root/build/bench/slimreduce-bench
[[ -x $bench && -f $lib ]] || { echo "sharded.sh: build first (./scripts/setup.sh)" >&2; exit 2; }
source "$root/bench/run_ranks.sh"

# run RANKS ALGORITHM COMPRESSORS [FLAGS]: "label time_us wire_per_rank" lines.
run() {
  local ranks=$1 algorithm=$2 compressors=$3
  shift 3
  local out
  out=$(run_ranks "$rate" "$ranks" -x LD_PRELOAD="$lib" -x SLIMREDUCE_TOPK_ALGORITHM="$algorithm" \
        "$bench" -b "$size" -e "$size" -n "$iters" -w 1 -c 1 --compressors "$compressors" "$@")
  echo "$out" | sed "s/^/# np=$ranks $algorithm: /" >&2
  echo "$out" | grep -q "CHECK FAILED" && { echo "sharded.sh: a result check failed" >&2; exit 1; }
  echo "$out" | awk -v a="$algorithm" '!/^#/ && NF >= 10 && ($4 == "yes" || $4 == "no") {
    label = $3; if (label ~ /^topk/) label = label "/" a; print label, $5, $10 }'
}

echo "# sharded.sh: $size over $rate, $rounds rounds, $iters timed iterations, $(date -u +%F)"
printf "%5s %-20s %12s %14s\n" ranks compressor time_ms wire_per_rank
for ranks in "${ranks_list[@]}"; do
  declare -A times=() wire=()
  for round in $(seq "$rounds"); do
    while read -r label time bytes; do
      times[$label]+=" $time"
      wire[$label]=$bytes
    done < <(run "$ranks" gather "none,fp16,int8,topk:0.01"; run "$ranks" sharded topk:0.01 --no-baseline)
  done
  for label in "${!times[@]}"; do echo "$label"; done | sort | while read -r label; do
    printf "%5d %-20s %12.1f %14s\n" "$ranks" "$label" \
      "$(median <<<"${times[$label]}" | awk '{print $1 / 1000}')" "${wire[$label]}"
  done
  t() { median <<<"${times[$1]}"; }
  awk -v n="$ranks" -v g="$(t topk:0.01/gather)" -v s="$(t topk:0.01/sharded)" \
      -v p="$(t none)" -v h="$(t fp16)" -v q="$(t int8)" 'BEGIN {
    printf "# np=%d: sharded top-k %.2fx gathered; int8 %.2fx plain, %.2fx fp16 (time ratios)\n",
           n, g / s, p / q, h / q }'
  unset times wire
done
