// SLIMREDUCE_COMPRESSOR=auto on the NCCL side (docs/architecture.md, "The
// measured choice"): the schedule and the choice are the runtime's
// (core/runtime/auto_choice.h, Runtime::auto_recorded and auto_agreed, as
// on the MPI side); here, each call's candidate becomes its route, the
// calls alone are timed by CUDA events, and the ranks exchange their times
// through core/nccl/auto_timing.h, a call or two later, with no host wait
// unless the device is behind (counted).
#include "core/nccl/engine.h"
#include "core/nccl/low_rank.h"
#include "core/nccl/sharded.h"

namespace slimreduce {
namespace {

// count: the whole call's (a cut call's pieces together), fp32.
NcclAutoTiming::Key timing_key(std::uint64_t comm_id, std::uint64_t count) {
  return {comm_id, AutoChooser::size_class(count * sizeof(float))};
}

// Whether the candidate's GPU kernels can carry the call (its route's entry
// points, under its size cap).
bool candidate_carries(const compressors::Compressor& candidate, ReductionPath route,
                       std::uint64_t count) {
  return carries_path(candidate, route) && count <= candidate.device_max_count();
}

}  // namespace

// An fp32 call classified for auto: the schedule's candidate (a step of it
// where `timed`, else the class's choice), its route made the call's. A
// candidate that cannot carry it (none; no GPU kernel for its size; a
// PowerSGD matrix NCCL sums) passes it through, still a step of the schedule.
std::optional<CallDecision> NcclEngine::auto_decision(CallPlan& p, const CallShape& shape,
                                                      bool capturing, bool timed,
                                                      SharedState& shared, Counters& counted) {
  if (!shared.chooser) return std::nullopt;  // switched away from auto while held
  // SLIMREDUCE_HIERARCHICAL=auto: a twin runs two-level where the
  // communicator's nodes take its route (runs_hierarchically's rule).
  const auto two_level = [&p](const Policy::Candidate& candidate) {
    return nodes_take(p.nodes.get(), route_of(candidate.compressor->aggregation()));
  };
  shared.chooser->exchanges_later(shape.comm_id);  // a call or two later (auto_timing.h)
  CallDecision decision =
      shared.decide(shape, ReductionPath::pass_through, timed, two_level, p.comm->size);
  p.auto_step = decision.auto_step;
  p.flat = decision.flat;
  if (decision.passes_because) {
    ++(counted.*decision.passes_because);
    return std::nullopt;
  }
  if (!decision.compressed()) return std::nullopt;
  const compressors::Compressor& candidate = *decision.compressor;
  if (!candidate_carries(candidate, decision.route, p.call.count)) return std::nullopt;
  if (decision.route == ReductionPath::low_rank &&
      !low_rank_compresses(candidate, p.call.count, capturing))
    return std::nullopt;
  p.call.verdict.path = decision.route;
  return decision;
}

// Under auto a key's device residual is sized for every candidate: the
// values' residual, then the largest owner-side residual of the candidates
// that shard (a switch between fp16 and int8 then keeps both, as the MPI
// side keeps them).
std::size_t NcclEngine::auto_key_floats(const CallPlan& p,
                                        const std::vector<scheduler::Partition>& pieces,
                                        const Policy& policy) {
  std::size_t floats = p.call.count;
  for (const Policy::Candidate& candidate : policy.candidates) {
    if (!candidate.compressor || !candidate.compressor->sharded_codec()) continue;
    floats = std::max(
        floats, sharded_key_floats(*candidate.compressor, pieces, p.comm->size, p.comm->rank));
  }
  return floats;
}

// The tail of a device residual holds one sharded candidate's owner-side
// residual; another's layout differs, so it starts from zero (on the call's
// stream, before the call's kernels). False when the zeroing fails.
bool NcclEngine::owner_side_kept(ResidualSlot& slot, int candidate, float* tail,
                                 std::size_t tail_floats, void* stream) {
  if (slot.owner_side_of == candidate) return true;
  if (slot.owner_side_of >= 0 && tail_floats > 0 &&
      cudaMemsetAsync(tail, 0, tail_floats * sizeof(float), static_cast<cudaStream_t>(stream)) !=
          cudaSuccess)
    return false;
  slot.owner_side_of = candidate;
  return true;
}

// After the decisions (outside the runtime's lock): each call's step goes to
// the schedule; a step that closes a window closes this side's too.
void NcclEngine::record_auto_steps(const GroupPlan& plan) {
  for (const CallPlan& p : plan.calls) {
    if (!p.auto_step || !p.comm) continue;
    const std::optional<std::vector<double>> window =
        runtime_.auto_recorded(Side::nccl, p.comm->id, *p.auto_step, 0.0, p.auto_resets);
    if (window)
      auto_timing_.close(timing_key(p.comm->id, p.call.count), *p.auto_step, window->back());
  }
}

// Before a call alone is decided: what its size class has due, an exchange
// of a closed window (on this call's stream, ahead of its work) or the
// agreement of one exchanged before. Every rank makes the same calls alone,
// so every rank does the same here at the same call.
ncclResult_t NcclEngine::absorb_auto(const GroupPlan& plan) {
  if (!runtime_.settings().chooses() || plan.calls.size() != 1) return ncclSuccess;
  const Reduction& call = plan.calls.front().call;
  const auto stream = static_cast<cudaStream_t>(call.stream);
  if (is_capturing(stream)) return ncclSuccess;  // nothing of auto goes into a graph
  std::shared_ptr<NcclCommState> comm;
  NcclAutoTiming::Key key;
  NcclAutoTiming::Due due = NcclAutoTiming::Due::nothing;
  void* buffer = nullptr;
  {
    std::lock_guard lock(mutex_);
    const auto found = comms_.find(static_cast<ncclComm_t>(call.comm));
    if (found == comms_.end() || !found->second->blocking || found->second->size < 1)
      return ncclSuccess;
    comm = found->second;
    key = timing_key(comm->id, call.count);
    due = auto_timing_.due(key);
    if (due == NcclAutoTiming::Due::exchange) {
      DeviceGuard device(comm->device);
      buffer = device.ok() ? comm->auto_workspaces[stream].ensure(auto_timing_.exchange_bytes(key),
                                                                  stream, device_memory_)
                           : nullptr;
      if (!buffer) return ncclSystemError;
    }
  }
  Counters waited;
  Status status;
  if (due == NcclAutoTiming::Due::exchange) {
    DeviceGuard device(comm->device);
    status = auto_timing_.exchange(key, comm->comm, stream, buffer, &waited.auto_waits);
  } else if (due == NcclAutoTiming::Due::agreement) {
    NcclAutoTiming::Agreed agreed;
    status = auto_timing_.agreement(key, &agreed, &waited.auto_waits);
    if (status.ok()) {
      runtime_.auto_agreed(Side::nccl, key.first, comm->rank, agreed.step, agreed.window,
                           agreed.exchange_begin_us);
    }
  }
  runtime_.board(Side::nccl).add(waited);
  return status.ok() ? ncclSuccess : backends::nccl_code(status);
}

// A plan of one timed call: its events before and after its work.
ncclResult_t NcclEngine::time_auto_call(const GroupPlan& plan, bool stop) {
  if (plan.calls.empty()) return ncclSuccess;
  const CallPlan& p = plan.calls.front();
  if (!p.auto_step || !p.auto_step->timed || !p.comm) return ncclSuccess;
  const auto stream = static_cast<cudaStream_t>(p.call.stream);
  std::uint64_t count = 0;  // the plan is the call's pieces
  for (const CallPlan& piece : plan.calls) count += piece.call.count;
  DeviceGuard device(p.comm->device);
  const NcclAutoTiming::Key key = timing_key(p.comm->id, count);
  const Status status = stop ? auto_timing_.stop(key, stream) : auto_timing_.start(key, stream);
  return status.ok() ? ncclSuccess : backends::nccl_code(status);
}

}  // namespace slimreduce
