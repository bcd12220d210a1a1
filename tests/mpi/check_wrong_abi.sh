#!/usr/bin/env bash
# check_wrong_abi.sh LIB LAUNCHER_FAMILY LAUNCHER PROGRAM...
# LIB, built for one MPI family (ABI), preloaded into a 2-rank job of the
# other family (LAUNCHER, of LAUNCHER_FAMILY: openmpi or mpich), must end the
# job with one line naming both, before any collective: not an MPI error from
# inside a collective, a crash or a hang. PROGRAM `compile:WRAPPER` is a small
# C job built here with that family's compiler wrapper; any other PROGRAM is
# run as given (mpi4py: its MPI loaded privately, RTLD_LOCAL).
set -uo pipefail
lib=$1 family=$2 launcher=$3
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
program=("$@")
if [[ ${program[0]} == compile:* ]]; then
  cat >"$work/job.c" <<'C'
#include <mpi.h>
#include <stdio.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  float x[1 << 16] = {1}, y[1 << 16];
  MPI_Allreduce(x, y, 1 << 16, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  printf("a collective ran\n");
  MPI_Finalize();
  return 0;
}
C
  "${program[0]#compile:}" "$work/job.c" -o "$work/job" || { echo "FAIL: cannot build the job"; exit 1; }
  program=("$work/job")
fi
case $family in
  openmpi) launch=("$launcher" --allow-run-as-root --oversubscribe -np 2 -x "LD_PRELOAD=$lib"
                   -x SLIMREDUCE_COMPRESSOR=fp16) ;;
  mpich) launch=("$launcher" -np 2 -genv LD_PRELOAD "$lib" -genv SLIMREDUCE_COMPRESSOR fp16) ;;
  *) echo "unknown family: $family" >&2; exit 2 ;;
esac
out=$(timeout 60 "${launch[@]}" "${program[@]}" 2>&1)
rc=$?
echo "$out"
echo "exit code $rc"
lines=$(echo "$out" | grep -c 'slimreduce: error: .* is built for .* MPI ABI, but this job.s MPI is')
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { echo "FAIL: the job did not fail (or hung)"; exit 1; }
[ "$lines" -eq 1 ] || { echo "FAIL: expected one line naming both MPIs, got $lines"; exit 1; }
if echo "$out" | grep -q 'a collective ran'; then
  echo "FAIL: a collective ran"; exit 1
fi
echo "OK: refused before any collective"
