// Stochastic rounding (SLIMREDUCE_QUANT_ROUNDING=stochastic, kernels/rounding.h)
// through the sharded algorithm over the real MPI (core's host_allreduce,
// linked, no preload), 1 to 4 ranks, at every width and with both codes:
// the same bits on every rank; a rerun with the same seed, rank and call
// number the same bits, another seed or call number others; cut into
// partitions, still alike on every rank; and without error feedback the
// result unbiased: over calls of their own numbers, each value's mean is the
// exact sum within what its spread allows, where nearest rounding's is not.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "tests/mpi/host_caller.h"
#include "tests/mpi/mpi_helpers.h"
#include "tests/mpi/mpi_test_main.h"
#include "tests/reference/bias_statistic.h"

namespace slimreduce::testing {
namespace {

using compressors::QuantCodes;
using compressors::QuantRounding;

compressors::CompressorOptions stochastic(QuantCodes codes, std::uint64_t seed,
                                          QuantRounding rounding = QuantRounding::stochastic) {
  compressors::CompressorOptions options;
  options.quant_bucket = 64;
  options.quant_codes = codes;
  options.quant_rounding = rounding;
  options.quant_seed = seed;
  return options;
}

// Rank r's values: normal, of scales 2^-2..2^2 by stretches of 29, every
// third bucket of 64 moved to 20.
std::vector<float> input_of(int rank, std::size_t n) {
  std::mt19937 random(77u + rank);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; ++i) {
    values[i] = dist(random) * std::ldexp(1.0f, int(i / 29 % 5) - 2);
    if (i / 64 % 3 == 2) values[i] += 20.0f;
  }
  return values;
}

// The exact sum of every rank's values, in double.
std::vector<double> exact_sum(int ranks, std::size_t n) {
  std::vector<double> sum(n, 0.0);
  for (int r = 0; r < ranks; ++r) {
    const std::vector<float> values = input_of(r, n);
    for (std::size_t i = 0; i < n; ++i) sum[i] += values[i];
  }
  return sum;
}

using Case = std::tuple<std::string, QuantCodes>;  // compressor, codes
class Stochastic : public ::testing::TestWithParam<Case> {
 protected:
  const std::string& name() const { return std::get<0>(GetParam()); }
  QuantCodes codes() const { return std::get<1>(GetParam()); }
};

TEST_P(Stochastic, AlikeOnEveryRankAndReproducible) {
  const std::size_t n = 4099;
  Caller first(name(), stochastic(codes(), 5), n, true);
  Caller again(name(), stochastic(codes(), 5), n, true);
  Caller other_seed(name(), stochastic(codes(), 6), n, true);
  const std::vector<float> input = input_of(first.rank(), n);
  for (std::uint64_t c = 0; c < 3; ++c) {
    SCOPED_TRACE("call " + std::to_string(c));
    const compressors::CallDraw draw{c, first.rank()};
    const std::vector<float> got = first.call(input, {}, draw);
    EXPECT_TRUE(first.reduced().sharded);
    EXPECT_TRUE(identical_on_all_ranks(got.data(), n * sizeof(float), MPI_COMM_WORLD));
    EXPECT_EQ(again.call(input, {}, draw), got) << "the same seed, rank and call";
    EXPECT_NE(other_seed.call(input, {}, draw), got) << "another seed";
  }
  // The same state, another call number: other draws.
  Caller fresh(name(), stochastic(codes(), 5), n, true);
  Caller renumbered(name(), stochastic(codes(), 5), n, true);
  EXPECT_NE(fresh.call(input, {}, {0, first.rank()}),
            renumbered.call(input, {}, {1, first.rank()}));
}

TEST_P(Stochastic, PartitionsAlikeOnEveryRank) {
  const std::size_t n = 20000;
  Caller caller(name(), stochastic(codes(), 9), n, true);
  RunOptions cut;
  cut.partition_bytes = 16 * 1024;  // pieces of 4096 values
  for (std::uint64_t c = 0; c < 2; ++c) {
    const std::vector<float> got = caller.call(input_of(caller.rank(), n), cut, {c, caller.rank()});
    EXPECT_GT(caller.reduced().partitions, 1u);
    EXPECT_TRUE(identical_on_all_ranks(got.data(), n * sizeof(float), MPI_COMM_WORLD));
  }
}

TEST_P(Stochastic, UnbiasedWithoutErrorFeedback) {
  const std::size_t n = 1500;
  constexpr int kCalls = 300;
  Caller caller(name(), stochastic(codes(), 3), n, false);
  const std::vector<float> input = input_of(caller.rank(), n);
  const std::vector<double> want = exact_sum(caller.size(), n);
  std::vector<double> sum(n, 0.0), sum_sq(n, 0.0);
  for (int c = 0; c < kCalls; ++c) {
    const std::vector<float> got = caller.call(input, {}, {std::uint64_t(c), caller.rank()});
    for (std::size_t i = 0; i < n; ++i) {
      const double error = double(got[i]) - want[i];
      sum[i] += error, sum_sq[i] += error * error;
    }
  }
  // reference::bias_statistic: z about standard normal when unbiased; rounding
  // to nearest, the same codes on every call, has no spread and a bias.
  const reference::BiasStatistic stat = reference::bias_statistic(sum, sum_sq, kCalls);
  ASSERT_GT(stat.varying, int(n) / 2) << "the codes move with the call number";
  EXPECT_LT(stat.z, 6.0) << "squared mean errors beyond their variance";
}

INSTANTIATE_TEST_SUITE_P(WidthsCodes, Stochastic,
                         ::testing::Combine(::testing::Values("int8", "int4", "int2"),
                                            ::testing::Values(QuantCodes::absmax,
                                                              QuantCodes::minmax)),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::get<0>(info.param) +
                                  (std::get<1>(info.param) == QuantCodes::minmax ? "_minmax"
                                                                                 : "_absmax");
                         });

}  // namespace
}  // namespace slimreduce::testing

int main(int argc, char** argv) { return slimreduce::testing::run_all_tests_under_mpi(argc, argv); }
