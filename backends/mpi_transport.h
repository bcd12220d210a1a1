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
  // Over `comm`, which stays the caller's.
  MpiTransport(MPI_Comm comm, int rank, int size, MemoryKind memory = MemoryKind::host)
      : Transport(rank, size, memory, Execution::blocking), comm_(comm) {}
  // A sub-transport owns its communicator, freed with it.
  ~MpiTransport() override;
  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;

  Status sendrecv(const void* send, std::size_t send_bytes, int dest, void* recv,
                  std::size_t recv_bytes, int source) override;
  Status allgather(const void* send, std::size_t bytes_per_rank, void* gathered) override;
  // One MPI_Alltoallv where every count and offset fits its int, else the
  // pairwise steps of the default.
  Status alltoallv(const void* send, const std::size_t* send_bytes, void* recv,
                   const std::size_t* recv_bytes) override;
  Status reduce_scatter_sum(const float* send, float* recv, std::size_t count_per_rank) override;
  Status split(int color, int key, std::unique_ptr<Transport>* sub) override;

 private:
  MPI_Comm comm_;
  bool owns_comm_ = false;
};

// The MPI error code a caller gets for a status of any domain.
int mpi_code(const Status& status);

}  // namespace slimreduce::backends
