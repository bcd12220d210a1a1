#include "core/host_allreduce.h"

#include <memory>

#include "algorithms/allreduce.h"
#include "algorithms/cast_ring.h"
#include "algorithms/gathered.h"
#include "algorithms/hierarchical.h"
#include "algorithms/rescued_cast_ring.h"
#include "scheduler/host_step.h"
#include "scheduler/plan.h"

namespace slimreduce {
namespace {

using scheduler::HostStep;

// The compressor's flat algorithm over `transport` on count floats, picked
// by its aggregation (the same on every rank), on the communicator's
// workspace: a call's whole algorithm, or a hierarchical reduction's shard.
std::unique_ptr<algorithms::Allreduce> flat_algorithm(std::size_t count,
                                                      compressors::Compressor& compressor,
                                                      backends::Transport& transport,
                                                      CommState& state) {
  using algorithms::AllreduceOf;
  if (compressor.aggregation() == compressors::Aggregation::summable) {
    using algorithms::CastRing;
    auto& summable = static_cast<compressors::SummableCompressor&>(compressor);
    std::byte* wire = state.wire(CastRing::wire_bytes(summable, count));
    std::byte* scratch = state.scratch(CastRing::scratch_bytes(summable, count, transport.size()));
    return std::make_unique<AllreduceOf<algorithms::RescuedCastRing>>(transport, summable, count,
                                                                      wire, scratch);
  }
  auto& gathered = static_cast<compressors::GatheredCompressor&>(compressor);
  const std::size_t payload_bytes = gathered.compressed_bytes(count);
  std::byte* payload = state.scratch(payload_bytes);
  std::byte* all = state.wire(payload_bytes * transport.size());
  return std::make_unique<AllreduceOf<algorithms::GatheredAllreduce>>(transport, gathered, count,
                                                                      payload_bytes, payload, all);
}

// Full precision inside the node, the compressor's algorithm on a shard across nodes.
std::unique_ptr<scheduler::Step> hierarchical(const AllreduceCall& call,
                                              compressors::Compressor& compressor,
                                              const Hierarchy& hierarchy, CommState& state) {
  using algorithms::Hierarchical;
  backends::Transport& node = *hierarchy.node;
  const std::size_t shard = Hierarchical::shard_count(call.count, node.size());
  std::byte* workspace = state.shards(Hierarchical::workspace_bytes(call.count, node.size()));
  return std::make_unique<HostStep<Hierarchical>>(
      call.input, call.residual, call.output, node, call.count, workspace,
      flat_algorithm(shard, compressor, *hierarchy.cross, state));
}

}  // namespace

// A plan of one step, run as every blocking plan is.
Status host_allreduce(const AllreduceCall& call, compressors::Compressor& compressor,
                      backends::Transport& transport, CommState& state, Reduced* reduced) {
  return host_allreduce(call, compressor, transport, state, reduced, nullptr);
}

Status host_allreduce(const AllreduceCall& call, compressors::Compressor& compressor,
                      backends::Transport& transport, CommState& state, Reduced* reduced,
                      scheduler::PhaseObserver* observer) {
  scheduler::Plan plan;
  const Hierarchy* hierarchy = state.hierarchy();
  if (hierarchy && !hierarchy->flat()) {
    plan.add(hierarchical(call, compressor, *hierarchy, state));
  } else {
    plan.add(std::make_unique<HostStep<algorithms::AnyAllreduce>>(
        call.input, call.residual, call.output,
        flat_algorithm(call.count, compressor, transport, state)));
  }
  SLIMREDUCE_TRY(scheduler::run_blocking(plan, observer));
  reduced->wire_sent = plan.wire_sent();
  reduced->overflow_rescued = plan.overflow_rescued() > 0;
  return {};
}

}  // namespace slimreduce
