// An MPI that cannot read device memory, as Debian's Open MPI: linked ahead
// of the real MPI into the host simulation's MPI device tests, these
// PMPI_Allreduce, PMPI_Sendrecv and PMPI_Allgather abort when handed a buffer
// of (simulated) device memory, where a real MPI that is not CUDA-aware would
// fault or read garbage; otherwise they call the real ones unchanged. So a
// path of SlimReduce's that hands device memory to MPI fails its test here.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>

#include "tests/hostsim/next_symbol.h"
#include "tests/hostsim/sim.h"

namespace {

void refuse_device(const char* function, const void* buffer) {
  if (buffer == MPI_IN_PLACE || !slimreduce::hostsim::is_device_range(buffer, 1)) return;
  std::fprintf(stderr,
               "%s was handed device memory, which an MPI that is not CUDA-aware cannot read\n",
               function);
  std::abort();
}

}  // namespace

extern "C" {

int PMPI_Allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                   MPI_Comm comm) {
  refuse_device("PMPI_Allreduce", send);
  refuse_device("PMPI_Allreduce", recv);
  static const auto fn = slimreduce::hostsim::next_symbol<decltype(&PMPI_Allreduce)>(
      "mpi_host_only", "PMPI_Allreduce");
  return fn(send, recv, count, type, op, comm);
}

int PMPI_Sendrecv(const void* send, int send_count, MPI_Datatype send_type, int dest, int send_tag,
                  void* recv, int recv_count, MPI_Datatype recv_type, int source, int recv_tag,
                  MPI_Comm comm, MPI_Status* status) {
  refuse_device("PMPI_Sendrecv", send);
  refuse_device("PMPI_Sendrecv", recv);
  static const auto fn =
      slimreduce::hostsim::next_symbol<decltype(&PMPI_Sendrecv)>("mpi_host_only", "PMPI_Sendrecv");
  return fn(send, send_count, send_type, dest, send_tag, recv, recv_count, recv_type, source,
            recv_tag, comm, status);
}

int PMPI_Allgather(const void* send, int send_count, MPI_Datatype send_type, void* recv,
                   int recv_count, MPI_Datatype recv_type, MPI_Comm comm) {
  refuse_device("PMPI_Allgather", send);
  refuse_device("PMPI_Allgather", recv);
  static const auto fn = slimreduce::hostsim::next_symbol<decltype(&PMPI_Allgather)>(
      "mpi_host_only", "PMPI_Allgather");
  return fn(send, send_count, send_type, recv, recv_count, recv_type, comm);
}

}  // extern "C"
