#!/usr/bin/env bash
# Runs a job in which one rank dies inside a call (dead_rank_job.c) under
# `timeout`, and passes iff the job ended with an error (mpirun non-zero, not
# the timeout's 124 or 137) within BOUND seconds of the death, the MPI's own
# report of the dead rank in its output (a rank killed by SIGABRT, or one that
# exited with a non-zero status), and the dying rank's marker saying it died
# inside a call after calls that were all compressed (or, with
# --uncompressed, after calls none of which were: the baseline without
# compression). With --report PREFIX, the dying rank's report PREFIX.1.json
# (written by its exit handler while its call was in flight) must be whole
# JSON and count at least those compressed calls.
# The MPI's report, by family (--mpi, default openmpi):
#  - Open MPI's mpirun names the rank: "exited on signal 6" after an abort,
#    "exited with non-zero status" after an exit;
#  - MPICH's Hydra prints its "BAD TERMINATION OF ONE OF YOUR APPLICATION
#    PROCESSES" banner after an abort (the exit code it names is that of the
#    first process it saw end, which may be one it killed, so it is not
#    checked); after an exit it ends with the rank's status, 1, and prints
#    nothing, or, where it saw first a rank it killed end, the same banner.
# Usage: check_dead_rank.sh [--mpi openmpi|mpich] [--uncompressed] [--report PREFIX]
#        TIMEOUT BOUND -- COMMAND...
set -uo pipefail
want=compressed report= mpi=openmpi
while true; do
  case $1 in
    --mpi) mpi=$2 && shift 2 ;;
    --uncompressed) want=uncompressed && shift ;;
    --report) report=$2 && shift 2 ;;
    *) break ;;
  esac
done
[ -n "$report" ] && rm -f "$report".*.json
limit=$1 bound=$2
shift 3
ulimit -c 0  # abort() would leave a core file
log=$(mktemp)
trap 'rm -f "$log"' EXIT
timeout -k 5 "$limit" "$@" >"$log" 2>&1
rc=$?
ended=$(date +%s.%N)
cat "$log"
fail() {
  echo "FAIL: $*"
  exit 1
}
echo "exit code $rc"
[ $rc -eq 124 ] || [ $rc -eq 137 ] && fail "the job was still running after ${limit} s (a hang)"
[ $rc -ne 0 ] || fail "the job ended without an error"
marker=$(grep -m1 -E 'dead_rank_job: rank 1 (dies|exits) inside' "$log") ||
  fail "no rank died inside a call (no marker)"
case $mpi,$marker in
  openmpi,*" exits "*)
    grep -q 'exited with non-zero status' "$log" || fail "no report of the exited rank from the MPI" ;;
  openmpi,*)
    grep -q 'exited on signal 6' "$log" || fail "no report of the dead rank from the MPI" ;;
  mpich,*" exits "*)
    [ $rc -eq 1 ] || grep -q 'BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES' "$log" ||
      fail "Hydra ended with $rc, neither the exited rank's status 1 nor its report" ;;
  mpich,*)
    grep -q 'BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES' "$log" ||
      fail "no report of the dead rank from Hydra" ;;
  *) fail "unknown MPI family: $mpi" ;;
esac
read -r calls compressed died <<<"$(echo "$marker" |
  sed -E 's/.* after ([0-9]+) calls, compressed ([0-9]+) at ([0-9.]+)$/\1 \2 \3/')"
[ "$calls" -gt 0 ] || fail "rank 1 died before its first call ended"
if [ $want = compressed ]; then
  [ "$compressed" -eq "$calls" ] ||
    fail "only $compressed of the $calls calls before the death were compressed"
else
  [ "$compressed" -eq 0 ] || fail "$compressed calls were compressed in the baseline"
fi
if [ -n "$report" ]; then
  python3 -c 'import json, sys
counted = json.load(open(sys.argv[1]))["calls"]["compressed"]
sys.exit(0 if counted >= int(sys.argv[2]) else f"{sys.argv[1]}: {counted} compressed")' \
    "$report.1.json" "$compressed" || fail "the dying rank's report is missing or wrong"
  echo "ok: $report.1.json written at exit"
fi
took=$(echo "$ended $died" | awk '{printf "%.2f", $1 - $2}')
awk -v t="$took" -v b="$bound" 'BEGIN { exit !(t < b) }' ||
  fail "the job ended ${took} s after the death (bound ${bound} s)"
echo "ok: the job ended with an error ${took} s after rank 1 died inside call $((calls + 1)) \
($compressed before it $want)"
