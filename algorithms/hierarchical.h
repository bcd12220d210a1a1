// Full precision inside a node, compressed only between nodes
// (docs/architecture.md, "Hierarchical"), written once over two
// sub-transports of the caller's communicator: `node` (the ranks of this
// node, by rank) and the inner algorithm's (the ranks of this local index on
// every node, by node).
//  1. compress: the input, padded with zeros to node.size() equal shards, is
//     reduce-scattered in fp32 inside the node (each element summed once), so
//     local rank i holds shard i of the node's sum; the inner algorithm
//     (CastRing, GatheredAllreduce) compresses that shard, with the residual's
//     slice of the same elements;
//  2. communicate: the inner algorithm's collectives, across nodes;
//  3. finish: the inner algorithm's result for the shard, then an allgather
//     of the shards inside the node, the padding dropped.
// Every rank of a local index holds the same shard bits after step 2, and step
// 3 copies them, so every rank holds the same bits. The caller owns the
// buffers (workspace_bytes) and builds the inner algorithm over
// shard_count() elements.
#pragma once

#include <cstddef>
#include <memory>

#include "algorithms/allreduce.h"
#include "backends/transport.h"

namespace slimreduce::algorithms {

class Hierarchical {
 public:
  // Elements of one shard: count split into local_size equal parts, rounded up.
  static std::size_t shard_count(std::size_t count, int local_size) {
    return (count + local_size - 1) / static_cast<std::size_t>(local_size);
  }
  static std::size_t workspace_bytes(std::size_t count, int local_size);
  // Bytes a rank hands to the node transport for count floats: a ring
  // reduce-scatter and a ring allgather of fp32 shards, (L-1) shards each.
  static double intra_node_bytes(std::size_t count, int local_size);

  // workspace: workspace_bytes(count, node.size()) bytes, float-aligned.
  Hierarchical(backends::Transport& node, std::size_t count, std::byte* workspace,
               std::unique_ptr<Allreduce> inner);

  // Reduce-scatters inside the node, then compresses this rank's shard.
  Status compress(const float* input, float* residual);
  Status communicate() { return inner_->communicate(); }
  // Decodes the shard, then gathers every shard of the node into output.
  Status finish(float* output);

  // Bytes this rank hands to the transports: across nodes (the inner
  // algorithm's) and inside the node (a ring reduce-scatter and a ring
  // allgather of fp32 shards, (L-1) shards each).
  double inter_node_sent() const { return inner_->wire_sent(); }
  double intra_node_sent() const { return intra_node_bytes(count_, node_.size()); }
  double wire_sent() const { return inter_node_sent() + intra_node_sent(); }
  // Whether this rank's shard was rescued from an overflow across nodes.
  bool overflow_rescued() const { return inner_->overflow_rescued(); }

 private:
  // The count splits into node.size() equal shards: no padding anywhere.
  bool even() const { return shard_ * node_.size() == count_; }
  // This rank's elements of the tensor: [offset, offset + valid).
  std::size_t offset() const { return shard_ * node_.rank(); }
  std::size_t valid() const;

  backends::Transport& node_;
  std::size_t count_;
  std::size_t shard_;
  float* padded_;    // node.size() shards: the padded input, then the gathered result
  float* in_;        // this rank's shard of the node's sum
  float* out_;       // the shard reduced across nodes
  float* residual_;  // the shard's slice of the residual, zero past the tensor
  float* copied_residual_ = nullptr;  // where residual_ goes back to, when it is a copy
  std::unique_ptr<Allreduce> inner_;
};

}  // namespace slimreduce::algorithms
