#!/usr/bin/env bash
# check_misuse.sh LIB JOB MODE MPIRUN...: runs tests/mpi/misuse_job.c's MODE
# without and with LIB preloaded (fp16, every float call eligible); passes
# when both stop with an error and Open MPI's message names the same call.
set -uo pipefail
lib=$1 job=$2 mode=$3
shift 3
run() { "$@" -np 1 "$job" "$mode" 2>&1; echo "exit=$?"; }
plain=$(run "$@")
preloaded=$(run "$@" -x LD_PRELOAD="$lib" -x SLIMREDUCE_COMPRESSOR=fp16 -x SLIMREDUCE_MIN_BYTES=4)
said() { grep -o 'The [A-Za-z_]*() function was called [a-z]* MPI_[A-Z]*' <<<"$1" | head -1; }
echo "without: $(said "$plain") ($(grep -o 'exit=[0-9]*' <<<"$plain"))"
echo "with:    $(said "$preloaded") ($(grep -o 'exit=[0-9]*' <<<"$preloaded"))"
[[ -n $(said "$plain") ]] || { echo "$plain"; echo "FAIL: no message without the library"; exit 1; }
[[ $(said "$plain") == "$(said "$preloaded")" ]] ||
  { echo "$preloaded"; echo "FAIL: the preloaded job's message names another call"; exit 1; }
grep -q 'exit=0$' <<<"$preloaded" && { echo "FAIL: the preloaded job went on"; exit 1; }
echo "ok: $mode"
