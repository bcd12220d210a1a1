#include "algorithms/sharded.h"

#include <algorithm>
#include <cstring>

#include "algorithms/wire_bytes.h"

namespace slimreduce::algorithms {
namespace {

// Sizes travel as 8-byte counts, whatever the platform's size_t.
static_assert(sizeof(std::size_t) == sizeof(std::uint64_t));

constexpr std::size_t kAlign = 64;
std::size_t aligned(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// Where a call's buffers lie, from the codec, the count and the ranks alone.
struct Layout {
  std::vector<std::size_t> bounds;
  std::size_t sizes = 0;      // the parts' sizes, sent then received (where they vary)
  std::size_t owned = 0;      // this rank's shard
  std::size_t send = 0;       // all of this rank's parts
  std::size_t recv_part = 0;  // one rank's part of this rank's shard, at most
  std::size_t slot = 0;       // one owner's result, padded to 8 bytes

  Layout(const compressors::ShardedCodec& codec, std::size_t count, int ranks, int rank)
      : bounds(static_cast<std::size_t>(ranks) + 1) {
    codec.shard_bounds(count, ranks, bounds.data());
    owned = bounds[rank + 1] - bounds[rank];
    if (codec.part_sizes_vary())
      sizes = 2 * static_cast<std::size_t>(ranks) * sizeof(std::uint64_t);
    send = codec.parts_capacity(count, ranks);
    recv_part = codec.part_capacity(owned, count);
    for (int s = 0; s < ranks; ++s) {
      slot = std::max(slot, codec.owner_bytes(bounds[s + 1] - bounds[s], count));
    }
    slot = (slot + 7) / 8 * 8;
  }
  std::size_t recv(int ranks) const { return recv_part * static_cast<std::size_t>(ranks); }
  std::size_t gathered(int ranks) const { return slot * static_cast<std::size_t>(ranks); }
};

}  // namespace

std::size_t ShardedAllreduce::wire_bytes(const compressors::ShardedCodec& codec, std::size_t count,
                                         int ranks, int rank) {
  const Layout layout(codec, count, ranks, rank);
  return aligned(layout.sizes) + aligned(layout.send) + aligned(layout.recv(ranks)) +
         layout.gathered(ranks);
}

std::size_t ShardedAllreduce::scratch_bytes(const compressors::ShardedCodec& codec,
                                            std::size_t count, int ranks, int rank) {
  const Layout layout(codec, count, ranks, rank);
  return aligned(layout.owned * sizeof(float)) + layout.slot;
}

std::size_t ShardedAllreduce::owned_count(const compressors::ShardedCodec& codec, std::size_t count,
                                          int ranks, int rank) {
  return Layout(codec, count, ranks, rank).owned;
}

ShardedAllreduce::ShardedAllreduce(backends::Transport& transport, compressors::ShardedCodec& codec,
                                   std::size_t count, float* owner_residual, std::byte* wire,
                                   std::byte* scratch, const compressors::CallDraw& draw)
    : transport_(transport),
      codec_(codec),
      count_(count),
      draw_(draw),
      send_bytes_(transport.size(), 0),
      recv_bytes_(transport.size(), 0),
      owner_residual_(owner_residual) {
  const int ranks = transport.size();
  Layout layout(codec, count, ranks, transport.rank());
  bounds_ = std::move(layout.bounds);
  owned_ = layout.owned;
  part_most_ = layout.recv_part;
  slot_bytes_ = layout.slot;
  sizes_ = layout.sizes ? reinterpret_cast<std::uint64_t*>(wire) : nullptr;
  send_ = wire + aligned(layout.sizes);
  recv_ = send_ + aligned(layout.send);
  gathered_ = recv_ + aligned(layout.recv(ranks));
  shard_ = reinterpret_cast<float*>(scratch);
  result_ = scratch + aligned(layout.owned * sizeof(float));
  if (!codec.part_sizes_vary()) {
    // Sizes from the bounds alone: each part is as large as it can be.
    for (int r = 0; r < ranks; ++r) {
      send_bytes_[r] = codec.part_capacity(bounds_[r + 1] - bounds_[r], count);
      recv_bytes_[r] = part_most_;
    }
  }
}

void ShardedAllreduce::compress(const float* input, float* residual) {
  feeds_back_ = residual != nullptr;
  codec_.compress_parts(input, residual, count_, bounds_.data(), transport_.size(), send_,
                        send_bytes_.data(), draw_);
}

// The sizes first, where they vary, then the parts. The sizes travel from
// the wire buffer (where a device's compress wrote them) and are read back
// to the host (on a stream-ordered transport: a host wait). A size larger
// than this rank's shard allows is received as nothing (the sender's bytes
// are then refused by the transport, not written past the buffer) and fails
// the call.
Status ShardedAllreduce::exchange_parts() {
  const int ranks = transport_.size();
  bool sizes_fit = true;
  if (codec_.part_sizes_vary()) {
    if (!device_owner_) std::copy(send_bytes_.begin(), send_bytes_.end(), sizes_);
    const std::vector<std::size_t> eight(ranks, sizeof(std::uint64_t));
    SLIMREDUCE_TRY(transport_.alltoallv(sizes_, eight.data(), sizes_ + ranks, eight.data()));
    std::vector<std::uint64_t> sizes(2 * static_cast<std::size_t>(ranks));
    SLIMREDUCE_TRY(
        transport_.read_back(sizes.data(), sizes_, sizes.size() * sizeof(std::uint64_t)));
    for (int r = 0; r < ranks; ++r) {
      send_bytes_[r] = sizes[r];
      recv_bytes_[r] = sizes[ranks + r];
      // Our own sizes, from the device: a part past its room would have been
      // written past the send buffer's.
      if (send_bytes_[r] > codec_.part_capacity(bounds_[r + 1] - bounds_[r], count_))
        return Status::internal();
      if (recv_bytes_[r] > part_most_) {
        sizes_fit = false;
        recv_bytes_[r] = 0;
      }
    }
  }
  SLIMREDUCE_TRY(transport_.alltoallv(send_, send_bytes_.data(), recv_, recv_bytes_.data()));
  return sizes_fit ? Status{} : Status::internal();
}

Status ShardedAllreduce::check_parts() const {
  if (!transport_.host_readable()) return {};
  const std::byte* part = recv_;
  for (const std::size_t bytes : recv_bytes_) {
    if (!codec_.part_valid(part, bytes, owned_, count_)) return Status::internal();
    part += bytes;
  }
  return {};
}

Status ShardedAllreduce::check_results() const {
  if (!transport_.host_readable()) return {};
  for (int s = 0; s < transport_.size(); ++s) {
    if (!codec_.owner_valid(gathered_ + slot_bytes_ * s, bounds_[s + 1] - bounds_[s], count_))
      return Status::internal();
  }
  return {};
}

Status ShardedAllreduce::reduce_owned() {
  float* owner_residual = feeds_back_ ? owner_residual_ : nullptr;
  if (device_owner_) {
    return Status::cuda(device_owner_->device_owner_step(
        recv_, recv_bytes_.data(), transport_.size(), owned_, count_, shard_, owner_residual,
        result_, slot_bytes_, device_scratch_, stream_, owner_draw()));
  }
  std::fill_n(shard_, owned_, 0.0f);
  const std::byte* part = recv_;
  for (const std::size_t bytes : recv_bytes_) {  // in rank order: the same adds on every owner
    codec_.accumulate_part(part, bytes, owned_, count_, shard_);
    part += bytes;
  }
  const std::size_t result_bytes = codec_.owner_bytes(owned_, count_);
  std::memset(result_ + result_bytes, 0, slot_bytes_ - result_bytes);  // the padding travels too
  codec_.owner_compress(shard_, owner_residual, owned_, count_, result_, owner_draw());
  return {};
}

Status ShardedAllreduce::communicate() {
  SLIMREDUCE_TRY(exchange_parts());
  SLIMREDUCE_TRY(check_parts());
  SLIMREDUCE_TRY(reduce_owned());
  SLIMREDUCE_TRY(transport_.allgather(result_, slot_bytes_, gathered_));
  return check_results();
}

void ShardedAllreduce::finish(float* output) const {
  for (int s = 0; s < transport_.size(); ++s) {
    codec_.owner_decode(gathered_ + slot_bytes_ * s, bounds_[s + 1] - bounds_[s], count_,
                        output + bounds_[s]);
  }
}

std::size_t ShardedAllreduce::parts_bytes() const {
  std::size_t bytes = 0;
  for (const std::size_t part : send_bytes_) bytes += part;
  return bytes;
}

namespace {

// What a rank sends: the sizes (where they vary), its parts to the other
// owners, and a ring allgather of one result slot.
double sent_by(const std::vector<std::size_t>& part_bytes, bool sizes_vary, std::size_t slot,
               int rank) {
  const int ranks = static_cast<int>(part_bytes.size());
  double sent = sizes_vary ? 8.0 * (ranks - 1) : 0.0;
  for (int r = 0; r < ranks; ++r) {
    if (r != rank) sent += static_cast<double>(part_bytes[r]);
  }
  return sent + ring_allgather_wire_bytes(slot, ranks);
}

}  // namespace

double ShardedAllreduce::wire_sent() const {
  return sent_by(send_bytes_, codec_.part_sizes_vary(), slot_bytes_, transport_.rank());
}

double ShardedAllreduce::fixed_wire_sent(const compressors::ShardedCodec& codec, std::size_t count,
                                         int ranks, int rank) {
  const Layout layout(codec, count, ranks, rank);
  std::vector<std::size_t> part_bytes(ranks);
  for (int r = 0; r < ranks; ++r)
    part_bytes[r] = codec.part_capacity(layout.bounds[r + 1] - layout.bounds[r], count);
  return sent_by(part_bytes, false, layout.slot, rank);
}

}  // namespace slimreduce::algorithms
