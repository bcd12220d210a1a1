// Whether a communicator reduces hierarchically (SLIMREDUCE_HIERARCHICAL,
// algorithms/hierarchical.h), and its two sub-transports. Made once per
// communicator, at its first compressed call (the same call on every rank),
// from facts every rank gathers alike: the answer is the same on every rank.
#pragma once

#include <mpi.h>

#include <memory>
#include <optional>
#include <string>

#include "backends/status.h"
#include "backends/transport.h"
#include "core/runtime/node_split.h"

namespace slimreduce {

struct Hierarchy {
  std::unique_ptr<backends::Transport> node;   // this node's ranks, by rank
  std::unique_ptr<backends::Transport> cross;  // this local index on every node, by node
  NodeSplit split;                             // the nodes (core/runtime/node_split.h)
  bool flat() const { return !node; }
};

// Nodes are consecutive blocks of local_size ranks of MPI_COMM_WORLD when it
// is set (emulated nodes), else the ranks that share memory
// (MPI_COMM_TYPE_SHARED). Flat, with the reason, when the communicator spans
// one node, nodes of unequal size, or one rank per node. `comm` is
// SlimReduce's private duplicate; `transport` runs on it.
Status make_hierarchy(MPI_Comm comm, backends::Transport& transport, int world_rank,
                      std::optional<int> local_size, Hierarchy* out);

}  // namespace slimreduce
