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
      : comm_(comm), rank_(rank), size_(size), memory_(memory) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  MemoryKind memory() const override { return memory_; }
  Execution execution() const override { return Execution::blocking; }

  Status sendrecv(const void* send, std::size_t send_bytes, int dest, void* recv,
                  std::size_t recv_bytes, int source) override;
  Status allgather(const void* send, std::size_t bytes_per_rank, void* gathered) override;

 private:
  MPI_Comm comm_;
  int rank_;
  int size_;
  MemoryKind memory_;
};

// The MPI error code a caller gets for a status of any domain.
int mpi_code(const Status& status);

}  // namespace slimreduce::backends
