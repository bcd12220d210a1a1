#!/usr/bin/env bash
# pipeline.sh RATE|shm [RANKS] [ROUNDS] [SIZE] [COMPRESSORS] [ITERS]
#
# Pipelined against unpipelined (docs/performance.md, "Partitions and
# pipelining"): one large blocking MPI_Allreduce (slimreduce-bench, SIZE,
# default 256M) cut into SLIMREDUCE_PARTITION_BYTES partitions (4 MiB unless
# set in the environment), run with SLIMREDUCE_PIPELINE=0 and =1 alternately
# for ROUNDS rounds, over an emulated link of RATE (bench/netem.sh) or shared
# memory (`shm`), for each of COMPRESSORS (default fp16,topk:0.01; with
# PIPELINE_BASELINE=1 slimreduce-bench also times `none`, plain MPI_Allreduce,
# first). Prints each run's time per compressor and the medians' ratios.
# Run from the repository root after ./scripts/setup.sh (build/).
set -euo pipefail
rate=${1:-1gbit}
ranks=${2:-4}
rounds=${3:-2}
size=${4:-256M}
compressors=${5:-fp16,topk:0.01}
iters=${6:-3}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
lib=$root/build/interpose/libslimreduce.so
bench=$root/build/bench/slimreduce-bench
[[ -x $bench && -f $lib ]] || { echo "pipeline.sh: build first (./scripts/setup.sh)" >&2; exit 2; }

source "$root/bench/run_ranks.sh"
baseline_flag=--no-baseline
[[ ${PIPELINE_BASELINE:-0} == 1 ]] && baseline_flag=

run() {  # run PIPELINE: one run; "compressor time_us" lines on stdout
  local exports=(-x LD_PRELOAD="$lib" -x SLIMREDUCE_PIPELINE="$1"
                 -x SLIMREDUCE_PARTITION_BYTES="${SLIMREDUCE_PARTITION_BYTES:-4M}")
  local out
  out=$(run_ranks "$rate" "$ranks" "${exports[@]}" "$bench" -b "$size" -e "$size" -n "$iters" \
        -w 1 -c 0 --compressors "$compressors" ${baseline_flag})
  echo "$out" | sed "s/^/# pipeline=$1: /" >&2
  echo "$out" | awk '!/^#/ && NF >= 5 && ($4 == "yes" || $4 == "no") {print $3, $5}'
}

declare -A times
for round in $(seq "$rounds"); do
  for pipeline in 0 1; do
    while read -r compressor time; do
      times[$compressor.$pipeline]+=" $time"
    done < <(run "$pipeline")
  done
done
echo "# pipeline.sh: $ranks ranks over $rate, $size, partitions of" \
     "${SLIMREDUCE_PARTITION_BYTES:-4M}, $rounds rounds alternated, $iters timed iterations"
printf "%-12s %14s %14s %10s\n" compressor "unpipelined_ms" "pipelined_ms" "speedup"
for key in "${!times[@]}"; do echo "${key%.*}"; done | sort -u | while read -r compressor; do
  off=$(median <<<"${times[$compressor.0]}")
  on=$(median <<<"${times[$compressor.1]}")
  echo "#   $compressor unpipelined (us):${times[$compressor.0]}  pipelined (us):${times[$compressor.1]}"
  awk -v c="$compressor" -v off="$off" -v on="$on" \
    'BEGIN { printf "%-12s %14.1f %14.1f %9.2fx\n", c, off / 1000, on / 1000, off / on }'
done
