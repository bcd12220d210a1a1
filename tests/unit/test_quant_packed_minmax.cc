// Tests for kernels/quant_packed_minmax.h (4- and 2-bit min-max codes):
// blocks and decoded bits against the independent reference
// (tests/reference/independent_packed_minmax.h) and the scalar path against
// AVX2 bit for bit, over sizes, buckets and widths; then the header's error
// bound, exact buckets, what min-max buys over absmax, non-finite values and
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

#include "kernels/quant_packed.h"
#include "kernels/quant_packed_minmax.h"
#include "tests/reference/independent_packed_minmax.h"

namespace slimreduce::kernels {
namespace {

namespace ref = reference;

std::uint32_t bits_of(float f) { return ref::bits_of(f); }
float from_bits(std::uint32_t u) { return ref::float_of(u); }

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNan = from_bits(0x7fc00000u);

bool available(Isa isa) { return static_cast<int>(isa) <= static_cast<int>(best_isa()); }

std::vector<Isa> usable_isas() {
  std::vector<Isa> isas = {Isa::scalar};
  if (available(Isa::avx2)) isas.push_back(Isa::avx2);
  return isas;
}

std::vector<float> round_trip(const std::vector<float>& in, std::size_t bucket, int bits, Isa isa) {
  std::vector<std::uint8_t> block(quant_packed_minmax_bytes(in.size(), bucket, bits));
  quant_packed_minmax_compress(in.data(), nullptr, in.size(), bucket, bits, block.data(), isa);
  std::vector<float> out(in.size());
  quant_packed_minmax_decompress(block.data(), in.size(), bucket, bits, out.data(), isa);
  return out;
}

// Normal values of scales 2^-4..2^4 by stretches of 97, some buckets moved
// away from 0 (offset), with inf, NaN and -inf where asked.
std::vector<float> sample(std::size_t n, unsigned seed, bool specials) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = normal(rng) * std::ldexp(1.0f, int(i / 97 % 9) - 4);
    if (i / 61 % 3 == 1) v[i] += 100.0f;
  }
  if (specials && n > 3) {
    v[n / 3] = kInf;
    v[n / 2] = kNan;
    v[n - 1] = -kInf;
  }
  return v;
}

// n, bucket, bits
using Case = std::tuple<std::size_t, std::size_t, int>;
class QuantPackedMinmax : public ::testing::TestWithParam<Case> {};

// Every ISA writes the reference's block, bit for bit, decodes it to the
// reference's values and leaves the reference's residual; nothing past the block.
TEST_P(QuantPackedMinmax, MatchesTheIndependentReferenceOnEveryIsa) {
  const auto [n, bucket, bits] = GetParam();
  for (const bool specials : {false, true}) {
    const std::vector<float> in = sample(n, unsigned(n * 31 + bucket + bits), specials);
    std::vector<float> res0 = sample(n, unsigned(n + 5), false);
    for (float& r : res0) r *= 0.01f;
    std::vector<float> want_res = res0;
    const std::vector<std::uint8_t> want =
        ref::quant_packed_minmax_compress(in.data(), want_res.data(), n, bucket, bits);
    const std::vector<float> want_out =
        ref::quant_packed_minmax_decompress(want.data(), n, bucket, bits);
    ASSERT_EQ(quant_packed_minmax_bytes(n, bucket, bits), want.size());
    for (const Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
      if (!available(isa)) continue;
      SCOPED_TRACE(::testing::Message() << isa_name(isa) << (specials ? " with inf, NaN" : ""));
      std::vector<std::uint8_t> block(want.size() + 1, 0xa5);
      std::vector<float> res = res0;
      quant_packed_minmax_compress(in.data(), res.data(), n, bucket, bits, block.data(), isa);
      EXPECT_EQ(block.back(), 0xa5) << "wrote past the block";
      block.pop_back();
      EXPECT_EQ(block, want);
      std::vector<float> out(n, 42.0f), sum(n, 1.0f), want_sum(n, 1.0f);
      quant_packed_minmax_decompress(block.data(), n, bucket, bits, out.data(), isa);
      quant_packed_minmax_accumulate(block.data(), n, bucket, bits, sum.data(), isa);
      ref::quant_packed_minmax_accumulate(want.data(), n, bucket, bits, want_sum.data());
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(bits_of(out[i]), bits_of(want_out[i])) << i;
        ASSERT_EQ(bits_of(res[i]), bits_of(want_res[i])) << i;
        ASSERT_EQ(bits_of(sum[i]), bits_of(want_sum[i])) << i;
      }
      EXPECT_TRUE(quant_packed_minmax_valid(block.data(), n, bucket, bits));
    }
  }
}

// The scalar and AVX2 paths agree bit for bit on inputs made to meet every
// rule: offset, constant, tiny, huge and non-finite buckets, with a residual.
TEST_P(QuantPackedMinmax, ScalarAndAvx2GiveTheSameBits) {
  if (!available(Isa::avx2)) GTEST_SKIP() << "no AVX2";
  const auto [n, bucket, bits] = GetParam();
  std::mt19937 rng(unsigned(n + bucket * 7 + bits));
  std::uniform_int_distribution<int> kind(0, 9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> in(n), res0(n);
  const float big = std::numeric_limits<float>::max();
  for (std::size_t i = 0; i < n; ++i) {
    const int k = kind(rng);
    in[i] = k == 0   ? kInf
            : k == 1 ? -kInf
            : k == 2 ? kNan
            : k == 3 ? big * normal(rng) / 4
            : k == 4 ? 1e-35f * normal(rng)
            : k == 5 ? 5.0f
                     : 1000.0f + normal(rng);
    res0[i] = k == 9 ? normal(rng) : 0.0f;
  }
  std::vector<std::uint8_t> blocks[2];
  std::vector<float> res[2], out[2];
  for (int p = 0; p < 2; ++p) {
    const Isa isa = p == 0 ? Isa::scalar : Isa::avx2;
    blocks[p].assign(quant_packed_minmax_bytes(n, bucket, bits), 0);
    res[p] = res0;
    out[p].assign(n, 3.0f);
    quant_packed_minmax_compress(in.data(), res[p].data(), n, bucket, bits, blocks[p].data(), isa);
    quant_packed_minmax_accumulate(blocks[p].data(), n, bucket, bits, out[p].data(), isa);
  }
  EXPECT_EQ(blocks[0], blocks[1]);
  EXPECT_EQ(0, std::memcmp(res[0].data(), res[1].data(), n * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(out[0].data(), out[1].data(), n * sizeof(float)));
}

// The header's bound: (hi - lo) / (2 top) + (hi - lo + M) 2^-21 per value.
TEST_P(QuantPackedMinmax, RoundTripWithinTheBound) {
  const auto [n, bucket, bits] = GetParam();
  const std::vector<float> in = sample(n, unsigned(3 * n + bits), false);
  const double top = (1 << bits) - 2;
  for (const Isa isa : usable_isas()) {
    SCOPED_TRACE(isa_name(isa));
    const std::vector<float> out = round_trip(in, bucket, bits, isa);
    for (std::size_t first = 0; first < n; first += bucket) {
      const std::size_t last = std::min(n, first + bucket);
      double lo = in[first], hi = in[first];
      for (std::size_t i = first; i < last; ++i)
        lo = std::min(lo, double(in[i])), hi = std::max(hi, double(in[i]));
      const double bound = (hi - lo) / (2 * top) + (hi - lo + std::max(-lo, hi)) * 0x1p-21;
      for (std::size_t i = first; i < last; ++i) {
        ASSERT_LE(std::fabs(double(out[i]) - in[i]), bound) << i << " of bucket at " << first;
        ASSERT_GE(out[i], lo) << i;
        ASSERT_LE(out[i], hi) << i;
      }
    }
  }
}

// Constant buckets decode exactly, and so do every bucket's smallest and largest values.
TEST_P(QuantPackedMinmax, ConstantBucketsAndEachBucketsEndsAreExact) {
  const auto [n, bucket, bits] = GetParam();
  std::vector<float> constant(n);
  for (std::size_t i = 0; i < n; ++i) {
    const float c = std::ldexp(1.0f + float(i / bucket % 97) / 97.0f, int(i / bucket % 61) - 30);
    constant[i] = i / bucket % 2 ? -c : c;
  }
  const std::vector<float> varied = sample(n, unsigned(n + 77), false);
  for (const Isa isa : usable_isas()) {
    const std::vector<float> out = round_trip(constant, bucket, bits, isa);
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(bits_of(out[i]), bits_of(constant[i])) << i << " on " << isa_name(isa);
    const std::vector<float> ends = round_trip(varied, bucket, bits, isa);
    for (std::size_t first = 0; first < n; first += bucket) {
      const std::size_t last = std::min(n, first + bucket);
      const auto lo = std::min_element(varied.begin() + first, varied.begin() + last);
      const auto hi = std::max_element(varied.begin() + first, varied.begin() + last);
      EXPECT_EQ(ends[lo - varied.begin()], *lo) << first << " on " << isa_name(isa);
      EXPECT_EQ(ends[hi - varied.begin()], *hi) << first << " on " << isa_name(isa);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    SizesBucketsWidths, QuantPackedMinmax,
    ::testing::Combine(::testing::Values<std::size_t>(1, 2, 3, 7, 8, 9, 15, 17, 512, 1000, 4099),
                       ::testing::Values<std::size_t>(1, 3, 8, 13, 512), ::testing::Values(4, 2)),
    [](const auto& info) {
      return "n" + std::to_string(std::get<0>(info.param)) + "_bucket" +
             std::to_string(std::get<1>(info.param)) + "_bits" +
             std::to_string(std::get<2>(info.param));
    });

class QuantPackedMinmaxWidth : public ::testing::TestWithParam<int> {};

// Values in [1000, 1001]: absmax's codes all meet its top, which decodes to
// the bucket's largest value, so it errs by up to the whole range (1) and
// half of it on average; min-max errs by half a step of the range at most
// (1 / 28 at 4 bits, 1 / 4 at 2) and a quarter step on average.
TEST_P(QuantPackedMinmaxWidth, OffsetBucketsAreFarBetterThanAbsmax) {
  const int bits = GetParam();
  const std::size_t n = 4096, bucket = 512;
  std::vector<float> in(n);
  for (std::size_t i = 0; i < n; ++i) in[i] = 1000.0f + float(i % 1000) / 999.0f;
  const double top = (1 << bits) - 2;
  for (const Isa isa : usable_isas()) {
    SCOPED_TRACE(isa_name(isa));
    const std::vector<float> minmax = round_trip(in, bucket, bits, isa);
    std::vector<std::uint8_t> block(quant_packed_bytes(n, bucket, bits));
    std::vector<float> absmax(n);
    quant_packed_compress(in.data(), nullptr, n, bucket, bits, block.data(), isa);
    quant_packed_decompress(block.data(), n, bucket, bits, absmax.data(), isa);
    double worst_minmax = 0, worst_absmax = 0, mean_minmax = 0, mean_absmax = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double e_minmax = std::fabs(double(minmax[i]) - in[i]);
      const double e_absmax = std::fabs(double(absmax[i]) - in[i]);
      worst_minmax = std::max(worst_minmax, e_minmax), mean_minmax += e_minmax / n;
      worst_absmax = std::max(worst_absmax, e_absmax), mean_absmax += e_absmax / n;
    }
    EXPECT_LE(worst_minmax, 1.0 / (2 * top) + 2002 * 0x1p-21);
    EXPECT_GT(worst_absmax, 0.9);
    EXPECT_GT(mean_absmax, top * mean_minmax) << mean_absmax << " against " << mean_minmax;
  }
}

// inf, -inf and NaN decode where they were, the bucket's other values stay
// finite, and a sum of two ranks' blocks has NaN where inf meets -inf.
TEST_P(QuantPackedMinmaxWidth, NonFiniteValuesComeOutWhereAPlainSumHasThem) {
  const int bits = GetParam();
  const std::size_t n = 64, bucket = 16;
  std::vector<float> a(n), b(n);
  for (std::size_t i = 0; i < n; ++i) a[i] = b[i] = float(i % 5) - 2.0f + (i >= 48 ? 500.0f : 0);
  a[1] = kInf, b[1] = -kInf;     // NaN in the sum
  a[18] = kInf, b[19] = -kInf;   // inf and -inf, each with a finite partner
  a[40] = kNan;                  // NaN in a bucket with no inf
  a[60] = -kInf, b[60] = -kInf;  // in an offset bucket
  for (const Isa isa : usable_isas()) {
    SCOPED_TRACE(isa_name(isa));
    std::vector<float> sum(n, 0.0f);
    for (const auto* v : {&a, &b}) {
      std::vector<std::uint8_t> block(quant_packed_minmax_bytes(n, bucket, bits));
      quant_packed_minmax_compress(v->data(), nullptr, n, bucket, bits, block.data(), isa);
      EXPECT_TRUE(quant_packed_minmax_valid(block.data(), n, bucket, bits));
      quant_packed_minmax_accumulate(block.data(), n, bucket, bits, sum.data(), isa);
    }
    for (std::size_t i = 0; i < n; ++i) {
      const float plain = a[i] + b[i];
      EXPECT_EQ(std::isnan(sum[i]), std::isnan(plain)) << i;
      EXPECT_EQ(std::isinf(sum[i]), std::isinf(plain)) << i;
      if (std::isinf(plain)) {
        EXPECT_EQ(sum[i], plain) << i;
      }
    }
  }
}

// A pair compress never writes is refused: a NaN or inf where a value
// belongs, a range that overflows, a swapped pair at 2 bits or narrower than
// 2^-100, +0 before -0, values below 2^-100 (sent as +0).
TEST_P(QuantPackedMinmaxWidth, ValidRefusesImpossibleHeaders) {
  const int bits = GetParam();
  const std::size_t n = 20, bucket = 8;
  std::vector<float> in(n, 1.0f);
  in[3] = 2.0f;
  std::vector<std::uint8_t> block(quant_packed_minmax_bytes(n, bucket, bits));
  quant_packed_minmax_compress(in.data(), nullptr, n, bucket, bits, block.data());
  ASSERT_TRUE(quant_packed_minmax_valid(block.data(), n, bucket, bits));
  const float big = std::numeric_limits<float>::max();
  std::vector<std::pair<float, float>> bad = {
      {kNan, 1.0f},
      {1.0f, kNan},
      {kInf, 1.0f},
      {-kInf, 1.0f},
      {1.0f, -kInf},
      {kInf, kInf},
      {-big, big},
      {big, -big},
      {0.0f, -0.0f},
      {std::ldexp(1.0f + 0x1p-23f, -100), std::ldexp(1.0f, -100)},
      {std::ldexp(1.0f, -101), std::ldexp(1.5f, -101)},
      {-0.0f, -0.0f},
      {-0.0f, kInf},                    // no midpoint or lo is -0
      {std::ldexp(1.0f, -130), kInf}};  // nor subnormal
  if (bits == 2) bad.emplace_back(2.0f, 1.0f);
  for (const auto& [a, b] : bad) {
    std::vector<std::uint8_t> broken = block;
    std::memcpy(&broken[8], &a, 4);
    std::memcpy(&broken[12], &b, 4);
    EXPECT_FALSE(quant_packed_minmax_valid(broken.data(), n, bucket, bits)) << a << ", " << b;
  }
  // And what it could write is accepted: a pair, a flat marked one, a tiny marked one.
  for (const auto& [a, b] :
       std::vector<std::pair<float, float>>{{-1.0f, 0.0f}, {3.0f, kInf}, {0.0f, kInf}}) {
    std::vector<std::uint8_t> fine = block;
    std::memcpy(&fine[8], &a, 4);
    std::memcpy(&fine[12], &b, 4);
    EXPECT_TRUE(quant_packed_minmax_valid(fine.data(), n, bucket, bits)) << a << ", " << b;
  }
}

// A marked flat bucket's one value may lie below 2^-100 where its finite
// values do not all do: the midpoint of lo = 0 and hi = 1.13 2^-100 (every
// marked 2-bit bucket is flat), or lo itself in a range narrower than 2^-100
// (lo = 1.5 2^-101, hi = 2^-100). Compress writes (v, +inf), and the check
// must accept it: it refused it once (found by fuzz_quant_packed_block), so
// a healthy rank's block failed the call. Each decodes to v, +inf and NaN.
TEST_P(QuantPackedMinmaxWidth, MarkedBucketsWithATinyValueAreValid) {
  const int bits = GetParam();
  const std::vector<std::vector<float>> buckets = {{0x1.21fep-100f, kInf, 0.0f, 0.0f, 0.0f},
                                                   {0x1.8p-101f, 0x1p-100f, kInf, kNan, 0x1p-100f}};
  for (const std::vector<float>& in : buckets) {
    const std::size_t n = in.size();
    std::vector<std::uint8_t> block(quant_packed_minmax_bytes(n, n, bits));
    quant_packed_minmax_compress(in.data(), nullptr, n, n, bits, block.data());
    float a, b;
    std::memcpy(&a, block.data(), 4);
    std::memcpy(&b, block.data() + 4, 4);
    if (bits == 4 && in[1] == kInf) continue;  // a step at 4 bits: not flat
    ASSERT_EQ(bits_of(b), 0x7f800000u);
    EXPECT_TRUE(a > 0.0f && a < 0x1p-100f) << a;
    EXPECT_TRUE(quant_packed_minmax_valid(block.data(), n, n, bits)) << a;
    std::vector<float> out(n);
    quant_packed_minmax_decompress(block.data(), n, n, bits, out.data());
    for (std::size_t i = 0; i < n; ++i) {
      if (std::isnan(in[i])) {
        EXPECT_TRUE(std::isnan(out[i]));
      } else if (std::isinf(in[i])) {
        EXPECT_EQ(out[i], in[i]);
      } else {
        EXPECT_EQ(bits_of(out[i]), bits_of(a)) << i;
      }
    }
  }
}

// The largest floats code and decode without overflow; a bucket spanning
// both ends is clipped to +-2^126 and still decodes finite values.
TEST_P(QuantPackedMinmaxWidth, ValuesNearFltMaxStayFinite) {
  const int bits = GetParam();
  const float big = std::numeric_limits<float>::max();
  const std::vector<float> in = {big, big / 3, big * 0.999f, 0.0f, big, -big, 1.0f, -big / 7};
  for (const Isa isa : usable_isas()) {
    const std::vector<float> out = round_trip(in, 4, bits, isa);
    for (std::size_t i = 0; i < in.size(); ++i) EXPECT_TRUE(std::isfinite(out[i])) << i;
    EXPECT_EQ(out[0], big) << isa_name(isa);
    EXPECT_EQ(out[3], 0.0f) << isa_name(isa);
    EXPECT_EQ(out[4], std::ldexp(1.0f, 126)) << isa_name(isa);
    EXPECT_EQ(out[5], -std::ldexp(1.0f, 126)) << isa_name(isa);
  }
}

TEST(QuantPackedMinmaxBytes, TwoFloatsPerBucketAndThePackedCodes) {
  EXPECT_EQ(quant_packed_minmax_bytes(0, 512, 4), 0u);
  EXPECT_EQ(quant_packed_minmax_bytes(1, 512, 4), 8u + 1u);
  EXPECT_EQ(quant_packed_minmax_bytes(1024, 512, 4), 16u + 512u);
  EXPECT_EQ(quant_packed_minmax_bytes(1025, 512, 2), 24u + 256u + 1u);
  EXPECT_EQ(quant_packed_minmax_bytes(7, 3, 4), 24u + 2u + 2u + 1u);
}

INSTANTIATE_TEST_SUITE_P(Widths, QuantPackedMinmaxWidth, ::testing::Values(4, 2));

}  // namespace
}  // namespace slimreduce::kernels
