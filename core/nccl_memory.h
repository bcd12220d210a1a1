// Device memory of the NCCL path: per-(communicator, stream) workspace and
// error-feedback residuals (design invariants 4 and 5). Both grow when a call
// needs more and never shrink, so the steady state allocates nothing. A block
// a captured CUDA graph may still use is never freed before its communicator
// goes: it is retired instead. Nothing is allocated or freed while a stream
// is captured. Pure logic over an allocator interface, so tests run it with
// host memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "core/device_memory.h"
#include "core/residuals.h"

namespace slimreduce {

// Frees blocks that work still queued on `devices` may use (our kernels after
// an aborted communicator's, a compress kernel writing a residual): waits for
// each device first; call it outside any lock. No blocks: no wait. Leaks them
// when it cannot wait. Empties `blocks`.
void release_after_device_wait(std::vector<DeviceBlock>& blocks, const std::vector<int>& devices,
                               DeviceAllocator& allocator);

// The scratch of one (communicator, stream): calls on one stream run one
// after another, so they can share it without further ordering.
class Workspace {
 public:
  bool large_enough(std::size_t bytes) const { return block_.get() && block_.bytes() >= bytes; }
  // At least `bytes`, grown (1 MiB steps, 1.5x) if needed; nullptr when out of
  // memory. Outside capture only. A block a graph captured is retired and a
  // fresh one made: a replay may run on any stream at any time, so eager calls
  // on the capture stream must not share its block.
  void* ensure(std::size_t bytes, void* stream, DeviceAllocator& allocator);
  void* get() const { return block_.get(); }
  // A graph captured a call that uses this block: it stays alive until the
  // communicator goes, and eager calls get another one.
  void mark_captured() { captured_ = true; }
  std::size_t bytes_held() const;
  // Moves every block out (the current one and the retired ones).
  void take_blocks(std::vector<DeviceBlock>& out);

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
  DeviceBlock residual;   // count floats, or nothing while error feedback is off
  bool captured = false;  // a captured graph uses the residual
};

class NcclResidualStore {
 public:
  enum class Status { ok, over_cap, no_memory, not_now };

  explicit NcclResidualStore(std::uint64_t max_bytes) : max_bytes_(max_bytes) {}

  // The slot of key (reset when count or datatype changed). With
  // want_residual it holds a zeroed residual of count floats, unless that
  // would pass the cap (over_cap: nothing stored, *slot null), allocation is
  // not allowed now (not_now: graph capture) or fails (no_memory). Without
  // may_allocate nothing is freed either: a key whose shape changed keeps its
  // old slot and answers not_now.
  Status find_or_create(const NcclResidualKey& key, std::uint64_t count, int datatype,
                        bool want_residual, bool may_allocate, void* stream,
                        DeviceAllocator& allocator, NcclResidualSlot** slot);

  // Forgets the communicator's keys; its blocks (retired ones too) go to
  // `out`, for release_after_device_wait once no plan can use them.
  void take_communicator(std::uint64_t comm_id, std::vector<DeviceBlock>& out);
  // Forgets every key. Residuals a graph captured are retired (kept until
  // their communicator goes); the others go to `out`, to free after a wait.
  void take_all(std::vector<DeviceBlock>& out);
  std::uint64_t bytes_held() const { return bytes_held_; }

 private:
  void retire_or_release(std::uint64_t comm_id, NcclResidualSlot& slot, void* stream);

  std::uint64_t max_bytes_;
  std::uint64_t bytes_held_ = 0;
  std::map<NcclResidualKey, NcclResidualSlot> slots_;
  std::multimap<std::uint64_t, DeviceBlock> retired_;  // by communicator
};

}  // namespace slimreduce
