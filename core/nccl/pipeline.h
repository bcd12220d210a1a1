// Pipelining on the NCCL path (docs/architecture.md, "Partitions and
// pipelining"): a call outside any group, cut into pieces, runs its pieces'
// compress and finish kernels on a side stream of ours while their
// collectives stay on the caller's stream, each piece's in a launch of its
// own (an NCCL group runs its collectives as one launch, which would wait
// for every piece's compress). CUDA events order the two streams
// (scheduler/stream_pipeline.h gives the order), so the caller's stream, as
// the caller sees it, still runs the whole call after what it held before
// and before what it gets next. CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <vector>

#include "scheduler/stream_pipeline.h"

namespace slimreduce {

// A side stream and the events that tie it to one caller's stream: one per
// (communicator, stream), made at its first pipelined call (never during
// capture) and kept with the communicator.
class SideStream {
 public:
  SideStream() = default;
  ~SideStream();
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;

  // Made on the current device if not yet; false: could not be (the call
  // then runs unpipelined, with the same bits).
  bool ready();
  cudaStream_t stream() const { return side_; }

  enum Event { fork, compressed, communicated, join, kEvents };
  cudaEvent_t event(Event which) const { return events_[which]; }

 private:
  void release();
  cudaStream_t side_ = nullptr;
  cudaEvent_t events_[kEvents] = {};
  bool failed_ = false;  // tried once and could not: never again
};

// The handoff over a SideStream for one pipelined call: the real group
// around each piece's collectives through `group_start` and `group_end`
// (ncclResult_t values), and the timeline's marks through `mark` (on the
// stream the phase runs on), when timed.
class NcclHandoff final : public scheduler::StreamHandoff {
 public:
  // Before and after each phase of step `step` is enqueued, on the stream `on` it runs on.
  using Mark = std::function<void(std::size_t step, cudaStream_t on)>;
  NcclHandoff(cudaStream_t caller, SideStream& side, std::function<int()> group_start,
              std::function<int()> group_end, Mark mark)
      : caller_(caller),
        side_(side),
        group_start_(std::move(group_start)),
        group_end_(std::move(group_end)),
        mark_(std::move(mark)) {}

  Status fork() override { return tie(SideStream::fork, caller_, side_.stream()); }
  Status compressed() override;
  Status wait_compressed() override;
  Status communicated() override { return tie(SideStream::communicated, caller_, side_.stream()); }
  Status join() override { return tie(SideStream::join, side_.stream(), caller_); }
  Status open_collectives() override;
  Status close_collectives() override;
  void mark(std::size_t step, scheduler::Phase phase, bool end) override;

 private:
  // `waiter` waits for `recorded` as it is now, through `which`.
  Status tie(SideStream::Event which, cudaStream_t recorded, cudaStream_t waiter);

  cudaStream_t caller_;
  SideStream& side_;
  std::function<int()> group_start_, group_end_;
  Mark mark_;
};

}  // namespace slimreduce
