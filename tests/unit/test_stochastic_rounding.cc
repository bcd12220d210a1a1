// Tests for stochastic rounding (kernels/rounding.h) in every quantizer
// (SLIMREDUCE_QUANT_ROUNDING=stochastic): the rule itself (only floor or
// floor + 1, unbiased, snapped on a code), and for each codec (8-bit absmax
// and min-max, 4- and 2-bit absmax and min-max) over sizes and buckets:
// every ISA the same bits as the scalar path (a draw's element number
// carried past 2^32 too), each decoded value within one step of its input,
// unbiased over seeds, reproducible from its key and apart for another seed,
// rank, call or phase, a block's offset honoured, constant buckets exact, and
// NaN and inf where they went in.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/quant8.h"
#include "kernels/quant8_minmax.h"
#include "kernels/quant_packed.h"
#include "kernels/quant_packed_minmax.h"
#include "kernels/rounding.h"
#include "tests/reference/bias_statistic.h"

namespace slimreduce::kernels {
namespace {

std::vector<Isa> usable_isas() {
  std::vector<Isa> isas;
  for (const Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    if (static_cast<int>(isa) <= static_cast<int>(best_isa())) isas.push_back(isa);
  }
  return isas;
}

// ------------------------------------------------------------- the rule ----

TEST(StochasticRound, FloorOrNextAndUnbiased) {
  for (const float r : {0.3f, -2.75f, 5.5f, 125.9f, -125.01f, 0.999f, 7.0f / 3.0f}) {
    const double floor_r = std::floor(double(r));
    double sum = 0;
    constexpr int kDraws = 1 << 16;
    for (int i = 0; i < kDraws; ++i) {
      const int code = stochastic_round(r, rounding_draw(rounding_key(1, 0, 0, 0), i));
      ASSERT_TRUE(code == floor_r || code == floor_r + 1) << r << " -> " << code;
      sum += code;
    }
    // frac(1 - frac) / draws is the variance of the mean: within 5 standard errors.
    const double frac = double(r) - floor_r, mean = sum / kDraws;
    EXPECT_NEAR(mean, r, 5 * std::sqrt(frac * (1 - frac) / kDraws) + 1e-7) << r;
  }
}

TEST(StochasticRound, CodesAndNearCodesStayPut) {
  const Rounding key = rounding_key(3, 1, 2, 0);
  for (std::uint64_t i = 0; i < 4096; ++i) {
    const std::uint32_t draw = rounding_draw(key, i);
    for (const float code : {-126.0f, -1.0f, 0.0f, 1.0f, 7.0f, 126.0f}) {
      ASSERT_EQ(stochastic_round(code, draw), int(code));
      // fp32's error in a position worked out by a quotient (126 - 2^-17 and so on).
      ASSERT_EQ(stochastic_round(std::nextafter(code, -200.0f), draw), int(code)) << code;
      ASSERT_EQ(stochastic_round(std::nextafter(code, 200.0f), draw), int(code)) << code;
    }
  }
}

TEST(StochasticRound, DrawsDifferByElementAndKey) {
  const Rounding a = rounding_key(0, 0, 0, 0);
  std::vector<std::uint32_t> draws;
  for (std::uint64_t i = 0; i < 1024; ++i) draws.push_back(rounding_draw(a, i));
  std::sort(draws.begin(), draws.end());
  EXPECT_EQ(std::adjacent_find(draws.begin(), draws.end()), draws.end()) << "elements collide";
  for (const Rounding& other : {rounding_key(1, 0, 0, 0), rounding_key(0, 1, 0, 0),
                                rounding_key(0, 0, 1, 0), rounding_key(0, 0, 0, 1)}) {
    int same = 0;
    for (std::uint64_t i = 0; i < 1024; ++i) same += rounding_draw(a, i) == rounding_draw(other, i);
    EXPECT_LE(same, 2) << "a key apart draws apart";
  }
  // The element number's high word counts: elements 2^32 apart draw apart.
  EXPECT_NE(rounding_draw(a, 5), rounding_draw(a, (std::uint64_t{1} << 32) + 5));
  EXPECT_EQ(rounding_draw(a.at(10), 5), rounding_draw(a, 15));
}

// -------------------------------------------------------------- codecs ----

enum class Codec { quant8, quant8_minmax, packed4, packed2, minmax4, minmax2 };

std::string codec_name(Codec c) {
  switch (c) {
    case Codec::quant8:
      return "quant8";
    case Codec::quant8_minmax:
      return "quant8_minmax";
    case Codec::packed4:
      return "packed4";
    case Codec::packed2:
      return "packed2";
    case Codec::minmax4:
      return "minmax4";
    case Codec::minmax2:
      return "minmax2";
  }
  return "?";
}

int bits_of(Codec c) {
  return c == Codec::packed4 || c == Codec::minmax4   ? 4
         : c == Codec::packed2 || c == Codec::minmax2 ? 2
                                                      : 8;
}

std::size_t block_bytes(Codec c, std::size_t n, std::size_t bucket) {
  switch (c) {
    case Codec::quant8:
      return quant8_bytes(n, bucket);
    case Codec::quant8_minmax:
      return quant8_minmax_bytes(n, bucket);
    case Codec::packed4:
    case Codec::packed2:
      return quant_packed_bytes(n, bucket, bits_of(c));
    case Codec::minmax4:
    case Codec::minmax2:
      return quant_packed_minmax_bytes(n, bucket, bits_of(c));
  }
  return 0;
}

void compress(Codec c, const float* in, float* residual, std::size_t n, std::size_t bucket,
              std::uint8_t* out, Isa isa, const Rounding& rounding) {
  switch (c) {
    case Codec::quant8:
      return quant8_compress(in, residual, n, bucket, out, isa, rounding);
    case Codec::quant8_minmax:
      return quant8_minmax_compress(in, residual, n, bucket, out, isa, rounding);
    case Codec::packed4:
    case Codec::packed2:
      return quant_packed_compress(in, residual, n, bucket, bits_of(c), out, isa, rounding);
    case Codec::minmax4:
    case Codec::minmax2:
      return quant_packed_minmax_compress(in, residual, n, bucket, bits_of(c), out, isa, rounding);
  }
}

void decompress(Codec c, const std::uint8_t* block, std::size_t n, std::size_t bucket, float* out) {
  switch (c) {
    case Codec::quant8:
      return quant8_decompress(block, n, bucket, out);
    case Codec::quant8_minmax:
      return quant8_minmax_decompress(block, n, bucket, out);
    case Codec::packed4:
    case Codec::packed2:
      return quant_packed_decompress(block, n, bucket, bits_of(c), out);
    case Codec::minmax4:
    case Codec::minmax2:
      return quant_packed_minmax_decompress(block, n, bucket, bits_of(c), out);
  }
}

struct Coded {
  std::vector<std::uint8_t> block;
  std::vector<float> residual, decoded;
};

Coded code(Codec c, const std::vector<float>& in, std::size_t bucket, Isa isa,
           const Rounding& rounding, bool with_residual = false) {
  Coded out{std::vector<std::uint8_t>(block_bytes(c, in.size(), bucket)),
            std::vector<float>(with_residual ? in.size() : 0, 0.0f), std::vector<float>(in.size())};
  compress(c, in.data(), with_residual ? out.residual.data() : nullptr, in.size(), bucket,
           out.block.data(), isa, rounding);
  decompress(c, out.block.data(), in.size(), bucket, out.decoded.data());
  return out;
}

// Normal values of scales 2^-3..2^3 by stretches of 37, every third bucket
// moved away from 0; NaN and infs where asked.
std::vector<float> sample(std::size_t n, std::size_t bucket, unsigned seed, bool specials) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = normal(rng) * std::ldexp(1.0f, int(i / 37 % 7) - 3);
    if (i / bucket % 3 == 2) v[i] += 40.0f;
  }
  if (specials && n > 8) {
    v[n / 5] = std::numeric_limits<float>::quiet_NaN();
    v[n / 2] = std::numeric_limits<float>::infinity();
    v[n - 2] = -std::numeric_limits<float>::infinity();
  }
  return v;
}

// One step of the bucket holding value i, from its finite values (each
// codec's step as its header states it), with fp32's rounding on top.
double step_bound(Codec c, const std::vector<float>& in, std::size_t bucket, std::size_t i) {
  const std::size_t first = i / bucket * bucket, last = std::min(in.size(), first + bucket);
  float lo = INFINITY, hi = -INFINITY;
  bool marked = false;
  for (std::size_t j = first; j < last; ++j) {
    if (std::isinf(in[j])) marked = true;
    if (!std::isfinite(in[j])) continue;
    lo = std::min(lo, in[j]), hi = std::max(hi, in[j]);
  }
  const double m = std::max(std::fabs(double(lo)), std::fabs(double(hi)));
  const double slack = m * std::ldexp(1.0, -20);
  switch (c) {
    case Codec::quant8:
      return m / 126 + slack;
    case Codec::quant8_minmax:
      return 2 * quant8_minmax_error_bound(lo, hi) + slack;
    case Codec::packed4:
    case Codec::packed2: {
      const int top = (1 << (bits_of(c) - 1)) - (marked ? 2 : 1);
      return top == 0 ? m : m / top + slack;
    }
    case Codec::minmax4:
    case Codec::minmax2: {
      const int top = (1 << bits_of(c)) - (marked ? 4 : 2);
      return top == 0 ? (double(hi) - lo) / 2 + slack : (double(hi) - lo) / top + slack;
    }
  }
  return 0;
}

using Case = std::tuple<Codec, std::size_t, std::size_t>;  // codec, n, bucket

class StochasticCodec : public ::testing::TestWithParam<Case> {
 protected:
  Codec codec() const { return std::get<0>(GetParam()); }
  std::size_t n() const { return std::get<1>(GetParam()); }
  std::size_t bucket() const { return std::get<2>(GetParam()); }
};

TEST_P(StochasticCodec, EveryIsaGivesTheScalarBits) {
  for (const bool specials : {false, true}) {
    const std::vector<float> in = sample(n(), bucket(), 11, specials);
    // Element numbers that carry into the high word inside a block of lanes.
    const Rounding key = rounding_key(5, 3, 9, 0, (std::uint64_t{1} << 32) - 13);
    const Coded scalar = code(codec(), in, bucket(), Isa::scalar, key, true);
    for (const Isa isa : usable_isas()) {
      const Coded other = code(codec(), in, bucket(), isa, key, true);
      EXPECT_EQ(other.block, scalar.block) << "isa " << int(isa) << " specials " << specials;
      EXPECT_EQ(0, std::memcmp(other.residual.data(), scalar.residual.data(), n() * 4))
          << "isa " << int(isa);
    }
  }
}

TEST_P(StochasticCodec, WithinOneStepAndSpecialsInPlace) {
  const std::vector<float> in = sample(n(), bucket(), 12, true);
  const Coded out = code(codec(), in, bucket(), best_isa(), rounding_key(0, 0, 0, 0));
  for (std::size_t i = 0; i < n(); ++i) {
    if (!std::isfinite(in[i])) {
      EXPECT_EQ(std::isnan(in[i]), std::isnan(out.decoded[i])) << i;
      if (std::isinf(in[i])) {
        EXPECT_EQ(in[i], out.decoded[i]) << i;
      }
      continue;
    }
    ASSERT_LE(std::fabs(double(out.decoded[i]) - in[i]), step_bound(codec(), in, bucket(), i))
        << "value " << i << " = " << in[i];
  }
}

TEST_P(StochasticCodec, UnbiasedOverSeeds) {
  const std::vector<float> in = sample(n(), bucket(), 13, false);
  constexpr int kSeeds = 400;
  std::vector<double> sum(n(), 0.0), sum_sq(n(), 0.0);
  for (int seed = 0; seed < kSeeds; ++seed) {
    const Coded out = code(codec(), in, bucket(), best_isa(), rounding_key(seed, 0, 0, 0, 77));
    for (std::size_t i = 0; i < n(); ++i) {
      const double error = double(out.decoded[i]) - in[i];
      sum[i] += error, sum_sq[i] += error * error;
    }
  }
  // Each value: its mean error within 5 standard errors of the widest
  // two-point spread (half a step), plus the snap's bias (below 2^-16 of a
  // step); all values: reference::bias_statistic's z below 6.
  for (std::size_t i = 0; i < n(); ++i) {
    const double mean = sum[i] / kSeeds, step = step_bound(codec(), in, bucket(), i);
    ASSERT_LE(std::fabs(mean), 5 * step / 2 / std::sqrt(double(kSeeds)) + step * 0x1p-15)
        << "value " << i << " = " << in[i];
  }
  const reference::BiasStatistic stat = reference::bias_statistic(sum, sum_sq, kSeeds);
  EXPECT_LT(stat.z, 6.0) << "squared mean errors beyond their variance, over " << stat.varying
                         << " values that vary";
}

TEST_P(StochasticCodec, ReproducibleAndApartByKey) {
  const std::vector<float> in = sample(n(), bucket(), 14, false);
  const Coded a = code(codec(), in, bucket(), best_isa(), rounding_key(4, 2, 6, 0));
  EXPECT_EQ(code(codec(), in, bucket(), best_isa(), rounding_key(4, 2, 6, 0)).block, a.block);
  if (n() < 64) return;  // too few values to be sure that a draw apart changes a code
  for (const Rounding& other : {rounding_key(5, 2, 6, 0), rounding_key(4, 3, 6, 0),
                                rounding_key(4, 2, 7, 0), rounding_key(4, 2, 6, 1)}) {
    EXPECT_NE(code(codec(), in, bucket(), best_isa(), other).block, a.block);
  }
  EXPECT_NE(code(codec(), in, bucket(), best_isa(), Rounding{}).block, a.block)
      << "stochastic is not nearest";
}

TEST_P(StochasticCodec, OffsetBlocksDrawAsTheWhole) {
  if (n() < 2 * bucket()) return;
  const std::vector<float> in = sample(n(), bucket(), 15, false);
  const Rounding key = rounding_key(8, 1, 3, 0, 1000);
  const Coded whole = code(codec(), in, bucket(), best_isa(), key);
  const std::size_t skip = n() / bucket() / 2 * bucket();  // whole buckets
  const std::vector<float> tail(in.begin() + std::ptrdiff_t(skip), in.end());
  const Coded part = code(codec(), tail, bucket(), best_isa(), key.at(skip));
  EXPECT_TRUE(std::equal(part.decoded.begin(), part.decoded.end(),
                         whole.decoded.begin() + std::ptrdiff_t(skip)));
}

TEST_P(StochasticCodec, ConstantBucketsExact) {
  for (const float value : {1.0f, -3.3f, 1000.1f, 1e-30f, 0.0f}) {
    const std::vector<float> in(n(), value);
    for (int seed = 0; seed < 8; ++seed) {
      const Coded out = code(codec(), in, bucket(), best_isa(), rounding_key(seed, 0, 0, 0));
      for (std::size_t i = 0; i < n(); ++i)
        ASSERT_EQ(out.decoded[i], value) << value << " at " << i << " seed " << seed;
    }
  }
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return codec_name(std::get<0>(info.param)) + "_n" + std::to_string(std::get<1>(info.param)) +
         "_b" + std::to_string(std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    Codecs, StochasticCodec,
    ::testing::Combine(::testing::Values(Codec::quant8, Codec::quant8_minmax, Codec::packed4,
                                         Codec::packed2, Codec::minmax4, Codec::minmax2),
                       ::testing::Values(std::size_t{7}, std::size_t{513}, std::size_t{3000}),
                       ::testing::Values(std::size_t{5}, std::size_t{64}, std::size_t{512})),
    case_name);

}  // namespace
}  // namespace slimreduce::kernels
