// A flush of a communicator's queued MPI_Iallreduce calls (docs/architecture.md,
// "Fusion"): agree with the other ranks how many queued calls all of them
// hold (a MIN over the queue lengths), order them (scheduler/order.h), cut
// them into fused buffers of at most SLIMREDUCE_PARTITION_BYTES, agree how
// many buffers the waits in progress need (a MAX), run those, and leave the
// rest at the queue's front for a later flush. core/mpi/engine_queue.cc queues
// the calls and reduces each buffer.
#include <algorithm>
#include <unordered_set>

#include "backends/mpi_backend.h"
#include "core/mpi/engine.h"
#include "core/runtime/log.h"
#include "core/runtime/timeline.h"
#include "fusion/layout.h"
#include "scheduler/order.h"

namespace slimreduce {
namespace {

// Consecutive queued calls that one collective can carry (the one planner,
// fusion/layout.h, with the flush's rule): the same compressor, at most
// `threshold` bytes (a larger call alone); a compressor that cannot fuse
// (sharded) runs each call alone.
std::vector<std::vector<QueuedReduction>> batches_of(const std::vector<QueuedReduction>& taken,
                                                     std::uint64_t threshold) {
  fusion::Layout<const compressors::Compressor*> layout(
      fusion::BatchRule{.adjacent = true, .max_size = threshold, .placed = fusion::as_given});
  for (const QueuedReduction& reduction : taken) {
    const compressors::Compressor* compressor = reduction.decision.compressor.get();
    layout.add(compressor, reduction.bytes(), !compressors::fusable(*compressor));
  }
  std::vector<std::vector<QueuedReduction>> batches(layout.batches());
  for (int b = 0; b < layout.batches(); ++b) {
    for (int member : layout.members(b)) batches[b].push_back(taken[member]);
  }
  return batches;
}

// The calls a flush left for later, back at the queue's front in call order
// (`taken`'s), so that the next flush orders them as this one did.
void put_back(const std::vector<QueuedReduction>& taken, const std::vector<QueuedReduction>& left,
              ReductionQueue& queue) {
  if (left.empty()) return;
  std::unordered_set<MPI_Request> later;
  for (const QueuedReduction& r : left) later.insert(r.request);
  std::vector<QueuedReduction> in_call_order;
  for (const QueuedReduction& r : taken) {
    if (!later.count(r.request)) continue;
    in_call_order.push_back(r);
    queue.bytes += r.bytes();
  }
  queue.pending.insert(queue.pending.begin(), in_call_order.begin(), in_call_order.end());
}

// Whether the batch holds one of the awaited requests.
bool holds_any(const std::vector<QueuedReduction>& batch, const MPI_Request* requests, int count) {
  for (const QueuedReduction& r : batch) {
    if (std::find(requests, requests + count, r.request) != requests + count) return true;
  }
  return false;
}

}  // namespace

int Engine::flush(CommState& state) { return flush(state, Awaited{}); }

int Engine::flush(CommState& state, const Awaited& awaited) {
  ReductionQueue& queue = state.queue();
  std::lock_guard lock(queue.mutex);
  if (queue.pending.empty()) return MPI_SUCCESS;
  MPI_Comm wire_comm = MPI_COMM_NULL;
  if (const int rc = state.private_comm(&wire_comm)) return rc;
  // The calls every rank has queued: ranks may reach their waits at other points.
  unsigned long long mine = queue.pending.size(), agreed = 0;
  int rc = PMPI_Allreduce(&mine, &agreed, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, wire_comm);
  if (rc != MPI_SUCCESS) agreed = mine;  // no agreement: every queued call fails
  std::vector<QueuedReduction> taken(queue.pending.begin(), queue.pending.begin() + agreed);
  queue.pending.erase(queue.pending.begin(), queue.pending.begin() + agreed);
  for (const QueuedReduction& reduction : taken) queue.bytes -= reduction.bytes();
  if (rc != MPI_SUCCESS) {
    complete(taken, rc);
    return rc;
  }
  std::vector<QueuedReduction> left;
  rc = reduce_in_order(state, wire_comm, ordered(taken), awaited, &left);
  put_back(taken, left, queue);
  return rc;
}

// The taken calls in the order the settings and the priorities give (scheduler/order.h).
std::vector<QueuedReduction> Engine::ordered(const std::vector<QueuedReduction>& taken) const {
  std::vector<int> priorities;
  for (const QueuedReduction& reduction : taken) priorities.push_back(reduction.priority);
  const auto order = runtime_.settings().priority == Priority::reverse
                         ? scheduler::CallOrder::reverse
                         : scheduler::CallOrder::fifo;
  std::vector<QueuedReduction> in_order;
  for (std::size_t index : scheduler::flush_order(priorities, order))
    in_order.push_back(taken[index]);
  return in_order;
}

std::size_t Engine::buffers_to_run(MPI_Comm wire_comm,
                                   const std::vector<std::vector<QueuedReduction>>& batches,
                                   const Awaited& awaited) const {
  // Every rank holds the same buffers, so every rank takes this branch alike.
  if (batches.size() < 2) return batches.size();
  unsigned long long need = batches.size();
  if (awaited.requests) {
    // A wait for one: up to the first buffer holding one; otherwise the last.
    std::size_t first = batches.size(), last = 0;
    for (std::size_t b = 0; b < batches.size(); ++b) {
      if (!holds_any(batches[b], awaited.requests, awaited.count)) continue;
      first = std::min(first, b);
      last = b;
    }
    if (first < batches.size()) need = (awaited.until == Until::one_done ? first : last) + 1;
  }
  unsigned long long agreed = need;
  if (PMPI_Allreduce(&need, &agreed, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, wire_comm) !=
      MPI_SUCCESS) {
    return batches.size();  // no agreement: all of them, whose collectives report the error
  }
  return static_cast<std::size_t>(std::min<unsigned long long>(agreed, batches.size()));
}

// Batch after batch; each batch's requests complete as soon as it ran, so a
// wait for one of the first (a first layer, in reverse order) returns early.
int Engine::reduce_in_order(CommState& state, MPI_Comm wire_comm,
                            const std::vector<QueuedReduction>& taken, const Awaited& awaited,
                            std::vector<QueuedReduction>* left) {
  // Fused buffers of at most a partition (a larger call alone), one after
  // another: a buffer of the whole threshold streams through memory three
  // times (compress, ring, decode), and measured 19% slower than unfused
  // calls over shared memory at 64 MiB; 4 MiB ones were level.
  Timeline& timeline = runtime_.timeline();
  const double flush_begin = timeline.on() ? Timeline::now_us() : 0.0;
  const Settings& settings = runtime_.settings();
  const std::uint64_t largest = std::min(settings.fusion_threshold, settings.partition_bytes);
  const auto batches = batches_of(taken, largest);
  log_plan(state, batches);
  const std::size_t run = buffers_to_run(wire_comm, batches, awaited);
  if (timeline.on()) {
    // The calls left for a later flush get their QUEUE span there, once.
    for (std::size_t b = 0; b < run; ++b) {
      for (const QueuedReduction& r : batches[b])
        timeline.span("QUEUE", r.queued_us, flush_begin,
                      span_args(*r.decision.compressor, r.count, 1));
    }
    timeline.span("FUSE", flush_begin, Timeline::now_us(),
                  "\"calls\": " + std::to_string(taken.size()) +
                      ", \"buffers\": " + std::to_string(batches.size()));
  }
  int rc = MPI_SUCCESS;
  for (std::size_t b = 0; b < run; ++b) {
    // After a failure, the rest completes with its error.
    if (rc == MPI_SUCCESS) rc = reduce_queued(state, wire_comm, batches[b]);
    complete(batches[b], rc);
  }
  for (std::size_t b = run; b < batches.size(); ++b) {
    if (rc == MPI_SUCCESS) {
      left->insert(left->end(), batches[b].begin(), batches[b].end());
    } else {
      complete(batches[b], rc);
    }
  }
  return rc;
}

// At debug level, each flush's plan as a hash of its calls' counts and its
// cuts, for a check that every rank forms the same batches
// (tests/mpi/check_plan_hashes.py).
void Engine::log_plan(const CommState& state,
                      const std::vector<std::vector<QueuedReduction>>& batches) const {
  const Settings& settings = runtime_.settings();
  if (settings.log_level < LogLevel::debug) return;
  std::uint64_t hash = 1469598103934665603ull;  // FNV-1a over the plan's numbers
  auto mix = [&hash](std::uint64_t value) {
    for (int byte = 0; byte < 8; ++byte)
      hash = (hash ^ ((value >> (8 * byte)) & 0xff)) * 1099511628211ull;
  };
  std::size_t calls = 0;
  for (const auto& batch : batches) {
    mix(batch.size());
    for (const QueuedReduction& reduction : batch) mix(reduction.count);
    calls += batch.size();
  }
  log_line(settings.log_level, LogLevel::debug, world_rank_,
           "fusion: communicator %llu flushes %zu calls in %zu buffers, plan %016llx",
           static_cast<unsigned long long>(state.id()), calls, batches.size(),
           static_cast<unsigned long long>(hash));
}

void Engine::flush_all(CommState& state) {
  ReductionQueue& queue = state.queue();
  for (;;) {
    {
      std::lock_guard lock(queue.mutex);
      if (queue.pending.empty()) return;
    }
    if (const int rc = flush(state); rc != MPI_SUCCESS) {
      // Their requests carry the error to whoever still waits on them.
      log_line(runtime_.settings().log_level, LogLevel::error, world_rank_,
               "queued MPI_Iallreduce calls failed when their communicator went: %s",
               backends::mpi::error_text(rc).c_str());
      return;
    }
  }
}

int Engine::flush_for(const MPI_Request* requests, int count, Until until, MPI_Comm* failed_comm) {
  int queued_at_start = 0;
  for (int pass = 0;; ++pass) {
    std::vector<CommState*> states;
    int queued = 0;  // of `requests`
    {
      std::lock_guard lock(requests_mutex_);
      for (int i = 0; i < count; ++i) {
        auto found = queued_requests_.find(requests[i]);
        if (found == queued_requests_.end()) continue;
        ++queued;
        if (std::find(states.begin(), states.end(), found->second) == states.end())
          states.push_back(found->second);
      }
    }
    if (states.empty()) return MPI_SUCCESS;
    if (pass == 0) queued_at_start = queued;
    if (pass > 0 &&
        (until == Until::one_pass || (until == Until::one_done && queued < queued_at_start))) {
      return MPI_SUCCESS;
    }
    sort_by_id(states);
    for (CommState* state : states) {
      if (const int rc = flush(*state, {requests, count, until}); rc != MPI_SUCCESS) {
        *failed_comm = state->user_comm();
        return rc;
      }
    }
  }
}

}  // namespace slimreduce
