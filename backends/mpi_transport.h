// The Transport over the real MPI (PMPI_*), on a communicator of SlimReduce's
// own (a private duplicate of the caller's: our messages never meet theirs).
// Blocking. Host memory, or pinned host memory standing in for device buffers
// on an MPI that cannot read device memory.
#pragma once

#include <mpi.h>

#include "backends/transport.h"

namespace slimreduce::backends {

class MpiTransport final : public Transport {
 public:
  MpiTransport(MPI_Comm comm, int rank, int size, MemoryKind memory = MemoryKind::host)
      : Transport(rank, size, memory, Execution::blocking), comm_(comm) {}

  Status sendrecv(const void* send, std::size_t send_bytes, int dest, void* recv,
                  std::size_t recv_bytes, int source) override;
  Status allgather(const void* send, std::size_t bytes_per_rank, void* gathered) override;

 private:
  MPI_Comm comm_;
};

// The MPI error code a caller gets for a status of any domain.
int mpi_code(const Status& status);

}  // namespace slimreduce::backends
