#include "core/nccl/memory.h"

#include <algorithm>

namespace slimreduce {

void* Workspace::ensure(std::size_t bytes, void* stream, DeviceAllocator& allocator) {
  // A captured block is left to the graph: its replays may run at any time,
  // on any stream, concurrently with this eager call.
  if (large_enough(bytes) && !captured_) return block_.get();
  constexpr std::size_t kStep = std::size_t{1} << 20;
  const std::size_t grown = large_enough(bytes)
                                ? block_.bytes()  // a fresh block of the same size
                                : std::max(bytes, block_.bytes() + block_.bytes() / 2);
  const std::size_t size = (grown + kStep - 1) / kStep * kStep;
  void* ptr = allocator.allocate(size, stream, false);
  if (!ptr) return nullptr;
  if (captured_) {
    retired_.push_back(std::move(block_));
    captured_ = false;
  } else {
    block_.release(stream);  // after the calls already on this stream
  }
  block_ = DeviceBlock(&allocator, ptr, size);
  return ptr;
}

void Workspace::take_blocks(std::vector<DeviceBlock>& out) {
  if (block_.get()) out.push_back(std::move(block_));
  for (DeviceBlock& block : retired_) out.push_back(std::move(block));
  retired_.clear();
  captured_ = false;
}

std::size_t Workspace::bytes_held() const {
  std::size_t bytes = block_.bytes();
  for (const DeviceBlock& block : retired_) bytes += block.bytes();
  return bytes;
}

}  // namespace slimreduce
