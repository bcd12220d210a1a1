#include "core/residuals.h"

namespace slimreduce {

ResidualSlot* ResidualStore::find_or_create(const ResidualKey& key, std::size_t count,
                                            std::uint64_t datatype_tag, bool want_residual) {
  auto found = slots_.find(key);
  if (found != slots_.end() &&
      (found->second.count != count || found->second.datatype_tag != datatype_tag)) {
    // Same buffer, new shape: what was carried belongs to another tensor.
    bytes_held_ -= found->second.held_bytes();
    resets_ += found->second.feeds_back ? 1 : 0;
    slots_.erase(found);
    found = slots_.end();
  }
  if (found != slots_.end()) return &found->second;

  const std::uint64_t needed = want_residual ? std::uint64_t{count} * sizeof(float) : 0;
  if (bytes_held_ + needed > max_bytes_) return nullptr;
  ResidualSlot slot;
  slot.count = count;
  slot.datatype_tag = datatype_tag;
  slot.feeds_back = want_residual;
  bytes_held_ += needed;
  return &slots_.emplace(key, std::move(slot)).first->second;
}

void ResidualStore::forget_communicator(std::uint64_t comm_id) {
  auto it = slots_.lower_bound(ResidualKey{comm_id, nullptr});
  while (it != slots_.end() && it->first.comm_id == comm_id) {
    bytes_held_ -= it->second.held_bytes();
    it = slots_.erase(it);
  }
}

void ResidualStore::abandon_device_memory() {
  for (auto& [key, slot] : slots_) slot.device.abandon();
}

bool WarmupCounter::warming_up(std::uint64_t comm_id, std::size_t count,
                               std::uint64_t datatype_tag) {
  if (steps_ == 0) return false;
  std::uint64_t& calls = calls_[Shape{comm_id, count, datatype_tag}];
  if (calls >= steps_) return false;
  ++calls;
  return true;
}

void WarmupCounter::forget_communicator(std::uint64_t comm_id) {
  auto it = calls_.lower_bound(Shape{comm_id, 0, 0});
  while (it != calls_.end() && it->first.comm_id == comm_id) it = calls_.erase(it);
}

}  // namespace slimreduce
