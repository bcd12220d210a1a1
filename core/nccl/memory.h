// Device memory of the NCCL path: per-(communicator, stream) workspace
// (invariant 4 of docs/architecture.md; its residuals are in the one store,
// core/runtime/residuals.h). It grows when a call needs more and never shrinks, so the steady state
// allocates nothing. A block a captured CUDA graph may still use is never
// freed before its communicator goes: it is retired instead. Nothing is
// allocated or freed while a stream is captured. Pure logic over an allocator
// interface, so tests run it with host memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "core/gpu/device_memory.h"

namespace slimreduce {

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

}  // namespace slimreduce
