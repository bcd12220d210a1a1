#include "algorithms/hierarchical.h"

#include <algorithm>

#include "algorithms/wire_bytes.h"

namespace slimreduce::algorithms {

std::size_t Hierarchical::workspace_bytes(std::size_t count, int local_size) {
  const std::size_t shard = shard_count(count, local_size);
  return (shard * local_size + 3 * shard) * sizeof(float);
}

Hierarchical::Hierarchical(backends::Transport& node, std::size_t count, std::byte* workspace,
                           std::unique_ptr<Allreduce> inner)
    : node_(node),
      count_(count),
      shard_(shard_count(count, node.size())),
      padded_(reinterpret_cast<float*>(workspace)),
      in_(padded_ + shard_ * node.size()),
      out_(in_ + shard_),
      residual_(out_ + shard_),
      inner_(std::move(inner)) {}

std::size_t Hierarchical::valid() const {
  return offset() >= count_ ? 0 : std::min(shard_, count_ - offset());
}

Status Hierarchical::compress(const float* input, float* residual) {
  // Padded only where the count does not split into equal shards.
  const float* send = input;
  if (!even()) {
    std::copy_n(input, count_, padded_);
    std::fill(padded_ + count_, padded_ + shard_ * node_.size(), 0.0f);
    send = padded_;
  }
  SLIMREDUCE_TRY(node_.reduce_scatter_sum(send, in_, shard_));
  // The residual of this rank's elements, in place when the shard holds no
  // padding; else a copy whose padding stays zero (its input is zero).
  float* shard_residual = residual && valid() == shard_ ? residual + offset() : nullptr;
  if (residual && !shard_residual) {
    std::copy_n(residual + offset(), valid(), residual_);
    std::fill(residual_ + valid(), residual_ + shard_, 0.0f);
    shard_residual = residual_;
  }
  inner_->compress(in_, shard_residual);
  // Copied back after finish() too: a low-rank algorithm writes its residual there.
  copied_residual_ = shard_residual == residual_ ? residual + offset() : nullptr;
  if (copied_residual_) std::copy_n(residual_, valid(), copied_residual_);
  return {};
}

Status Hierarchical::finish(float* output) {
  inner_->finish(out_);
  if (copied_residual_) std::copy_n(residual_, valid(), copied_residual_);
  float* gathered = even() ? output : padded_;
  SLIMREDUCE_TRY(node_.allgather(out_, shard_ * sizeof(float), gathered));
  if (!even()) std::copy_n(padded_, count_, output);
  return {};
}

double Hierarchical::intra_node_bytes(std::size_t count, int local_size) {
  const double shard_bytes = static_cast<double>(shard_count(count, local_size)) * sizeof(float);
  return 2.0 * (local_size - 1) * shard_bytes;
}

}  // namespace slimreduce::algorithms
