// SLIMREDUCE_COMPRESSOR=auto on the NCCL path (docs/architecture.md, "The
// measured choice"): the times of the schedule's timed calls and the ranks'
// exchange of them, with no host wait on the way.
//
// A timed call (outside any group and capture: a call alone) is bracketed by
// two CUDA events on the caller's stream. Its time is the least over the
// ranks: the last rank to reach the call waits for no other in the
// collective, so its time is the collective's own, without the arrival skew.
// A window (a probe round, or a check's calls) is closed when its last call
// is decided; then, at the size class's next call alone on every rank:
//  1. the window's events are read (a host wait only where the device has
//     not reached them yet: counted as auto.waits), and this rank's times
//     and residual resets go to the device and into one ncclAllReduce(MIN)
//     of doubles on that call's stream, ahead of its own work (resets
//     negated: the ranks' largest count). The result is copied into pinned
//     memory behind an event;
//  2. at the class's next call alone after that, the copy is read (a wait,
//     counted, only where the device is behind) and handed to the runtime's
//     chooser, which takes effect from that call on, on every rank alike.
// Until then the class's calls take its choice untimed (AutoChooser's
// "awaiting"). Each class holds at most one window and one exchange.
// CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "backends/status.h"
#include "core/runtime/auto_choice.h"

namespace slimreduce {

class NcclAutoTiming {
 public:
  // (communicator id, size class)
  using Key = std::pair<std::uint64_t, std::uint32_t>;

  NcclAutoTiming() = default;
  ~NcclAutoTiming();
  NcclAutoTiming(const NcclAutoTiming&) = delete;
  NcclAutoTiming& operator=(const NcclAutoTiming&) = delete;

  // The device bytes the exchange of the key's window needs (one double per
  // timed call, and the resets).
  std::size_t exchange_bytes(const Key& key) const;

  // A timed call of `key`: its start before its work on `stream`, its stop after.
  Status start(const Key& key, cudaStream_t stream);
  Status stop(const Key& key, cudaStream_t stream);
  // The window's last call was decided (`step`, agree_after); this rank's
  // residual resets in the window.
  void close(const Key& key, const AutoStep& step, double resets);
  // What the class's next call alone brings.
  enum class Due { nothing, exchange, agreement };
  Due due(const Key& key) const;
  // Due::exchange: the window's times and resets into an ncclAllReduce(MIN)
  // on `comm` and `stream`, through `device_buffer` (exchange_bytes); `waits`
  // counts the host waits it made.
  Status exchange(const Key& key, ncclComm_t comm, cudaStream_t stream, void* device_buffer,
                  std::uint64_t* waits);
  // Due::agreement: the exchanged window as AutoChooser::agreed() takes it
  // (each time the ranks' least, then the ranks' largest count of resets),
  // the step that closed it and when the exchange began (for the timeline).
  struct Agreed {
    AutoStep step;
    std::vector<double> window;
    double exchange_begin_us = 0;
  };
  Status agreement(const Key& key, Agreed* agreed, std::uint64_t* waits);
  // A communicator went: its windows are dropped (their events once reached).
  void forget_communicator(std::uint64_t comm_id);

 private:
  struct Event {
    Event() = default;
    ~Event();
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
    cudaEvent_t event = nullptr;
  };
  struct Pinned {
    Pinned() = default;
    ~Pinned();
    Pinned(const Pinned&) = delete;
    Pinned& operator=(const Pinned&) = delete;
    double* values = nullptr;
    std::size_t capacity = 0;
  };
  struct Timed {
    std::unique_ptr<Event> start, stop;
  };
  struct Window {
    std::vector<Timed> calls;
    bool closed = false;
    AutoStep step;
    double resets = 0;
    // The exchange in flight: its values copied back into the class's pinned
    // memory behind `done`.
    std::unique_ptr<Event> done;
    std::size_t values = 0;
    double exchange_begin_us = 0;
  };

  static Status recorded(cudaStream_t stream, std::unique_ptr<Event>* event);
  // The class's pinned memory for its exchanges, kept for the next
  // (cudaFreeHost waits for the whole device); nullptr when none can be made.
  Pinned* pinned_for(const Key& key, std::size_t values);

  mutable std::mutex mutex_;  // guards everything below; never held across a wait
  std::map<Key, Window> windows_;
  std::map<Key, std::unique_ptr<Pinned>> pinned_;
  // A gone communicator's, maybe still in flight; freed with the engine.
  std::vector<Window> retired_;
  std::vector<std::unique_ptr<Pinned>> retired_pinned_;
};

}  // namespace slimreduce
