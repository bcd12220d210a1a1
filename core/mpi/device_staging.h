// The MPI path for device (GPU) buffers, over an MPI that cannot read device
// memory (Debian's Open MPI is not CUDA-aware): compress on the GPU, move only
// the compressed bytes through pinned host memory, run the same wire
// algorithm objects as for host buffers (algorithms/: the cast ring, the
// gathered top-k, so host- and device-buffer ranks interoperate), and finish on
// the GPU. The engine calls it from Engine::compress_call (docs/gpu.md shows
// the branch). Every function exists in every build: a CUDA build compiles
// device_staging.cc and device_pointer.cc, a CPU-only one
// device_staging_without_cuda.cc, where is_device_pointer() is always false
// and nothing else is ever reached (core/CMakeLists.txt chooses).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "backends/transport.h"
#include "compressors/compressor.h"
#include "core/gpu/device_memory.h"
#include "core/mpi/comm_state.h"
#include "core/mpi/host_allreduce.h"
#include "core/runtime/residuals.h"

namespace slimreduce::device_staging {

// A stream of our own and staging buffers on one device: what one call uses.
struct StagingSpace;

// The staging spaces kept between calls, owned by the MPI side: a call
// leases one for its duration, so no lock is held while MPI runs (with
// MPI_THREAD_MULTIPLE, two threads reaching two communicators in different
// orders on two ranks would otherwise wait for each other forever).
class StagingPool {
 public:
  // `residual_memory` makes the device residuals (the runtime's allocator).
  explicit StagingPool(DeviceAllocator* residual_memory);
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  DeviceAllocator* residual_memory() const { return residual_memory_; }
  // An idle space of `device`, or nullptr (the caller makes one).
  std::unique_ptr<StagingSpace> take(int device);
  // A space a call is done with.
  void give_back(std::unique_ptr<StagingSpace> space);

 private:
  DeviceAllocator* residual_memory_;
  std::mutex mutex_;  // guards idle_ only; never held across MPI
  std::vector<std::unique_ptr<StagingSpace>> idle_;
};

// Whether ptr is device memory (managed memory counts as host: the CPU reaches
// it). A process that never loaded the CUDA driver gets false without any
// CUDA call, in nanoseconds (cached until the process loads another library).
bool is_device_pointer(const void* ptr);

// Whether a call on these buffers with this compressor runs on the GPU (cast
// or top-k kernels) and so keeps its error-feedback residual there; false
// where it would be staged through the host algorithm, whose residual is the
// engine's host one.
bool keeps_residual_on_device(const AllreduceCall& call, compressors::Compressor& compressor,
                              int ranks);

// One compressed allreduce of the call (fp32 values; input and output may be
// device memory), over `transport` (the communicator behind `state`), with
// error feedback when `residual` (the key's slot in the engine's one residual
// store) feeds back: on the GPU the residual is the slot's device memory, made
// zeroed on first use and freed with the slot; staged through the host it is
// call.residual (the slot's host memory). Returns an MPI error
// code; *reduced gets the bytes this rank handed to MPI and whether an
// overflow was rescued. Synchronous, like
// the MPI call: the result is in call.output on return. Our stream is a
// blocking one, so it also starts after work the caller left queued on the
// legacy default stream. Buffers on two different GPUs are staged through the
// host. No lock is held while MPI runs (each call leases a space of `pool`).
// options: the call is cut into partitions as a host-buffer call is
// (pieces_of: host- and device-buffer ranks run the same collectives), the
// pieces pipelined where options.helpers gives a helper thread (the same
// bits); options.observer (SLIMREDUCE_TIMELINE; nullptr: none) is told of each phase.
Status allreduce(const AllreduceCall& call, compressors::Compressor& compressor, CommState& state,
                 backends::Transport& transport, ResidualSlot* residual, StagingPool& pool,
                 Reduced* reduced, const RunOptions& options);

// An eligible call the engine passes through uncompressed (warm-up, a tensor
// larger than the residual cap) with device memory on either side: its fp32
// values through pinned host memory to PMPI_Allreduce with the caller's
// datatype, op and communicator (so MPI's own sum, by an MPI that cannot read
// device memory), and back. Synchronous, like the call. Returns our own
// (CUDA-side) failure, for the engine to raise; *mpi_rc gets what
// PMPI_Allreduce returned (MPI raised any error of it on comm itself).
int passed_through_allreduce(const AllreduceCall& call, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm, StagingPool& pool, int* mpi_rc);

// SLIMREDUCE_ADAPTIVE: *norm = kernels::fixed_order_norm of the reduced
// result at `output` (device memory), the same bits, computed on its device
// (kernels/cuda/norm.cu); synchronous, as the call was.
Status reduced_norm(const float* output, std::size_t count, StagingPool& pool, double* norm);

// ---- the arithmetic of the GPU top-k route (every build, so tests check it) ----

// How the gathered payloads (packed at `payload` bytes in pinned memory) go
// to the device at `stride` bytes: one copy when nothing is padded, one 2D
// copy while the stride fits the device's largest pitch (cudaDevAttrMaxPitch,
// about 2 GiB), else one copy per rank.
enum class GatherCopy { contiguous, pitched, per_rank };
inline GatherCopy gather_copy_for(std::size_t payload, std::size_t stride, std::size_t max_pitch) {
  if (stride == payload) return GatherCopy::contiguous;
  return stride <= max_pitch ? GatherCopy::pitched : GatherCopy::per_rank;
}

}  // namespace slimreduce::device_staging
