#include "compressors/bucketed_quantizer.h"

#include <cstring>

#include "kernels/device.h"

namespace slimreduce::compressors {

void BucketedQuantizer::shard_bounds(std::size_t n, int ranks, std::size_t* bounds) const {
  whole_bucket_bounds(n, bucket_, buckets(n), ranks, bounds);
}

void BucketedQuantizer::compress_parts(const float* in, float* residual, std::size_t n,
                                       const std::size_t* bounds, int ranks, std::byte* out,
                                       std::size_t* part_bytes, const CallDraw& draw) {
  for (int s = 0; s < ranks; ++s) {
    const std::size_t count = bounds[s + 1] - bounds[s];
    const std::size_t bytes = block_bytes(count);
    encode(in + bounds[s], residual ? residual + bounds[s] : nullptr, count, out,
           rounding(draw.at(bounds[s]), kRankPhase));
    part_bytes[s] = part_capacity(count, n);
    std::memset(out + bytes, 0, part_bytes[s] - bytes);
    out += part_bytes[s];
  }
}

int BucketedQuantizer::device_compress_parts(const float* in, float* residual, std::size_t n,
                                             const std::size_t* bounds, int ranks, std::byte* out,
                                             std::uint64_t* part_bytes, void* scratch, void* stream,
                                             const CallDraw& draw) const {
  (void)part_bytes, (void)scratch;  // sizes do not vary; no scratch
  for (int s = 0; s < ranks; ++s) {
    const std::size_t count = bounds[s + 1] - bounds[s];
    const std::size_t bytes = block_bytes(count);
    const std::size_t part = part_capacity(count, n);
    if (const int rc = device_encode(in + bounds[s], residual ? residual + bounds[s] : nullptr,
                                     count, out, rounding(draw.at(bounds[s]), kRankPhase), stream))
      return rc;
    if (part > bytes) {
      if (const int rc = kernels::device::zero_bytes(out + bytes, part - bytes, stream)) return rc;
    }
    out += part;
  }
  return 0;
}

int BucketedQuantizer::device_decode_results(const std::byte* gathered, std::size_t slot_bytes,
                                             std::size_t n, const std::size_t* bounds, int ranks,
                                             float* out, int divisor, void* scratch,
                                             void* stream) const {
  (void)n, (void)scratch;
  for (int s = 0; s < ranks; ++s) {
    const std::size_t count = bounds[s + 1] - bounds[s];
    if (const int rc =
            device_decode(gathered + slot_bytes * s, count, out + bounds[s], divisor, stream))
      return rc;
  }
  return 0;
}

int BucketedQuantizer::device_owner_step(const std::byte* parts, const std::size_t* part_bytes,
                                         int ranks, std::size_t owned, std::size_t n, float* shard,
                                         float* owner_residual, std::byte* result,
                                         std::size_t slot_bytes, void* scratch, void* stream,
                                         const CallDraw& draw) const {
  namespace device = kernels::device;
  (void)scratch;
  const std::size_t result_bytes = owner_bytes(owned, n);
  if (const int rc = device::zero_bytes(shard, owned * sizeof(float), stream)) return rc;
  for (int r = 0; r < ranks; ++r) {  // in rank order: the same adds on every owner
    if (const int rc = device_add(parts, owned, shard, stream)) return rc;
    parts += part_bytes[r];
  }
  if (slot_bytes > result_bytes) {
    if (const int rc = device::zero_bytes(result + result_bytes, slot_bytes - result_bytes, stream))
      return rc;
  }
  return device_encode(shard, owner_residual, owned, result, rounding(draw, kOwnerPhase), stream);
}

}  // namespace slimreduce::compressors
