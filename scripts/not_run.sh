#!/usr/bin/env bash
# not_run.sh CMAKE_CACHE CTEST_OUTPUT [MPICH_CACHE|none MPICH_CTEST_OUTPUT]: what a
# test run left out, and why: the
# suites the build did not make (no CUDA toolkit, no clang) and the tests
# that skipped themselves (no GPU, no Horovod). ctest's "100% passed" counts
# neither, so scripts/test.sh ends with this.
#
# In CI (CI=true) the suites that can run there must: the host simulation
# (the GPU path's suites), the fuzz targets, Horovod and pip. A skip or an
# unbuilt suite of those fails the run, unless the skip's cause is a
# registry's refusal that scripts/registry_refuses.sh confirms by asking the
# registry again. GPU-only tests (cuda_*) stay skips, listed.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=$1
output=$2
mpich_cache=${3:-none}
mpich_output=${4:-}
echo "== Not run, and why"
lines=0
required_missing=0
say() { echo "  $*"; lines=$((lines + 1)); }
in_ci() { [ "${CI:-}" = true ]; }
# A required suite did not run: in CI that fails, unless the registry's refusal is confirmed.
required() {  # WHAT [REGISTRY PACKAGE ...]
  local what=$1
  shift
  in_ci || return 0
  while [ $# -ge 2 ]; do
    local answer refused=0
    answer=$("$here/registry_refuses.sh" "$1" "$2" 2>&1) || refused=$?
    say "  $answer"
    if [ $refused = 0 ]; then
      say "  (allowed in CI: the skip's cause, $1 refusing $2, confirmed just now)"
      return 0
    fi
    shift 2
  done
  say "  FAIL: $what must run in CI (CI=true)"
  required_missing=$((required_missing + 1))
}
# ctest's own summary: what follows its last "N% tests passed" line (a failed
# test's output, printed above it, may hold an inner ctest's summary).
summary_of() {
  awk '/^[0-9]+% tests passed/ { buffer = "" } { buffer = buffer $0 "\n" } END { printf "%s", buffer }' "$1"
}
if [[ $(sed -n 's/^SLIMREDUCE_CUDA:[A-Z]*=//p' "$cache") != ON ]] ||
   ! grep -q '^SLIMREDUCE_NCCL_INCLUDE_DIR:PATH=/' "$cache"; then
  say "GPU path suites (labels cuda, hostsim: the NCCL shim, the device path, the host" \
      "simulation of 1-4 ranks): not built, no CUDA toolkit with nccl.h found (docs/gpu.md)"
  required "the host simulation suites (hostsim)"
fi
if ! grep -q '^SLIMREDUCE_CLANGXX:FILEPATH=/' "$cache"; then
  say "fuzz targets (tests/fuzz): not built, no clang++ (apt-get install clang libclang-rt-14-dev)"
  required "the fuzz targets"
fi
if grep -q '^SLIMREDUCE_TEST_HOROVOD:BOOL=OFF' "$cache"; then
  say "horovod_integration: not registered (-DSLIMREDUCE_TEST_HOROVOD=OFF)"
  required "horovod_integration"
fi
if [ "$mpich_cache" = none ] || [ ! -f "$mpich_cache" ]; then
  say "MPICH suites (build-mpich, label mpich): not built, no MPICH found" \
      "(apt-get install mpich libmpich-dev)"
  required "the MPICH suites (mpich)"
elif ! grep -q '^MPIEXEC_EXECUTABLE:FILEPATH=/' "$mpich_cache"; then
  say "MPICH suites (build-mpich, label mpich): not registered, no MPICH launcher (mpiexec.mpich)"
  required "the MPICH suites (mpich)"
fi
# Whether this CPU has every one of the flags (/proc/cpuinfo's words).
cpu_has() {
  local flag
  for flag in "$@"; do grep -qw "$flag" /proc/cpuinfo 2>/dev/null || return 1; done
}
# The kernels' AVX-512 and AVX2 cases (the ISA in the name) skip on a CPU that
# lacks it, their scalar and other-ISA twins run: one line for them all,
# unless the CPU has the ISA, where such a skip is a failure in CI.
isa_skips=0
isa_missing=""  # the ISAs they named, each once ("AVX-512 AVX2")
isa_skip() {  # NAME ISA FLAG...
  local name=$1 isa=$2
  shift 2
  if cpu_has "$@"; then
    say "$name: skipped though this CPU has $isa ($*)"
    required "$name"
  else
    isa_skips=$((isa_skips + 1))
    case " $isa_missing " in *" $isa "*) ;; *) isa_missing="${isa_missing:+$isa_missing }$isa" ;; esac
  fi
}
while read -r name; do
  case $name in
    cuda_*) say "$name: needs a GPU (none on this machine)" ;;
    *avx512*) isa_skip "$name" AVX-512 avx512f avx512bw avx512vl ;;
    *avx2*) isa_skip "$name" AVX2 avx2 f16c fma ;;
    horovod*)
      say "$name: needs Horovod built with MPI and PyTorch (from PyPI)"
      required "$name" pip horovod==0.28.1 apt python3-torch apt libtorch-dev ;;
    mpich_python_venv|mpich_job_python_*|mpich_python_*|mpich_job_numpy_*)
      say "$name: needs PyPI for mpi4py's source and numpy (an MPICH venv)"
      required "$name" pip mpi4py==4.1.2 ;;
    impi_*|openmpi_library_refused_by_impi_job)
      say "$name: needs PyPI for Intel MPI's runtime (impi-rt, tests/mpi/intel_mpi.sh)"
      required "$name" pip impi-rt==2021.13.1 ;;
    tools_pip_install)
      say "$name: needs PyPI for pip's build requirements (scikit-build-core)"
      required "$name" pip scikit-build-core ;;
    tools_pip_install_mpich|tools_pip_install_both_abis)
      say "$name: needs PyPI for pip's build requirements (scikit-build-core), and the MPICH build"
      required "$name" pip scikit-build-core ;;
    *)
      say "$name: skipped itself: its output in Testing/Temporary/LastTest.log says why"
      required "$name" ;;
  esac
done < <(for log in "$output" "$mpich_output"; do
           if [ -f "$log" ]; then summary_of "$log"; fi
         done | sed -n 's/^[[:space:]]*[0-9]* - \(.*\) (Skipped)$/\1/p')
if [ $isa_skips -gt 0 ]; then
  say "$isa_skips kernel test cases for an ISA this CPU lacks ($isa_missing: /proc/cpuinfo):" \
      "skipped; their scalar twins, which must give the same bits, ran"
fi
[[ $lines -gt 0 ]] || echo "  nothing: every suite was built and every test ran"
if [ $required_missing -gt 0 ]; then
  echo "FAIL: $required_missing required suite(s) did not run in CI (above)"
  exit 1
fi
