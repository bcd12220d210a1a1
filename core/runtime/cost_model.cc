#include "core/runtime/cost_model.h"

#include <algorithm>

#include "algorithms/wire_bytes.h"
#include "compressors/kind.h"

namespace slimreduce::cost {
namespace {

using algorithms::ring_allgather_wire_bytes;
using algorithms::ring_allreduce_wire_bytes;
using compressors::Aggregation;

Phase ring_allreduce(double bytes, int ranks) {
  return {ring_allreduce_wire_bytes(static_cast<std::uint64_t>(bytes), ranks), Pattern::ring,
          2 * (ranks - 1)};
}

// The sharded algorithm (algorithms/sharded.h): this rank's parts to their
// owners (rank 0's view: it owns the largest shard), then every owner's
// result allgathered in slots of the largest result (8-byte aligned). Parts whose sizes vary
// (top-k's) are taken at their expected size, the payload's share of the
// shard, with the sizes exchanged first (8 bytes a peer).
std::vector<Phase> sharded(const compressors::Compressor& compressor, std::size_t n, int ranks) {
  const compressors::ShardedCodec& codec = *compressor.sharded_codec();
  std::vector<std::size_t> bounds(static_cast<std::size_t>(ranks) + 1);
  codec.shard_bounds(n, ranks, bounds.data());
  double parts = 0;
  std::size_t slot = 0;  // the largest owner's result, padded to 8 bytes
  for (int s = 0; s < ranks; ++s) {
    const std::size_t count = bounds[s + 1] - bounds[s];
    slot = std::max(slot, codec.owner_bytes(count, n));
    if (s == 0) continue;  // its own part stays
    parts += codec.part_sizes_vary()
                 ? static_cast<double>(compressor.compressed_bytes(n)) * count / n + 8.0
                 : static_cast<double>(codec.part_capacity(count, n));
  }
  slot = (slot + 7) / 8 * 8;
  return {{parts, Pattern::all_to_all, ranks - 1},
          {ring_allgather_wire_bytes(slot, ranks), Pattern::ring, ranks - 1}};
}

}  // namespace

std::vector<Phase> flat_phases(const compressors::Compressor* compressor, std::size_t n, int ranks,
                               std::string* algorithm) {
  *algorithm = "ring";
  if (ranks < 2 || n == 0) return {};
  const double fp32 = 4.0 * static_cast<double>(n);
  if (!compressor) return {ring_allreduce(fp32, ranks)};
  switch (compressor->aggregation()) {
    case Aggregation::summable: {
      const auto& summable = compressors::kind_cast<compressors::SummableCompressor>(*compressor);
      return {ring_allreduce(static_cast<double>(n * summable.wire_element_bytes()), ranks)};
    }
    case Aggregation::gathered:
      if (compressor->sharded_codec() && compressor->prefers_sharded(n, ranks)) {
        *algorithm = "sharded";
        return sharded(*compressor, n, ranks);
      }
      *algorithm = "gather";
      return {{ring_allgather_wire_bytes(compressor->compressed_bytes(n), ranks), Pattern::ring,
               ranks - 1}};
    case Aggregation::sharded:
      *algorithm = "sharded";
      return sharded(*compressor, n, ranks);
    case Aggregation::low_rank: {
      const auto& low_rank = compressors::kind_cast<compressors::LowRankCompressor>(*compressor);
      const kernels::LowRankShape shape = low_rank.shape(n, 0);
      if (shape.rank == 0) return {ring_allreduce(fp32, ranks)};  // summed as it is
      *algorithm = "low rank";
      Phase p = ring_allreduce(4.0 * static_cast<double>(shape.p_floats()), ranks);
      const Phase q = ring_allreduce(4.0 * static_cast<double>(shape.q_floats()), ranks);
      p.bytes += q.bytes;
      p.messages += q.messages;
      return {p};
    }
  }
  return {ring_allreduce(fp32, ranks)};
}

std::vector<Phase> two_level_phases(const compressors::Compressor* compressor, std::size_t n,
                                    const Layout& layout, std::string* algorithm) {
  const int local = std::min(layout.per_node, layout.ranks);
  const int nodes = layout.nodes();
  const double fp32 = 4.0 * static_cast<double>(n);
  const double local_share = local > 1 ? fp32 * (local - 1) / local : 0.0;
  std::vector<Phase> phases;
  phases.push_back({local_share, Pattern::ring, local - 1, true});  // reduce-scatter, fp32
  std::string across;
  const std::size_t shard = (n + static_cast<std::size_t>(local) - 1) / local;
  for (Phase phase : flat_phases(compressor, shard, nodes, &across)) {
    phase.across_nodes_only = true;  // every local rank's shard crosses at once
    phases.push_back(phase);
  }
  phases.push_back({local_share, Pattern::ring, local - 1, true});  // allgather, fp32
  *algorithm = "two-level (" + across + " across)";
  return phases;
}

double phase_seconds(const Phase& phase, const Layout& layout, const Link& inter,
                     const Link& intra) {
  if (phase.inside_node || (layout.nodes() == 1 && !layout.shared_link))
    return phase.messages * intra.latency_s + phase.bytes / intra.bytes_per_s;
  double through_link = phase.bytes;
  if (layout.shared_link) {
    through_link *= layout.ranks;
  } else if (phase.across_nodes_only) {
    through_link *= layout.per_node;
  } else if (phase.pattern == Pattern::all_to_all) {
    through_link *= static_cast<double>(layout.per_node) * (layout.ranks - layout.per_node) /
                    (layout.ranks - 1);
  }
  return phase.messages * inter.latency_s + through_link / inter.bytes_per_s;
}

Prediction predict(const compressors::Compressor* compressor, std::size_t n, const Layout& layout,
                   const Link& inter, const Link& intra, const Rates& rates, bool hierarchical) {
  Prediction prediction;
  const bool two_level = hierarchical && layout.nodes() > 1 && !layout.shared_link;
  const std::vector<Phase> phases =
      two_level ? two_level_phases(compressor, n, layout, &prediction.algorithm)
                : flat_phases(compressor, n, layout.ranks, &prediction.algorithm);
  for (const Phase& phase : phases) {
    if (!phase.inside_node) prediction.wire_bytes += phase.bytes;
    prediction.wire_s += phase_seconds(phase, layout, inter, intra);
  }
  if (compressor) {
    // Compression of what crosses (the node's shard where two-level), and
    // the decoding of the result; a gathered call also decodes every payload.
    const double crossing =
        4.0 * static_cast<double>(n) / (two_level ? std::min(layout.per_node, layout.ranks) : 1);
    if (rates.compress > 0) prediction.compute_s += crossing / rates.compress;
    if (rates.decode > 0) prediction.compute_s += crossing / rates.decode;
    if (rates.decode > 0 && compressor->aggregation() == Aggregation::gathered &&
        prediction.algorithm == "gather")
      prediction.compute_s +=
          static_cast<double>(compressor->compressed_bytes(n)) * (layout.ranks - 1) / rates.decode;
    const int on_node = layout.shared_link ? layout.ranks : std::min(layout.per_node, layout.ranks);
    if (layout.cores_per_node > 0 && on_node > layout.cores_per_node)
      prediction.compute_s *= static_cast<double>(on_node) / layout.cores_per_node;
  }
  return prediction;
}

}  // namespace slimreduce::cost
