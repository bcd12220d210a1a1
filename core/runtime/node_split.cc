#include "core/runtime/node_split.h"

#include "algorithms/hierarchical.h"

namespace slimreduce {

NodeSplit split_by_node(const std::vector<int>& node_of, int rank) {
  NodeSplit split;
  const int size = static_cast<int>(node_of.size());
  split.node = node_of[rank];
  split.ring_hop_crosses = node_of[(rank + 1) % size] != split.node;
  split.flat_because = algorithms::Hierarchical::flat_reason(node_of);
  for (int node : node_of) split.node_ranks += node == split.node ? 1 : 0;
  return split;
}

Status split_transports(backends::Transport& parent, const NodeSplit& split,
                        std::unique_ptr<backends::Transport>* node,
                        std::unique_ptr<backends::Transport>* cross) {
  SLIMREDUCE_TRY(parent.split(split.node, parent.rank(), node));
  // Ranks of one local index, ordered by their node's number: the same order on every rank.
  return parent.split((*node)->rank(), split.node, cross);
}

void count_by_node(Counters& call, const NodeSplit& split, bool ran_hierarchically,
                   std::size_t count) {
  if (!ran_hierarchically) {
    call.count_by_node(call.wire_baseline, call.wire_sent, split.ring_hop_crosses);
    return;
  }
  call.count_hierarchical_by_node(
      algorithms::Hierarchical::intra_node_bytes(count, split.node_ranks), split.ring_hop_crosses);
}

}  // namespace slimreduce
