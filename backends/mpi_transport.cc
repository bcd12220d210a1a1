#include "backends/mpi_transport.h"

#include "backends/mpi_backend.h"

namespace slimreduce::backends {

Status MpiTransport::sendrecv(const void* send, std::size_t send_bytes, int dest, void* recv,
                              std::size_t recv_bytes, int source) {
  return Status::mpi(mpi::sendrecv_bytes(send, send_bytes, dest, recv, recv_bytes, source, comm_));
}

Status MpiTransport::allgather(const void* send, std::size_t bytes_per_rank, void* gathered) {
  return Status::mpi(mpi::allgather_bytes(send, bytes_per_rank, gathered, comm_));
}

int mpi_code(const Status& status) {
  switch (status.domain()) {
    case ErrorDomain::none:
      return MPI_SUCCESS;
    case ErrorDomain::mpi:
      return status.code();
    case ErrorDomain::no_memory:
      return MPI_ERR_NO_MEM;
    case ErrorDomain::internal:
      return MPI_ERR_INTERN;
    case ErrorDomain::nccl:
    case ErrorDomain::cuda:
      break;
  }
  return MPI_ERR_OTHER;  // a failed CUDA step on the MPI device path
}

}  // namespace slimreduce::backends
