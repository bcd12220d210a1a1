// MPI-4's large-count allreduces (MPI_Allreduce_c, MPI_Iallreduce_c), built
// where the MPI has them (MPICH 4; Open MPI 4.1 has none). mpi4py 4 calls
// them for every reduction on such an MPI, so a Python job would otherwise
// pass untouched. A count that fits an int is the call MPI_Allreduce would
// make, and is taken as one (classified, compressed or counted and passed
// through); a larger count goes to the real MPI untouched, uncounted: the
// engine's counts are ints. A call the fast path passes through reaches the
// real MPI_Allreduce_c as given.
#include <climits>

#include "interpose/shim_common.h"

using namespace slimreduce::interpose;

namespace {

bool fits_an_int(MPI_Count count) { return count >= 0 && count <= INT_MAX; }

}  // namespace

SR_EXPORT int MPI_Allreduce_c(const void* sendbuf, void* recvbuf, MPI_Count count,
                              MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  if (!fits_an_int(count) ||
      Engine::counted_pass_through(static_cast<int>(count), datatype, op, comm)) {
    return PMPI_Allreduce_c(sendbuf, recvbuf, count, datatype, op, comm);
  }
  return allreduce_through_engine(sendbuf, recvbuf, static_cast<int>(count), datatype, op, comm);
}

SR_EXPORT int MPI_Iallreduce_c(const void* sendbuf, void* recvbuf, MPI_Count count,
                               MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                               MPI_Request* request) {
  if (!fits_an_int(count))
    return PMPI_Iallreduce_c(sendbuf, recvbuf, count, datatype, op, comm, request);
  return iallreduce_through_engine(sendbuf, recvbuf, static_cast<int>(count), datatype, op, comm,
                                   request);
}
