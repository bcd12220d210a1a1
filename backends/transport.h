// What an algorithm (algorithms/) needs from a communicator, whatever carries
// it: the real MPI through PMPI (host memory, or device buffers staged through
// pinned host memory), or the real NCCL (device memory, stream-ordered). Each
// algorithm is written once against this interface (Gloo's transport pairs are
// the model), so it serves every path.
//
// Every rank calls the same collectives in the same order with the same
// sizes (invariant 3 of docs/architecture.md): a transport never decides anything.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <vector>

#include "backends/status.h"
#include "kernels/cast.h"

namespace slimreduce::backends {

// Where the buffers handed to the transport live.
enum class MemoryKind {
  host,         // host memory, read by the host code of the compressors
  staged_host,  // pinned host memory that stands in for device buffers (MPI not CUDA-aware)
  device,       // device memory, read by the kernels
};

// When a collective's result is there: on return (blocking), or once the work
// queued on the caller's stream before it has run (stream-ordered).
enum class Execution { blocking, stream_ordered };

class Transport {
 public:
  Transport(int rank, int size, MemoryKind memory, Execution execution)
      : rank_(rank), size_(size), memory_(memory), execution_(execution) {}
  virtual ~Transport() = default;

  int rank() const { return rank_; }
  int size() const { return size_; }
  MemoryKind memory() const { return memory_; }
  Execution execution() const { return execution_; }
  // Whether the host can read what a collective received once it returns
  // (blocking, not device memory): where bytes from other ranks are checked.
  bool host_readable() const {
    return execution_ == Execution::blocking && memory_ != MemoryKind::device;
  }

  // Sends send_bytes to rank dest while receiving recv_bytes from rank source.
  virtual Status sendrecv(const void* send, std::size_t send_bytes, int dest, void* recv,
                          std::size_t recv_bytes, int source) = 0;
  // Every rank's bytes_per_rank bytes, in rank order, into gathered.
  virtual Status allgather(const void* send, std::size_t bytes_per_rank, void* gathered) = 0;
  // send holds size() blocks back to back in rank order, send_bytes[r] bytes
  // for rank r; recv gets size() blocks back to back in rank order,
  // recv_bytes[r] bytes from rank r (what rank r sends here, its own block
  // included). The default runs size() - 1 sendrecv steps in a fixed order
  // (step s: to rank + s, from rank - s) and copies its own block on the
  // host, so every host transport has it; a device transport overrides it.
  virtual Status alltoallv(const void* send, const std::size_t* send_bytes, void* recv,
                           const std::size_t* recv_bytes);

  // Copies `bytes` of `from`, a buffer this transport's collectives wrote,
  // into host memory at `host` once they are there: a host transport copies;
  // a stream-ordered one waits for its stream first (a host wait).
  virtual Status read_back(void* host, const void* from, std::size_t bytes) {
    if (memory_ == MemoryKind::device) return Status::internal();
    std::copy_n(static_cast<const std::byte*>(from), bytes, static_cast<std::byte*>(host));
    return {};
  }

  // send holds size() blocks of count_per_rank floats, in rank order; recv
  // gets this rank's block of their elementwise fp32 sum over all ranks. The
  // backend picks the order of the adds, but each element is summed once, so
  // the ranks that gather the blocks afterwards hold the same bits.
  virtual Status reduce_scatter_sum(const float* send, float* recv, std::size_t count_per_rank) = 0;
  // A sub-transport over the ranks that pass the same color (a node, a local
  // index), ranked by key then by rank here; same memory and execution. Every
  // rank calls it at the same point, in the same order. The caller owns it,
  // and drops it before this transport's communicator goes.
  virtual Status split(int color, int key, std::unique_ptr<Transport>* sub) = 0;

  // Whether the backend sums 16-bit elements of `format` itself (NCCL does);
  // then sum16 replaces the ring over sendrecv.
  virtual bool sums_natively(kernels::HalfFormat format) const {
    (void)format;
    return false;
  }
  // In place: inout (n elements of format) becomes their sum over all ranks.
  virtual Status sum16(void* inout, std::size_t n, kernels::HalfFormat format) {
    (void)inout, (void)n, (void)format;
    return Status::internal();
  }

 private:
  int rank_;
  int size_;
  MemoryKind memory_;
  Execution execution_;
};

inline Status Transport::alltoallv(const void* send, const std::size_t* send_bytes, void* recv,
                                   const std::size_t* recv_bytes) {
  if (memory_ == MemoryKind::device) return Status::internal();  // no host copy of device memory
  const auto* send_at = static_cast<const std::byte*>(send);
  auto* recv_at = static_cast<std::byte*>(recv);
  std::vector<std::size_t> send_offset(size_ + 1, 0), recv_offset(size_ + 1, 0);
  for (int r = 0; r < size_; ++r) {
    send_offset[r + 1] = send_offset[r] + send_bytes[r];
    recv_offset[r + 1] = recv_offset[r] + recv_bytes[r];
  }
  std::copy_n(send_at + send_offset[rank_], send_bytes[rank_], recv_at + recv_offset[rank_]);
  for (int step = 1; step < size_; ++step) {
    const int dest = (rank_ + step) % size_;
    const int source = (rank_ - step + size_) % size_;
    SLIMREDUCE_TRY(sendrecv(send_at + send_offset[dest], send_bytes[dest], dest,
                            recv_at + recv_offset[source], recv_bytes[source], source));
  }
  return {};
}

}  // namespace slimreduce::backends
