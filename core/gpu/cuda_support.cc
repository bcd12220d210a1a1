#include "core/gpu/cuda_support.h"

#include <memory>

namespace slimreduce {

bool is_device_memory(const void* ptr) {
  if (!ptr) return false;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}

bool is_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return status != cudaStreamCaptureStatusNone;
}

// A failed call leaves its error as the last one of our private runtime:
// each is cleared here, so no later cudaGetLastError() (after a launch)
// reports it as the launch's.
DeviceGuard::DeviceGuard(int device) {
  if (cudaGetDevice(&previous_) != cudaSuccess) {
    cudaGetLastError();
    previous_ = -1;
    return;
  }
  ok_ = previous_ == device || cudaSetDevice(device) == cudaSuccess;
  if (!ok_) cudaGetLastError();
}

DeviceGuard::~DeviceGuard() {
  int now = -1;
  if (previous_ < 0) return;
  if (cudaGetDevice(&now) != cudaSuccess || (now != previous_ && cudaSetDevice(previous_))) {
    cudaGetLastError();
  }
}

void* CudaAllocator::allocate(std::size_t bytes, void* stream, bool zeroed) {
  auto s = static_cast<cudaStream_t>(stream);
  void* ptr = nullptr;
  if (cudaMallocAsync(&ptr, bytes, s) != cudaSuccess) {
    cudaGetLastError();
    ptr = nullptr;
    if (cudaMalloc(&ptr, bytes) != cudaSuccess) {  // no memory pools on this device
      cudaGetLastError();
      return nullptr;
    }
    std::lock_guard lock(mutex_);
    synchronous_.insert(ptr);
  }
  if (zeroed && cudaMemsetAsync(ptr, 0, bytes, s) != cudaSuccess) {
    cudaGetLastError();
    release(ptr, stream);
    return nullptr;
  }
  return ptr;
}

bool CudaAllocator::wait_device(int device) {
  DeviceGuard guard(device);
  if (!guard.ok()) return false;
  // An error here (a sticky one after an abort, say) still means the device's
  // work is over: clear it, so it does not surface at the caller's next check.
  if (cudaDeviceSynchronize() != cudaSuccess) cudaGetLastError();
  return true;
}

void CudaAllocator::release(void* ptr, void* stream) {
  bool synchronous = false;
  {
    std::lock_guard lock(mutex_);
    synchronous = synchronous_.erase(ptr) > 0;
  }
  // cudaFree (stream nullptr) does not wait for kernels still queued that use
  // cudaMallocAsync memory: callers freeing such memory wait first
  // (release_after_device_wait); only at teardown, or without memory pools.
  const cudaError_t rc = synchronous || !stream
                             ? cudaFree(ptr)
                             : cudaFreeAsync(ptr, static_cast<cudaStream_t>(stream));
  if (rc != cudaSuccess) cudaGetLastError();
}

std::unique_ptr<DeviceAllocator> make_device_allocator() {
  return std::make_unique<CudaAllocator>();
}

}  // namespace slimreduce
