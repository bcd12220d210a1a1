#include "core/runtime/residuals.h"

#include <algorithm>

namespace slimreduce {

std::uint64_t ResidualStore::note_use(std::uint64_t comm_id) {
  const std::uint64_t now = ++uses_[comm_id];
  // A sweep every quarter of the limit: a key lives at most 1.25x it unused.
  if (evict_after_ != 0 && now % std::max<std::uint64_t>(1, evict_after_ / 4) == 0)
    evict_unused(comm_id, now);
  return now;
}

void ResidualStore::evict_unused(std::uint64_t comm_id, std::uint64_t now) {
  auto it = slots_.lower_bound(ResidualKey{comm_id, nullptr});
  while (it != slots_.end() && it->first.comm_id == comm_id) {
    ResidualSlot& slot = it->second;
    if (slot.captured || now <= slot.last_use + evict_after_) {
      ++it;
      continue;
    }
    bytes_held_ -= slot.held_bytes();
    ++evicted_;
    // The MPI paths are synchronous: nothing of ours still uses their memory.
    // NCCL's kernels may still be queued on the key's last stream.
    if (slot.stream_ordered) {
      slot.device.release(slot.last_stream);
      slot.device_state.release(slot.last_stream);
    }
    it = slots_.erase(it);
  }
}

ResidualSlot* ResidualStore::find_or_create(const ResidualKey& key, std::size_t count,
                                            std::uint64_t datatype_tag, bool want_residual) {
  const std::uint64_t now = note_use(key.comm_id);
  auto found = slots_.find(key);
  if (found != slots_.end() &&
      (found->second.count != count || found->second.datatype_tag != datatype_tag)) {
    // Same buffer, new shape: what was carried belongs to another tensor.
    ++shape_changes_;
    found = reset(found, nullptr);
  }
  if (found != slots_.end()) {
    found->second.last_use = now;
    return &found->second;
  }

  const std::uint64_t needed = want_residual ? std::uint64_t{count} * sizeof(float) : 0;
  if (bytes_held_ + needed > max_bytes_) return nullptr;
  ResidualSlot slot;
  slot.count = count;
  slot.datatype_tag = datatype_tag;
  slot.feeds_back = want_residual;
  slot.last_use = now;
  bytes_held_ += needed;
  return &slots_.emplace(key, std::move(slot)).first->second;
}

ResidualSlot* ResidualStore::find_existing(const ResidualKey& key, std::size_t count,
                                           std::uint64_t datatype_tag) {
  const std::uint64_t now = note_use(key.comm_id);
  auto found = slots_.find(key);
  if (found == slots_.end()) return nullptr;
  if (found->second.count != count || found->second.datatype_tag != datatype_tag) {
    ++shape_changes_;
    return nullptr;
  }
  found->second.last_use = now;
  return &found->second;
}

ResidualStore::Found ResidualStore::find_on_device(const ResidualKey& key, std::size_t count,
                                                   std::uint64_t datatype_tag, bool want_residual,
                                                   bool may_allocate, void* stream,
                                                   DeviceAllocator& allocator, ResidualSlot** out) {
  *out = nullptr;
  // A capture is not a call that runs: it neither counts nor evicts (nothing
  // may be freed during capture).
  const std::uint64_t now = may_allocate ? note_use(key.comm_id) : 0;
  auto found = slots_.find(key);
  if (found != slots_.end() &&
      (found->second.count != count || found->second.datatype_tag != datatype_tag)) {
    ++shape_changes_;
    // Under capture a free on the capturing stream is invalid (it would
    // invalidate the user's capture): keep the old slot, pass through now.
    if (!may_allocate && found->second.holds_memory()) return Found::not_now;
    found = reset(found, stream);
  }
  const bool feeds_back = found != slots_.end() && found->second.feeds_back;
  const std::uint64_t needed = std::uint64_t{count} * sizeof(float);
  if (want_residual && !feeds_back) {
    if (bytes_held_ + needed > max_bytes_) return Found::over_cap;
    if (!may_allocate) return Found::not_now;
  }
  if (found == slots_.end()) {
    found = slots_.emplace(key, ResidualSlot{}).first;
    found->second.count = count;
    found->second.datatype_tag = datatype_tag;
    found->second.stream_ordered = true;
  }
  ResidualSlot& slot = found->second;
  if (may_allocate) {
    slot.last_use = now;
    slot.last_stream = stream;
  }
  if (want_residual && !slot.feeds_back) {
    slot.feeds_back = true;
    if (!slot.device_residual(allocator, stream)) {
      slot.feeds_back = false;  // held nothing: the next call tries again
      return Found::no_memory;
    }
    bytes_held_ += needed;
  }
  *out = &slot;
  return Found::ok;
}

ResidualStore::Slots::iterator ResidualStore::reset(Slots::iterator found, void* stream) {
  ResidualSlot& slot = found->second;
  resets_ += slot.feeds_back ? 1 : 0;
  if (slot.captured && slot.device.get()) {
    retired_.emplace(found->first.comm_id, std::move(slot.device));  // still counted: still held
  } else {
    bytes_held_ -= slot.held_bytes();
    slot.device.release(stream);
  }
  slot.device_state.release(stream);
  slots_.erase(found);
  return slots_.end();
}

void ResidualStore::count_state(const ResidualKey& key) {
  const auto found = slots_.find(key);
  if (found == slots_.end() || !found->second.state_uncounted()) return;
  ResidualSlot& slot = found->second;
  bytes_held_ -= slot.held_bytes();
  slot.state_floats_counted = slot.compressor_state.size();
  bytes_held_ += slot.held_bytes();
}

void ResidualStore::forget_communicator(std::uint64_t comm_id) {
  std::vector<DeviceBlock> freed_now;
  take_communicator(comm_id, freed_now);
}

void ResidualStore::take_communicator(std::uint64_t comm_id, std::vector<DeviceBlock>& out) {
  uses_.erase(comm_id);
  auto it = slots_.lower_bound(ResidualKey{comm_id, nullptr});
  while (it != slots_.end() && it->first.comm_id == comm_id) {
    bytes_held_ -= it->second.held_bytes();
    if (it->second.device.get()) out.push_back(std::move(it->second.device));
    if (it->second.device_state.get()) out.push_back(std::move(it->second.device_state));
    it = slots_.erase(it);
  }
  auto [first, last] = retired_.equal_range(comm_id);
  for (auto retired = first; retired != last; ++retired) {
    bytes_held_ -= retired->second.bytes();
    out.push_back(std::move(retired->second));
  }
  retired_.erase(first, last);
}

void ResidualStore::take_all(std::vector<DeviceBlock>& out) {
  for (auto& [key, slot] : slots_) {
    if (slot.device_state.get()) out.push_back(std::move(slot.device_state));
    if (slot.captured && slot.device.get()) {
      retired_.emplace(key.comm_id, std::move(slot.device));  // a graph may replay it
      continue;
    }
    bytes_held_ -= slot.held_bytes();
    if (slot.device.get()) out.push_back(std::move(slot.device));
  }
  slots_.clear();
}

void ResidualStore::abandon_device_memory() {
  for (auto& [key, slot] : slots_) {
    slot.device.abandon();
    slot.device_state.abandon();
  }
  for (auto& [comm_id, block] : retired_) block.abandon();
}

bool WarmupCounter::warming_up(std::uint64_t comm_id, std::size_t count, std::uint64_t datatype_tag,
                               std::uint64_t* number) {
  if (steps_ == 0 && !numbers_calls_) return false;
  std::uint64_t& calls = calls_[Shape{comm_id, count, datatype_tag}];
  if (number) *number = calls;
  return calls++ < steps_;
}

void WarmupCounter::forget_communicator(std::uint64_t comm_id) {
  auto it = calls_.lower_bound(Shape{comm_id, 0, 0});
  while (it != calls_.end() && it->first.comm_id == comm_id) it = calls_.erase(it);
}

}  // namespace slimreduce
