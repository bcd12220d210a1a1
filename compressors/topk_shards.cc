#include "compressors/topk_shards.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "compressors/compressor.h"
#include "kernels/cast.h"

namespace slimreduce::compressors {
namespace {

constexpr std::size_t kTagBytes = sizeof(std::uint32_t);
// The smallest finite magnitude fp16 rounds to inf (the midpoint of 65504 and 2^16).
constexpr float kFp16Overflow = 65520.0f;

std::uint32_t tag_of(const std::byte* result) {
  std::uint32_t tag;
  std::memcpy(&tag, result, sizeof tag);
  return tag;
}

void put_tag(std::byte* result, OwnerFormat format) {
  const auto tag = static_cast<std::uint32_t>(format);
  std::memcpy(result, &tag, sizeof tag);
}

// Whether acc = sum + residual (as the cast forms it) has a finite value
// that fp16 cannot hold.
bool beyond_fp16(const float* sum, const float* residual, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    const float acc = residual ? sum[i] + residual[i] : sum[i];
    if (std::isfinite(acc) && std::fabs(acc) >= kFp16Overflow) return true;
  }
  return false;
}

// The parts of a payload of payload_bytes, each padded (3 bytes at most): the payload itself sits
// behind them.
std::size_t parts_room(std::size_t payload_bytes, int ranks) {
  return ShardedCodec::padded_part(payload_bytes + 3 * static_cast<std::size_t>(ranks));
}

}  // namespace

void TopkShards::shard_bounds(std::size_t n, int ranks, std::size_t* bounds) {
  const auto shards = static_cast<std::size_t>(ranks);
  for (std::size_t s = 0; s <= shards; ++s) {
    // n / shards * s + the remainder's share: no n * s that could overflow.
    bounds[s] = n / shards * s + n % shards * s / shards;
  }
}

std::size_t TopkShards::part_capacity(std::size_t count, std::size_t n) const {
  return ShardedCodec::padded_part(
      kernels::topk_payload_bytes(std::min(kernels::topk_count(n, ratio_), count), values_));
}

std::size_t TopkShards::parts_capacity(std::size_t n, int ranks) const {
  // Each part may gain up to 3 bytes of padding; the payload sits behind them all.
  const std::size_t payload = kernels::topk_payload_bytes(kernels::topk_count(n, ratio_), values_);
  return parts_room(payload, ranks) + payload;
}

void TopkShards::compress_parts(const float* in, float* residual, std::size_t n,
                                const std::size_t* bounds, int ranks, std::byte* out,
                                std::size_t* part_bytes, kernels::TopkScratch& scratch) const {
  const std::size_t k = kernels::topk_count(n, ratio_);
  std::byte* payload = out + parts_room(kernels::topk_payload_bytes(k, values_), ranks);
  kernels::topk_compress(in, residual, n, k, values_, payload, scratch);
  const auto* indices = reinterpret_cast<const std::uint32_t*>(payload);
  const std::byte* values = payload + k * sizeof(std::uint32_t);
  std::size_t first = 0;  // the payload's first entry in shard s (indices ascend)
  for (int s = 0; s < ranks; ++s) {
    const std::size_t end = std::lower_bound(indices + first, indices + k, bounds[s + 1]) - indices;
    const std::size_t m = end - first;
    auto* part_indices = reinterpret_cast<std::uint32_t*>(out);
    for (std::size_t i = 0; i < m; ++i) {
      part_indices[i] = indices[first + i] - static_cast<std::uint32_t>(bounds[s]);
    }
    std::memcpy(out + m * sizeof(std::uint32_t), values + first * value_bytes(), m * value_bytes());
    const std::size_t bytes = kernels::topk_payload_bytes(m, values_);
    part_bytes[s] = ShardedCodec::padded_part(bytes);
    std::memset(out + bytes, 0, part_bytes[s] - bytes);
    out += part_bytes[s];
    first = end;
  }
}

bool TopkShards::part_valid(const std::byte* part, std::size_t bytes, std::size_t count,
                            std::size_t n) const {
  const std::size_t m = bytes / (sizeof(std::uint32_t) + value_bytes());
  if (ShardedCodec::padded_part(kernels::topk_payload_bytes(m, values_)) != bytes ||
      bytes > part_capacity(count, n))
    return false;
  return kernels::topk_payload_valid(part, m, count);
}

void TopkShards::accumulate_part(const std::byte* part, std::size_t bytes, float* shard) const {
  const std::size_t m = bytes / (sizeof(std::uint32_t) + value_bytes());
  kernels::topk_accumulate(part, m, values_, shard);
}

bool TopkShards::owner_dense(std::size_t count) const {
  const std::size_t k = kernels::topk_count(count, ratio_);
  return kernels::topk_payload_bytes(k, values_) >= count * sizeof(std::uint16_t);
}

std::size_t TopkShards::owner_bytes(std::size_t count) const {
  if (owner_dense(count)) return kTagBytes + count * sizeof(std::uint16_t);
  return kTagBytes + kernels::topk_payload_bytes(kernels::topk_count(count, ratio_), values_);
}

void TopkShards::owner_compress(const float* sum, float* owner_residual, std::size_t count,
                                std::byte* out, kernels::TopkScratch& scratch) const {
  std::byte* body = out + kTagBytes;
  if (!owner_dense(count)) {
    put_tag(out, OwnerFormat::topk);
    kernels::topk_compress(sum, owner_residual, count, kernels::topk_count(count, ratio_), values_,
                           body, scratch);
    return;
  }
  const bool wide = beyond_fp16(sum, owner_residual, count);
  put_tag(out, wide ? OwnerFormat::bf16 : OwnerFormat::fp16);
  kernels::compress(wide ? kernels::HalfFormat::bf16 : kernels::HalfFormat::fp16, sum,
                    owner_residual, reinterpret_cast<std::uint16_t*>(body), count);
}

bool TopkShards::owner_valid(const std::byte* result, std::size_t count) const {
  const std::uint32_t tag = tag_of(result);
  if (!owner_dense(count)) {
    return tag == static_cast<std::uint32_t>(OwnerFormat::topk) &&
           kernels::topk_payload_valid(result + kTagBytes, kernels::topk_count(count, ratio_),
                                       count);
  }
  return tag == static_cast<std::uint32_t>(OwnerFormat::fp16) ||
         tag == static_cast<std::uint32_t>(OwnerFormat::bf16);
}

void TopkShards::owner_decode(const std::byte* result, std::size_t count, float* out) const {
  const std::byte* body = result + kTagBytes;
  switch (static_cast<OwnerFormat>(tag_of(result))) {
    case OwnerFormat::topk:
      std::fill_n(out, count, 0.0f);
      kernels::topk_accumulate(body, kernels::topk_count(count, ratio_), values_, out);
      return;
    case OwnerFormat::fp16:
    case OwnerFormat::bf16:
      kernels::decompress(static_cast<OwnerFormat>(tag_of(result)) == OwnerFormat::bf16
                              ? kernels::HalfFormat::bf16
                              : kernels::HalfFormat::fp16,
                          reinterpret_cast<const std::uint16_t*>(body), out, count);
      return;
  }
}

double TopkShards::gathered_wire_bytes(std::size_t n, int ranks) const {
  return static_cast<double>(ranks - 1) *
         static_cast<double>(kernels::topk_payload_bytes(kernels::topk_count(n, ratio_), values_));
}

double TopkShards::sharded_wire_bytes(std::size_t n, int ranks) const {
  const double payload =
      static_cast<double>(kernels::topk_payload_bytes(kernels::topk_count(n, ratio_), values_));
  // The largest shard is the first ceil(n / ranks): its result sets the allgather's slot.
  const std::size_t largest = (n + static_cast<std::size_t>(ranks) - 1) / ranks;
  const double slot = static_cast<double>(owner_bytes(largest));
  return payload * (ranks - 1) / ranks + 8.0 * (ranks - 1) + slot * (ranks - 1);
}

}  // namespace slimreduce::compressors
