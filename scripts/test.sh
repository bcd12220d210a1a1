#!/usr/bin/env bash
# The README's test command: set up (install, build), then run every test
# (unit, multi-rank under mpirun, whole jobs under LD_PRELOAD, fuzz targets)
# through ctest; its last lines say which suites did not run, and why.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
./scripts/setup.sh
source scripts/compiler_cache.sh  # the trees the tests build use it too
# hwloc (under mpiexec, MPICH's hydra and each rank's MPI_Init) leaves out
# the I/O devices: reading every PCI device's configuration through sysfs
# took 0.15 s of CPU of each 3-rank launch here (0.28 s -> 0.13 s), and the
# suite launches over 400 multi-rank tests on loopback, where no device's
# locality matters. A value the caller set stays.
export HWLOC_COMPONENTS=${HWLOC_COMPONENTS:--linuxio,-pci}
# Open MPI 4 removes the top of its session directories (ompi.<host>.<uid>)
# when a job ends and leaves it empty; a launch that creates it at that moment
# fails in orte_init ("mkdir ... File exists": two tests of one CI run, under
# ctest -j2; 6 of 4,800 launches of `mpirun -np 1 true`, four at a time). The
# suite's launches share a private top that a directory of ours keeps from
# ever being empty (0 of 2,400).
if mpirun --version 2>/dev/null | grep "Open MPI" >/dev/null; then  # all of it read: no SIGPIPE under pipefail
  ompi_sessions=$(mktemp -d "${TMPDIR:-/tmp}/slimreduce-ompi.XXXXXX")
  trap 'rm -rf "$ompi_sessions"' EXIT
  export OMPI_MCA_orte_tmpdir_base=$ompi_sessions
  top=$(mpirun --allow-run-as-root -np 1 printenv OMPI_MCA_orte_top_session_dir)
  mkdir -p "$top/held-by-scripts-test.sh"
fi
# The MPICH build (docs/architecture.md, "Two MPI builds"): libslimreduce-mpich.so
# and the programs of its multi-rank subset (label mpich), CPU path only.
mpich_cache=none
if command -v mpicc.mpich >/dev/null && command -v mpiexec.mpich >/dev/null; then
  cmake -S . -B build-mpich -DCMAKE_BUILD_TYPE=Release -DSLIMREDUCE_MPI_ABI=mpich \
        -DSLIMREDUCE_CUDA=OFF -DSLIMREDUCE_BUILD_BENCH=OFF "${compiler_launchers[@]}" >/dev/null
  cmake --build build-mpich -j"$(nproc)"
  mpich_cache=$PWD/build-mpich/CMakeCache.txt
fi
cd build
status=0
mpich_log=""
ctest --output-on-failure -j"$(nproc)" "$@" 2>&1 | tee ctest-output.log || status=$?
if [ "$mpich_cache" != none ]; then
  echo "== The MPICH build's tests (build-mpich, label mpich)"
  ctest --test-dir ../build-mpich --output-on-failure --no-tests=error -j"$(nproc)" -L mpich \
        "$@" 2>&1 | tee ctest-mpich-output.log || status=$?
  mpich_log=ctest-mpich-output.log
fi
../scripts/not_run.sh CMakeCache.txt ctest-output.log "$mpich_cache" "$mpich_log" || status=$?
exit "$status"
