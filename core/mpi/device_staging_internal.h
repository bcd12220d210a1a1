// What the MPI path's device routes share (core/mpi/device_staging.cc, and the
// low-rank route in core/mpi/device_low_rank.cc): staging memory that grows and
// stays, a call's stream and buffers, and CUDA failures as a Status. CUDA
// builds only; not part of the runtime's interface.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "core/gpu/device_memory.h"
#include "core/mpi/device_staging.h"
#include "scheduler/plan.h"

namespace slimreduce::device_staging {

// ---- memory that grows and stays ---------------------------------------------

struct DeviceFree {
  void operator()(void* p) const { cudaFree(p); }
};
struct PinnedFree {
  void operator()(void* p) const { cudaFreeHost(p); }
};
template <class Free>
struct Buffer {
  std::unique_ptr<std::byte, Free> ptr;
  std::size_t bytes = 0;
};

template <class Free>
inline std::byte* grow(Buffer<Free>& buffer, std::size_t bytes, bool pinned) {
  if (buffer.bytes >= bytes && buffer.ptr) return buffer.ptr.get();
  buffer.ptr.reset();
  buffer.bytes = 0;
  void* raw = nullptr;
  const cudaError_t rc = pinned ? cudaMallocHost(&raw, bytes) : cudaMalloc(&raw, bytes);
  if (rc != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  buffer.ptr.reset(static_cast<std::byte*>(raw));
  buffer.bytes = bytes;
  return buffer.ptr.get();
}

using DeviceBuffer = Buffer<DeviceFree>;
using PinnedBuffer = Buffer<PinnedFree>;

struct StreamDelete {
  void operator()(CUstream_st* s) const { cudaStreamDestroy(s); }
};

// What one call needs: a stream of our own on its device and staging space.
struct StagingSpace {
  int device = -1;
  std::unique_ptr<CUstream_st, StreamDelete> stream;
  DeviceBuffer wire, scratch, gathered;
  PinnedBuffer host_in, host_out;
  // An fp16 overflow's rerun (fp32 values through the host path with the
  // rescue's wider wire): its own, so that it never moves the pinned buffers
  // other pieces of the call hold.
  PinnedBuffer rescue_in, rescue_out;
};

// Where each piece's stretch of a buffer shared by a cut call's pieces begins:
// 256-byte aligned, each piece's bytes from `bytes(piece count)`. total: the
// buffer's size.
template <class Bytes>
std::vector<std::size_t> piece_offsets(const std::vector<scheduler::Partition>& pieces,
                                       Bytes&& bytes, std::size_t* total) {
  std::vector<std::size_t> offsets;
  *total = 0;
  for (const scheduler::Partition& piece : pieces) {
    offsets.push_back(*total);
    *total += round256(bytes(piece.count));
  }
  return offsets;
}

// A failed CUDA step, as a Status (the error cleared, so it never reaches a
// later check): the caller sees an MPI error (backends::mpi_code), never a
// wrong result.
inline Status cuda_status(cudaError_t rc) {
  if (rc == cudaSuccess) return {};
  cudaGetLastError();
  return Status::cuda(rc);
}
// A compressor's device entry point answers a cudaError_t as an int.
inline Status cuda_status(int rc) { return cuda_status(static_cast<cudaError_t>(rc)); }

// ---- one call ---------------------------------------------------------------

struct StagedCall {
  const AllreduceCall& call;
  compressors::Compressor& compressor;
  CommState& state;
  backends::Transport& transport;  // the MPI transport, over pinned host memory here
  StagingSpace& device;
  float* residual;  // device, or nullptr
  // How the call is cut (partition_bytes), pipelined (helpers: nullptr, its
  // pieces in turn) and observed (SLIMREDUCE_TIMELINE's observer, or nullptr).
  RunOptions options;
  cudaStream_t stream() const { return device.stream.get(); }
};

inline Status sync(const StagedCall& job) {
  return cuda_status(cudaStreamSynchronize(job.stream()));
}

// A plan of one step, run as every blocking plan is, its phases told to observer.
Status run_one(std::unique_ptr<scheduler::Step> step, Reduced* reduced,
               scheduler::PhaseObserver* observer);

// A step of one piece of a cut call: made for the piece's job (its stretch of
// input, output and residual) and its index among the pieces.
using PieceStep = std::function<std::unique_ptr<scheduler::Step>(const StagedCall&, std::size_t)>;

// The call cut into `pieces` as the host path cuts it (pieces_of: host- and
// device-buffer ranks run the same collectives), a step per piece, each on
// buffers of its own: pipelined where job.options gives a helper thread (its
// compress and finish, CUDA only, on the helper; the collectives on the
// caller's thread), else one after another. The same bits either way.
Status run_pieces(const StagedCall& job, const std::vector<scheduler::Partition>& pieces,
                  Reduced* reduced, const PieceStep& make_step);

// PowerSGD on the GPU (DeviceKernels::low_rank): the compressor's device
// steps, its two factors staged through pinned memory for the sums
// (core/mpi/device_low_rank.cc).
Status staged_low_rank(const StagedCall& job, compressors::LowRankCompressor& compressor,
                       Reduced* reduced);

// A sharded compressor (int8) on the GPU (DeviceKernels::sharded): its parts
// and its owners' results decoded on the GPU, the exchange and each owner's
// step on the host (core/mpi/device_sharded.cc).
Status staged_sharded(const StagedCall& job, compressors::ShardedCompressor& compressor,
                      Reduced* reduced);

}  // namespace slimreduce::device_staging
