// SLIMREDUCE_TIMELINE on the NCCL path (docs/architecture.md, "Timeline"):
// there a group's phases only enqueue work, so its spans come from CUDA
// events recorded on each stream at the phase boundaries: before the compress
// kernels, before the group's collectives, after the real group ended, and
// after the finishing kernels. COMPRESS, COMMUNICATE and DECOMPRESS are the
// stretches between them as the GPU ran them; DECOMPRESS holds what a step
// runs after the group (PowerSGD's and int8's later collectives, the
// hierarchical step's cross-node ones too: "after_group": true says so).
// One span of each per group and stream, over its compressed calls.
//
// No host wait in steady state: the spans of a group are written once its last
// event has been reached, which later groups ask without waiting
// (cudaEventQuery), and at the end (before the timeline's file closes; polled
// for at most a few seconds, so that work that never ends cannot hold up the exit). The GPU's
// clock is tied to the host's once per device: the first timed group waits
// for one event (its stream's work so far), reads the host clock, and every
// span after is placed from that event by cudaEventElapsedTime. A stream being
// captured into a CUDA graph is not timed (an event there would be a graph node).
// At most kPending groups wait to be written; past that the oldest is waited
// for. CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/nccl/plan.h"
#include "core/runtime/timeline.h"

namespace slimreduce {

// A stream of a planned group's compressed calls, to be timed: not one being
// captured into a graph (an event there would be a node of it). args: its
// spans' (compressor, values, bytes and calls on it; "after_group" where a
// step runs collectives after the group's end: PowerSGD, int8, hierarchical).
struct TimedStream {
  cudaStream_t stream;
  int device;
  std::string args;
};
// In the order of each stream's first compressed call.
std::vector<TimedStream> timed_streams(const GroupPlan& plan);
// The spans' args of piece `piece` of a pipelined call (GroupPlan::side):
// its compressor, values and bytes, and "partition", "partitions".
std::string piece_args(const GroupPlan& plan, std::size_t piece);

class NcclTimeline {
 public:
  explicit NcclTimeline(Timeline& timeline) : timeline_(timeline) {}
  ~NcclTimeline();  // events destroyed, spans not written are dropped
  NcclTimeline(const NcclTimeline&) = delete;
  NcclTimeline& operator=(const NcclTimeline&) = delete;

  // One group's marks on each timed stream.
  class Group {
   public:
    // A stream with compressed calls in the group: `args`, the spans' (a JSON
    // object's members). Before its compress kernels are enqueued.
    void add(cudaStream_t stream, int device, std::string args);
    // The next boundary, on every stream added (four in all).
    void mark();
    // A piece of a pipelined call (a group started with paired marks, one
    // stream added): each phase's start, then its end, recorded on the
    // stream `on` it runs on; six in all, each span on the lane of its stream.
    void mark_on(cudaStream_t on);
    bool empty() const { return streams_.empty(); }
    NcclTimeline& owner() const { return *owner_; }

   private:
    friend class NcclTimeline;
    struct Stream {
      cudaStream_t stream;
      int device;
      std::string args;
      std::vector<cudaEvent_t> events;  // the boundaries reached so far
      std::vector<cudaStream_t> on;     // the stream each was recorded on
      bool failed = false;              // an event could not be made or recorded
    };
    Group(NcclTimeline& owner, bool paired) : owner_(&owner), paired_(paired) {}
    void record(Stream& s, cudaStream_t on);
    NcclTimeline* owner_;
    bool paired_;  // spans from pairs of marks (mark_on), not from consecutive ones
    std::vector<Stream> streams_;
  };

  Group start() { return Group(*this, false); }
  // A piece of a pipelined call: marked with mark_on().
  Group start_piece() { return Group(*this, true); }
  // A group whose four marks were made: written once the GPU has reached
  // them. Also writes the spans of earlier groups that are done by now.
  void submit(Group group);
  // Before the timeline's file closes: polls every group's events for up to
  // a few seconds and writes their spans; a group not done by then is dropped.
  void drain();

 private:
  static constexpr std::size_t kPending = 1024;
  struct Anchor {
    cudaEvent_t event = nullptr;
    double host_us = 0;  // the host clock when the GPU had reached it
  };
  cudaEvent_t take_event(int device);             // under mutex_
  void give_back(cudaEvent_t event, int device);  // under mutex_
  Anchor* anchor_of(const Group::Stream& s);      // under mutex_
  // Writes the front group if the GPU reached its events (or `wait`); false: not yet.
  bool write_front(bool wait);       // under mutex_
  int lane_of(cudaStream_t stream);  // under mutex_

  Timeline& timeline_;
  std::mutex mutex_;
  std::deque<Group> pending_;
  std::map<int, Anchor> anchors_;                  // per device
  std::map<int, std::vector<cudaEvent_t>> spare_;  // per device
  std::map<cudaStream_t, int> lanes_;              // each stream a row of its own in the trace
};

}  // namespace slimreduce
