// Device memory as the state that owns it sees it: an allocator interface
// (the CUDA one is core/gpu/cuda_support.h's CudaAllocator; tests use host memory)
// and a block that frees itself. Pure logic, no CUDA header: the residual
// store (core/runtime/residuals.h) and the NCCL path's memory (core/nccl/memory.h)
// hold device memory through it on any build.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "kernels/device.h"

namespace slimreduce {

using kernels::device::round256;

class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;
  // `bytes` of device memory, usable by work enqueued on `stream` from now on
  // (zeroed first when asked); nullptr when there is none.
  virtual void* allocate(std::size_t bytes, void* stream, bool zeroed) = 0;
  // Frees after the work already on `stream`; nullptr: at once (cudaFree of
  // cudaMallocAsync memory does not wait for queued kernels: see
  // release_after_device_wait).
  virtual void release(void* ptr, void* stream) = 0;
  // Waits until all work queued on `device` has finished; false when it could
  // not wait (then nothing that work may use may be freed).
  virtual bool wait_device(int device) = 0;
};

// The allocator of the process's device memory: CUDA's on a CUDA build
// (core/gpu/cuda_support.cc), nullptr on a CPU-only one (core/runtime/runtime.cc).
std::unique_ptr<DeviceAllocator> make_device_allocator();

// One allocation, freed at once when dropped (see release_after_device_wait).
class DeviceBlock {
 public:
  DeviceBlock() = default;
  DeviceBlock(DeviceAllocator* allocator, void* ptr, std::size_t bytes)
      : allocator_(allocator), ptr_(ptr), bytes_(bytes) {}
  DeviceBlock(DeviceBlock&& other) noexcept { *this = std::move(other); }
  DeviceBlock& operator=(DeviceBlock&& other) noexcept;
  ~DeviceBlock() { release(nullptr); }

  void* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }
  // Frees now, ordered after the work on stream (nullptr: at once).
  void release(void* stream);
  // Forgets the block without freeing it (it leaks).
  void abandon();

 private:
  DeviceAllocator* allocator_ = nullptr;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// Frees blocks that work still queued on `devices` may use (our kernels after
// an aborted communicator's, a compress kernel writing a residual): waits for
// each device first; call it outside any lock. No blocks: no wait. Leaks them
// when it cannot wait. Empties `blocks`.
void release_after_device_wait(std::vector<DeviceBlock>& blocks, const std::vector<int>& devices,
                               DeviceAllocator& allocator);

}  // namespace slimreduce
