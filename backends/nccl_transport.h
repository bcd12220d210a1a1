// The Transport over the real NCCL (the functions backends/nccl_backend.h
// resolved), on the caller's communicator and stream: device memory,
// stream-ordered (each collective is enqueued; its result is there once the
// stream reaches it). Only with SLIMREDUCE_HAVE_CUDA.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "backends/transport.h"

namespace slimreduce::backends {

class NcclTransport final : public Transport {
 public:
  NcclTransport(ncclComm_t comm, int rank, int size, cudaStream_t stream)
      : Transport(rank, size, MemoryKind::device, Execution::stream_ordered),
        comm_(comm),
        stream_(stream) {}

  // Not resolved yet: no algorithm on this transport uses point-to-point
  // (casts are summed natively, top-k payloads allgathered). Answers internal.
  Status sendrecv(const void* send, std::size_t send_bytes, int dest, void* recv,
                  std::size_t recv_bytes, int source) override;
  Status allgather(const void* send, std::size_t bytes_per_rank, void* gathered) override;
  bool sums_natively(kernels::HalfFormat) const override { return true; }
  Status sum16(void* inout, std::size_t n, kernels::HalfFormat format) override;

 private:
  ncclComm_t comm_;
  cudaStream_t stream_;
};

// The ncclResult_t a caller gets for a status of any domain.
ncclResult_t nccl_code(const Status& status);

}  // namespace slimreduce::backends
