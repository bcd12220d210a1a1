#include "core/nccl_memory.h"

#include <algorithm>

namespace slimreduce {

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

void NcclResidualStore::retire_or_release(std::uint64_t comm_id, NcclResidualSlot& slot,
                                          void* stream) {
  if (!slot.residual.get()) return;
  if (slot.captured) {
    retired_.emplace(comm_id, std::move(slot.residual));  // still counted: still held
    return;
  }
  bytes_held_ -= slot.residual.bytes();
  slot.residual.release(stream);
}

NcclResidualStore::Status NcclResidualStore::find_or_create(
    const NcclResidualKey& key, std::uint64_t count, int datatype, bool want_residual,
    bool may_allocate, void* stream, DeviceAllocator& allocator, NcclResidualSlot** out) {
  *out = nullptr;
  auto found = slots_.find(key);
  if (found != slots_.end() &&
      (found->second.count != count || found->second.datatype != datatype)) {
    // Under capture a free on the capturing stream is invalid (it would
    // invalidate the user's capture): keep the old slot, pass through now.
    if (!may_allocate && found->second.residual.get()) return Status::not_now;
    retire_or_release(key.comm_id, found->second, stream);
    slots_.erase(found);
    found = slots_.end();
  }
  const std::uint64_t bytes = count * sizeof(float);
  const bool has_residual = found != slots_.end() && found->second.residual.get();
  if (want_residual && !has_residual) {
    if (bytes_held_ + bytes > max_bytes_) return Status::over_cap;
    if (!may_allocate) return Status::not_now;
  }
  if (found == slots_.end()) {
    found = slots_.emplace(key, NcclResidualSlot{}).first;
    found->second.count = count;
    found->second.datatype = datatype;
  }
  NcclResidualSlot& slot = found->second;
  if (want_residual && !slot.residual.get()) {
    void* ptr = allocator.allocate(bytes, stream, true);
    if (!ptr) return Status::no_memory;
    slot.residual = DeviceBlock(&allocator, ptr, bytes);
    bytes_held_ += bytes;
  }
  *out = &slot;
  return Status::ok;
}

void NcclResidualStore::take_communicator(std::uint64_t comm_id, std::vector<DeviceBlock>& out) {
  for (auto it = slots_.lower_bound({comm_id, nullptr});
       it != slots_.end() && it->first.comm_id == comm_id;) {
    bytes_held_ -= it->second.residual.bytes();
    if (it->second.residual.get()) out.push_back(std::move(it->second.residual));
    it = slots_.erase(it);
  }
  auto [first, last] = retired_.equal_range(comm_id);
  for (auto it = first; it != last; ++it) {
    bytes_held_ -= it->second.bytes();
    out.push_back(std::move(it->second));
  }
  retired_.erase(first, last);
}

void NcclResidualStore::take_all(std::vector<DeviceBlock>& out) {
  for (auto& [key, slot] : slots_) {
    if (!slot.residual.get()) continue;
    if (slot.captured) {
      retired_.emplace(key.comm_id, std::move(slot.residual));  // a graph may replay it
    } else {
      bytes_held_ -= slot.residual.bytes();
      out.push_back(std::move(slot.residual));
    }
  }
  slots_.clear();
}

}  // namespace slimreduce
