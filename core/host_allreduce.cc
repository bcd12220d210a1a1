#include "core/host_allreduce.h"

#include <memory>
#include <vector>

#include "algorithms/allreduce.h"
#include "algorithms/cast_ring.h"
#include "algorithms/gathered.h"
#include "algorithms/hierarchical.h"
#include "algorithms/powersgd.h"
#include "algorithms/rescued_cast_ring.h"
#include "scheduler/host_step.h"
#include "scheduler/partition.h"
#include "scheduler/plan.h"

namespace slimreduce {
namespace {

using scheduler::HostStep;

// The bytes of the two workspaces a flat algorithm takes.
struct Workspace {
  std::size_t wire = 0;
  std::size_t scratch = 0;
};

// Where one partition's workspace begins in the shared buffers: cache-line
// aligned, so that no two partitions share a line (they run on two threads).
constexpr std::size_t kAlign = 64;
std::size_t aligned(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// What the compressor's flat algorithm needs for count floats over `ranks`.
Workspace flat_workspace(std::size_t count, const compressors::Compressor& compressor, int ranks) {
  using algorithms::CastRing;
  if (compressor.aggregation() == compressors::Aggregation::low_rank) {
    const auto& low_rank = static_cast<const compressors::LowRankCompressor&>(compressor);
    return {algorithms::PowerSgd::workspace_bytes(low_rank, count, ranks), 0};
  }
  if (compressor.aggregation() == compressors::Aggregation::summable) {
    const auto& summable = static_cast<const compressors::SummableCompressor&>(compressor);
    return {CastRing::wire_bytes(summable, count), CastRing::scratch_bytes(summable, count, ranks)};
  }
  const std::size_t payload_bytes = compressor.compressed_bytes(count);
  return {payload_bytes * static_cast<std::size_t>(ranks), payload_bytes};
}

// The compressor's flat algorithm over `transport` on count floats, picked
// by its aggregation (the same on every rank), on workspace of
// flat_workspace(): a call's whole algorithm, a partition's, or a
// hierarchical reduction's shard. state: the key's compressor state (a
// low-rank compressor's Q), or nullptr.
std::unique_ptr<algorithms::Allreduce> flat_algorithm(std::size_t count,
                                                      compressors::Compressor& compressor,
                                                      backends::Transport& transport,
                                                      std::byte* wire, std::byte* scratch,
                                                      std::vector<float>* state) {
  using algorithms::AllreduceOf;
  if (compressor.aggregation() == compressors::Aggregation::low_rank) {
    auto& low_rank = static_cast<compressors::LowRankCompressor&>(compressor);
    return std::make_unique<AllreduceOf<algorithms::PowerSgd>>(transport, low_rank, count, state,
                                                               wire);
  }
  if (compressor.aggregation() == compressors::Aggregation::summable) {
    auto& summable = static_cast<compressors::SummableCompressor&>(compressor);
    return std::make_unique<AllreduceOf<algorithms::RescuedCastRing>>(transport, summable, count,
                                                                      wire, scratch);
  }
  auto& gathered = static_cast<compressors::GatheredCompressor&>(compressor);
  const std::size_t payload_bytes = gathered.compressed_bytes(count);
  return std::make_unique<AllreduceOf<algorithms::GatheredAllreduce>>(transport, gathered, count,
                                                                      payload_bytes, scratch, wire);
}

// Full precision inside the node, the compressor's algorithm on a shard across nodes.
std::unique_ptr<scheduler::Step> hierarchical(const AllreduceCall& call,
                                              compressors::Compressor& compressor,
                                              const Hierarchy& hierarchy, CommState& state) {
  using algorithms::Hierarchical;
  backends::Transport& node = *hierarchy.node;
  const std::size_t shard = Hierarchical::shard_count(call.count, node.size());
  std::byte* workspace = state.shards(Hierarchical::workspace_bytes(call.count, node.size()));
  const Workspace needs = flat_workspace(shard, compressor, hierarchy.cross->size());
  std::byte* wire = state.wire(needs.wire);
  std::byte* scratch = state.scratch(needs.scratch);
  return std::make_unique<HostStep<Hierarchical>>(
      call.input, call.residual, call.output, node, call.count, workspace,
      flat_algorithm(shard, compressor, *hierarchy.cross, wire, scratch, call.state));
}

// A step per partition, each on its own part of the workspace (taken whole
// first: growing it later would move what earlier steps hold).
void add_partitions(const AllreduceCall& call, compressors::Compressor& compressor,
                    backends::Transport& transport, CommState& state,
                    const std::vector<scheduler::Partition>& pieces, scheduler::Plan& plan) {
  std::vector<Workspace> offsets;
  Workspace total;
  for (const scheduler::Partition& piece : pieces) {
    offsets.push_back(total);
    const Workspace needs = flat_workspace(piece.count, compressor, transport.size());
    total.wire += aligned(needs.wire);
    total.scratch += aligned(needs.scratch);
  }
  std::byte* wire = state.wire(total.wire);
  std::byte* scratch = state.scratch(total.scratch);
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const scheduler::Partition& piece = pieces[i];
    plan.add(std::make_unique<HostStep<algorithms::AnyAllreduce>>(
        call.input + piece.begin, call.residual ? call.residual + piece.begin : nullptr,
        call.output + piece.begin,
        flat_algorithm(piece.count, compressor, transport, wire + offsets[i].wire,
                       scratch + offsets[i].scratch, call.state)));
  }
}

// Pipelined where it can be (and a helper thread can be had), else step after step.
Status run_plan(const scheduler::Plan& plan, const RunOptions& options) {
  if (!options.helpers || !scheduler::can_pipeline(plan))
    return scheduler::run_blocking(plan, options.observer);
  scheduler::HelperPool::Lease lease = options.helpers->lease();
  if (!lease.get()) return scheduler::run_blocking(plan, options.observer);
  return scheduler::run_pipelined(plan, *lease.get(), options.observer);
}

}  // namespace

Status host_allreduce(const AllreduceCall& call, compressors::Compressor& compressor,
                      backends::Transport& transport, CommState& state, Reduced* reduced) {
  return host_allreduce(call, compressor, transport, state, RunOptions{}, reduced);
}

Status host_allreduce(const AllreduceCall& call, compressors::Compressor& compressor,
                      backends::Transport& transport, CommState& state, const RunOptions& options,
                      Reduced* reduced) {
  scheduler::Plan plan;
  const Hierarchy* hierarchy = state.hierarchy();
  if (hierarchy && !hierarchy->flat()) {
    plan.add(hierarchical(call, compressor, *hierarchy, state));
  } else if (options.partition_bytes == 0 ||
             compressor.aggregation() == compressors::Aggregation::low_rank) {
    // A low-rank call is one matrix with one Q: never cut (a partition would
    // be another matrix, with a Q of its own; docs/architecture.md, "Low rank").
    add_partitions(call, compressor, transport, state, {{0, call.count}}, plan);
  } else {
    add_partitions(call, compressor, transport, state,
                   scheduler::partitions(call.count, sizeof(float), options.partition_bytes), plan);
  }
  SLIMREDUCE_TRY(run_plan(plan, options));
  reduced->wire_sent = plan.wire_sent();
  reduced->overflow_rescued = plan.overflow_rescued() > 0;
  reduced->partitions = plan.size();
  return {};
}

}  // namespace slimreduce
