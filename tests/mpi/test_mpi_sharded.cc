// The sharded allreduce (algorithms/sharded.h) through core's host_allreduce
// over the real MPI (linked, no preload), 1 to 8 ranks: top-k sharded and
// int8 equal to independent float64 models of the algorithm (tests/mpi/sharded_model.h:
// each rank's selection and residual, the owners' sums, their second
// selection or dense 16-bit shard, and their residuals) over three calls on
// one key; the same bits on every rank; the report's bytes by hand; uneven
// shards, shards that receive nothing, all pairs in one shard, k larger
// than a shard; partitions; the transport's alltoallv, both ways.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "algorithms/wire_bytes.h"
#include "backends/mpi_transport.h"
#include "compressors/registry.h"
#include "core/mpi/comm_state.h"
#include "core/mpi/host_allreduce.h"
#include "tests/mpi/host_caller.h"
#include "tests/mpi/mpi_helpers.h"
#include "tests/mpi/mpi_test_main.h"
#include "tests/mpi/sharded_model.h"

namespace slimreduce::testing {
namespace {

// Rank r's input for call c: normal values, zero outside [zero_below, n)
// when asked (so that some shards receive nothing).
std::vector<float> input_of(int rank, int call, std::size_t n, std::size_t nonzero_from = 0) {
  std::mt19937 random(1000u * call + rank);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> values(n, 0.0f);
  for (std::size_t i = nonzero_from; i < n; ++i) values[i] = dist(random);
  return values;
}

compressors::CompressorOptions topk_options(double ratio, bool fp16_values,
                                            compressors::TopkAlgorithm algorithm) {
  compressors::CompressorOptions options;
  options.topk_ratio = ratio;
  options.topk_values_fp16 = fp16_values;
  options.topk_algorithm = algorithm;
  return options;
}

// Within float rounding of the model: fp32 sums in rank order against
// float64 sums. Where 16-bit values travel, a sum on a rounding boundary
// rounds one way here and the other way in the model, and the residual
// carries that step into the next calls: two 16-bit steps at `scale` (the
// largest value sent) then.
void expect_near_model(const std::vector<float>& got, const std::vector<double>& want,
                       bool sixteen_bit, double scale = 0.0) {
  for (double v : want) scale = std::max(scale, std::fabs(v));
  scale = std::max(scale, 1.0);
  std::size_t off = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double tolerance = 1e-5 * scale + (sixteen_bit ? scale / 512 : 0.0);
    if (std::fabs(got[i] - want[i]) > tolerance && ++off <= 5)
      ADD_FAILURE() << "value " << i << ": " << got[i] << " against the model's " << want[i];
  }
  EXPECT_EQ(off, 0u);
}

// count, ratio, fp16 values, error feedback
using TopkCase = std::tuple<std::size_t, double, bool, bool>;
class ShardedTopk : public ::testing::TestWithParam<TopkCase> {};

TEST_P(ShardedTopk, MatchesTheModelOverThreeCallsOnEveryRank) {
  const auto [count, ratio, fp16_values, error_feedback] = GetParam();
  Caller caller("topk", topk_options(ratio, fp16_values, compressors::TopkAlgorithm::sharded),
                count, error_feedback);
  const int ranks = caller.size(), rank = caller.rank();
  ShardedTopkModel model(ranks, count, ratio, fp16_values, error_feedback);
  for (int c = 0; c < 3; ++c) {
    SCOPED_TRACE("call " + std::to_string(c));
    std::vector<std::vector<float>> inputs;
    for (int r = 0; r < ranks; ++r) inputs.push_back(input_of(r, c, count));
    const std::vector<double> want = model.call(inputs);
    const std::vector<float> got = caller.call(inputs[rank]);
    EXPECT_TRUE(caller.reduced().sharded);
    bool any_dense = false;
    for (int s = 0; s < ranks; ++s) any_dense = any_dense || model.owner_dense(s);
    expect_near_model(got, want, any_dense || fp16_values);
    EXPECT_TRUE(identical_on_all_ranks(got.data(), got.size() * sizeof(float), MPI_COMM_WORLD));
    if (error_feedback) {
      // This rank's own selection is exact: its residual is the model's, bit for bit.
      EXPECT_EQ(caller.residual(), model.residual(rank)) << "call " << c;
      const std::vector<double>& owner = model.owner_residual(rank);
      ASSERT_EQ(caller.owner_residual().size(), owner.size());
      std::vector<float> owner_float(caller.owner_residual());
      double sent = 0.0;
      for (double v : want) sent = std::max(sent, std::fabs(v));
      expect_near_model(owner_float, owner, any_dense || fp16_values, sent);
    } else {
      EXPECT_TRUE(caller.owner_residual().empty());
    }
  }
}

TEST_P(ShardedTopk, WireBytesByHand) {
  const auto [count, ratio, fp16_values, error_feedback] = GetParam();
  Caller caller("topk", topk_options(ratio, fp16_values, compressors::TopkAlgorithm::sharded),
                count, error_feedback);
  const int ranks = caller.size(), rank = caller.rank();
  ShardedTopkModel model(ranks, count, ratio, fp16_values, error_feedback);
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < ranks; ++r) inputs.push_back(input_of(r, 0, count));
  model.call(inputs);
  caller.call(inputs[rank]);
  const std::size_t entry = 4 + (fp16_values ? 2 : 4);
  double parts = 0;
  for (int s = 0; s < ranks; ++s) {
    if (s != rank) parts += (model.pairs(rank, s) * entry + 3) / 4 * 4;
  }
  std::size_t slot = 0;
  for (int s = 0; s < ranks; ++s) {
    const std::size_t body =
        model.owner_dense(s) ? 2 * model.count(s) : model_k(model.count(s), ratio) * entry;
    slot = std::max(slot, 4 + body);
  }
  slot = (slot + 7) / 8 * 8;
  EXPECT_DOUBLE_EQ(caller.reduced().wire_sent,
                   8.0 * (ranks - 1) + parts + algorithms::ring_allgather_wire_bytes(slot, ranks));
}

// Uneven counts (not divisible by 1..8), fewer values than ranks (empty
// shards), a high ratio (k larger than a shard: owners send dense 16 bits).
INSTANTIATE_TEST_SUITE_P(
    Counts, ShardedTopk,
    ::testing::Values(TopkCase{1, 0.01, false, true}, TopkCase{5, 0.5, false, true},
                      TopkCase{1001, 0.01, false, true}, TopkCase{4099, 0.05, false, true},
                      TopkCase{4099, 0.05, true, true}, TopkCase{4099, 0.05, false, false},
                      TopkCase{20011, 0.6, false, true}, TopkCase{65537, 0.01, true, true}));

TEST(ShardedTopkShards, AllPairsInOneShardOthersReceiveNothing) {
  const std::size_t count = 3000;
  Caller caller("topk", topk_options(0.01, false, compressors::TopkAlgorithm::sharded), count,
                true);
  const int ranks = caller.size(), rank = caller.rank();
  ShardedTopkModel model(ranks, count, 0.01, false, true);
  const std::size_t last_shard = count * (ranks - 1) / ranks;
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < ranks; ++r) inputs.push_back(input_of(r, 0, count, last_shard));
  const auto want = model.call(inputs);
  const auto got = caller.call(inputs[rank]);
  for (int s = 0; s + 1 < ranks; ++s) EXPECT_EQ(model.pairs(rank, s), 0u);
  expect_near_model(got, want, false);
  EXPECT_TRUE(identical_on_all_ranks(got.data(), got.size() * sizeof(float), MPI_COMM_WORLD));
}

TEST(ShardedTopkShards, PartitionsEachShardedWithTheirOwnOwnerResidual) {
  const std::size_t count = 50000;
  Caller whole("topk", topk_options(0.01, false, compressors::TopkAlgorithm::sharded), count, true);
  Caller cut("topk", topk_options(0.01, false, compressors::TopkAlgorithm::sharded), count, true);
  RunOptions options;
  options.partition_bytes = 64 * 1024;  // 50000 floats: 4 pieces
  for (int c = 0; c < 2; ++c) {
    const auto input = input_of(whole.rank(), c, count);
    whole.call(input);
    const auto got = cut.call(input, options);
    EXPECT_EQ(cut.reduced().partitions, 4u);
    EXPECT_TRUE(cut.reduced().sharded);
    EXPECT_TRUE(identical_on_all_ranks(got.data(), got.size() * sizeof(float), MPI_COMM_WORLD));
  }
  // Four pieces' owned shards, back to back: as long as the whole call's owned shard, or a
  // value or so longer.
  EXPECT_NEAR(double(cut.owner_residual().size()), double(whole.owner_residual().size()), 4.0);
}

TEST(ShardedTopkChoice, AutoGathersOnFewRanksAndShardsOnMany) {
  auto topk = compressors::make_compressor(
      "topk", topk_options(0.01, false, compressors::TopkAlgorithm::automatic));
  EXPECT_FALSE(topk->prefers_sharded(1 << 20, 1));
  EXPECT_FALSE(topk->prefers_sharded(1 << 20, 2));
  EXPECT_TRUE(topk->prefers_sharded(1 << 20, 8));
  EXPECT_TRUE(topk->prefers_sharded(1 << 20, 64));
  // Owners that would send dense 16-bit shards (ratio 0.3): gathered, exact in fp32.
  auto dense = compressors::make_compressor(
      "topk", topk_options(0.3, false, compressors::TopkAlgorithm::automatic));
  EXPECT_FALSE(dense->prefers_sharded(1 << 20, 64));
  auto gather = compressors::make_compressor(
      "topk", topk_options(0.01, false, compressors::TopkAlgorithm::gather));
  EXPECT_FALSE(gather->prefers_sharded(1 << 20, 64));
  auto sharded = compressors::make_compressor(
      "topk", topk_options(0.01, false, compressors::TopkAlgorithm::sharded));
  EXPECT_TRUE(sharded->prefers_sharded(1 << 20, 2));
}

using compressors::QuantCodes;

compressors::CompressorOptions int8_options(std::size_t bucket,
                                            QuantCodes codes = QuantCodes::absmax) {
  compressors::CompressorOptions options;
  options.quant_bucket = bucket;
  options.quant_codes = codes;
  return options;
}

// Two of the owner's 8-bit steps at the largest value: its requantization
// of a float64 sum may round one code apart from the model's fp32 one, and
// the owner residual carries that into the next call.
// With min-max codes, two steps of the widest owner bucket: 2 (max - min) / 251
// each at most (or an ulp of the largest value).
void expect_near_int8_model(const std::vector<float>& got, const std::vector<double>& want,
                            QuantCodes codes = QuantCodes::absmax) {
  double largest = 0.0, lo = 0.0, hi = 0.0;
  for (double v : want) {
    largest = std::max(largest, std::fabs(v));
    lo = std::min(lo, v), hi = std::max(hi, v);
  }
  const double minmax_step = std::max(2 * (hi - lo) / 251, largest * 0x1p-23);
  const double tolerance =
      (codes == QuantCodes::minmax ? 2.0 * minmax_step : 2.0 * largest / 126) + 1e-6;
  std::size_t off = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= tolerance) && ++off <= 5)
      ADD_FAILURE() << "value " << i << ": " << got[i] << " against the model's " << want[i];
  }
  EXPECT_EQ(off, 0u);
}

// count, bucket, error feedback, codes
using Int8Case = std::tuple<std::size_t, std::size_t, bool, QuantCodes>;
class ShardedInt8 : public ::testing::TestWithParam<Int8Case> {};

TEST_P(ShardedInt8, MatchesTheModelOverThreeCallsOnEveryRank) {
  const auto [count, bucket, error_feedback, codes] = GetParam();
  Caller caller("int8", int8_options(bucket, codes), count, error_feedback);
  const int ranks = caller.size(), rank = caller.rank();
  ShardedInt8Model model(ranks, count, bucket, error_feedback, codes == QuantCodes::minmax);
  for (int c = 0; c < 3; ++c) {
    SCOPED_TRACE("call " + std::to_string(c));
    std::vector<std::vector<float>> inputs;
    for (int r = 0; r < ranks; ++r) inputs.push_back(input_of(r, c, count));
    const std::vector<double> want = model.call(inputs);
    const std::vector<float> got = caller.call(inputs[rank]);
    EXPECT_TRUE(caller.reduced().sharded);
    expect_near_int8_model(got, want, codes);
    EXPECT_TRUE(identical_on_all_ranks(got.data(), got.size() * sizeof(float), MPI_COMM_WORLD));
    if (error_feedback) {
      // This rank's own quantization is exact: its residual is the model's, bit for bit.
      EXPECT_EQ(caller.residual(), model.residual(rank));
      EXPECT_EQ(caller.owner_residual().size(), model.count(rank));
    }
  }
}

TEST_P(ShardedInt8, WireBytesByHand) {
  const auto [count, bucket, error_feedback, codes] = GetParam();
  Caller caller("int8", int8_options(bucket, codes), count, error_feedback);
  const int ranks = caller.size(), rank = caller.rank();
  const ShardedInt8Model model(ranks, count, bucket, error_feedback);
  caller.call(input_of(rank, 0, count));
  const std::size_t per_bucket = codes == QuantCodes::minmax ? 8 : 4;  // scale, or step + offset
  const auto block = [bucket = bucket, per_bucket](std::size_t n) {
    return (n + bucket - 1) / bucket * per_bucket + n;
  };
  double parts = 0;
  std::size_t slot = 0;
  for (int s = 0; s < ranks; ++s) {
    if (s != rank) parts += (block(model.count(s)) + 3) / 4 * 4;
    slot = std::max(slot, block(model.count(s)));
  }
  slot = (slot + 7) / 8 * 8;
  EXPECT_DOUBLE_EQ(caller.reduced().wire_sent,
                   parts + algorithms::ring_allgather_wire_bytes(slot, ranks));
}

INSTANTIATE_TEST_SUITE_P(CountsBuckets, ShardedInt8,
                         ::testing::Values(Int8Case{1, 512, true, QuantCodes::absmax},
                                           Int8Case{5, 1, true, QuantCodes::absmax},
                                           Int8Case{1000, 7, true, QuantCodes::absmax},
                                           Int8Case{4099, 512, true, QuantCodes::absmax},
                                           Int8Case{4099, 512, false, QuantCodes::absmax},
                                           Int8Case{65537, 512, true, QuantCodes::absmax},
                                           Int8Case{65537, 4096, false, QuantCodes::absmax},
                                           Int8Case{1, 512, true, QuantCodes::minmax},
                                           Int8Case{5, 1, true, QuantCodes::minmax},
                                           Int8Case{1000, 7, true, QuantCodes::minmax},
                                           Int8Case{4099, 512, false, QuantCodes::minmax},
                                           Int8Case{65537, 512, true, QuantCodes::minmax}));

// An inf or NaN comes out where a plain sum has it, and nowhere else: the
// other values of its bucket stay finite.
class ShardedInt8Values : public ::testing::TestWithParam<QuantCodes> {};

TEST_P(ShardedInt8Values, InfAndNanWhereAPlainSumHasThem) {
  const std::size_t count = 5000;
  Caller caller("int8", int8_options(512, GetParam()), count, true);
  auto input = input_of(caller.rank(), 0, count);
  const float inf = std::numeric_limits<float>::infinity();
  if (caller.rank() == 0) input[10] = inf;
  if (caller.rank() == caller.size() - 1) input[2000] = std::nanf("");
  input[4000] = caller.rank() % 2 ? -inf : inf;  // inf - inf: NaN, with two ranks or more
  const auto got = caller.call(input);
  EXPECT_EQ(got[10], inf);
  EXPECT_TRUE(std::isnan(got[2000]));
  if (caller.size() == 1) {
    EXPECT_EQ(got[4000], inf);
  } else {
    EXPECT_TRUE(std::isnan(got[4000]));
  }
  for (std::size_t i = 0; i < count; ++i) {
    if (i != 10 && i != 2000 && i != 4000) {
      ASSERT_TRUE(std::isfinite(got[i])) << i;
    }
  }
  // The next call starts clean: a non-finite value is not carried in the residual.
  const auto next = caller.call(input_of(caller.rank(), 1, count));
  for (std::size_t i = 0; i < count; ++i) ASSERT_TRUE(std::isfinite(next[i])) << i;
}

INSTANTIATE_TEST_SUITE_P(Codes, ShardedInt8Values,
                         ::testing::Values(QuantCodes::absmax, QuantCodes::minmax));

// int4 and int2 (kernels/quant_packed.h, quant_packed_minmax.h): count,
// bucket, bits, error feedback, codes.
using PackedCase = std::tuple<std::size_t, std::size_t, int, bool, QuantCodes>;
class ShardedPacked : public ::testing::TestWithParam<PackedCase> {};

// One call within two rounds of half a step (each rank's, then its owner's,
// at most ranks * max|x| / (2 top) each; min-max's half step of a range is
// never more), its bytes by hand, the same bits on every rank; then two more
// calls on the key, still alike on every rank.
TEST_P(ShardedPacked, WithinTwoHalfStepsAndAlikeOnEveryRank) {
  const auto [count, bucket, bits, error_feedback, codes] = GetParam();
  compressors::CompressorOptions options = int8_options(bucket);
  options.quant_bits = bits;
  options.quant_codes = codes;
  Caller caller("quant", options, count, error_feedback);
  const int ranks = caller.size();
  std::vector<double> exact(count, 0.0);
  double largest = 0.0;
  for (int r = 0; r < ranks; ++r) {
    const auto in = input_of(r, 0, count);
    for (std::size_t i = 0; i < count; ++i)
      exact[i] += in[i], largest = std::max(largest, double(std::fabs(in[i])));
  }
  const auto got = caller.call(input_of(caller.rank(), 0, count));
  EXPECT_TRUE(caller.reduced().sharded);
  const double top = (1 << (bits - 1)) - 1;
  const double bound = 1.001 * ranks * largest / top;
  for (std::size_t i = 0; i < count; ++i) ASSERT_LE(std::fabs(got[i] - exact[i]), bound) << i;
  std::vector<std::size_t> bounds(ranks + 1);
  compressors::make_compressor("quant", options)
      ->sharded_codec()
      ->shard_bounds(count, ranks, bounds.data());
  double parts = 0;
  std::size_t slot = 0;
  for (int s = 0; s < ranks; ++s) {
    const std::size_t n = bounds[s + 1] - bounds[s], buckets = (n + bucket - 1) / bucket;
    // A scale, or lo and hi, per bucket; each bucket's codes from a byte.
    std::size_t block = (codes == QuantCodes::minmax ? 8 : 4) * buckets;
    for (std::size_t first = 0; first < n; first += bucket)
      block += (std::min(bucket, n - first) * bits + 7) / 8;
    if (s != caller.rank()) parts += (block + 3) / 4 * 4;
    slot = std::max(slot, block);
  }
  EXPECT_DOUBLE_EQ(caller.reduced().wire_sent,
                   parts + algorithms::ring_allgather_wire_bytes((slot + 7) / 8 * 8, ranks));
  for (int c = 0; c < 3; ++c) {
    const auto out = c == 0 ? got : caller.call(input_of(caller.rank(), c, count));
    EXPECT_TRUE(identical_on_all_ranks(out.data(), out.size() * sizeof(float), MPI_COMM_WORLD));
  }
}

// An inf or NaN comes out where a plain sum has it, and nowhere else.
TEST_P(ShardedPacked, InfAndNanWhereAPlainSumHasThem) {
  const auto [count, bucket, bits, error_feedback, codes] = GetParam();
  if (count < 3) GTEST_SKIP() << "needs three places; the larger counts run it";
  compressors::CompressorOptions options = int8_options(bucket);
  options.quant_bits = bits;
  options.quant_codes = codes;
  Caller caller("quant", options, count, error_feedback);
  auto input = input_of(caller.rank(), 0, count);
  const float inf = std::numeric_limits<float>::infinity();
  const std::size_t a = 0, b = count / 2, c = count - 1;
  if (caller.rank() == 0) input[a] = inf;
  if (caller.rank() == caller.size() - 1) input[b] = std::nanf("");
  input[c] = caller.rank() % 2 ? -inf : inf;  // inf - inf: NaN, with two ranks or more
  const auto got = caller.call(input);
  EXPECT_EQ(got[a], inf);
  EXPECT_TRUE(std::isnan(got[b]));
  EXPECT_TRUE(caller.size() == 1 ? got[c] == inf : std::isnan(got[c]));
  for (std::size_t i = 0; i < count; ++i) {
    if (i != a && i != b && i != c) {
      ASSERT_TRUE(std::isfinite(got[i])) << i;
    }
  }
  const auto next = caller.call(input_of(caller.rank(), 1, count));
  for (std::size_t i = 0; i < count; ++i) ASSERT_TRUE(std::isfinite(next[i])) << i;
}

INSTANTIATE_TEST_SUITE_P(CountsBucketsWidths, ShardedPacked,
                         ::testing::Values(PackedCase{1, 512, 4, true, QuantCodes::absmax},
                                           PackedCase{5, 1, 2, true, QuantCodes::absmax},
                                           PackedCase{1001, 7, 4, true, QuantCodes::absmax},
                                           PackedCase{1001, 7, 2, false, QuantCodes::absmax},
                                           PackedCase{4099, 512, 2, true, QuantCodes::absmax},
                                           PackedCase{65537, 512, 4, true, QuantCodes::absmax},
                                           PackedCase{65537, 4096, 2, false, QuantCodes::absmax},
                                           PackedCase{5, 1, 4, true, QuantCodes::minmax},
                                           PackedCase{1001, 7, 2, true, QuantCodes::minmax},
                                           PackedCase{4099, 512, 4, false, QuantCodes::minmax},
                                           PackedCase{65537, 512, 2, true, QuantCodes::minmax}));

// The transport's alltoallv: MPI's, and the default's pairwise steps.
class Alltoallv : public ::testing::TestWithParam<bool> {};

TEST_P(Alltoallv, EveryBlockArrivesFromItsSender) {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  const int ranks = world_size(), rank = world_rank();
  backends::MpiTransport transport(comm, rank, ranks);
  // Rank r sends (r + 2 d) % 5 bytes to rank d, each byte r * 16 + d.
  const auto bytes_from = [](int r, int d) { return std::size_t((r + 2 * d) % 5); };
  std::vector<std::size_t> send_bytes(ranks), recv_bytes(ranks);
  std::vector<unsigned char> send, want;
  for (int d = 0; d < ranks; ++d) {
    send_bytes[d] = bytes_from(rank, d);
    send.insert(send.end(), send_bytes[d], static_cast<unsigned char>(rank * 16 + d));
    recv_bytes[d] = bytes_from(d, rank);
    want.insert(want.end(), recv_bytes[d], static_cast<unsigned char>(d * 16 + rank));
  }
  send.push_back(0);  // never empty: data() of an empty vector may be null
  std::vector<unsigned char> got(want.size() + 1, 0xee);
  const Status status =
      GetParam()
          ? transport.alltoallv(send.data(), send_bytes.data(), got.data(), recv_bytes.data())
          : transport.backends::Transport::alltoallv(send.data(), send_bytes.data(), got.data(),
                                                     recv_bytes.data());
  EXPECT_TRUE(status.ok());
  got.pop_back();
  EXPECT_EQ(got, want);
  MPI_Comm_free(&comm);
}

INSTANTIATE_TEST_SUITE_P(MpiAndPairwise, Alltoallv, ::testing::Bool());

}  // namespace
}  // namespace slimreduce::testing

int main(int argc, char** argv) { return slimreduce::testing::run_all_tests_under_mpi(argc, argv); }
