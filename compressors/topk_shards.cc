#include "compressors/topk_shards.h"

#include <algorithm>
#include <cstring>

#include "compressors/compressor.h"
#include "kernels/cast.h"
#include "kernels/device.h"

namespace slimreduce::compressors {
namespace {

constexpr std::size_t kTagBytes = sizeof(std::uint32_t);

std::uint32_t tag_of(const std::byte* result) {
  std::uint32_t tag;
  std::memcpy(&tag, result, sizeof tag);
  return tag;
}

void put_tag(std::byte* result, OwnerFormat format) {
  const auto tag = static_cast<std::uint32_t>(format);
  std::memcpy(result, &tag, sizeof tag);
}

// The parts of a payload of payload_bytes, each padded (3 bytes at most): the payload itself sits
// behind them.
std::size_t parts_room(std::size_t payload_bytes, int ranks) {
  return ShardedCodec::padded_part(payload_bytes + 3 * static_cast<std::size_t>(ranks));
}

}  // namespace

void TopkShards::shard_bounds(std::size_t n, int ranks, std::size_t* bounds) {
  for (int s = 0; s <= ranks; ++s) bounds[s] = kernels::topk_shard_begin(n, ranks, s);
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

void TopkShards::compress_parts(const float* in, float* residual, std::size_t n, int ranks,
                                std::byte* out, std::size_t* part_bytes,
                                kernels::TopkScratch& scratch) const {
  const std::size_t k = kernels::topk_count(n, ratio_);
  std::byte* payload = out + parts_room(kernels::topk_payload_bytes(k, values_), ranks);
  kernels::topk_compress(in, residual, n, k, values_, payload, scratch);
  static_assert(sizeof(std::size_t) == sizeof(std::uint64_t));
  kernels::topk_split_parts(payload, k, values_, n, ranks, out,
                            reinterpret_cast<std::uint64_t*>(part_bytes));
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
  const bool wide = kernels::any_beyond_fp16(sum, owner_residual, count);
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

// Device scratch: [the selection's scratch (and the decode's, the owner's
// format flag: never needed at once) | this rank's payload | the split's].
namespace {
struct DeviceScratch {
  std::size_t shared, payload, split;
  DeviceScratch(std::size_t n, int ranks, std::size_t payload_bytes) {
    namespace device = kernels::device;
    using device::round256;
    shared = round256(std::max({device::topk_select_scratch_bytes(n),
                                device::topk_accumulate_scratch_bytes(n, 1), sizeof(unsigned)}));
    payload = round256(kernels::topk_payload_stride(payload_bytes));
    split = round256(device::topk_split_scratch_bytes(ranks));
  }
  std::size_t total() const { return shared + payload + split; }
};
}  // namespace

std::size_t TopkShards::device_scratch_bytes(std::size_t n, int ranks) const {
  return DeviceScratch(n, ranks,
                       kernels::topk_payload_bytes(kernels::topk_count(n, ratio_), values_))
      .total();
}

int TopkShards::device_compress_parts(const float* in, float* residual, std::size_t n, int ranks,
                                      std::byte* out, std::uint64_t* part_bytes, void* scratch,
                                      void* stream) const {
  namespace device = kernels::device;
  const std::size_t k = kernels::topk_count(n, ratio_);
  const std::size_t payload_bytes = kernels::topk_payload_bytes(k, values_);
  const DeviceScratch room(n, ranks, payload_bytes);
  auto* shared = static_cast<std::byte*>(scratch);
  std::byte* payload = shared + room.shared;
  const bool fp16 = values_ == kernels::TopkValues::fp16;
  if (const int rc = device::topk_select(device::Elem::fp32, in, residual, n, k, fp16, payload,
                                         room.payload, shared, stream))
    return rc;
  return device::topk_split_parts(payload, k, fp16, n, ranks, out, part_bytes,
                                  payload + room.payload, stream);
}

int TopkShards::device_owner_step(const std::byte* parts, const std::size_t* part_bytes, int ranks,
                                  std::size_t owned, float* shard, float* owner_residual,
                                  std::byte* result, std::size_t slot_bytes, void* scratch,
                                  void* stream) const {
  namespace device = kernels::device;
  const bool fp16 = values_ == kernels::TopkValues::fp16;
  if (const int rc = device::zero_bytes(shard, owned * sizeof(float), stream)) return rc;
  for (int r = 0; r < ranks; ++r) {  // in rank order: the same adds on every owner
    const std::size_t m = part_bytes[r] / (sizeof(std::uint32_t) + value_bytes());
    if (const int rc = device::topk_add_part(parts, m, fp16, owned, shard, stream)) return rc;
    parts += part_bytes[r];
  }
  const std::size_t bytes = owner_bytes(owned);
  if (slot_bytes > bytes) {  // the padding travels too
    if (const int rc = device::zero_bytes(result + bytes, slot_bytes - bytes, stream)) return rc;
  }
  if (owner_dense(owned)) {
    return device::owner_cast16(shard, owner_residual, owned, result,
                                static_cast<unsigned*>(scratch),
                                static_cast<std::uint32_t>(OwnerFormat::fp16),
                                static_cast<std::uint32_t>(OwnerFormat::bf16), stream);
  }
  if (const int rc = device::zero_bytes(result, kTagBytes, stream)) return rc;  // OwnerFormat::topk
  return device::topk_select(device::Elem::fp32, shard, owner_residual, owned,
                             kernels::topk_count(owned, ratio_), fp16, result + kTagBytes,
                             bytes - kTagBytes, scratch, stream);
}

int TopkShards::device_decode_results(const std::byte* gathered, std::size_t slot_bytes,
                                      const std::size_t* bounds, int ranks, float* out, int divisor,
                                      void* scratch, void* stream) const {
  namespace device = kernels::device;
  const bool fp16 = values_ == kernels::TopkValues::fp16;
  for (int s = 0; s < ranks; ++s) {
    const std::size_t count = bounds[s + 1] - bounds[s];
    const std::byte* result = gathered + slot_bytes * s;
    if (count == 0) continue;
    const int rc =
        owner_dense(count)
            ? device::owner_decode16(result, count, out + bounds[s], divisor,
                                     static_cast<std::uint32_t>(OwnerFormat::bf16), stream)
            : device::topk_accumulate(
                  result + kTagBytes, slot_bytes - kTagBytes, 1, kernels::topk_count(count, ratio_),
                  fp16, count, device::Elem::fp32, out + bounds[s], divisor, scratch, stream);
    if (rc) return rc;
  }
  return 0;
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
