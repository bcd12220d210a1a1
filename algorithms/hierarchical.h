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
//
// The same steps serve host memory (the MPI paths: the inner algorithm's host
// entry points, std::copy) and device memory (the NCCL path: its kernels and
// copies enqueued on the call's stream, through a Shard). A stream-ordered
// path runs the finer stages at the points its group allows: stage() before
// the group's collectives, scatter() among them, the rest after the group
// ends, when the node's sum is there for the compress kernels to read.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/allreduce.h"
#include "backends/transport.h"

namespace slimreduce::algorithms {

class Hierarchical {
 public:
  // The inner algorithm on this rank's shard, and the local copies around
  // it, where the shards live: the host (an Allreduce's host entry points,
  // std::copy), or a device path's kernels and copies on its stream.
  class Shard {
   public:
    virtual ~Shard() = default;
    virtual Status compress(const float* input, float* residual) = 0;
    virtual Status communicate() = 0;
    virtual Status finish(float* output) = 0;
    virtual double wire_sent() const = 0;
    virtual bool overflow_rescued() const { return false; }
    virtual Status copy(const float* from, std::size_t n, float* to) = 0;
    virtual Status zero(float* to, std::size_t n) = 0;
  };

  // Elements of one shard: count split into local_size equal parts, rounded up.
  static std::size_t shard_count(std::size_t count, int local_size) {
    return (count + local_size - 1) / static_cast<std::size_t>(local_size);
  }
  static std::size_t workspace_bytes(std::size_t count, int local_size);
  // Bytes a rank hands to the node transport for count floats: a ring
  // reduce-scatter and a ring allgather of fp32 shards, (L-1) shards each.
  static double intra_node_bytes(std::size_t count, int local_size);
  // Why ranks on these nodes cannot reduce hierarchically (empty: they can);
  // node_of[r] names rank r's node. Every rank passes the same names, so
  // every rank gets the same verdict.
  static std::string flat_reason(const std::vector<int>& node_of);

  // workspace: workspace_bytes(count, node.size()) bytes, float-aligned.
  // Over host memory: inner's host entry points and std::copy.
  Hierarchical(backends::Transport& node, std::size_t count, std::byte* workspace,
               std::unique_ptr<Allreduce> inner);
  // Wherever `inner` works (device memory: its kernels and copies).
  Hierarchical(backends::Transport& node, std::size_t count, std::byte* workspace,
               std::unique_ptr<Shard> inner);

  // Reduce-scatters inside the node, then compresses this rank's shard.
  Status compress(const float* input, float* residual) {
    SLIMREDUCE_TRY(stage(input));
    SLIMREDUCE_TRY(scatter());
    return compress_shard(residual);
  }
  Status communicate() { return inner_->communicate(); }
  // Decodes the shard, then gathers every shard of the node into output.
  Status finish(float* output) {
    SLIMREDUCE_TRY(finish_shard());
    return gather(output);
  }

  // compress() and finish() in stages. stage: the padded copy of the input
  // (only where the count does not split evenly; local work); scatter: the
  // node's fp32 reduce-scatter; compress_shard: the inner compress of this
  // rank's shard with its slice of the residual; finish_shard: the inner
  // finish; gather: the node's allgather into output.
  Status stage(const float* input);
  Status scatter();
  Status compress_shard(float* residual);
  Status finish_shard();
  Status gather(float* output);

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
  float* padded_;                // node.size() shards: the padded input, then the gathered result
  float* in_;                    // this rank's shard of the node's sum
  float* out_;                   // the shard reduced across nodes
  float* residual_;              // the shard's slice of the residual, zero past the tensor
  const float* send_ = nullptr;  // what scatter() reduces: the input, or padded_
  float* copied_residual_ = nullptr;  // where residual_ goes back to, when it is a copy
  std::unique_ptr<Shard> inner_;
};

}  // namespace slimreduce::algorithms
