#include "algorithms/hierarchical.h"

#include <algorithm>
#include <map>

#include "algorithms/wire_bytes.h"

namespace slimreduce::algorithms {
namespace {

// Each part of the workspace starts 256 bytes in: device kernels read their
// buffers with vector loads when they are aligned.
constexpr std::size_t kPartFloats = 64;
std::size_t part(std::size_t floats) {
  return (floats + kPartFloats - 1) / kPartFloats * kPartFloats;
}

// The host's shard: the inner algorithm's host entry points and std::copy.
class HostShard final : public Hierarchical::Shard {
 public:
  explicit HostShard(std::unique_ptr<Allreduce> inner) : inner_(std::move(inner)) {}
  Status compress(const float* input, float* residual) override {
    inner_->compress(input, residual);
    return {};
  }
  Status communicate() override { return inner_->communicate(); }
  Status finish(float* output) override {
    inner_->finish(output);
    return {};
  }
  double wire_sent() const override { return inner_->wire_sent(); }
  bool overflow_rescued() const override { return inner_->overflow_rescued(); }
  Status copy(const float* from, std::size_t n, float* to) override {
    std::copy_n(from, n, to);
    return {};
  }
  Status zero(float* to, std::size_t n) override {
    std::fill_n(to, n, 0.0f);
    return {};
  }

 private:
  std::unique_ptr<Allreduce> inner_;
};

}  // namespace

std::size_t Hierarchical::workspace_bytes(std::size_t count, int local_size) {
  const std::size_t shard = shard_count(count, local_size);
  return (part(shard * local_size) + 3 * part(shard)) * sizeof(float);
}

std::string Hierarchical::flat_reason(const std::vector<int>& node_of) {
  std::map<int, int> ranks_of;
  for (int node : node_of) ++ranks_of[node];
  if (ranks_of.size() < 2) return "one node";
  const int local = ranks_of.begin()->second;
  for (const auto& [node, ranks] : ranks_of) {
    if (ranks != local) return "nodes of unequal size";
  }
  if (local < 2) return "one rank per node";
  return {};
}

Hierarchical::Hierarchical(backends::Transport& node, std::size_t count, std::byte* workspace,
                           std::unique_ptr<Allreduce> inner)
    : Hierarchical(node, count, workspace, std::make_unique<HostShard>(std::move(inner))) {}

Hierarchical::Hierarchical(backends::Transport& node, std::size_t count, std::byte* workspace,
                           std::unique_ptr<Shard> inner)
    : node_(node),
      count_(count),
      shard_(shard_count(count, node.size())),
      padded_(reinterpret_cast<float*>(workspace)),
      in_(padded_ + part(shard_ * node.size())),
      out_(in_ + part(shard_)),
      residual_(out_ + part(shard_)),
      inner_(std::move(inner)) {}

std::size_t Hierarchical::valid() const {
  return offset() >= count_ ? 0 : std::min(shard_, count_ - offset());
}

Status Hierarchical::stage(const float* input) {
  // Padded only where the count does not split into equal shards.
  send_ = input;
  if (even()) return {};
  SLIMREDUCE_TRY(inner_->copy(input, count_, padded_));
  SLIMREDUCE_TRY(inner_->zero(padded_ + count_, shard_ * node_.size() - count_));
  send_ = padded_;
  return {};
}

Status Hierarchical::scatter() { return node_.reduce_scatter_sum(send_, in_, shard_); }

Status Hierarchical::compress_shard(float* residual) {
  // The residual of this rank's elements, in place when the shard holds no
  // padding; else a copy whose padding stays zero (its input is zero).
  float* shard_residual = residual && valid() == shard_ ? residual + offset() : nullptr;
  if (residual && !shard_residual) {
    SLIMREDUCE_TRY(inner_->copy(residual + offset(), valid(), residual_));
    SLIMREDUCE_TRY(inner_->zero(residual_ + valid(), shard_ - valid()));
    shard_residual = residual_;
  }
  SLIMREDUCE_TRY(inner_->compress(in_, shard_residual));
  // Copied back after finish() too: a low-rank algorithm writes its residual there.
  copied_residual_ = shard_residual == residual_ ? residual + offset() : nullptr;
  if (copied_residual_) return inner_->copy(residual_, valid(), copied_residual_);
  return {};
}

Status Hierarchical::finish_shard() {
  SLIMREDUCE_TRY(inner_->finish(out_));
  if (copied_residual_) return inner_->copy(residual_, valid(), copied_residual_);
  return {};
}

Status Hierarchical::gather(float* output) {
  float* gathered = even() ? output : padded_;
  SLIMREDUCE_TRY(node_.allgather(out_, shard_ * sizeof(float), gathered));
  if (!even()) return inner_->copy(padded_, count_, output);
  return {};
}

double Hierarchical::intra_node_bytes(std::size_t count, int local_size) {
  const double shard_bytes = static_cast<double>(shard_count(count, local_size)) * sizeof(float);
  return 2.0 * (local_size - 1) * shard_bytes;
}

}  // namespace slimreduce::algorithms
