// CUDA helpers of both device paths (NCCL, and MPI with device buffers):
// pointer and capture checks, the current device, and the stream-ordered
// allocator behind the workspaces and residuals.
// CUDA builds only (core/CMakeLists.txt). Only wait_device synchronizes the host
// (communicator teardown, a compressor switch).
#pragma once

#include <cuda_runtime_api.h>

#include <mutex>
#include <unordered_set>

#include "core/gpu/device_memory.h"

namespace slimreduce {

// Device or managed memory (both reachable by our kernels; managed memory is
// device memory on both sides, docs/architecture.md "Managed memory"); false for
// host memory and on any error (which is cleared, so it never reaches a later check).
bool is_device_memory(const void* ptr);

// Whether work on stream is being captured into a CUDA graph; false on error.
bool is_capturing(cudaStream_t stream);

// Makes `device` current for the scope and restores the caller's device: our
// launches must go to the communicator's device, the caller's must not move.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  bool ok() const { return ok_; }

 private:
  int previous_ = -1;
  bool ok_ = false;
};

// Stream-ordered allocations (cudaMallocAsync) where the device has memory
// pools, cudaMalloc elsewhere; zeroing is a cudaMemsetAsync on the stream.
class CudaAllocator : public DeviceAllocator {
 public:
  void* allocate(std::size_t bytes, void* stream, bool zeroed) override;
  void release(void* ptr, void* stream) override;
  // DeviceGuard on `device`, cudaDeviceSynchronize, error cleared.
  bool wait_device(int device) override;

 private:
  std::mutex mutex_;
  std::unordered_set<void*> synchronous_;  // from cudaMalloc: freed with cudaFree
};

}  // namespace slimreduce
