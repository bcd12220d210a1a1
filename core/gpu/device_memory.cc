#include "core/gpu/device_memory.h"

namespace slimreduce {

DeviceBlock& DeviceBlock::operator=(DeviceBlock&& other) noexcept {
  if (this != &other) {
    release(nullptr);
    allocator_ = std::exchange(other.allocator_, nullptr);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBlock::release(void* stream) {
  if (ptr_ && allocator_) allocator_->release(ptr_, stream);
  ptr_ = nullptr;
  bytes_ = 0;
}

void DeviceBlock::abandon() {
  ptr_ = nullptr;
  bytes_ = 0;
}

void release_after_device_wait(std::vector<DeviceBlock>& blocks, const std::vector<int>& devices,
                               DeviceAllocator& allocator) {
  if (blocks.empty()) return;
  // cudaFree of cudaMallocAsync memory does not wait, and NCCL's destroy or
  // abort only waits for its own stream, not for our kernels queued after its
  // kernel on the caller's stream: wait for the whole device first.
  bool waited = true;
  for (int device : devices) waited = allocator.wait_device(device) && waited;
  if (!waited) {
    for (DeviceBlock& block : blocks) block.abandon();  // a leak beats a use after free
  }
  blocks.clear();
}

}  // namespace slimreduce
