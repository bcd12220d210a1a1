// A communicator's nodes, written once for both sides (invariant 3,
// docs/architecture.md): from the node each rank is on, gathered over the
// communicator (the same vector on every rank), whether it reduces
// hierarchically, its node and cross-node sub-transports, and how a call's
// bytes split by node in the report. Each side learns the nodes its own way
// (MPI: the ranks sharing memory; NCCL: host name and boot id; both: blocks of
// SLIMREDUCE_LOCAL_SIZE ranks when set) and keeps the sub-transports it made.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "backends/status.h"
#include "backends/transport.h"
#include "core/runtime/counters.h"

namespace slimreduce {

struct NodeSplit {
  std::string flat_because;       // set: reduce flat, for this reason
  bool ring_hop_crosses = false;  // this rank's successor in the ring is on another node
  int node = 0;                   // this rank's node: a number every rank of it derives alike
  int node_ranks = 0;             // ranks per node (all nodes alike when not flat)
  bool flat() const { return !flat_because.empty(); }
};

// The split for `rank`, from node_of[r], the node of each rank r: flat, with
// the reason, for one node, nodes of unequal size or one rank per node.
NodeSplit split_by_node(const std::vector<int>& node_of, int rank);

// This node's ranks (by rank) and this local index on every node (by node):
// the same two splits of `parent` on every rank, in the same order.
Status split_transports(backends::Transport& parent, const NodeSplit& split,
                        std::unique_ptr<backends::Transport>* node,
                        std::unique_ptr<backends::Transport>* cross);

// Splits one call's counted bytes (call's own baseline and sent) by node: a
// call that ran flat by where this rank's ring hop goes, one that ran
// hierarchically by its node steps' bytes (count floats).
void count_by_node(Counters& call, const NodeSplit& split, bool ran_hierarchically,
                   std::size_t count);

}  // namespace slimreduce
