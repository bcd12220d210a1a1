// Error-feedback residuals and per-key call counts (design invariant 5).
//
// A key is (communicator, receive buffer, count, datatype). A key seen again
// with another count or datatype is reset; all of a communicator's keys go
// when it is freed; the residual memory is capped, and a key that would pass
// the cap gets no residual (counted by the caller).
//
// Buffer addresses differ from rank to rank (one rank's heap hands back an
// address another's does not), so whether a key exists is local knowledge:
// nothing here may decide whether a call is compressed. What may decide it
// reads the call's arguments and the calls before it, the same on every
// rank: core/decision.h, with WarmupCounter.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "core/device_memory.h"

namespace slimreduce {

struct ResidualKey {
  std::uint64_t comm_id;
  const void* buffer;
  bool operator<(const ResidualKey& other) const {
    return comm_id != other.comm_id ? comm_id < other.comm_id : buffer < other.buffer;
  }
};

struct ResidualSlot {
  std::size_t count = 0;
  std::uint64_t datatype_tag = 0;
  // Error feedback is on for this key: count floats are held for it, counted
  // against the cap, on the host or (device buffers) on the GPU.
  bool feeds_back = false;
  // The host residual, made zeroed on first use: a key whose residual lives
  // on the GPU never needs it.
  std::vector<float> residual;
  // The device residual (the MPI path's device buffers), made zeroed on first
  // use; freed with the slot, when its key resets or its communicator goes.
  DeviceBlock device;

  // The host residual, or nullptr when error feedback is off.
  float* host_residual() {
    if (feeds_back && residual.empty()) residual.assign(count, 0.0f);
    return residual.empty() ? nullptr : residual.data();
  }
  // The device residual, zeroed by work on `stream` when made; nullptr when
  // error feedback is off or no device memory could be had.
  float* device_residual(DeviceAllocator& allocator, void* stream) {
    if (!feeds_back) return nullptr;
    if (!device.get()) {
      const std::size_t bytes = count * sizeof(float);
      if (void* made = allocator.allocate(bytes, stream, true)) {
        device = DeviceBlock(&allocator, made, bytes);
      }
    }
    return static_cast<float*>(device.get());
  }
  std::uint64_t held_bytes() const { return feeds_back ? std::uint64_t{count} * sizeof(float) : 0; }
};

class ResidualStore {
 public:
  explicit ResidualStore(std::uint64_t max_bytes) : max_bytes_(max_bytes) {}

  // The slot for this key, reset if its shape changed. With want_residual the
  // slot feeds back error (count floats held, zeroed: see host_residual()),
  // unless that would pass the cap: then nullptr, and nothing is stored.
  ResidualSlot* find_or_create(const ResidualKey& key, std::size_t count,
                               std::uint64_t datatype_tag, bool want_residual);

  void forget_communicator(std::uint64_t comm_id);
  // Leaves every slot's device memory unfreed: at exit, when the CUDA
  // runtime may already be gone (a leak beats a crash of a finished job).
  void abandon_device_memory();
  std::uint64_t bytes_held() const { return bytes_held_; }
  // How many times a key came back with another shape and lost its residual.
  std::uint64_t resets() const { return resets_; }

 private:
  std::uint64_t max_bytes_;
  std::uint64_t bytes_held_ = 0;
  std::uint64_t resets_ = 0;
  std::map<ResidualKey, ResidualSlot> slots_;
};

// SLIMREDUCE_WARMUP_STEPS: the first N calls of each shape (communicator,
// count, datatype) go uncompressed. Counted by shape, not by buffer, so that
// every rank ends its warm-up at the same call.
class WarmupCounter {
 public:
  explicit WarmupCounter(std::uint64_t steps) : steps_(steps) {}
  // Counts the call; true while its shape is still warming up.
  bool warming_up(std::uint64_t comm_id, std::size_t count, std::uint64_t datatype_tag);
  void forget_communicator(std::uint64_t comm_id);

 private:
  struct Shape {
    std::uint64_t comm_id;
    std::size_t count;
    std::uint64_t datatype_tag;
    auto operator<=>(const Shape&) const = default;
  };
  std::uint64_t steps_;
  std::map<Shape, std::uint64_t> calls_;
};

}  // namespace slimreduce
