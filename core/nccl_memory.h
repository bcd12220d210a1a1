// Device memory of the NCCL path: per-(communicator, stream) workspace and
// error-feedback residuals (design invariants 4 and 5). Both grow when a call
// needs more and never shrink, so the steady state allocates nothing. A block
// a captured CUDA graph may still use is never freed before its communicator
// goes: it is retired instead. Pure logic over an allocator interface, so
// tests run it with host memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "core/residuals.h"

namespace slimreduce {

class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;
  // `bytes` of device memory, usable by work enqueued on `stream` from now on
  // (zeroed first when asked); nullptr when there is none.
  virtual void* allocate(std::size_t bytes, void* stream, bool zeroed) = 0;
  // Frees after the work already on `stream`; nullptr: after all device work.
  virtual void release(void* ptr, void* stream) = 0;
};

// One allocation, freed (device-wide) when dropped.
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
  // Frees now, ordered after the work on stream (nullptr: device-wide).
  void release(void* stream);

 private:
  DeviceAllocator* allocator_ = nullptr;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// The scratch of one (communicator, stream): calls on one stream run one
// after another, so they can share it without further ordering.
class Workspace {
 public:
  bool large_enough(std::size_t bytes) const { return block_.bytes() >= bytes; }
  // At least `bytes`, grown (1 MiB steps, 1.5x) if needed; nullptr when out of memory.
  void* ensure(std::size_t bytes, void* stream, DeviceAllocator& allocator);
  void* get() const { return block_.get(); }
  // A graph captured a call that uses this block: keep it alive when growing.
  void mark_captured() { captured_ = true; }
  std::size_t bytes_held() const;

 private:
  DeviceBlock block_;
  bool captured_ = false;
  std::vector<DeviceBlock> retired_;
};

// The same key as the MPI path's residuals (design invariant 5).
using NcclResidualKey = ResidualKey;

struct NcclResidualSlot {
  std::uint64_t count = 0;
  int datatype = -1;
  std::uint64_t calls = 0;  // calls seen for this key, warm-up included
  DeviceBlock residual;     // count floats, or nothing while error feedback is off
  bool captured = false;    // a captured graph uses the residual
};

class NcclResidualStore {
 public:
  enum class Status { ok, over_cap, no_memory, not_now };

  explicit NcclResidualStore(std::uint64_t max_bytes) : max_bytes_(max_bytes) {}

  // The slot of key (reset when count or datatype changed). With
  // want_residual it holds a zeroed residual of count floats, unless that
  // would pass the cap (over_cap: nothing stored, *slot null), allocation is
  // not allowed now (not_now: graph capture) or fails (no_memory).
  Status find_or_create(const NcclResidualKey& key, std::uint64_t count, int datatype,
                        bool want_residual, bool may_allocate, void* stream,
                        DeviceAllocator& allocator, NcclResidualSlot** slot);

  void forget_communicator(std::uint64_t comm_id);
  void clear();
  std::uint64_t bytes_held() const { return bytes_held_; }

 private:
  void retire_or_release(std::uint64_t comm_id, NcclResidualSlot& slot, void* stream);

  std::uint64_t max_bytes_;
  std::uint64_t bytes_held_ = 0;
  std::map<NcclResidualKey, NcclResidualSlot> slots_;
  std::multimap<std::uint64_t, DeviceBlock> retired_;  // by communicator
};

}  // namespace slimreduce
