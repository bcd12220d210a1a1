#!/usr/bin/env bash
# bench/device_check.sh, run where there is no GPU: a device call is short and
# rare, so the script must work the first time it meets a GPU. Here it must
# build everything it runs there (the library both ways, device_check, cub_topk,
# nccl_app and, with MPI, mpi_device_app), end with its table, and have no row
# but "ok" or "SKIP". On a GPU machine the same test runs the whole check.
# Usage: check_device_script.sh SOURCE_DIR SCRATCH_DIR
set -uo pipefail
src=$1 scratch=$2
rm -rf "$scratch" && mkdir -p "$scratch"
OUT="$scratch/out" BUILD_DIR="$scratch/build" bash "$src/bench/device_check.sh" >"$scratch/log" 2>&1
rc=$?
summary="$scratch/out/summary.txt"
[ -f "$summary" ] || { echo "no table"; tail -40 "$scratch/log"; exit 1; }
cat "$summary"
status=0
[ $rc = 0 ] || { echo "device_check.sh exited $rc"; status=1; }
grep -qE '^build +ok ' "$summary" || { echo "the build row is not ok"; status=1; }
if grep -E '^.{28} (FAIL|MISSING) ' "$summary"; then status=1; fi
built=(kernels/cuda/device_check interpose/libslimreduce_nccl.so nccl_app)
# cub_topk against the toolkit's CCCL is quick to build; against a CCCL wheel
# brought in .device-deps/ it may run out of its share of the time (its row
# then says so, a SKIP).
compgen -G "$src/.device-deps/cccl/*.whl" >/dev/null || built+=(kernels/cuda/cub_topk)
command -v mpicc >/dev/null && built+=(interpose/libslimreduce.so mpi_device_app)
for file in "${built[@]}"; do
  [ -e "$scratch/build/$file" ] || { echo "not built: $file"; status=1; }
done
# The DDP check reads the counters through ctypes: its structure must be the
# C one (a shorter one let the library write past it).
py_size=$(awk '/^class Counters/,/^$/' "$scratch/build/ddp_check.py" |
  python3 -c 'import ctypes, sys; exec(sys.stdin.read()); print(ctypes.sizeof(Counters))')
printf '#include <stdio.h>\n#include "interpose/slimreduce.h"\nint main(void) { printf("%%zu\\n", sizeof(slimreduce_counters)); return 0; }\n' |
  cc -x c -I"$src" - -o "$scratch/counters_size" && c_size=$("$scratch/counters_size")
if [ -z "$py_size" ] || [ "$py_size" != "${c_size:-}" ]; then
  echo "ddp_check.py's Counters is ${py_size:-?} bytes, slimreduce_counters ${c_size:-?}"
  status=1
fi
[ $status = 0 ] || tail -40 "$scratch/out/build.log"
exit $status
