#!/usr/bin/env bash
# docs/performance.md section 14: why compressed calls under MPICH 4.0.2
# (Debian, ch4:ucx over UCX 1.13) fell short of their gain on an emulated
# 1 Gbit/s link, and which UCX settings give it back. slimreduce-bench at
# 64 MiB on 4 ranks (bench/netem.sh: every rank behind one shared link, UCX on
# TCP), one run per UCX setting, ROUNDS rounds with the settings interleaved;
# then 2 ranks over shared memory, 1 to 64 MiB, default against the settings
# that change shared memory's traffic too. Prints each run's rows (time per
# call: slowest rank's median; speedup = plain MPI_Allreduce's time / time).
# Usage, from the repository root, with build-mpich built with benchmarks
# (-DSLIMREDUCE_BUILD_BENCH=ON):
#   docs/perf/mpich_ucx_runs.sh
set -uo pipefail
source bench/run_ranks.sh
lib="$PWD/build-mpich/interpose/libslimreduce-mpich.so"
bench="$PWD/build-mpich/bench/slimreduce-bench"
rounds="${ROUNDS:-2}"
# "default" sets nothing; each other entry is NAME=VALUE for UCX.
tcp_settings=(default UCX_RNDV_THRESH=1M UCX_TCP_PUT_ENABLE=n UCX_PROTO_ENABLE=y
              UCX_RNDV_SCHEME=get_zcopy UCX_RNDV_THRESH=inf)
shm_settings=(default UCX_RNDV_THRESH=1M UCX_TCP_PUT_ENABLE=n UCX_PROTO_ENABLE=y)

run() {  # rate ranks setting bench-args...
  local rate=$1 ranks=$2 setting=$3
  shift 3
  local genv=(-genv LD_PRELOAD "$lib")
  [[ $setting != default ]] && genv+=(-genv "${setting%%=*}" "${setting#*=}")
  echo "== $rate, $ranks ranks, $setting"
  # Over the emulated link MPICH's MPI_Finalize sometimes never returns (ranks
  # in UCX's progress and in the PMI barrier; a program without the library
  # too), after every row is printed: ranks still there after 150 s are killed.
  (sleep 150 && pkill -9 -f "^$bench" && echo "(ranks killed in MPI_Finalize)") &
  local guard=$!
  run_ranks_mpich "$rate" "$ranks" "${genv[@]}" "$bench" "$@" |
    grep -E '^ +[0-9]+[KM] |wire / counted'
  pkill -P "$guard" sleep 2>/dev/null
  wait "$guard" 2>/dev/null
}

for ((round = 1; round <= rounds; ++round)); do
  for setting in "${tcp_settings[@]}"; do
    run 1gbit 4 "$setting" -b 64M -e 64M -n 3 -w 1 -c 0 --compressors fp16,int8
  done
done
for ((round = 1; round <= rounds; ++round)); do
  for setting in "${shm_settings[@]}"; do
    run shm 2 "$setting" -b 1M -e 64M -f 8 -n 5 -w 1 -c 0 --compressors fp16,int8
  done
done
