#include "core/mpi/host_allreduce.h"

#include <memory>
#include <vector>

#include "algorithms/allreduce.h"
#include "algorithms/cast_ring.h"
#include "algorithms/gathered.h"
#include "algorithms/hierarchical.h"
#include "algorithms/powersgd.h"
#include "algorithms/rescued_cast_ring.h"
#include "algorithms/sharded.h"
#include "compressors/kind.h"
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

// What the compressor's flat algorithm needs for count floats over
// `transport`'s ranks (sharded: the sharded algorithm's, this rank's).
Workspace flat_workspace(std::size_t count, compressors::Compressor& compressor,
                         const backends::Transport& transport, bool sharded, std::size_t rows) {
  using algorithms::CastRing;
  const int ranks = transport.size();
  auto sharded_workspace = [&]() -> Workspace {
    const compressors::ShardedCodec& codec = *compressor.sharded_codec();
    return {algorithms::ShardedAllreduce::wire_bytes(codec, count, ranks, transport.rank()),
            algorithms::ShardedAllreduce::scratch_bytes(codec, count, ranks, transport.rank())};
  };
  if (sharded) return sharded_workspace();  // int8, or top-k that reduces sharded
  using namespace compressors;
  return with_kind(
      compressor,
      Overloaded{[&](const SummableCompressor& summable) -> Workspace {
                   return {CastRing::wire_bytes(summable, count),
                           CastRing::scratch_bytes(summable, count, ranks)};
                 },
                 [&](const GatheredCompressor& gathered) -> Workspace {
                   const std::size_t payload_bytes = gathered.compressed_bytes(count);
                   return {payload_bytes * static_cast<std::size_t>(ranks), payload_bytes};
                 },
                 [&](const LowRankCompressor& low_rank) -> Workspace {
                   return {algorithms::PowerSgd::workspace_bytes(low_rank, count, ranks, rows), 0};
                 },
                 [&](const ShardedCompressor&) { return sharded_workspace(); }});
}

std::vector<float*> owner_residuals(const AllreduceCall& call, compressors::Compressor& compressor,
                                    const backends::Transport& transport,
                                    const std::vector<std::size_t>& counts) {
  return slimreduce::owner_residuals(call.state, call.residual != nullptr,
                                     *compressor.sharded_codec(), transport.size(),
                                     transport.rank(), counts);
}

// The compressor's flat algorithm over `transport` on count floats, picked
// by its aggregation or sharded (the same on every rank), on workspace of
// flat_workspace(): a call's whole algorithm, a partition's, or a
// hierarchical reduction's shard. state: the key's compressor state (a
// low-rank compressor's Q), or nullptr; owner_residual: a sharded one's;
// rows: the tensor's real row count where count is the whole tensor, else 0;
// draw: the call's, moved to the count values' first.
std::unique_ptr<algorithms::Allreduce> flat_algorithm(
    std::size_t count, compressors::Compressor& compressor, backends::Transport& transport,
    std::byte* wire, std::byte* scratch, std::vector<float>* state, bool sharded,
    float* owner_residual, std::size_t rows, const compressors::CallDraw& draw) {
  using algorithms::AllreduceOf;
  using namespace compressors;
  using Algorithm = std::unique_ptr<algorithms::Allreduce>;
  auto sharded_algorithm = [&]() -> Algorithm {
    return std::make_unique<AllreduceOf<algorithms::ShardedAllreduce>>(
        transport, *compressor.sharded_codec(), count, owner_residual, wire, scratch, draw);
  };
  if (sharded) return sharded_algorithm();  // int8, or top-k that reduces sharded
  return with_kind(compressor,
                   Overloaded{[&](SummableCompressor& summable) -> Algorithm {
                                return std::make_unique<AllreduceOf<algorithms::RescuedCastRing>>(
                                    transport, summable, count, wire, scratch);
                              },
                              [&](GatheredCompressor& gathered) -> Algorithm {
                                const std::size_t payload_bytes = gathered.compressed_bytes(count);
                                return std::make_unique<AllreduceOf<algorithms::GatheredAllreduce>>(
                                    transport, gathered, count, payload_bytes, scratch, wire);
                              },
                              [&](LowRankCompressor& low_rank) -> Algorithm {
                                return std::make_unique<AllreduceOf<algorithms::PowerSgd>>(
                                    transport, low_rank, count, state, wire, rows);
                              },
                              [&](ShardedCompressor&) { return sharded_algorithm(); }});
}

// Full precision inside the node, the compressor's algorithm on a shard
// across nodes (sharded: reduces_sharded() of that shard over the nodes).
std::unique_ptr<scheduler::Step> hierarchical(const AllreduceCall& call,
                                              compressors::Compressor& compressor,
                                              const Hierarchy& hierarchy, CommState& state,
                                              bool sharded) {
  using algorithms::Hierarchical;
  backends::Transport& node = *hierarchy.node;
  const std::size_t shard = Hierarchical::shard_count(call.count, node.size());
  std::byte* workspace = state.shards(Hierarchical::workspace_bytes(call.count, node.size()));
  backends::Transport& cross = *hierarchy.cross;
  const Workspace needs = flat_workspace(shard, compressor, cross, sharded, 0);
  std::byte* wire = state.wire(needs.wire);
  std::byte* scratch = state.scratch(needs.scratch);
  float* owner_residual =
      sharded ? owner_residuals(call, compressor, cross, {shard}).front() : nullptr;
  return std::make_unique<HostStep<Hierarchical>>(
      call.input, call.residual, call.output, node, call.count, workspace,
      flat_algorithm(shard, compressor, cross, wire, scratch, call.state, sharded, owner_residual,
                     0, call.draw.at(shard * static_cast<std::size_t>(node.rank()))));
}

// A step per partition, each on its own part of the workspace (taken whole
// first: growing it later would move what earlier steps hold).
void add_partitions(const AllreduceCall& call, compressors::Compressor& compressor,
                    backends::Transport& transport, CommState& state,
                    const std::vector<scheduler::Partition>& pieces, bool sharded,
                    scheduler::Plan& plan) {
  std::vector<Workspace> offsets;
  std::vector<std::size_t> counts;
  Workspace total;
  // The tensor's real shape, where a piece is the whole of it.
  auto rows_of = [&call](const scheduler::Partition& piece) {
    return piece.count == call.count ? call.rows : 0;
  };
  for (const scheduler::Partition& piece : pieces) {
    offsets.push_back(total);
    counts.push_back(piece.count);
    const Workspace needs =
        flat_workspace(piece.count, compressor, transport, sharded, rows_of(piece));
    total.wire += aligned(needs.wire);
    total.scratch += aligned(needs.scratch);
  }
  std::byte* wire = state.wire(total.wire);
  std::byte* scratch = state.scratch(total.scratch);
  const std::vector<float*> owner_residual =
      sharded ? owner_residuals(call, compressor, transport, counts)
              : std::vector<float*>(pieces.size(), nullptr);
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const scheduler::Partition& piece = pieces[i];
    plan.add(std::make_unique<HostStep<algorithms::AnyAllreduce>>(
        call.input + piece.begin, call.residual ? call.residual + piece.begin : nullptr,
        call.output + piece.begin,
        flat_algorithm(piece.count, compressor, transport, wire + offsets[i].wire,
                       scratch + offsets[i].scratch, call.state, sharded, owner_residual[i],
                       rows_of(piece), call.draw.at(piece.begin))));
  }
}

// Pipelined where it can be (and a helper thread can be had), else step after step.
Status run_steps(const scheduler::Plan& plan, const RunOptions& options) {
  if (!options.helpers || !scheduler::can_pipeline(plan))
    return scheduler::run_blocking(plan, options.observer);
  scheduler::HelperPool::Lease lease = options.helpers->lease();
  if (!lease.get()) return scheduler::run_blocking(plan, options.observer);
  return scheduler::run_pipelined(plan, *lease.get(), options.observer);
}

}  // namespace

Status run_plan(const scheduler::Plan& plan, const RunOptions& options, Reduced* reduced) {
  SLIMREDUCE_TRY(run_steps(plan, options));
  reduced->wire_sent = plan.wire_sent();
  reduced->overflow_rescued = plan.overflow_rescued() > 0;
  reduced->partitions = plan.size();
  return {};
}

bool reduces_sharded(compressors::Compressor& compressor, std::size_t count, int ranks) {
  return compressor.sharded_codec() && compressor.prefers_sharded(count, ranks);
}

std::vector<scheduler::Partition> pieces_of(std::size_t count,
                                            const compressors::Compressor& compressor,
                                            std::uint64_t partition_bytes) {
  if (partition_bytes == 0 || compressor.aggregation() == compressors::Aggregation::low_rank)
    return {{0, count}};
  return scheduler::partitions(count, sizeof(float), partition_bytes);
}

std::vector<float*> owner_residuals(std::vector<float>* state, bool feeds_back,
                                    const compressors::ShardedCodec& codec, int ranks, int rank,
                                    const std::vector<std::size_t>& counts) {
  std::vector<float*> residuals(counts.size(), nullptr);
  if (!feeds_back || !state) return residuals;
  std::vector<std::size_t> offsets;
  std::size_t total = 0;
  for (const std::size_t count : counts) {
    offsets.push_back(total);
    total += algorithms::ShardedAllreduce::owned_count(codec, count, ranks, rank);
  }
  if (state->size() != total) state->assign(total, 0.0f);
  for (std::size_t i = 0; i < counts.size(); ++i) residuals[i] = state->data() + offsets[i];
  return residuals;
}

Status host_allreduce(const AllreduceCall& call, compressors::Compressor& compressor,
                      backends::Transport& transport, CommState& state, Reduced* reduced) {
  return host_allreduce(call, compressor, transport, state, RunOptions{}, reduced);
}

Status host_allreduce(const AllreduceCall& call, compressors::Compressor& compressor,
                      backends::Transport& transport, CommState& state, const RunOptions& options,
                      Reduced* reduced) {
  scheduler::Plan plan;
  const Hierarchy* hierarchy = state.hierarchy();
  // Decided once for the whole call, so that its partitions and the report agree.
  bool sharded = false;
  if (state.runs_two_level(options.flat)) {
    const std::size_t shard =
        algorithms::Hierarchical::shard_count(call.count, hierarchy->node->size());
    sharded = reduces_sharded(compressor, shard, hierarchy->cross->size());
    plan.add(hierarchical(call, compressor, *hierarchy, state, sharded));
  } else {
    sharded = reduces_sharded(compressor, call.count, transport.size());
    // A low-rank call is one matrix with one Q: never cut (a partition would
    // be another matrix, with a Q of its own; docs/architecture.md, "Low rank").
    add_partitions(call, compressor, transport, state,
                   pieces_of(call.count, compressor, options.partition_bytes), sharded, plan);
  }
  reduced->sharded = sharded;
  return run_plan(plan, options, reduced);
}

}  // namespace slimreduce
