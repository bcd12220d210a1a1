// Tests for kernels/quant_fp8.h (block-scaled fp8, e4m3 codes): blocks
// against an independent reference written from the header's words in
// double (the smallest power of two that brings the bucket's largest |x| to
// 448 or below, then the nearest of the 127 e4m3 magnitudes by search, ties
// to the even one), every ISA bit for bit with the scalar path, the
// residual, the error bound, NaN and inf where they went in, edge scales
// (FLT_MAX, 2^-100, significands past 1.75, fp32 subnormal inputs), and
// the validity check.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/quant_fp8.h"

namespace slimreduce::kernels {
namespace {

std::vector<Isa> usable_isas() {
  std::vector<Isa> isas;
  for (const Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    if (static_cast<int>(isa) <= static_cast<int>(best_isa())) isas.push_back(isa);
  }
  return isas;
}

std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// ---- the independent reference --------------------------------------------------

// e4m3's value of magnitude k (0..126): k 2^-9 below 8, else (1 + k%8 / 8) 2^(k/8 - 7).
double e4m3_value(int k) {
  return k < 8 ? std::ldexp(k, -9) : (1.0 + (k % 8) / 8.0) * std::ldexp(1.0, k / 8 - 7);
}

struct RefBlock {
  std::vector<std::uint8_t> bytes;
  std::vector<float> decoded;
};

RefBlock reference(const std::vector<float>& in, std::size_t bucket) {
  const std::size_t n = in.size(), buckets = (n + bucket - 1) / bucket;
  RefBlock out{std::vector<std::uint8_t>(buckets + n), std::vector<float>(n)};
  for (std::size_t j = 0; j < buckets; ++j) {
    const std::size_t first = j * bucket, last = std::min(n, first + bucket);
    double m = 0;
    for (std::size_t i = first; i < last; ++i)
      if (std::isfinite(in[i])) m = std::max(m, std::fabs(double(in[i])));
    const bool zero = m < std::ldexp(1.0, -100);
    int s = -300;
    while (!zero && std::ldexp(m, -s) > 448.0) ++s;  // the smallest s with m / 2^s <= 448,
    s = std::min(s, 119);                            // but 119 at most (448 2^119 < FLT_MAX)
    out.bytes[j] = zero ? 0 : std::uint8_t(s + 127);
    for (std::size_t i = first; i < last; ++i) {
      const float x = in[i];
      std::uint8_t code;
      double value;
      if (std::isnan(x)) {
        code = 0x80, value = NAN;
      } else if (std::isinf(x)) {
        code = x > 0 ? 0x7f : 0xff, value = x;
      } else if (zero) {
        code = 0, value = 0;
      } else {
        const double y = std::min(std::fabs(double(x)) * std::ldexp(1.0, -s), 448.0);
        int best = 0;
        for (int k = 1; k <= 126; ++k) {
          const double dk = std::fabs(e4m3_value(k) - y), db = std::fabs(e4m3_value(best) - y);
          if (dk < db || (dk == db && k % 2 == 0)) best = k;
        }
        code = best == 0 ? 0 : std::uint8_t(best | (x < 0 ? 0x80 : 0));
        value = best == 0 ? 0.0 : std::copysign(e4m3_value(best) * std::ldexp(1.0, s), x);
      }
      out.bytes[buckets + i] = code;
      out.decoded[i] = static_cast<float>(value);
    }
  }
  return out;
}

// ---- inputs ---------------------------------------------------------------------

// Normal values of scales 2^-8..2^8 by stretches of 41, with buckets of
// edge cases: a constant, ties between e4m3 codes, values past 448's
// significand, fp32 subnormals, a bucket below 2^-100, huge values, zeros of
// both signs; NaN and infs where asked.
std::vector<float> sample(std::size_t n, unsigned seed, bool specials) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = normal(rng) * std::ldexp(1.0f, int(i / 41 % 17) - 8);
  for (std::size_t i = 0; i < n; ++i) {
    switch (i / 37 % 11) {
      case 1:
        v[i] = -3.25f;
        break;
      case 2:  // ties: (1 + 1/16) 2^k halfway between two codes, and subnormal ties
        v[i] = (i % 2 ? 1.0625f : 0.0029296875f) * (i % 3 ? 1.0f : -1.0f);
        if (i % 37 == 0) v[i] = 448.0f;
        break;
      case 3:
        v[i] = (1.8f + 0.01f * float(i % 7)) * std::ldexp(1.0f, int(i % 5));
        break;
      case 4:
        v[i] = std::ldexp(normal(rng), -140);  // fp32 subnormals (and the bucket's max among them)
        break;
      case 5:
        v[i] = std::ldexp(normal(rng), -104);
        break;
      case 6:
        v[i] = i % 4 == 0 ? std::numeric_limits<float>::max() : std::ldexp(normal(rng), 120);
        break;
      case 7:
        v[i] = i % 2 ? 0.0f : -0.0f;
        break;
      default:
        break;
    }
  }
  if (specials && n > 8) {
    v[n / 3] = std::numeric_limits<float>::quiet_NaN();
    v[n / 2] = std::numeric_limits<float>::infinity();
    v[n - 1] = -std::numeric_limits<float>::infinity();
  }
  return v;
}

using Case = std::tuple<std::size_t, std::size_t, bool>;  // n, bucket, specials

class QuantFp8 : public ::testing::TestWithParam<Case> {
 protected:
  std::size_t n() const { return std::get<0>(GetParam()); }
  std::size_t bucket() const { return std::get<1>(GetParam()); }
  bool specials() const { return std::get<2>(GetParam()); }
};

TEST_P(QuantFp8, BlockAndValuesAsTheReferenceOnEveryIsa) {
  const std::vector<float> in = sample(n(), 3, specials());
  const RefBlock want = reference(in, bucket());
  for (const Isa isa : usable_isas()) {
    std::vector<std::uint8_t> block(quant_fp8_bytes(n(), bucket()));
    quant_fp8_compress(in.data(), nullptr, n(), bucket(), block.data(), isa);
    ASSERT_EQ(block.size(), want.bytes.size());
    for (std::size_t b = 0; b < block.size(); ++b)
      ASSERT_EQ(int(block[b]), int(want.bytes[b])) << "byte " << b << " isa " << int(isa);
    std::vector<float> out(n());
    quant_fp8_decompress(block.data(), n(), bucket(), out.data(), isa);
    for (std::size_t i = 0; i < n(); ++i) {
      if (std::isnan(want.decoded[i])) {
        ASSERT_EQ(bits_of(out[i]), 0x7fc00000u) << i;
      } else {
        ASSERT_EQ(bits_of(out[i]), bits_of(want.decoded[i])) << "value " << i << " = " << in[i];
      }
    }
    EXPECT_TRUE(quant_fp8_valid(block.data(), n(), bucket()));
  }
}

TEST_P(QuantFp8, ResidualAndAccumulateAsScalar) {
  const std::vector<float> in = sample(n(), 4, specials());
  const std::vector<float> old_residual = sample(n(), 5, false);
  std::vector<std::uint8_t> scalar_block(quant_fp8_bytes(n(), bucket()));
  std::vector<float> scalar_res = old_residual;
  quant_fp8_compress(in.data(), scalar_res.data(), n(), bucket(), scalar_block.data(), Isa::scalar);
  // The residual: acc - decoded, 0 where the decoded value is not finite.
  std::vector<float> decoded(n());
  quant_fp8_decompress(scalar_block.data(), n(), bucket(), decoded.data(), Isa::scalar);
  for (std::size_t i = 0; i < n(); ++i) {
    const float acc = in[i] + old_residual[i];
    const float want = std::isfinite(decoded[i]) ? acc - decoded[i] : 0.0f;
    if (!std::isnan(acc)) {
      ASSERT_EQ(bits_of(scalar_res[i]), bits_of(want)) << i;
    }
  }
  for (const Isa isa : usable_isas()) {
    std::vector<std::uint8_t> block(scalar_block.size());
    std::vector<float> res = old_residual;
    quant_fp8_compress(in.data(), res.data(), n(), bucket(), block.data(), isa);
    EXPECT_EQ(block, scalar_block) << int(isa);
    EXPECT_EQ(0, std::memcmp(res.data(), scalar_res.data(), n() * 4)) << int(isa);
    std::vector<float> sum = sample(n(), 6, false), want = sum;
    quant_fp8_accumulate(block.data(), n(), bucket(), sum.data(), isa);
    quant_fp8_accumulate(block.data(), n(), bucket(), want.data(), Isa::scalar);
    EXPECT_EQ(0, std::memcmp(sum.data(), want.data(), n() * 4)) << int(isa);
  }
}

TEST_P(QuantFp8, WithinTheBound) {
  const std::vector<float> in = sample(n(), 7, specials());
  std::vector<std::uint8_t> block(quant_fp8_bytes(n(), bucket()));
  quant_fp8_compress(in.data(), nullptr, n(), bucket(), block.data());
  std::vector<float> out(n());
  quant_fp8_decompress(block.data(), n(), bucket(), out.data());
  for (std::size_t first = 0; first < n(); first += bucket()) {
    const std::size_t last = std::min(n(), first + bucket());
    double m = 0;
    for (std::size_t i = first; i < last; ++i)
      if (std::isfinite(in[i])) m = std::max(m, std::fabs(double(in[i])));
    for (std::size_t i = first; i < last; ++i) {
      if (!std::isfinite(in[i])) continue;
      // max(|x| / 16, m 2^-17), or |x| in a bucket that codes 0 (m < 2^-100);
      // past 1.75 2^127 (saturated) an eighth.
      const double x = std::fabs(double(in[i]));
      const double bound = m < std::ldexp(1.0, -100)   ? x
                           : x > std::ldexp(1.75, 127) ? x / 8
                                                       : std::max(x / 16, std::ldexp(m, -17));
      ASSERT_LE(std::fabs(double(out[i]) - in[i]), bound) << "value " << i << " = " << in[i];
    }
  }
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return "n" + std::to_string(std::get<0>(info.param)) + "_b" +
         std::to_string(std::get<1>(info.param)) + (std::get<2>(info.param) ? "_specials" : "");
}

INSTANTIATE_TEST_SUITE_P(SizesBuckets, QuantFp8,
                         ::testing::Combine(::testing::Values(std::size_t{1}, std::size_t{7},
                                                              std::size_t{999}, std::size_t{4133}),
                                            // 64: buckets without the huge values, which
                                            // AVX-512 codes 64 at a time.
                                            ::testing::Values(std::size_t{1}, std::size_t{32},
                                                              std::size_t{37}, std::size_t{64},
                                                              std::size_t{512}),
                                            ::testing::Bool()),
                         case_name);

TEST(QuantFp8Edges, ConstantBucketsExactWhereE4m3HoldsThem) {
  for (const float v : {1.0f, -3.25f, 448.0f, 1000.0f, std::ldexp(1.25f, -99)}) {
    const std::vector<float> in(100, v);
    std::vector<std::uint8_t> block(quant_fp8_bytes(100, 32));
    quant_fp8_compress(in.data(), nullptr, 100, 32, block.data());
    std::vector<float> out(100);
    quant_fp8_decompress(block.data(), 100, 32, out.data());
    // A bucket's largest value scales to (224, 448]: exact when its
    // significand has 3 bits, as these do (1000 = 1.953125 2^9: 1.875 or 2).
    if (v == 1000.0f) {
      EXPECT_NEAR(out[0], v, v / 16);
    } else {
      for (const float o : out) ASSERT_EQ(o, v);
    }
  }
}

TEST(QuantFp8Edges, ValidityRefusesExponentsNoCompressWrites) {
  std::vector<std::uint8_t> block(quant_fp8_bytes(64, 32), 0);
  EXPECT_TRUE(quant_fp8_valid(block.data(), 64, 32));
  for (const int bad : {1, 18, 247, 255}) {
    block[1] = std::uint8_t(bad);
    EXPECT_FALSE(quant_fp8_valid(block.data(), 64, 32)) << bad;
  }
  for (const int good : {19, 127, 246}) {
    block[1] = std::uint8_t(good);
    EXPECT_TRUE(quant_fp8_valid(block.data(), 64, 32)) << good;
  }
}

}  // namespace
}  // namespace slimreduce::kernels
