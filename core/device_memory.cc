#include "core/device_memory.h"

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

}  // namespace slimreduce
