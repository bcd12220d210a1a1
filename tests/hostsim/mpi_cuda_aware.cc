// A CUDA-aware MPI, for the host simulation's programs whose calls pass
// through SlimReduce untouched on device buffers (invariant 1: a call that is
// not compressed reaches MPI exactly as given, so on device memory it needs a
// CUDA-aware MPI, as without SlimReduce). Linked ahead of the real MPI, these
// PMPI_Allreduce and PMPI_Iallreduce reach a buffer of (simulated) device
// memory where the simulated device keeps its bytes (hostsim::device_view), as
// a CUDA-aware MPI reaches device memory; host code cannot touch that memory.
// Every other argument goes to the real functions unchanged.
#include <mpi.h>

#include "tests/hostsim/next_symbol.h"
#include "tests/hostsim/sim.h"

namespace {

namespace sim = slimreduce::hostsim;

template <class T>
T* reachable(T* buffer) {
  return buffer == MPI_IN_PLACE ? buffer : sim::device_view(buffer);
}

}  // namespace

extern "C" {

int PMPI_Allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                   MPI_Comm comm) {
  static const auto fn =
      sim::next_symbol<decltype(&PMPI_Allreduce)>("mpi_cuda_aware", "PMPI_Allreduce");
  return fn(reachable(send), reachable(recv), count, type, op, comm);
}

int PMPI_Iallreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                    MPI_Comm comm, MPI_Request* request) {
  static const auto fn =
      sim::next_symbol<decltype(&PMPI_Iallreduce)>("mpi_cuda_aware", "PMPI_Iallreduce");
  return fn(reachable(send), reachable(recv), count, type, op, comm, request);
}

}  // extern "C"
