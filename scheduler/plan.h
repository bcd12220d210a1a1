// A plan: the steps of a batch of reductions, in the order every rank runs
// them (invariant 3 of docs/architecture.md: the same plan from the same calls). A step is one
// algorithm over one reduction's buffers (or, with fusion, a batch's) in the
// phases every algorithm has: compress (host entry points, or a device
// path's kernels), communicate (the transport's collectives), finish. A lone
// call is a plan of one step, as NCCL enqueues a lone collective as a group
// of one. The MPI paths run their plans with run_blocking(); the NCCL group
// path runs each phase over the whole plan with run_phase(), at the points
// scheduler/group_deferral.h gives it (compress and communicate inside the
// real group, finish after it closes): stream-ordered, the work is enqueued,
// and the streams order it. Priorities,
// partitions and pipelining order and split these steps (docs/architecture.md).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "backends/status.h"

namespace slimreduce::scheduler {

class Step {
 public:
  virtual ~Step() = default;
  virtual Status compress() = 0;
  virtual Status communicate() = 0;
  virtual Status finish() = 0;
  // Bytes this rank handed to the transport (once communicate() ran).
  virtual double wire_sent() const = 0;
  // How many of its reductions reran with a wider wire after an overflow
  // (algorithms/rescued_cast_ring.h, algorithms/fused_casts.h).
  virtual std::size_t overflow_rescued() const { return 0; }
  // Whether compress() and finish() are host work alone, never a call into
  // MPI or NCCL, so that a helper thread may run them (scheduler/pipeline.h).
  // False for a hierarchical step, whose phases reduce inside the node.
  virtual bool local_phases() const { return false; }
};

class Plan {
 public:
  void add(std::unique_ptr<Step> step) { steps_.push_back(std::move(step)); }
  std::size_t size() const { return steps_.size(); }
  Step& step(std::size_t index) const { return *steps_[index]; }
  // What the plan's steps handed to the transport, summed in plan order.
  double wire_sent() const;
  // How many of its reductions were rescued from an overflow.
  std::size_t overflow_rescued() const;

 private:
  std::vector<std::unique_ptr<Step>> steps_;
};

enum class Phase { compress, communicate, finish };

// Microseconds on a steady clock: the one clock of phase timings and of the
// timeline's spans (core/runtime/timeline.h), which share a trace.
double now_us();

// One phase of one step, as a run ran it.
struct PhaseRun {
  Phase phase;
  std::size_t step;   // its index in the plan
  std::size_t steps;  // the plan's size
  int lane;           // 0: the caller's thread; 1: the pipeline's helper
  double begin_us;    // now_us() at its start and its end
  double end_us;
};

// Told of each phase a blocking run ran, for the timeline (core/runtime/timeline.h).
// A pipelined run tells it from two threads, one phase at a time per thread.
class PhaseObserver {
 public:
  virtual ~PhaseObserver() = default;
  virtual void phase_ran(const PhaseRun& run) = 0;
};

// Runs one phase of every step, in plan order; the first failure stops it.
// For stream-ordered transports: each step's work is enqueued on its stream,
// so every step's compress kernels, then every step's collectives (NCCL
// enqueues a group's collectives together), then every finishing kernel.
Status run_phase(const Plan& plan, Phase phase);

// One phase of step `index`, timed and told to `observer` (nullptr: nobody)
// as run on `lane`.
Status run_one(const Plan& plan, std::size_t index, Phase phase, PhaseObserver* observer, int lane);

// Runs the plan over blocking transports: each step's three phases, step
// after step in plan order; the first failure stops it (later steps do not
// run, and their buffers are as the caller left them).
Status run_blocking(const Plan& plan);
// The same, telling `observer` (nullptr: nobody) of each phase.
Status run_blocking(const Plan& plan, PhaseObserver* observer);

}  // namespace slimreduce::scheduler
