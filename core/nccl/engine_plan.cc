// The planning half of NcclEngine (core/nccl/engine.h): each call's decision
// and residual, the cut into partitions, the workspaces, the choice to
// pipeline, and the report's counts of a planned group. Under the engine's
// mutex_ where said.
#include <cuda_runtime_api.h>

#include <utility>

#include "core/nccl/engine.h"
#include "core/nccl/low_rank.h"
#include "core/nccl/sharded.h"
#include "core/runtime/compressor_choice.h"
#include "core/runtime/log.h"

namespace slimreduce {

// Whether the planned call is compressed, passed through (warm-up, a tensor
// larger than the residual cap) or cannot run (no device memory for its
// residual): p.compressed and its residual set. Under mutex_. Warm-up and the cap's size test
// read the call and the calls before it, as every rank does; the residual
// store's keys are this rank's buffer addresses, so a missing residual (no
// room under the cap, or none can be made during graph capture) only turns
// error feedback off, never the path.
// The decision of a call under the policy's compressor (planned: the one
// the calls were classified for): nullopt where it passes through.
std::optional<CallDecision> NcclEngine::fixed_decision(const CallPlan& p,
                                                       const compressors::Compressor& planned,
                                                       const CallShape& shape, bool capturing,
                                                       SharedState& shared, Counters& counted) {
  const Reduction& c = p.call;
  CallDecision decision = shared.choose(shape, c.verdict.path);
  // A compressor switched while the call was held (not supported, but never a
  // wrong cast): the call passes through, as NCCL would run it. A level of
  // SLIMREDUCE_ADAPTIVE is a compressor of the planned one's kind.
  if (!decision.compressed() || !carries_path(*decision.compressor, c.verdict.path) ||
      decision.compressor->device_kernels() != planned.device_kernels())
    return std::nullopt;
  const bool low_rank = decision.route == ReductionPath::low_rank;
  if (low_rank && !low_rank_compresses(*decision.compressor, c.count, capturing))
    return std::nullopt;  // NCCL sums it
  shared.settle(decision, shape);
  if (!decision.compressed()) {
    ++(counted.*decision.passes_because);
    return std::nullopt;
  }
  return decision;
}

NcclEngine::Planned NcclEngine::decide(CallPlan& p, const compressors::Compressor* planned,
                                       bool capturing, bool timed, SharedState& shared,
                                       Counters& counted) {
  p.compressed = false;
  if (!p.comm || !p.comm->blocking || p.comm->size < 1) return Planned::ok;
  const Reduction& c = p.call;
  const CallShape shape{p.comm->id, c.count, static_cast<std::uint64_t>(c.datatype)};
  const std::uint64_t changes_before = shared.residuals.shape_changes();
  const std::optional<CallDecision> decided =
      planned ? fixed_decision(p, *planned, shape, capturing, shared, counted)
              : auto_decision(p, shape, capturing, timed, shared, counted);
  if (!decided) return Planned::ok;
  const Planned planned_call = with_residual(p, *decided, capturing, shared);
  p.auto_resets = shared.residuals.shape_changes() - changes_before;
  return planned_call;
}

// A compressed call's residual (and a low-rank call's Q), found or made.
NcclEngine::Planned NcclEngine::with_residual(CallPlan& p, const CallDecision& decision,
                                              bool capturing, SharedState& shared) {
  const Reduction& c = p.call;
  const compressors::Compressor& compressor = *decision.compressor;
  const bool low_rank = decision.route == ReductionPath::low_rank;
  const bool error_feedback = decision.error_feedback;
  // Top-k that its cost model shards: sharded, but gathered in a graph (the
  // sharded exchange reads its part sizes on the host), with the same key.
  const bool shards = topk_shards(p, compressor);
  if (shards && capturing) note_topk_gathered_in_graph();
  if (shards && !capturing) p.call.verdict.path = ReductionPath::sharded;
  ResidualSlot* slot = nullptr;
  DeviceGuard device(p.comm->device);
  // A sharded call's key also holds this rank's owner-side residual.
  // Cut, its pieces' owner-side residuals back to back (GroupPlan::cut).
  // Under auto the key is sized for every candidate's, so that a switch
  // keeps it (auto_key_floats).
  const std::vector<scheduler::Partition> pieces =
      nccl_pieces(c, false, runtime_.settings().partition_bytes);
  const bool owner_side = c.verdict.path == ReductionPath::sharded || shards;
  const std::size_t key_floats =
      shared.chooser ? auto_key_floats(p, pieces, shared.policy)
      : owner_side   ? sharded_key_floats(compressor, pieces, p.comm->size, p.comm->rank)
                     : c.count;
  const auto found = shared.residuals.find_on_device(
      {p.comm->id, c.recvbuff}, key_floats, static_cast<std::uint64_t>(c.datatype), error_feedback,
      !capturing, c.stream, device_memory_, &slot);
  switch (found) {
    case ResidualStore::Found::over_cap:
      p.residual = nullptr;  // compressed all the same, without error feedback
      p.residual_missing = CallPlan::Missing::no_room;
      break;
    case ResidualStore::Found::not_now:
      // Capturing, and this key has no residual of its shape yet (capture
      // allocates nothing): captured compressed without error feedback.
      p.residual = nullptr;
      p.residual_missing = CallPlan::Missing::in_graph;
      break;
    case ResidualStore::Found::no_memory:
      return Planned::out_of_memory;
    case ResidualStore::Found::ok:
      p.residual = static_cast<float*>(slot->device.get());
      if (capturing && p.residual) slot->captured = true;
      if (p.residual && owner_side && shared.chooser &&
          !owner_side_kept(*slot, decision.candidate, p.residual + c.count, key_floats - c.count,
                           c.stream))
        return Planned::out_of_memory;
      if (low_rank)
        p.q_state = key_q_on_device(*slot, compressor, c.count, c.stream, device_memory_);
      break;
  }
  p.compressed = true;
  p.compressor = decision.compressor;
  p.draw = {decision.shape_call, p.comm->rank};
  p.level = decision.levels_adapt ? decision.level : -1;
  return Planned::ok;
}

ncclResult_t NcclEngine::plan(GroupPlan& plan, bool alone) {
  if (const ncclResult_t rc = absorb_norms(plan); rc != ncclSuccess) return rc;
  if (alone) {
    if (const ncclResult_t rc = absorb_auto(plan); rc != ncclSuccess) return rc;
  }
  std::lock_guard lock(mutex_);
  Counters passed;  // warm-up and cap counts, added however the planning ends
  struct AddOnExit {
    CounterBoard& board;
    Counters& counted;
    ~AddOnExit() { board.add(counted); }
  } add_on_exit{runtime_.board(Side::nccl), passed};
  {
    Runtime::Locked shared = runtime_.shared();
    const std::uint64_t evicted_before = shared->residuals.evicted();
    for (CallPlan& p : plan.calls) {
      auto found = comms_.find(static_cast<ncclComm_t>(p.call.comm));
      p.comm = found == comms_.end() ? nullptr : found->second;
      if (p.comm) p.nodes = p.comm->hierarchy;
      // A compressor switched while the call was held: as in decide().
      // (auto: no policy compressor; each call's is its candidate.)
      if (plan.planned() && !plan.carries(p.call.verdict.path)) {
        p.compressed = false;
        continue;
      }
      const bool capturing = is_capturing(static_cast<cudaStream_t>(p.call.stream));
      // auto times and counts a call alone only (its events bracket it alone).
      const bool timed = alone && !capturing;
      if (decide(p, plan.planned(), capturing, timed, *shared, passed) == Planned::out_of_memory)
        return ncclSystemError;
      p.hierarchical = runs_hierarchically(p);
    }
    passed.ef_evicted += shared->residuals.evicted() - evicted_before;
  }
  record_auto_steps(plan);
  plan.cut(runtime_.settings().partition_bytes);
  if (const ncclResult_t rc = plan_memory(plan); rc != ncclSuccess) return rc;
  if (alone) pipeline(plan);
  // Call by call (a cut call's pieces together): the report's byte sums add
  // in the order the calls came.
  for (std::size_t first = 0; first < plan.calls.size(); first += plan.calls[first].piece.of)
    count_planned(plan, first);
  Counters fused;  // the cast batches that carry two calls or more
  for (const std::size_t members : plan.batch_sizes()) {
    if (members < 2) continue;
    ++fused.fused_batches;
    fused.fused_tensors += members;
  }
  runtime_.board(Side::nccl).add(fused);
  return ncclSuccess;
}

// The call whose pieces start at calls[first], counted as one call.
void NcclEngine::count_planned(const GroupPlan& plan, std::size_t first) {
  const CallPlan& p = plan.calls[first];
  std::uint64_t count = 0;
  double sent = 0;
  for (int i = 0; i < p.piece.of; ++i) {
    const CallPlan& piece = plan.calls[first + i];
    count += piece.call.count;
    if (piece.compressed) sent += plan.wire_sent(piece);
  }
  const std::uint64_t bytes = count * nccl_type_bytes(p.call.datatype);
  CallOutcome outcome;
  outcome.bytes = bytes;
  outcome.count = count;
  outcome.compressed = p.compressed;
  outcome.wire_sent = sent;
  outcome.ran_hierarchically = p.hierarchical;
  Counters counted =
      counted_call(p.comm ? p.comm->size : 1, p.nodes ? &p.nodes->split : nullptr, outcome);
  if (p.compressed) {
    if (is_topk(p)) counted.count_topk(p.call.verdict.path == ReductionPath::sharded, sent);
    if (p.level >= 0) counted.count_level(p.level);
    if (p.piece.of > 1) counted.partitions += static_cast<std::uint64_t>(p.piece.of);
    if (p.residual_missing != CallPlan::Missing::none) ++counted.ef_cap_fallback;
    if (p.residual_missing == CallPlan::Missing::in_graph) warn_no_residual_in_graph();
  }
  runtime_.board(Side::nccl).add(counted);
}

// A call outside any group cut into pieces of casts or gathered top-k:
// pipelined over a side stream (core/nccl/pipeline.h) unless
// SLIMREDUCE_PIPELINE=0, or its stream is being captured (nothing is made
// then). The same bits either way. Under mutex_ (the side streams are the
// communicator's, as its workspaces are).
void NcclEngine::pipeline(GroupPlan& plan) {
  if (runtime_.settings().pipeline == Pipelining::off || !plan.pipelinable()) return;
  const CallPlan& p = plan.calls.front();
  const auto stream = static_cast<cudaStream_t>(p.call.stream);
  if (is_capturing(stream)) return;
  SideStream* side = &p.comm->side_streams[stream];
  DeviceGuard device(p.comm->device);
  if (!device.ok() || !side->ready()) return;  // unpipelined: the same bits
  plan.run_kernels_on(side->stream());
  plan.side = side;
}

// Grows each (communicator, stream) workspace to what the plan needs. Under
// graph capture nothing is allocated: calls whose workspace is too small pass
// through, which every rank decides alike from the same call history.
ncclResult_t NcclEngine::plan_memory(GroupPlan& plan) {
  auto need = plan.layout();
  bool dropped = false;
  for (const auto& [key, bytes] : need) {
    Workspace& ws = key.first->workspaces[key.second];
    if (is_capturing(key.second)) {
      if (ws.large_enough(bytes)) {
        ws.mark_captured();
      } else {
        plan.pass_through_on(key.first, key.second);
        dropped = true;
      }
      continue;
    }
    DeviceGuard device(key.first->device);
    if (!device.ok() || !ws.ensure(bytes, key.second, device_memory_)) return ncclSystemError;
  }
  if (dropped) need = plan.layout();
  for (const auto& [key, bytes] : need) {
    plan.assign(key.first, key.second,
                static_cast<std::byte*>(key.first->workspaces[key.second].get()));
  }
  return ncclSuccess;
}

// Top-k calls the codec's cost model reduces sharded (flat, fp32; on a
// communicator split into nodes, top-k stays hierarchical and gathered).
bool NcclEngine::topk_shards(const CallPlan& p, const compressors::Compressor& compressor) {
  return p.call.verdict.path == ReductionPath::topk && p.call.datatype == ncclFloat32 &&
         (!p.nodes || p.nodes->flat()) && compressor.sharded_codec() &&
         compressor.prefers_sharded(p.call.count, p.comm->size);
}

// The bytes of the calls whose sizes were known only once they ran (sharded
// top-k's parts), with the byte split by node where it is kept.
void NcclEngine::count_after_run(const GroupPlan& plan) {
  for (std::size_t i = 0; i < plan.calls.size(); ++i) {
    const double sent = plan.sent_after_run(i);
    if (sent < 0) continue;
    const CallPlan& p = plan.calls[i];
    Counters counted;
    counted.wire_sent = sent;
    counted.topk_sharded_sent = sent;
    count_by_node(counted, p.nodes.get(), false, p.call.count);
    runtime_.board(Side::nccl).add(counted);
  }
}

void NcclEngine::note_topk_gathered_in_graph() {
  if (std::exchange(noted_topk_gathered_in_graph_, true)) return;
  log_line(runtime_.settings().log_level, LogLevel::info, first_rank_ < 0 ? 0 : first_rank_,
           "nccl: top-k calls captured into a CUDA graph are gathered, not sharded: the sharded "
           "exchange reads its part sizes on the host, which a graph cannot");
}

// Once per process: a graph that replays a call without error feedback keeps
// doing so, which the user can avoid by running the call once before capture.
void NcclEngine::warn_no_residual_in_graph() {
  if (std::exchange(warned_no_residual_in_graph_, true)) return;
  log_line(runtime_.settings().log_level, LogLevel::warn, first_rank_ < 0 ? 0 : first_rank_,
           "nccl: a call captured into a CUDA graph had no error-feedback residual for its "
           "receive buffer yet, so the graph reduces it compressed without error feedback; run "
           "each call once before capture (counted as residual cap reached)");
}

}  // namespace slimreduce
