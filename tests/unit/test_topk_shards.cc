// Top-k's side of the sharded algorithm (compressors/topk_shards.h): the parts
// a payload is cut into hold exactly its pairs, shard by shard, with
// shard-relative indices; the owner's result picks top-k or dense 16 bits by
// size alone (bf16 where fp16 would overflow); the checks refuse every part
// and result that could make a decoder write outside its shard.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "compressors/topk_shards.h"
#include "kernels/topk.h"

namespace slimreduce::compressors {
namespace {

std::vector<float> normal(std::size_t n, unsigned seed) {
  std::mt19937 random(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> values(n);
  for (float& v : values) v = dist(random);
  return values;
}

// n, ranks, ratio, fp16 values
using Case = std::tuple<std::size_t, int, double, bool>;
class Parts : public ::testing::TestWithParam<Case> {};

TEST_P(Parts, HoldThePayloadsPairsShardByShard) {
  const auto [n, ranks, ratio, fp16] = GetParam();
  const auto values = fp16 ? kernels::TopkValues::fp16 : kernels::TopkValues::fp32;
  const TopkShards shards(ratio, values);
  std::vector<std::size_t> bounds(ranks + 1);
  TopkShards::shard_bounds(n, ranks, bounds.data());
  ASSERT_EQ(bounds.front(), 0u);
  ASSERT_EQ(bounds.back(), n);
  const auto input = normal(n, 7);
  const std::size_t k = kernels::topk_count(n, ratio);
  std::vector<std::byte> payload(kernels::topk_payload_bytes(k, values));
  kernels::TopkScratch scratch;
  kernels::topk_compress(input.data(), nullptr, n, k, values, payload.data(), scratch);
  std::vector<float> whole(n, 0.0f);
  kernels::topk_accumulate(payload.data(), k, values, whole.data());

  std::vector<std::byte> parts(shards.parts_capacity(n, ranks));
  std::vector<std::size_t> part_bytes(ranks);
  shards.compress_parts(input.data(), nullptr, n, ranks, parts.data(), part_bytes.data(), scratch);
  std::vector<float> rebuilt(n, 0.0f);
  const std::byte* part = parts.data();
  for (int s = 0; s < ranks; ++s) {
    const std::size_t count = bounds[s + 1] - bounds[s];
    EXPECT_EQ(part_bytes[s] % 4, 0u);
    EXPECT_LE(part_bytes[s], shards.part_capacity(count, n));
    ASSERT_TRUE(shards.part_valid(part, part_bytes[s], count, n)) << "shard " << s;
    shards.accumulate_part(part, part_bytes[s], rebuilt.data() + bounds[s]);
    part += part_bytes[s];
  }
  EXPECT_EQ(rebuilt, whole);
}

INSTANTIATE_TEST_SUITE_P(Sizes, Parts,
                         ::testing::Values(Case{1, 1, 0.01, false}, Case{3, 8, 0.5, false},
                                           Case{1000, 3, 0.01, true}, Case{4099, 7, 0.05, false},
                                           Case{4099, 7, 0.05, true}, Case{65536, 16, 0.3, false}));

// kernels::topk_split_parts (the device kernel's twin) on a payload whose
// pairs all fall in shard 0: that part holds them all, with its padding, and
// every other part is empty; one shard of a single value takes one pair.
TEST(Parts, AllPairsInOneShardLeaveTheOthersEmpty) {
  for (const auto values : {kernels::TopkValues::fp32, kernels::TopkValues::fp16}) {
    const std::size_t n = 1000, k = 5;
    const int ranks = 8;
    const std::size_t value_bytes = values == kernels::TopkValues::fp16 ? 2 : 4;
    std::vector<std::byte> payload(kernels::topk_payload_bytes(k, values));
    const std::uint32_t index[k] = {0, 3, 50, 100, 124};  // shard 0 is [0, 125)
    std::memcpy(payload.data(), index, sizeof index);
    for (std::size_t i = 0; i < k * value_bytes; ++i)
      payload[k * 4 + i] = static_cast<std::byte>(0x11 + i);
    std::vector<std::byte> parts(payload.size() + 3 * ranks, std::byte{0x5a});
    std::vector<std::uint64_t> part_bytes(ranks, 99);
    kernels::topk_split_parts(payload.data(), k, values, n, ranks, parts.data(), part_bytes.data());
    EXPECT_EQ(part_bytes[0], (k * (4 + value_bytes) + 3) / 4 * 4);
    for (int s = 1; s < ranks; ++s) EXPECT_EQ(part_bytes[s], 0u) << "shard " << s;
    EXPECT_EQ(std::memcmp(parts.data(), payload.data(), payload.size()), 0)
        << "shard 0 begins at 0: its indices and values are the payload's";
    for (std::size_t b = payload.size(); b < part_bytes[0]; ++b)
      EXPECT_EQ(parts[b], std::byte{0}) << "padding byte " << b;
  }
  // 9 values over 8 shards: shard 7 is [7, 9); the pair at 8 becomes index 1 there.
  const std::uint32_t index[2] = {2, 8};
  const float value[2] = {1.0f, -2.0f};
  std::vector<std::byte> payload(16);
  std::memcpy(payload.data(), index, 8);
  std::memcpy(payload.data() + 8, value, 8);
  std::vector<std::byte> parts(16 + 24);
  std::vector<std::uint64_t> part_bytes(8);
  kernels::topk_split_parts(payload.data(), 2, kernels::TopkValues::fp32, 9, 8, parts.data(),
                            part_bytes.data());
  const std::vector<std::uint64_t> want = {0, 0, 8, 0, 0, 0, 0, 8};
  EXPECT_EQ(part_bytes, want);
  std::uint32_t shifted[2];
  std::memcpy(&shifted[0], parts.data(), 4);
  std::memcpy(&shifted[1], parts.data() + 8, 4);
  EXPECT_EQ(shifted[0], 0u) << "index 2 is the first of shard 2, [2, 3)";
  EXPECT_EQ(shifted[1], 1u);
}

TEST(Parts, ChecksRefuseWhatCouldLeaveTheShard) {
  const TopkShards shards(0.5, kernels::TopkValues::fp32);
  const std::size_t n = 100, count = 10;
  // Two pairs, indices 3 and 7, as compress_parts writes them.
  std::vector<std::uint32_t> words = {3, 7, 0x3f800000u, 0x40000000u};
  auto part = reinterpret_cast<std::byte*>(words.data());
  EXPECT_TRUE(shards.part_valid(part, 16, count, n));
  EXPECT_FALSE(shards.part_valid(part, 12, count, n)) << "a size that is no whole pair";
  EXPECT_FALSE(shards.part_valid(part, 1 << 20, count, n)) << "more pairs than the shard holds";
  words[1] = 10;
  EXPECT_FALSE(shards.part_valid(part, 16, count, n)) << "an index past the shard";
  words[1] = 3;
  EXPECT_FALSE(shards.part_valid(part, 16, count, n)) << "indices that do not ascend";
}

TEST(OwnerResult, TopkOrDenseBySizeAlone) {
  const TopkShards sparse(0.01, kernels::TopkValues::fp32);
  EXPECT_FALSE(sparse.owner_dense(10000));
  EXPECT_EQ(sparse.owner_bytes(10000), 4 + 100 * 8u);
  const TopkShards dense(0.3, kernels::TopkValues::fp32);
  EXPECT_TRUE(dense.owner_dense(10000));
  EXPECT_EQ(dense.owner_bytes(10000), 4 + 10000 * 2u);
  EXPECT_EQ(dense.owner_bytes(0), 4u);
}

TEST(OwnerResult, DenseShardGoesBf16WhereFp16WouldOverflow) {
  const TopkShards shards(0.5, kernels::TopkValues::fp32);
  const std::size_t count = 8;
  std::vector<float> sum = {1.5f, -2.0f, 70000.0f, 0.25f, 0, 0, 0, 3.0f};
  std::vector<std::byte> result(shards.owner_bytes(count));
  kernels::TopkScratch scratch;
  std::vector<float> residual(count, 0.0f);
  shards.owner_compress(sum.data(), residual.data(), count, result.data(), scratch);
  std::uint32_t tag;
  std::memcpy(&tag, result.data(), 4);
  EXPECT_EQ(tag, static_cast<std::uint32_t>(OwnerFormat::bf16));
  std::vector<float> out(count);
  ASSERT_TRUE(shards.owner_valid(result.data(), count));
  shards.owner_decode(result.data(), count, out.data());
  for (std::size_t i = 0; i < count; ++i) {
    EXPECT_TRUE(std::isfinite(out[i]));
    EXPECT_EQ(out[i] + residual[i], sum[i]) << i;  // what was not sent is kept
  }
  sum[2] = 700.0f;
  shards.owner_compress(sum.data(), nullptr, count, result.data(), scratch);
  std::memcpy(&tag, result.data(), 4);
  EXPECT_EQ(tag, static_cast<std::uint32_t>(OwnerFormat::fp16));
}

TEST(OwnerResult, ChecksRefuseABadTagOrIndex) {
  const TopkShards sparse(0.01, kernels::TopkValues::fp32);
  const std::size_t count = 1000;  // k_o = 10
  auto sum = normal(count, 3);
  std::vector<std::byte> result(sparse.owner_bytes(count));
  kernels::TopkScratch scratch;
  sparse.owner_compress(sum.data(), nullptr, count, result.data(), scratch);
  EXPECT_TRUE(sparse.owner_valid(result.data(), count));
  std::uint32_t word = static_cast<std::uint32_t>(OwnerFormat::fp16);
  std::memcpy(result.data(), &word, 4);
  EXPECT_FALSE(sparse.owner_valid(result.data(), count)) << "dense tag on a top-k result";
  word = static_cast<std::uint32_t>(OwnerFormat::topk);
  std::memcpy(result.data(), &word, 4);
  word = 5000;  // the last index, past the shard
  std::memcpy(result.data() + 4 + 9 * 4, &word, 4);
  EXPECT_FALSE(sparse.owner_valid(result.data(), count));

  const TopkShards dense(0.5, kernels::TopkValues::fp32);
  std::vector<std::byte> dense_result(dense.owner_bytes(count));
  word = 7;
  std::memcpy(dense_result.data(), &word, 4);
  EXPECT_FALSE(dense.owner_valid(dense_result.data(), count)) << "no such format";
}

}  // namespace
}  // namespace slimreduce::compressors
