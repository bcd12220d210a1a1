// The Transport over the real NCCL (the functions backends/nccl_backend.h
// resolved), on the caller's communicator and stream: device memory,
// stream-ordered (each collective is enqueued; its result is there once the
// stream reaches it). CUDA builds only (backends/CMakeLists.txt).
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>

#include "backends/transport.h"

namespace slimreduce::backends {

class NcclTransport final : public Transport {
 public:
  // Over `comm`, which stays the caller's.
  NcclTransport(ncclComm_t comm, int rank, int size, cudaStream_t stream)
      : Transport(rank, size, MemoryKind::device, Execution::stream_ordered),
        comm_(comm),
        stream_(stream) {}
  // A sub-transport owns its communicator, destroyed with it.
  ~NcclTransport() override;
  NcclTransport(const NcclTransport&) = delete;
  NcclTransport& operator=(const NcclTransport&) = delete;

  // ncclSend and ncclRecv in a group of their own (nested in the caller's, if any).
  Status sendrecv(const void* send, std::size_t send_bytes, int dest, void* recv,
                  std::size_t recv_bytes, int source) override;
  Status allgather(const void* send, std::size_t bytes_per_rank, void* gathered) override;
  // One group of an ncclSend and an ncclRecv per rank with bytes to move (its
  // own rank too: NCCL copies to itself), nested in the caller's, if any.
  Status alltoallv(const void* send, const std::size_t* send_bytes, void* recv,
                   const std::size_t* recv_bytes) override;
  Status reduce_scatter_sum(const float* send, float* recv, std::size_t count_per_rank) override;
  // cudaMemcpyAsync to the host on the stream, then cudaStreamSynchronize:
  // never while the stream is being captured into a graph.
  Status read_back(void* host, const void* from, std::size_t bytes) override;

  // ncclCommSplit, blocking (the sub-communicator is ready on return), on
  // the same stream. Not inside a group: NCCL would only queue the split.
  Status split(int color, int key, std::unique_ptr<Transport>* sub) override;
  bool sums_natively(kernels::HalfFormat) const override { return true; }
  Status sum16(void* inout, std::size_t n, kernels::HalfFormat format) override;

  ncclComm_t comm() const { return comm_; }
  // Before the parent goes (a split kept for later calls): a sub-transport's
  // communicator aborted (the parent is being aborted: a destroy could wait
  // for work that never ends) or finalized (the parent is); the destructor
  // then destroys only a communicator that was not aborted.
  Status abort_owned();
  Status finalize_owned();

 private:
  ncclComm_t comm_;
  cudaStream_t stream_;
  bool owns_comm_ = false;
};

// The ncclResult_t a caller gets for a status of any domain.
ncclResult_t nccl_code(const Status& status);

}  // namespace slimreduce::backends
