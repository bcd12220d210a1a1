// Tests for kernels/quant_packed.h (4- and 2-bit codes). The reference model
// here is written from the header's rules with the C library's float
// functions (fabs, isfinite, nearbyint: ties to even) and its own bit
// packing, not from kernels/quant_packed_rules.h.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/quant_packed.h"

namespace slimreduce::kernels {
namespace {

std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNan = from_bits(0x7fc00000u);

bool available(Isa isa) { return static_cast<int>(isa) <= static_cast<int>(best_isa()); }

// The ISAs this CPU runs with a path of their own (AVX-512 runs AVX2's).
std::vector<Isa> usable_isas() {
  std::vector<Isa> isas = {Isa::scalar};
  if (available(Isa::avx2)) isas.push_back(Isa::avx2);
  return isas;
}

std::vector<float> round_trip(const std::vector<float>& in, std::size_t bucket, int bits, Isa isa) {
  std::vector<std::uint8_t> block(quant_packed_bytes(in.size(), bucket, bits));
  quant_packed_compress(in.data(), nullptr, in.size(), bucket, bits, block.data(), isa);
  std::vector<float> out(in.size());
  quant_packed_decompress(block.data(), in.size(), bucket, bits, out.data(), isa);
  return out;
}

// ------------------------------------------------------ independent model ----

struct Model {
  std::vector<std::uint8_t> block;
  std::vector<float> decoded;
};

// The header's rules, value by value, into its layout.
Model model_compress(const std::vector<float>& acc, std::size_t bucket, int bits) {
  const std::size_t n = acc.size(), buckets = n == 0 ? 0 : (n - 1) / bucket + 1;
  const std::size_t stride = (bucket * bits + 7) / 8;
  Model m;
  std::size_t bytes = 4 * buckets;
  for (std::size_t first = 0; first < n; first += bucket)
    bytes += (std::min(bucket, n - first) * bits + 7) / 8;  // each bucket from a byte
  m.block.assign(bytes, 0);
  m.decoded.resize(n);
  for (std::size_t j = 0; j < buckets; ++j) {
    const std::size_t first = j * bucket, last = std::min(n, first + bucket);
    float max = 0.0f;
    bool marked = false;
    for (std::size_t i = first; i < last; ++i) {
      if (std::isfinite(acc[i])) max = std::max(max, std::fabs(acc[i]));
      marked |= std::isinf(acc[i]);
    }
    const int top = (1 << (bits - 1)) - 1 - (marked ? 1 : 0);
    if (max < std::ldexp(1.0f, -100) || top == 0) max = 0.0f;
    const float step = max == 0.0f ? 0.0f : max / static_cast<float>(top);
    const float stored = marked ? -max : max;
    std::memcpy(&m.block[4 * j], &stored, 4);
    for (std::size_t i = first; i < last; ++i) {
      const float x = acc[i];
      int q;
      if (std::isnan(x)) {
        q = -(1 << (bits - 1)), m.decoded[i] = kNan;
      } else if (std::isinf(x)) {
        q = x > 0 ? top + 1 : -(top + 1), m.decoded[i] = x;
      } else {
        q = step == 0.0f ? 0
                         : static_cast<int>(std::nearbyint(
                               std::fmin(std::fmax(x / step, float(-top)), float(top))));
        m.decoded[i] = q == top && top ? max : q == -top && top ? -max : float(q) * step;
      }
      const std::size_t bit = (i - first) * bits;
      m.block[4 * buckets + j * stride + bit / 8] |=
          static_cast<std::uint8_t>((q & ((1 << bits) - 1)) << (bit % 8));
    }
  }
  return m;
}

std::vector<float> sample(std::size_t n, unsigned seed, bool specials) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = normal(rng) * std::ldexp(1.0f, int(i / 97 % 9) - 4);
  if (specials && n > 3) {
    v[n / 3] = kInf;
    v[n / 2] = kNan;
    v[n - 1] = -kInf;
  }
  return v;
}

// n, bucket, bits
using Case = std::tuple<std::size_t, std::size_t, int>;
class QuantPacked : public ::testing::TestWithParam<Case> {};

TEST_P(QuantPacked, CompressMatchesModelOnEveryIsa) {
  const auto [n, bucket, bits] = GetParam();
  for (const bool specials : {false, true}) {
    const std::vector<float> in = sample(n, unsigned(n * 31 + bucket + bits), specials);
    const Model want = model_compress(in, bucket, bits);
    ASSERT_EQ(quant_packed_bytes(n, bucket, bits), want.block.size());
    for (const Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
      if (!available(isa)) continue;
      SCOPED_TRACE(::testing::Message() << isa_name(isa) << (specials ? " with inf, NaN" : ""));
      std::vector<std::uint8_t> block(want.block.size() + 1, 0xa5);
      quant_packed_compress(in.data(), nullptr, n, bucket, bits, block.data(), isa);
      EXPECT_EQ(block.back(), 0xa5) << "wrote past the block";
      block.pop_back();
      EXPECT_EQ(block, want.block);
      std::vector<float> out(n, 42.0f);
      quant_packed_decompress(block.data(), n, bucket, bits, out.data(), isa);
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(bits_of(out[i]), bits_of(want.decoded[i])) << i;
      EXPECT_TRUE(quant_packed_valid(block.data(), n, bucket, bits));
    }
  }
}

// Error feedback: residual = acc - decoded (in fp32), the same on every ISA;
// accumulate is decompress then add_nan_first.
TEST_P(QuantPacked, ResidualAndAccumulateAgreeAcrossIsas) {
  const auto [n, bucket, bits] = GetParam();
  const std::vector<float> in = sample(n, unsigned(n + 7 * bits), false);
  std::vector<float> res0 = sample(n, unsigned(n + 11), false);
  for (float& r : res0) r *= 0.01f;
  std::vector<std::uint8_t> first;
  std::vector<float> first_res, first_sum;
  for (const Isa isa : {Isa::scalar, Isa::avx2}) {
    if (!available(isa)) continue;
    std::vector<float> res = res0;
    std::vector<std::uint8_t> block(quant_packed_bytes(n, bucket, bits));
    quant_packed_compress(in.data(), res.data(), n, bucket, bits, block.data(), isa);
    std::vector<float> decoded(n), sum(n, 1.0f);
    quant_packed_decompress(block.data(), n, bucket, bits, decoded.data(), isa);
    quant_packed_accumulate(block.data(), n, bucket, bits, sum.data(), isa);
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(bits_of(res[i]), bits_of((in[i] + res0[i]) - decoded[i])) << i;
      ASSERT_EQ(bits_of(sum[i]), bits_of(1.0f + decoded[i])) << i;
    }
    if (first.empty()) {
      first = block, first_res = res, first_sum = sum;
    } else {
      EXPECT_EQ(block, first);
      EXPECT_EQ(0, std::memcmp(res.data(), first_res.data(), n * sizeof(float)));
      EXPECT_EQ(0, std::memcmp(sum.data(), first_sum.data(), n * sizeof(float)));
    }
  }
}

// The header's step bound: m / (2 top) + m 2^-21 per value, m the bucket's largest |x|.
TEST_P(QuantPacked, RoundTripWithinTheStepBound) {
  const auto [n, bucket, bits] = GetParam();
  const std::vector<float> in = sample(n, unsigned(3 * n + bits), false);
  for (const Isa isa : usable_isas()) {
    SCOPED_TRACE(isa_name(isa));
    const std::vector<float> out = round_trip(in, bucket, bits, isa);
    const double top = (1 << (bits - 1)) - 1;
    for (std::size_t first = 0; first < n; first += bucket) {
      double m = 0;
      for (std::size_t i = first; i < std::min(n, first + bucket); ++i)
        m = std::max(m, std::fabs(double(in[i])));
      const double bound = m / (2 * top) + m * 0x1p-21;
      for (std::size_t i = first; i < std::min(n, first + bucket); ++i)
        ASSERT_LE(std::fabs(double(out[i]) - in[i]), bound) << i << " of bucket at " << first;
    }
  }
}

// A bucket of one value decodes exactly, whatever the value.
TEST_P(QuantPacked, ConstantBucketsAreExact) {
  const auto [n, bucket, bits] = GetParam();
  std::vector<float> in(n);
  for (std::size_t i = 0; i < n; ++i) {
    const float c = std::ldexp(1.0f + float(i / bucket % 97) / 97.0f, int(i / bucket % 61) - 30);
    in[i] = i / bucket % 2 ? -c : c;
  }
  for (const Isa isa : usable_isas()) {
    const std::vector<float> out = round_trip(in, bucket, bits, isa);
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(bits_of(out[i]), bits_of(in[i])) << i << " on " << isa_name(isa);
  }
}

INSTANTIATE_TEST_SUITE_P(
    SizesBucketsWidths, QuantPacked,
    ::testing::Combine(::testing::Values<std::size_t>(1, 2, 3, 7, 8, 9, 15, 17, 512, 1000, 4099),
                       ::testing::Values<std::size_t>(1, 3, 8, 13, 512), ::testing::Values(4, 2)),
    [](const auto& info) {
      return "n" + std::to_string(std::get<0>(info.param)) + "_bucket" +
             std::to_string(std::get<1>(info.param)) + "_bits" +
             std::to_string(std::get<2>(info.param));
    });

class QuantPackedWidth : public ::testing::TestWithParam<int> {};

// inf, -inf and NaN decode where they were, the bucket's other values stay
// finite, and a sum of two ranks' blocks has NaN where inf meets -inf.
TEST_P(QuantPackedWidth, NonFiniteValuesComeOutWhereAPlainSumHasThem) {
  const int bits = GetParam();
  const std::size_t n = 64, bucket = 16;
  std::vector<float> a(n), b(n);
  for (std::size_t i = 0; i < n; ++i) a[i] = b[i] = float(i % 5) - 2.0f;
  a[1] = kInf, b[1] = -kInf;    // NaN in the sum
  a[18] = kInf, b[19] = -kInf;  // inf and -inf, each with a finite partner
  a[40] = kNan;                 // NaN in a bucket with no inf
  a[60] = -kInf, b[60] = -kInf;
  for (const Isa isa : usable_isas()) {
    SCOPED_TRACE(isa_name(isa));
    std::vector<float> sum(n, 0.0f), plain(n);
    for (const auto* v : {&a, &b}) {
      std::vector<std::uint8_t> block(quant_packed_bytes(n, bucket, bits));
      quant_packed_compress(v->data(), nullptr, n, bucket, bits, block.data(), isa);
      EXPECT_TRUE(quant_packed_valid(block.data(), n, bucket, bits));
      quant_packed_accumulate(block.data(), n, bucket, bits, sum.data(), isa);
    }
    for (std::size_t i = 0; i < n; ++i) {
      plain[i] = a[i] + b[i];
      EXPECT_EQ(std::isnan(sum[i]), std::isnan(plain[i])) << i;
      EXPECT_EQ(std::isinf(sum[i]), std::isinf(plain[i])) << i;
      if (std::isinf(plain[i])) {
        EXPECT_EQ(sum[i], plain[i]) << i;
      }
    }
  }
}

// A stored fp32 compress never writes is refused: a NaN, an inf, a
// subnormal, a value below 2^-100, and a marked 2-bit bucket's nonzero.
TEST_P(QuantPackedWidth, ValidRefusesWhatCompressNeverWrites) {
  const int bits = GetParam();
  const std::size_t n = 20, bucket = 8;
  std::vector<float> in(n, 1.0f);
  std::vector<std::uint8_t> block(quant_packed_bytes(n, bucket, bits));
  quant_packed_compress(in.data(), nullptr, n, bucket, bits, block.data());
  ASSERT_TRUE(quant_packed_valid(block.data(), n, bucket, bits));
  std::vector<float> bad = {kNan, kInf, -kInf, from_bits(1), std::ldexp(1.0f, -101)};
  if (bits == 2) bad.push_back(-1.0f);
  for (const float stored : bad) {
    std::vector<std::uint8_t> broken = block;
    std::memcpy(&broken[4], &stored, 4);
    EXPECT_FALSE(quant_packed_valid(broken.data(), n, bucket, bits)) << stored;
  }
}

// The largest floats code and decode without overflow.
TEST_P(QuantPackedWidth, ValuesNearFltMaxStayFinite) {
  const int bits = GetParam();
  const float big = std::numeric_limits<float>::max();
  const std::vector<float> in = {big, -big, big / 3, -big / 7, 0.0f, big * 0.999f};
  for (const Isa isa : usable_isas()) {
    const std::vector<float> out = round_trip(in, 512, bits, isa);
    for (std::size_t i = 0; i < in.size(); ++i) EXPECT_TRUE(std::isfinite(out[i])) << i;
    EXPECT_EQ(out[0], big) << isa_name(isa);
    EXPECT_EQ(out[1], -big) << isa_name(isa);
  }
}

TEST(QuantPackedBytes, TwoOrFourCodesPerByteAndAScalePerBucket) {
  EXPECT_EQ(quant_packed_bytes(0, 512, 4), 0u);
  EXPECT_EQ(quant_packed_bytes(1, 512, 4), 4u + 1u);
  EXPECT_EQ(quant_packed_bytes(1024, 512, 4), 8u + 512u);
  EXPECT_EQ(quant_packed_bytes(1024, 512, 2), 8u + 256u);
  EXPECT_EQ(quant_packed_bytes(1025, 512, 2), 12u + 256u + 1u);
  EXPECT_EQ(quant_packed_bytes(7, 3, 4), 12u + 2u + 2u + 1u);  // buckets start on a byte
}

INSTANTIATE_TEST_SUITE_P(Widths, QuantPackedWidth, ::testing::Values(4, 2));

}  // namespace
}  // namespace slimreduce::kernels
