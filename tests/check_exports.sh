#!/bin/sh
# check_exports.sh LIB [--no-fortran]: the library exports only the entry points it
# intercepts (MPI C and Fortran, NCCL) and its own slimreduce_* API, so its
# internals (C++ templates, a static CUDA runtime) never clash with the job's;
# and it needs no BLAS at load time (PowerSGD's private OpenBLAS is loaded
# with dlmopen when used, so the job's numpy keeps its own).
set -eu
exports=$(nm -D --defined-only "$1" | awk '{print $3}')
unexpected=$(printf '%s\n' "$exports" |
  grep -vE '^(MPI_[A-Za-z_]+|mpi_[a-z_]+|ompi_[a-z_]+_f|nccl[A-Za-z]+|slimreduce_[a-z_]+)$' || true)
if [ -n "$unexpected" ]; then
  echo "exported but not an entry point:"; echo "$unexpected"; exit 1
fi
printf '%s\n' "$exports" | grep -qx MPI_Allreduce || { echo "MPI_Allreduce not exported"; exit 1; }
# MPI-4's large-count calls: the allreduces alone are intercepted (and only
# by a build against an MPI that has them: interpose/mpi_large_count_shim.cc);
# every other MPI_*_c must reach the real MPI untouched.
large=$(printf '%s\n' "$exports" | grep -E '^MPI_[A-Za-z_]+_c$' |
  grep -vxE 'MPI_(Allreduce|Iallreduce)_c' || true)
if [ -n "$large" ]; then
  echo "large-count calls exported other than the allreduces:"; echo "$large"; exit 1
fi
needed=$(readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
if printf '%s\n' "$needed" | grep -iE 'blas|lapack|gfortran'; then
  echo "a BLAS is a load-time dependency (NEEDED) of $1"; exit 1
fi
# The MPICH build has no Fortran entry points: MPICH's Fortran bindings call
# the C MPI_* (interpose/CMakeLists.txt).
if [ "${2:-}" = --no-fortran ]; then
  fortran=$(printf '%s\n' "$exports" | grep -E '^(mpi_[a-z_]+|MPI_[A-Z_]+|ompi_[a-z_]+_f)$' || true)
  [ -z "$fortran" ] || { echo "Fortran entry points exported:"; echo "$fortran"; exit 1; }
fi
echo "OK: $(printf '%s\n' "$exports" | wc -l) symbols, all entry points; NEEDED: $(printf '%s ' $needed)"
