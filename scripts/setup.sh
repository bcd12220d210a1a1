#!/usr/bin/env bash
# Installs what SlimReduce needs to build and test on a fresh Debian machine,
# then configures and builds it in build/. Safe to run again: it installs only
# what is missing and rebuilds only what changed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

packages=(cmake g++ make gfortran openmpi-bin libopenmpi-dev libgtest-dev libbenchmark-dev
          python3 python3-mpi4py python3-numpy iproute2
          libopenblas0-serial  # PowerSGD's products (loaded privately at run time)
          python3-venv python3-pip python3-matplotlib pkgconf  # the tools' tests (docs/tools.md)
          clang libclang-rt-14-dev  # libFuzzer, for tests/fuzz
          ccache  # the suite's build trees rebuild from it (scripts/compiler_cache.sh)
          mpich libmpich-dev)  # the MPICH build and its tests, beside Open MPI (scripts/test.sh)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# Open MPI stays the default mpicc/mpirun beside MPICH (Debian ranks it
# higher, 50 against 40; a manual choice could have flipped it): the main
# build and its tests are Open MPI's.
for alternative in "mpi /usr/bin/mpicc.openmpi" "mpirun /usr/bin/mpirun.openmpi" \
                   "mpi-x86_64-linux-gnu /usr/lib/x86_64-linux-gnu/openmpi/include"; do
  set -- $alternative
  if [ -e "$2" ] && [ "$(readlink -f "/etc/alternatives/$1")" != "$(readlink -f "$2")" ]; then
    echo "setup: making Open MPI the default $1 again (update-alternatives)"
    $sudo_cmd update-alternatives --set "$1" "$2" >/dev/null
  fi
done

source scripts/compiler_cache.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${compiler_launchers[@]}" >/dev/null
cmake --build build -j"$(nproc)"
