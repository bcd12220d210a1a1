#!/usr/bin/env bash
# intel_mpi.sh setup | mpiexec ARGS... | identify LIB PROGRAM... | ready COMMAND...
# Intel MPI, an MPI of the MPICH family (one ABI: libmpi.so.12), from PyPI's
# impi-rt in a venv of the machine's cache, for the suite's Intel MPI tests
# (tests/mpi/mpich.cmake, tests/mpi/CMakeLists.txt). 2021.13.1: the last
# release whose wheel carries its own libfabric (later ones require a
# libfabric package that PyPI does not have).
#   setup     makes the venv once per machine (about 130 MB from PyPI); exit
#             77 (a skip, which scripts/not_run.sh refuses in CI unless PyPI's
#             refusal is confirmed) where PyPI cannot be reached, 1 on any other
#             failure
#   mpiexec   Intel's launcher (Hydra: -n/-np, -genv NAME VALUE), with the
#             variables its library needs; programs built against Debian's
#             MPICH (libmpich.so.12) load Intel's library of the same ABI
#             through a link of that name; exit 77 without the venv
#   identify  runs PROGRAM on 2 ranks with LIB preloaded, and requires that it
#             ran to its end under Intel MPI (its own startup line, I_MPI_DEBUG=2)
#   ready     runs COMMAND (a checker that launches through intel/mpiexec),
#             or skips (77) without the venv
# intel/mpiexec is `intel_mpi.sh mpiexec`, for checkers that take a launcher's path.
set -euo pipefail
version=2021.13.1
venv=${IMPI_RT_VENV:-${SLIMREDUCE_CACHE_DIR:-$HOME/.cache/slimreduce}/impi-rt-$version}
ready=$venv/.ready  # written once the venv is whole
# The venv for the calls a checker makes through intel/mpiexec, by a name
# the ranks may see: not SLIMREDUCE_CACHE_DIR, which Hydra would hand them
# and the library would refuse as a SLIMREDUCE_* name it does not know.
export IMPI_RT_VENV=$venv
unset SLIMREDUCE_CACHE_DIR
source "$(dirname "$0")/pip_or_skip.sh"

intel_environment() {
  mkdir -p "$venv/abi"
  ln -sf "$venv/lib/libmpi.so.12" "$venv/abi/libmpich.so.12"
  ln -sf "$venv/lib/libmpifort.so.12" "$venv/abi/libmpichfort.so.12"
  export I_MPI_ROOT="$venv" FI_PROVIDER_PATH="$venv/lib/libfabric/prov"
  export LD_LIBRARY_PATH="$venv/abi:$venv/lib:$venv/lib/libfabric${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

need_venv() {
  [ -f "$ready" ] && return 0
  echo "SKIPPED: no Intel MPI venv at $venv (the impi_rt_venv test makes it)"
  exit 77
}

case ${1:-} in
  setup)
    if [ -f "$ready" ]; then
      echo "intel_mpi: $venv: $("$venv/bin/mpiexec" --version | head -1)"
      exit 0
    fi
    rm -rf "$venv"
    python3 -m venv "$venv"
    pip_or_skip impi-rt "$venv/bin/pip" install --quiet "impi-rt==$version"
    said=$("$venv/bin/mpiexec" --version | head -1)
    case $said in
      *Intel*) ;;
      *) echo "intel_mpi: $venv/bin/mpiexec is not Intel's: $said"; exit 1 ;;
    esac
    touch "$ready"
    echo "intel_mpi: $venv: $said"
    ;;
  mpiexec)
    shift
    need_venv
    intel_environment
    exec "$venv/bin/mpiexec" "$@"
    ;;
  identify)
    lib=${2:?usage: intel_mpi.sh identify LIB PROGRAM...}
    shift 2
    need_venv
    intel_environment
    rc=0
    out=$(timeout 120 "$venv/bin/mpiexec" -n 2 -genv I_MPI_DEBUG 2 -genv LD_PRELOAD "$lib" \
          -genv SLIMREDUCE_COMPRESSOR fp16 "$@" 2>&1) || rc=$?
    echo "$out"
    [ "$rc" -eq 0 ] || { echo "FAIL: the job exited with $rc"; exit 1; }
    line=$(echo "$out" | grep -m1 -o "Intel(R) MPI Library.*") ||
      { echo "FAIL: no startup line of Intel MPI: another MPI ran"; exit 1; }
    echo "OK: ran under $line"
    ;;
  ready)
    shift
    need_venv
    exec "$@"
    ;;
  *)
    echo "usage: intel_mpi.sh setup | mpiexec ARGS... | identify LIB PROGRAM... | ready COMMAND..." >&2
    exit 2
    ;;
esac
