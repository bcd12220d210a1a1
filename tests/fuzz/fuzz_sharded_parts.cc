// libFuzzer target: the sharded algorithm's parts and owner results as they
// may arrive from other ranks (algorithms/sharded.h, docs/reliability.md).
// The first 8 bytes choose the codec (top-k with fp32 or fp16 values, or
// int8 with absmax or min-max codes), the tensor's n (at most 4096 values), the ranks (1 to 8), the
// shard and the ratio or bucket; the rest is one part, then one owner result. What the codec's
// checks accept is decoded into its shard (AddressSanitizer sees any write out of bounds), and
// nothing accepted may be larger than the shard's capacity.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "compressors/registry.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace slimreduce::compressors;
  if (size < 8) return 0;
  const int codec_choice = data[0] % 4;  // 3: int8 with min-max codes
  const std::size_t n = (std::size_t{data[1]} << 4 | data[2] >> 4) % 4097;
  const int ranks = 1 + data[3] % 8;
  const int shard = data[4] % ranks;
  CompressorOptions options;
  options.topk_ratio = (1 + data[5]) / 256.0;
  options.topk_values_fp16 = codec_choice == 1;
  options.quant_bucket = 1 + (std::size_t{data[6]} << 2 | data[7] >> 6);
  options.quant_codes = codec_choice == 3 ? QuantCodes::minmax : QuantCodes::absmax;
  auto compressor = make_compressor(codec_choice >= 2 ? "int8" : "topk", options);
  ShardedCodec& codec = *compressor->sharded_codec();
  std::vector<std::size_t> bounds(ranks + 1);
  codec.shard_bounds(n, ranks, bounds.data());
  const std::size_t count = bounds[shard + 1] - bounds[shard];
  const std::size_t rest = size - 8;
  const std::size_t part_bytes = std::min(rest, codec.part_capacity(count, n) + 8);
  std::vector<std::byte> part(part_bytes + 1);
  std::memcpy(part.data(), data + 8, part_bytes);
  std::vector<float> values(count, 0.0f);
  if (codec.part_valid(part.data(), part_bytes, count, n)) {
    if (part_bytes > codec.part_capacity(count, n)) std::abort();
    codec.accumulate_part(part.data(), part_bytes, count, n, values.data());
  }
  std::vector<std::byte> result(codec.owner_bytes(count, n) + 1, std::byte{0});
  std::memcpy(result.data(), data + 8 + part_bytes, std::min(result.size() - 1, rest - part_bytes));
  if (codec.owner_valid(result.data(), count, n))
    codec.owner_decode(result.data(), count, n, values.data());
  return 0;
}
