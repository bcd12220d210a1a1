// Pipelining over two streams (the GPU path's; docs/architecture.md,
// "Partitions and pipelining"): a call cut into pieces whose compress and
// finish kernels go on a side stream while their collectives stay on the
// caller's stream, so that piece i + 1 is compressed and piece i - 1 decoded
// while piece i is on the wire. Only the order is here: the streams, their
// events and the real group around each piece's collectives are behind
// StreamHandoff, so tests drive it with fakes. Each piece has its own
// buffers and its phases keep their order (the events see to it), so the
// results are the bits of the same pieces run on the caller's stream alone.
#pragma once

#include <cstddef>

#include "scheduler/plan.h"

namespace slimreduce::scheduler {

// What orders the two streams. Each call returns the first failure it met.
class StreamHandoff {
 public:
  virtual ~StreamHandoff() = default;
  // The side stream waits for the caller's stream as it is now.
  virtual Status fork() = 0;
  // Marks the side stream as it is now (after a step's compress was enqueued).
  virtual Status compressed() = 0;
  // The caller's stream waits for the side stream's last mark.
  virtual Status wait_compressed() = 0;
  // The side stream waits for the caller's stream as it is now (after a step's collectives).
  virtual Status communicated() = 0;
  // The caller's stream waits for everything on the side stream: last, always.
  virtual Status join() = 0;
  // Around one step's collectives: a launch of their own (NCCL's group).
  virtual Status open_collectives() = 0;
  virtual Status close_collectives() = 0;
  // Before (end false) and after (end true) a phase of step `step` is
  // enqueued, on the stream it runs on: the timeline's marks.
  virtual void mark(std::size_t step, Phase phase, bool end) = 0;
};

// Runs the plan's steps over two streams (their compress and finish enqueue on
// the side stream, their collectives on the caller's), in this order:
//   fork; compress 0; for each i: compress i + 1, collectives i, finish i;
// each collective waiting for its compress, each finish for its collective.
// The first failure stops it; the side stream is joined whatever happened.
Status run_on_two_streams(const Plan& plan, StreamHandoff& handoff);

}  // namespace slimreduce::scheduler
