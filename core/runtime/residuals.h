// Error-feedback residuals and per-key call counts (invariant 5 of docs/architecture.md).
//
// One store for every path (MPI host, MPI device, NCCL). A key is
// (communicator, receive buffer, count, datatype). A key seen again
// with another count or datatype is reset; all of a communicator's keys go
// when it is freed; the residual memory is capped, and a key that would pass
// the cap gets no residual (counted by the caller).
//
// Buffer addresses differ from rank to rank (one rank's heap hands back an
// address another's does not), so whether a key exists is local knowledge:
// nothing here may decide whether a call is compressed. What may decide it
// reads the call's arguments and the calls before it, the same on every
// rank: core/runtime/decision.h, with WarmupCounter.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "core/gpu/device_memory.h"

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
  // A CUDA graph captured a call that uses the device residual: a replay may
  // still use it, so it is retired, not freed, until its communicator goes.
  bool captured = false;
  // The host residual, made zeroed on first use: a key whose residual lives
  // on the GPU never needs it.
  std::vector<float> residual;
  // The device residual (device buffers, MPI or NCCL), made zeroed on first
  // use; freed with the slot, when its key resets or its communicator goes.
  DeviceBlock device;
  // The compressor's own state for this key, kept whether or not error
  // feedback is on: PowerSGD's Q (warm start), a sharded call's owner-side
  // residual (a 1/ranks share of the tensor), made by its algorithm on first
  // use (algorithms/powersgd.h, core/mpi/host_allreduce.cc). Dropped with the
  // slot (a new shape, the communicator freed, a compressor switched).
  std::vector<float> compressor_state;
  // The same state where a stream-ordered path keeps it on the device (the
  // NCCL path's PowerSGD Q), made by that path; freed with the slot. Small
  // (cols x rank floats), not counted against the cap.
  DeviceBlock device_state;
  // How much of compressor_state the store counts against the cap: while the
  // key feeds back error, what the algorithm made, once the call that made it
  // is over (ResidualStore::count_state); without error feedback, nothing.
  std::size_t state_floats_counted = 0;
  // SLIMREDUCE_COMPRESSOR=auto on the NCCL side: the candidate whose
  // owner-side residual the device residual's tail holds (-1: none yet, the
  // tail zero). Another sharded candidate's layout differs: it starts from zero.
  int owner_side_of = -1;
  // SLIMREDUCE_HIERARCHICAL=auto on the MPI side: whether compressor_state
  // was last laid out for a two-level call (-1: not yet). A sharded call's
  // owner-side residual covers other values flat (the tensor's 1/ranks) than
  // two-level (a shard's 1/nodes), even where the sizes match: a call of the
  // other layout zeroes it (its size kept, as counted against the cap).
  // PowerSGD has no two-level twin, so its Q never meets another layout.
  int state_two_level = -1;
  void keep_state_for(bool two_level) {
    const int now = two_level ? 1 : 0;
    if (state_two_level >= 0 && state_two_level != now)
      compressor_state.assign(compressor_state.size(), 0.0f);
    state_two_level = now;
  }

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
  std::uint64_t held_bytes() const {
    return feeds_back ? (std::uint64_t{count} + state_floats_counted) * sizeof(float) : 0;
  }
  // The key's state changed size since the store last counted it.
  bool state_uncounted() const {
    return feeds_back && compressor_state.size() != state_floats_counted;
  }
  // Its communicator's use count (ResidualStore) at the key's last call.
  std::uint64_t last_use = 0;
  // Made by a stream-ordered path (find_on_device): work of ours queued on
  // the device may still use its memory, so an eviction frees it in the
  // order of the stream of its key's last call, as a reset frees it.
  bool stream_ordered = false;
  void* last_stream = nullptr;
  // Memory is held for it (what a key reset during graph capture may not free).
  bool holds_memory() const { return !residual.empty() || device.get() || device_state.get(); }
};

// The one residual store of the process (core/runtime/runtime.h owns it), for every
// path: the MPI paths' host and device residuals and the NCCL path's device
// ones, under one cap.
class ResidualStore {
 public:
  enum class Found { ok, over_cap, not_now, no_memory };

  // evict_after: a key unused for that many of its communicator's calls
  // (compressed calls that looked a key up, graph captures not counted) is
  // freed (SLIMREDUCE_EF_EVICT_CALLS; 0: never).
  explicit ResidualStore(std::uint64_t max_bytes, std::uint64_t evict_after = 0)
      : max_bytes_(max_bytes), evict_after_(evict_after) {}
  ResidualStore(ResidualStore&&) = default;
  ResidualStore& operator=(ResidualStore&&) = default;

  // The slot for this key, reset if its shape changed. With want_residual the
  // slot feeds back error (count floats held, zeroed: see host_residual()),
  // unless that would pass the cap: then nullptr, and nothing is stored.
  ResidualSlot* find_or_create(const ResidualKey& key, std::size_t count,
                               std::uint64_t datatype_tag, bool want_residual);
  // The slot for this key as it is, or nullptr when there is none of this
  // shape (nothing is made or reset): a call that sends no compressed bytes
  // (auto's `none`) hands on what the key carries, if anything.
  ResidualSlot* find_existing(const ResidualKey& key, std::size_t count,
                              std::uint64_t datatype_tag);
  // The same for a stream-ordered path (NCCL), the device residual made at
  // once on `stream`. Without may_allocate (graph capture) nothing is made
  // or freed: a new key, or a key whose shape changed, answers not_now (a
  // key without memory may still reset). no_memory: the device had none;
  // the slot then does not feed back.
  Found find_on_device(const ResidualKey& key, std::size_t count, std::uint64_t datatype_tag,
                       bool want_residual, bool may_allocate, void* stream,
                       DeviceAllocator& allocator, ResidualSlot** slot);

  // Counts the key's compressor state (what its last call made: an
  // owner-side residual, PowerSGD's Q) against the cap, while it feeds back
  // error. Counted after the call that made it, outside whose lock it was
  // made: a key may pass the cap by its own state once; the next new key
  // then finds no room.
  void count_state(const ResidualKey& key);
  // Forgets the communicator's keys and frees their memory at once (the MPI
  // paths are synchronous: no work of ours still uses it).
  void forget_communicator(std::uint64_t comm_id);
  // Forgets the communicator's keys; their device blocks (retired ones too)
  // go to `out`, to free once nothing queued can use them
  // (release_after_device_wait).
  void take_communicator(std::uint64_t comm_id, std::vector<DeviceBlock>& out);
  // Forgets every key. Residuals a graph captured are retired (kept until
  // their communicator goes); the other device blocks go to `out`.
  void take_all(std::vector<DeviceBlock>& out);
  // Leaves every slot's device memory unfreed: at exit, when the CUDA
  // runtime may already be gone (a leak beats a crash of a finished job).
  void abandon_device_memory();
  std::uint64_t bytes_held() const { return bytes_held_; }
  // How many times a key came back with another shape and lost its residual.
  std::uint64_t resets() const { return resets_; }
  // How many lookups found their key with another shape, whatever it held (a
  // fusion buffer whose make-up changes: SLIMREDUCE_COMPRESSOR=auto leaves the
  // candidates that keep a residual out where most calls do).
  std::uint64_t shape_changes() const { return shape_changes_; }
  // How many keys went unused for SLIMREDUCE_EF_EVICT_CALLS calls and were freed.
  std::uint64_t evicted() const { return evicted_; }

 private:
  using Slots = std::map<ResidualKey, ResidualSlot>;
  // Drops a slot whose shape changed: a captured device residual is retired
  // (still held), anything else freed after the work on `stream`.
  Slots::iterator reset(Slots::iterator slot, void* stream);

  // Counts a call on the communicator and, every quarter of evict_after_
  // calls, frees its keys not used by any of its last evict_after_ calls (so
  // a key lives at most about 1.25 evict_after_ calls unused); the call's number.
  std::uint64_t note_use(std::uint64_t comm_id);
  void evict_unused(std::uint64_t comm_id, std::uint64_t now);

  std::uint64_t max_bytes_;
  std::uint64_t evict_after_;
  std::uint64_t bytes_held_ = 0;
  std::uint64_t resets_ = 0;
  std::uint64_t shape_changes_ = 0;
  std::uint64_t evicted_ = 0;
  // Per communicator: the calls that looked up a key (one numbering per
  // communicator, the same on every rank: every rank makes its calls in order).
  std::map<std::uint64_t, std::uint64_t> uses_;
  Slots slots_;
  std::multimap<std::uint64_t, DeviceBlock> retired_;  // by communicator, still held
};

// SLIMREDUCE_WARMUP_STEPS: the first N calls of each shape (communicator,
// count, datatype) go uncompressed. Counted by shape, not by buffer, so that
// every rank ends its warm-up at the same call. The same count numbers each
// shape's calls (0 first), from which stochastic rounding draws
// (kernels/rounding.h): the same number on every rank. Nothing is counted
// (no lookup on the hot path, no entry per shape) unless a warm-up is set or
// `numbers_calls` asks for the numbers.
class WarmupCounter {
 public:
  explicit WarmupCounter(std::uint64_t steps, bool numbers_calls = false)
      : steps_(steps), numbers_calls_(numbers_calls) {}
  // Counts the call; true while its shape is still warming up. `number`
  // (nullptr: not asked): the call's number among its shape's calls, where
  // calls are numbered (else left as it is).
  bool warming_up(std::uint64_t comm_id, std::size_t count, std::uint64_t datatype_tag,
                  std::uint64_t* number = nullptr);
  void forget_communicator(std::uint64_t comm_id);

 private:
  struct Shape {
    std::uint64_t comm_id;
    std::size_t count;
    std::uint64_t datatype_tag;
    auto operator<=>(const Shape&) const = default;
  };
  std::uint64_t steps_;
  bool numbers_calls_;
  std::map<Shape, std::uint64_t> calls_;
};

}  // namespace slimreduce
