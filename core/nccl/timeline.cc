#include "core/nccl/timeline.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>

#include "core/gpu/cuda_support.h"
#include "core/runtime/decision.h"

namespace slimreduce {
namespace {

constexpr int kMarks = 4;  // before compress, before the collectives, after the group, after finish
constexpr int kPairedMarks = 6;  // each phase's start and end, a pipelined piece's
constexpr const char* kSpans[kMarks - 1] = {"COMPRESS", "COMMUNICATE", "DECOMPRESS"};
constexpr int kFirstLane = 2;  // after the caller's (0) and the pipeline helper's (1)
constexpr double kDrainSeconds = 5;

}  // namespace

std::vector<TimedStream> timed_streams(const GroupPlan& plan) {
  struct Tally {
    cudaStream_t stream;
    int device;
    const CallPlan* first;  // its first compressed call, whose compressor names the spans
    std::uint64_t count = 0, bytes = 0;
    std::size_t calls = 0;
    bool after_group = false;
  };
  std::vector<Tally> tallies;
  for (const CallPlan& p : plan.calls) {
    if (!p.compressed) continue;
    const auto stream = static_cast<cudaStream_t>(p.call.stream);
    auto it = std::find_if(tallies.begin(), tallies.end(),
                           [&](const Tally& t) { return t.stream == stream; });
    if (it == tallies.end()) {
      if (is_capturing(stream)) continue;
      it = tallies.insert(tallies.end(), Tally{stream, p.comm->device, &p});
    }
    it->count += p.call.count;
    it->bytes += p.call.count * nccl_type_bytes(p.call.datatype);
    if (p.piece.index == 0) ++it->calls;  // a cut call's pieces are one call
    it->after_group = it->after_group || p.hierarchical ||
                      p.call.verdict.path == ReductionPath::low_rank ||
                      p.call.verdict.path == ReductionPath::sharded;
  }
  std::vector<TimedStream> streams;
  for (const Tally& t : tallies) {
    streams.push_back({t.stream, t.device,
                       span_args(*t.first->compressor, t.count, t.calls, t.bytes) +
                           ", \"memory\": \"device\", \"path\": \"nccl\"" +
                           auto_span_args(t.first->auto_step) +
                           (t.after_group ? ", \"after_group\": true" : "")});
  }
  return streams;
}

std::string piece_args(const GroupPlan& plan, std::size_t piece) {
  const CallPlan& p = plan.calls[piece];  // compressed: only such calls are pipelined
  return span_args(*p.compressor, p.call.count, 1,
                   p.call.count * nccl_type_bytes(p.call.datatype)) +
         ", \"memory\": \"device\", \"path\": \"nccl\", \"partition\": " +
         std::to_string(p.piece.index) + ", \"partitions\": " + std::to_string(p.piece.of) +
         ", \"pipelined\": true";
}

NcclTimeline::~NcclTimeline() {
  for (Group& group : pending_) {
    for (Group::Stream& s : group.streams_) {
      for (cudaEvent_t event : s.events) cudaEventDestroy(event);
    }
  }
  for (auto& [device, anchor] : anchors_) cudaEventDestroy(anchor.event);
  for (auto& [device, events] : spare_) {
    for (cudaEvent_t event : events) cudaEventDestroy(event);
  }
}

cudaEvent_t NcclTimeline::take_event(int device) {
  std::vector<cudaEvent_t>& spare = spare_[device];
  if (!spare.empty()) {
    cudaEvent_t event = spare.back();
    spare.pop_back();
    return event;
  }
  cudaEvent_t made = nullptr;
  if (cudaEventCreate(&made) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return made;
}

void NcclTimeline::give_back(cudaEvent_t event, int device) { spare_[device].push_back(event); }

NcclTimeline::Anchor* NcclTimeline::anchor_of(const Group::Stream& s) {
  auto found = anchors_.find(s.device);
  if (found != anchors_.end()) return &found->second;
  cudaEvent_t event = take_event(s.device);
  if (!event) return nullptr;
  // Once per device: the GPU's clock tied to the host's.
  if (cudaEventRecord(event, s.stream) != cudaSuccess ||
      cudaEventSynchronize(event) != cudaSuccess) {
    cudaGetLastError();
    cudaEventDestroy(event);
    return nullptr;
  }
  return &(anchors_[s.device] = Anchor{event, Timeline::now_us()});
}

void NcclTimeline::Group::add(cudaStream_t stream, int device, std::string args) {
  Stream& s = streams_.emplace_back(Stream{stream, device, std::move(args), {}, {}, false});
  std::lock_guard lock(owner_->mutex_);
  DeviceGuard guard(device);
  if (!guard.ok() || !owner_->anchor_of(s)) s.failed = true;
}

void NcclTimeline::Group::mark() {
  std::lock_guard lock(owner_->mutex_);
  for (Stream& s : streams_) record(s, s.stream);
}

void NcclTimeline::Group::mark_on(cudaStream_t on) {
  std::lock_guard lock(owner_->mutex_);
  for (Stream& s : streams_) record(s, on);
}

// Under the owner's mutex_.
void NcclTimeline::Group::record(Stream& s, cudaStream_t on) {
  if (s.failed) return;
  DeviceGuard guard(s.device);
  cudaEvent_t event = guard.ok() ? owner_->take_event(s.device) : nullptr;
  if (!event || cudaEventRecord(event, on) != cudaSuccess) {
    cudaGetLastError();
    if (event) owner_->give_back(event, s.device);
    s.failed = true;
    return;
  }
  s.events.push_back(event);
  s.on.push_back(on);
}

int NcclTimeline::lane_of(cudaStream_t stream) {
  auto [found, added] = lanes_.try_emplace(stream, kFirstLane + static_cast<int>(lanes_.size()));
  return found->second;
}

bool NcclTimeline::write_front(bool wait) {
  Group& group = pending_.front();
  const std::size_t marks = group.paired_ ? kPairedMarks : kMarks;
  for (Group::Stream& s : group.streams_) {
    if (s.failed || s.events.size() != marks) continue;
    const cudaError_t reached =
        wait ? cudaEventSynchronize(s.events.back()) : cudaEventQuery(s.events.back());
    if (reached == cudaErrorNotReady) return false;
    if (reached != cudaSuccess) {
      cudaGetLastError();
      s.failed = true;
    }
  }
  for (Group::Stream& s : group.streams_) {
    const auto anchor = anchors_.find(s.device);
    float ms[kPairedMarks] = {};
    bool timed = !s.failed && s.events.size() == marks && anchor != anchors_.end();
    for (std::size_t i = 0; timed && i < marks; ++i)
      timed = cudaEventElapsedTime(&ms[i], anchor->second.event, s.events[i]) == cudaSuccess;
    if (!timed) cudaGetLastError();
    for (int i = 0; timed && i + 1 < kMarks; ++i) {
      // Paired: span i from mark 2i to 2i + 1, on its stream's lane.
      const int from = group.paired_ ? 2 * i : i;
      const double host_us = anchor->second.host_us;
      timeline_.span(kSpans[i], host_us + 1000.0 * ms[from], host_us + 1000.0 * ms[from + 1],
                     s.args, lane_of(group.paired_ ? s.on[from] : s.stream));
    }
    for (cudaEvent_t event : s.events) give_back(event, s.device);
  }
  pending_.pop_front();
  return true;
}

void NcclTimeline::submit(Group group) {
  std::lock_guard lock(mutex_);
  if (!group.empty()) pending_.push_back(std::move(group));
  while (!pending_.empty() && write_front(pending_.size() > kPending)) {
  }
}

void NcclTimeline::drain() {
  std::lock_guard lock(mutex_);
  // Polled, not waited for: work that never ends (a communicator aborted
  // under it) must not hold up the exit. What is not done in time is dropped.
  const double deadline_us = Timeline::now_us() + kDrainSeconds * 1e6;
  while (!pending_.empty()) {
    if (write_front(false)) continue;
    if (Timeline::now_us() > deadline_us) {
      for (Group::Stream& s : pending_.front().streams_) s.failed = true;
      continue;  // written as nothing, its events given back
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace slimreduce
