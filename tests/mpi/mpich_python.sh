#!/usr/bin/env bash
# mpich_python.sh VENV: a venv whose mpi4py is built against MPICH (Debian's
# python3-mpi4py is Open MPI's), with numpy, for the Python jobs of the MPICH
# build's suite (tests/mpi/mpich.cmake). mpi4py is built from its PyPI source
# with MPICC=mpicc.mpich once per machine into a wheel folder of our own
# (~/.cache/slimreduce/mpich-wheels: pip's own cache keys a built wheel by its
# source alone, so it could hand back one built against Open MPI), then
# installed from there. Prints what mpi4py reports as its MPI.
# Exit 77 (a skip, which scripts/not_run.sh reports and refuses in CI unless
# PyPI's refusal is confirmed) where PyPI cannot be reached; 1 on any other failure.
set -euo pipefail
venv=${1:?usage: mpich_python.sh VENV}
mpi4py_version=4.1.2
wheels=${SLIMREDUCE_CACHE_DIR:-$HOME/.cache/slimreduce}/mpich-wheels/mpi4py-$mpi4py_version
source "$(dirname "$0")/pip_or_skip.sh"
command -v mpicc.mpich >/dev/null || { echo "mpich_python: no mpicc.mpich (apt-get install libmpich-dev)"; exit 1; }
if ! compgen -G "$wheels/mpi4py-$mpi4py_version-*.whl" >/dev/null; then
  mkdir -p "$wheels"
  MPICC=mpicc.mpich pip_or_skip "mpi4py's source" python3 -m pip wheel --quiet --no-deps \
    --no-binary mpi4py --no-cache-dir --wheel-dir "$wheels" "mpi4py==$mpi4py_version"
fi
rm -rf "$venv"
python3 -m venv "$venv"
pip_or_skip numpy "$venv/bin/python" -m pip install --quiet numpy
pip_or_skip mpi4py "$venv/bin/python" -m pip install --quiet --no-index --find-links "$wheels" \
  "mpi4py==$mpi4py_version"
# The venv's mpi4py must speak MPICH: its MPI library's own words.
version=$("$venv/bin/python" -c 'from mpi4py import MPI; print(MPI.Get_library_version().split(chr(10))[0])')
echo "mpich_python: $venv: mpi4py $mpi4py_version over: $version"
case $version in
  MPICH*) ;;
  *) echo "mpich_python: mpi4py is not built against MPICH"; exit 1 ;;
esac
