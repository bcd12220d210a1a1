#ifdef SLIMREDUCE_HAVE_CUDA
#include "core/nccl_cuda.h"

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

DeviceGuard::DeviceGuard(int device) {
  if (cudaGetDevice(&previous_) != cudaSuccess) return;
  ok_ = previous_ == device || cudaSetDevice(device) == cudaSuccess;
}

DeviceGuard::~DeviceGuard() {
  int now = -1;
  if (previous_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous_) {
    cudaSetDevice(previous_);
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

void CudaAllocator::release(void* ptr, void* stream) {
  bool synchronous = false;
  {
    std::lock_guard lock(mutex_);
    synchronous = synchronous_.erase(ptr) > 0;
  }
  // cudaFree waits for the device; only at communicator teardown or without pools.
  const cudaError_t rc = synchronous || !stream
                             ? cudaFree(ptr)
                             : cudaFreeAsync(ptr, static_cast<cudaStream_t>(stream));
  if (rc != cudaSuccess) cudaGetLastError();
}

}  // namespace slimreduce
#endif  // SLIMREDUCE_HAVE_CUDA
