// The kernels (kernels/) against tests/reference/independent.h, the plain
// references the host simulation's model is built from: the casts over a
// structured sample of all fp32 patterns and every 16-bit pattern, top-k over
// sizes, ratios, ties and specials, int8 over bucket sizes and awkward
// buckets, on every ISA this CPU has. The references are first held to the
// formats' definitions on their own (nearest value, round trips), so that a
// shared misreading would still show.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/cast.h"
#include "kernels/element_rules.h"
#include "kernels/quant8.h"
#include "kernels/quant_packed.h"
#include "kernels/topk.h"
#include "tests/reference/independent.h"

namespace slimreduce {
namespace {

namespace ref = reference;
namespace k = kernels;
using ref::bits_of;
using ref::float_of;

std::vector<k::Isa> available_isas() {
  std::vector<k::Isa> isas;
  for (k::Isa isa : {k::Isa::scalar, k::Isa::avx2, k::Isa::avx512}) {
    if (static_cast<int>(isa) <= static_cast<int>(k::best_isa())) isas.push_back(isa);
  }
  return isas;
}

std::string hex(std::uint32_t u) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", u);
  return text;
}

// Counts disagreements and describes the first few, so a broken rule shows
// its pattern without flooding the log.
struct Mismatches {
  std::size_t count = 0;
  std::string first;
  void add(const std::string& what) {
    if (count++ < 8) first += "  " + what + "\n";
  }
};

// Compares two arrays of bits element by element.
template <class T>
void compare_bits(const char* what, const std::vector<T>& got, const std::vector<T>& want,
                  Mismatches& m) {
  if (got.size() != want.size()) return m.add(std::string(what) + ": sizes differ");
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) == 0) continue;
    std::uint32_t g = 0, w = 0;
    std::memcpy(&g, &got[i], sizeof(T));
    std::memcpy(&w, &want[i], sizeof(T));
    m.add(std::string(what) + "[" + std::to_string(i) + "]: kernel " + hex(g) + ", reference " +
          hex(w));
  }
}

// ------------------------------------------------------------ the casts ----

// fp32 patterns a cast must get right. For both signs and all 256 exponents:
// fractions whose kept part is 0, 1, 2, 3, a mixed one or (nearly) all ones,
// and whose dropped part is 0, 1, half - 1, half, half + 1 or all ones, for
// the bits bf16 drops (16), fp16 drops at normal exponents (13) and fp16
// drops where it is subnormal (126 - exponent, 14 to 23); so every halfway
// case, the subnormal and overflow boundaries, inf and NaNs of every kind.
// Then every 65537th and every 4099th pattern, which walk all fractions.
std::vector<float> float_sample() {
  std::vector<std::uint32_t> bits;
  for (std::uint32_t sign = 0; sign < 2; ++sign) {
    for (std::uint32_t e = 0; e < 256; ++e) {
      std::vector<unsigned> drops = {13, 16};
      if (e >= 103 && e <= 112) drops.push_back(126 - e);
      for (unsigned drop : drops) {
        const std::uint32_t kept_all = (1u << (23 - drop)) - 1u, half = 1u << (drop - 1);
        for (std::uint32_t kept : {0u, 1u, 2u, 3u, 0x155u & kept_all, kept_all - 1u, kept_all}) {
          for (std::uint32_t low : {0u, 1u, half - 1u, half, half + 1u, 2 * half - 1u}) {
            bits.push_back(sign << 31 | e << 23 | (kept & kept_all) << drop | low);
          }
        }
      }
    }
  }
  for (std::uint64_t u = 0; u < (std::uint64_t{1} << 32); u += 65537) bits.push_back(u);
  for (std::uint64_t u = 0; u < (std::uint64_t{1} << 32); u += 4099) bits.push_back(u);
  std::vector<float> sample;
  for (std::uint32_t u : bits) sample.push_back(float_of(u));
  return sample;
}

std::uint16_t reference_narrow(k::HalfFormat f, float x) {
  return f == k::HalfFormat::fp16 ? ref::float_to_fp16(x) : ref::float_to_bf16(x);
}
float reference_widen(k::HalfFormat f, std::uint16_t h) {
  return f == k::HalfFormat::fp16 ? ref::fp16_to_float(h) : ref::bf16_to_float(h);
}
ref::Format layout(k::HalfFormat f) { return f == k::HalfFormat::fp16 ? ref::kFp16 : ref::kBf16; }

class Cast : public ::testing::TestWithParam<k::HalfFormat> {};

// The reference on its own: each finite x goes to a nearest value, a tie to
// the even encoding, and to inf exactly from max_finite + half an ulp on.
TEST_P(Cast, ReferenceRoundsToNearestEven) {
  const k::HalfFormat f = GetParam();
  const ref::Format fmt = layout(f);
  const double overflow = fmt.max_finite() + std::ldexp(1.0, fmt.bias() - fmt.mant_bits - 1);
  Mismatches m;
  for (float x : float_sample()) {
    if (!std::isfinite(x)) continue;
    const std::uint16_t h = reference_narrow(f, x);
    const double a = std::fabs(static_cast<double>(x));
    const auto magnitude = static_cast<std::uint16_t>(h & ~fmt.sign_bit());
    if ((a >= overflow) != (magnitude == (fmt.all_ones() << fmt.mant_bits))) {
      m.add("overflow of " + hex(bits_of(x)));
      continue;
    }
    if (a >= overflow) continue;
    if (std::signbit(x) != ((h & fmt.sign_bit()) != 0)) m.add("sign of " + hex(bits_of(x)));
    const double d = std::fabs(a - std::fabs(static_cast<double>(reference_widen(f, h))));
    for (int step : {-1, 1}) {
      if (magnitude == 0 && step < 0) continue;
      const auto next = static_cast<std::uint16_t>(magnitude + step);
      const double dn = std::fabs(a - static_cast<double>(reference_widen(f, next)));
      if (dn < d || (dn == d && (magnitude & 1u))) m.add("not nearest even: " + hex(bits_of(x)));
    }
  }
  EXPECT_EQ(m.count, 0u) << m.first;
}

// Every 16-bit pattern widens and narrows back to itself (a NaN quieted).
TEST_P(Cast, ReferenceRoundTripsEveryPattern) {
  const k::HalfFormat f = GetParam();
  const ref::Format fmt = layout(f);
  Mismatches m;
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float x = reference_widen(f, static_cast<std::uint16_t>(h));
    const bool nan = ((h >> fmt.mant_bits) & fmt.all_ones()) == fmt.all_ones() &&
                     (h & ((1u << fmt.mant_bits) - 1u)) != 0;
    const std::uint32_t want = nan ? h | 1u << (fmt.mant_bits - 1) : h;
    if (std::isnan(x) != nan || reference_narrow(f, x) != want) m.add("pattern " + hex(h));
  }
  EXPECT_EQ(m.count, 0u) << m.first;
}

TEST_P(Cast, FloatToHalfMatchesOnEveryIsa) {
  const k::HalfFormat f = GetParam();
  const std::vector<float> sample = float_sample();
  std::vector<std::uint16_t> want, rule;
  for (float x : sample) {
    want.push_back(reference_narrow(f, x));
    rule.push_back(f == k::HalfFormat::fp16 ? k::float_to_fp16_bits(x) : k::float_to_bf16_bits(x));
  }
  Mismatches m;
  compare_bits("element rule", rule, want, m);
  for (k::Isa isa : available_isas()) {
    std::vector<std::uint16_t> got(sample.size());
    k::compress(f, sample.data(), nullptr, got.data(), sample.size(), isa);
    compare_bits(k::isa_name(isa), got, want, m);
  }
  EXPECT_EQ(m.count, 0u) << sample.size() << " patterns\n" << m.first;
}

TEST_P(Cast, EveryHalfPatternWidensAlikeOnEveryIsa) {
  const k::HalfFormat f = GetParam();
  std::vector<std::uint16_t> all(65536);
  std::vector<float> want, rule;
  for (std::uint32_t h = 0; h < 65536; ++h) {
    all[h] = static_cast<std::uint16_t>(h);
    want.push_back(reference_widen(f, all[h]));
    rule.push_back(f == k::HalfFormat::fp16 ? k::fp16_bits_to_float(all[h])
                                            : k::bf16_bits_to_float(all[h]));
  }
  Mismatches m;
  compare_bits("element rule", rule, want, m);
  for (k::Isa isa : available_isas()) {
    std::vector<float> got(all.size());
    k::decompress(f, all.data(), got.data(), all.size(), isa);
    compare_bits(k::isa_name(isa), got, want, m);
  }
  EXPECT_EQ(m.count, 0u) << m.first;
}

// A value for the compressors: spread over many exponents, or one of zeros of
// both signs, infinities, NaNs, a subnormal, values beyond fp16's range, a tie.
float awkward_value(std::mt19937& rng) {
  const float specials[] = {
      0.0f,   -0.0f,    INFINITY, -INFINITY, float_of(0x7fc00001u), float_of(0xff800123u),
      1e-40f, 70000.0f, -3e38f,   2.5f};
  const unsigned pick = rng() % 64;
  if (pick < 10) return specials[pick];
  const float u = static_cast<float>(rng() % 2000001) / 1e6f - 1.0f;
  return std::ldexp(u, static_cast<int>(rng() % 41) - 20);
}

std::vector<float> awkward_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = awkward_value(rng);
  return v;
}

TEST_P(Cast, CompressorWithResidualAndRingStepMatchOnEveryIsa) {
  const k::HalfFormat f = GetParam();
  const ref::Half h = f == k::HalfFormat::fp16 ? ref::Half::fp16 : ref::Half::bf16;
  const std::size_t n = 4133;  // Not a multiple of any vector width: the tails too.
  const std::vector<float> in = awkward_values(n, 1), residual = awkward_values(n, 2);
  std::vector<float> want_res = residual;
  std::vector<std::uint16_t> want(n), wire(n), want_sum(n);
  ref::cast_compress(h, in.data(), want_res.data(), want.data(), n);
  std::mt19937 rng(3);
  for (std::uint16_t& w : wire) w = static_cast<std::uint16_t>(rng());  // NaNs and infs too
  want_sum = want;
  ref::cast_accumulate(h, wire.data(), want_sum.data(), n);
  Mismatches m;
  for (k::Isa isa : available_isas()) {
    std::vector<float> res = residual;
    std::vector<std::uint16_t> got(n);
    k::compress(f, in.data(), res.data(), got.data(), n, isa);
    compare_bits("compress", got, want, m);
    compare_bits("residual", res, want_res, m);
    k::accumulate(f, wire.data(), got.data(), n, isa);
    compare_bits("accumulate", got, want_sum, m);
  }
  EXPECT_EQ(m.count, 0u) << m.first;
}

INSTANTIATE_TEST_SUITE_P(Formats, Cast, ::testing::Values(k::HalfFormat::fp16, k::HalfFormat::bf16),
                         [](const auto& info) {
                           return std::string(info.param == k::HalfFormat::fp16 ? "fp16" : "bf16");
                         });

// The element rules the compressors share, against their restatement.
TEST(ElementRules, SumsDivisionsAndResidualsMatch) {
  const std::vector<float> a = awkward_values(3000, 4), b = awkward_values(3000, 5);
  std::vector<float> got, want;
  for (std::size_t i = 0; i < a.size(); ++i) {
    got.push_back(k::add_nan_first(a[i], b[i]));
    want.push_back(ref::add_nan_first(a[i], b[i]));
    got.push_back(k::residual_after(a[i], b[i]));
    want.push_back(ref::residual_after(a[i], b[i]));
    for (int d : {1, 3}) {
      got.push_back(k::divide_keeping_nan(a[i], d));
      want.push_back(ref::divide_keeping_nan(a[i], d));
    }
  }
  Mismatches m;
  compare_bits("rule", got, want, m);
  EXPECT_EQ(m.count, 0u) << m.first;
}

// ---------------------------------------------------------------- top-k ----

// k = ceil(p n / q) for a ratio p / q, worked out in integers.
TEST(TopkCount, IsTheCeilingOfTheRatioTimesN) {
  const std::pair<std::size_t, std::size_t> ratios[] = {{1, 1000}, {1, 100}, {7, 100},   {1, 3},
                                                        {2, 3},    {1, 2},   {999, 1000}};
  for (const auto& [p, q] : ratios) {
    const double ratio = static_cast<double>(p) / static_cast<double>(q);
    for (std::size_t n = 0; n <= 3000; ++n) {
      const std::size_t exact = n == 0 ? 0 : std::clamp<std::size_t>((p * n + q - 1) / q, 1, n);
      ASSERT_EQ(ref::topk_count(n, ratio), exact) << p << "/" << q << " of " << n;
      ASSERT_EQ(k::topk_count(n, ratio), exact) << p << "/" << q << " of " << n;
    }
  }
  for (double odd : {0.0, -1.0, std::nan(""), 1.0, 2.5}) {
    EXPECT_EQ(k::topk_count(50, odd), ref::topk_count(50, odd)) << odd;
  }
}

enum class Data { spread, ties, mostly_zero, specials };

std::vector<float> topk_input(Data kind, std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<float> v(n);
  for (float& x : v) {
    switch (kind) {
      case Data::spread:
        x = std::ldexp(static_cast<float>(rng() % 100001) / 5e4f - 1.0f,
                       static_cast<int>(rng() % 17) - 8);
        break;
      case Data::ties: {  // a handful of magnitudes, both signs, both zeros
        const float levels[] = {0.5f, 1.0f, 2.0f, 0.0f};
        x = levels[rng() % 4] * (rng() & 1 ? -1.0f : 1.0f);
        break;
      }
      case Data::mostly_zero:
        x = rng() % 50 == 0 ? static_cast<float>(rng() % 5) - 2.0f : (rng() & 1 ? 0.0f : -0.0f);
        break;
      case Data::specials:
        x = awkward_value(rng);
        break;
    }
  }
  return v;
}

using TopkCase = std::tuple<std::size_t, double, Data>;
class Topk : public ::testing::TestWithParam<TopkCase> {};

// The payload's bytes, the residual and what the payload adds to a sum, with
// fp32 and fp16 values, with and without a residual, on every ISA, on one
// thread and on three (which split the input and its ties).
TEST_P(Topk, MatchesReference) {
  const auto [n, ratio, kind] = GetParam();
  const std::vector<float> in = topk_input(kind, n, 11);
  const std::vector<float> start = topk_input(Data::spread, n, 12);
  const std::vector<float> dense = topk_input(kind, n, 13);
  const std::size_t kk = ref::topk_count(n, ratio);
  ASSERT_EQ(k::topk_count(n, ratio), kk);
  Mismatches m;
  for (bool fp16 : {false, true}) {
    const auto values = fp16 ? k::TopkValues::fp16 : k::TopkValues::fp32;
    for (bool with_residual : {false, true}) {
      std::vector<float> want_res = start, want_sum = dense;
      const ref::TopkPayload p =
          ref::topk_compress(in.data(), with_residual ? want_res.data() : nullptr, n, kk, fp16);
      ref::topk_accumulate(p, want_sum.data());
      for (k::Isa isa : available_isas()) {
        for (unsigned threads : {1u, 3u}) {
          std::vector<float> res = start, sum = dense;
          std::vector<std::uint8_t> payload(k::topk_payload_bytes(kk, values));
          ASSERT_EQ(payload.size(), ref::topk_payload_bytes(kk, fp16));
          k::TopkScratch scratch;
          k::TopkTuning tuning;
          tuning.isa = isa;
          tuning.threads = threads;
          k::topk_compress(in.data(), with_residual ? res.data() : nullptr, n, kk, values,
                           payload.data(), scratch, tuning);
          compare_bits("payload", payload, p.bytes(), m);
          compare_bits("residual", res, want_res, m);
          k::topk_accumulate(payload.data(), kk, values, sum.data());
          compare_bits("sum", sum, want_sum, m);
        }
      }
    }
  }
  EXPECT_EQ(m.count, 0u) << "k = " << kk << "\n" << m.first;
}

std::string topk_name(const ::testing::TestParamInfo<TopkCase>& info) {
  const char* kinds[] = {"spread", "ties", "mostly_zero", "specials"};
  const auto [n, ratio, kind] = info.param;
  // Appended, not "n" + ...: GCC 12 warns (-Wrestrict) on that falsely.
  std::string name = "n";
  name += std::to_string(n) + "_r" + std::to_string(static_cast<int>(ratio * 1000)) + "_";
  return name + kinds[static_cast<int>(kind)];
}

INSTANTIATE_TEST_SUITE_P(SizesRatiosData, Topk,
                         ::testing::Combine(::testing::Values<std::size_t>(1, 2, 5, 64, 1000, 4099,
                                                                           70001),
                                            ::testing::Values(0.001, 0.07, 0.3, 1.0),
                                            ::testing::Values(Data::spread, Data::ties,
                                                              Data::mostly_zero, Data::specials)),
                         topk_name);
// Large enough that a tied bucket outgrows what the kernel copies out (the
// refining passes), and that three threads share one tied magnitude.
INSTANTIATE_TEST_SUITE_P(LargeTies, Topk,
                         ::testing::Combine(::testing::Values<std::size_t>(600000),
                                            ::testing::Values(0.01, 0.3),
                                            ::testing::Values(Data::ties, Data::mostly_zero)),
                         topk_name);

// ----------------------------------------------------------------- int8 ----

enum class Bucket { spread, zeros, constant, huge, tiny, threshold, halves, specials };

// Buckets that test a rule: all zeros; one value repeated; near FLT_MAX
// (quotients just past 126, clamped); all below 2^-100 (scale 0); around
// 2^-100; a largest value of 126 so that the scale is 1 and halves tie.
std::vector<float> int8_input(Bucket kind, std::size_t n, std::size_t bucket, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<float> v(n);
  const float tiny = std::ldexp(1.0f, -100);
  for (std::size_t i = 0; i < n; ++i) {
    const float u = static_cast<float>(rng() % 200001) / 1e5f - 1.0f;  // [-1, 1]
    switch (kind) {
      case Bucket::spread:
        v[i] = std::ldexp(u, static_cast<int>(rng() % 13) - 6);
        break;
      case Bucket::zeros:
        v[i] = rng() & 1 ? 0.0f : -0.0f;
        break;
      case Bucket::constant:
        v[i] = -0.7f;
        break;
      case Bucket::huge:
        v[i] = i % bucket == 0 ? FLT_MAX : u * FLT_MAX;
        break;
      case Bucket::tiny:
        v[i] = u * std::nextafter(tiny, 0.0f);
        break;
      case Bucket::threshold: {
        const float edges[] = {tiny, std::nextafter(tiny, 0.0f), std::nextafter(tiny, 1.0f),
                               1e-45f};
        v[i] = i % bucket == 0 ? edges[(i / bucket) % 4] : u * tiny;
        break;
      }
      case Bucket::halves:
        v[i] = i % bucket == 0 ? 126.0f
                               : static_cast<float>(static_cast<int>(rng() % 253) - 126) / 2.0f;
        break;
      case Bucket::specials:
        v[i] = awkward_value(rng);
        break;
    }
  }
  return v;
}

using Int8Case = std::tuple<std::size_t, std::size_t, Bucket>;
class Int8 : public ::testing::TestWithParam<Int8Case> {};

// The block's bytes, the residual, the decoded values and what the block adds
// to a sum, with and without a residual, on every ISA.
TEST_P(Int8, MatchesReference) {
  const auto [n, bucket, kind] = GetParam();
  const std::vector<float> in = int8_input(kind, n, bucket, 21);
  const std::vector<float> start = int8_input(Bucket::spread, n, bucket, 22);
  const std::vector<float> dense = int8_input(Bucket::specials, n, bucket, 23);
  Mismatches m;
  for (bool with_residual : {false, true}) {
    std::vector<float> want_res = start, want_sum = dense;
    const std::vector<std::uint8_t> want =
        ref::quant8_compress(in.data(), with_residual ? want_res.data() : nullptr, n, bucket);
    const std::vector<float> want_out = ref::quant8_decompress(want.data(), n, bucket);
    ref::quant8_accumulate(want.data(), n, bucket, want_sum.data());
    for (k::Isa isa : available_isas()) {
      std::vector<float> res = start, sum = dense, out(n);
      std::vector<std::uint8_t> block(k::quant8_bytes(n, bucket));
      ASSERT_EQ(block.size(), want.size());
      k::quant8_compress(in.data(), with_residual ? res.data() : nullptr, n, bucket, block.data(),
                         isa);
      compare_bits("block", block, want, m);
      compare_bits("residual", res, want_res, m);
      k::quant8_decompress(block.data(), n, bucket, out.data(), isa);
      compare_bits("decoded", out, want_out, m);
      k::quant8_accumulate(block.data(), n, bucket, sum.data(), isa);
      compare_bits("sum", sum, want_sum, m);
    }
  }
  EXPECT_EQ(m.count, 0u) << m.first;
}

std::string int8_name(const ::testing::TestParamInfo<Int8Case>& info) {
  const char* kinds[] = {"spread", "zeros",     "constant", "huge",
                         "tiny",   "threshold", "halves",   "specials"};
  const auto [n, bucket, kind] = info.param;
  std::string name = "n";
  name += std::to_string(n) + "_b" + std::to_string(bucket) + "_";
  return name + kinds[static_cast<int>(kind)];
}

INSTANTIATE_TEST_SUITE_P(SizesBucketsData, Int8,
                         ::testing::Combine(::testing::Values<std::size_t>(1, 7, 100, 513, 4097),
                                            ::testing::Values<std::size_t>(1, 7, 64, 512),
                                            ::testing::Values(Bucket::spread, Bucket::zeros,
                                                              Bucket::constant, Bucket::huge,
                                                              Bucket::tiny, Bucket::threshold,
                                                              Bucket::halves, Bucket::specials)),
                         int8_name);

// ------------------------------------------------------------ int4, int2 ----

using PackedCase = std::tuple<int, std::size_t, std::size_t, Bucket>;
class Packed : public ::testing::TestWithParam<PackedCase> {};

// As Int8 above, at 4 and 2 bits: the block, the residual, the decoded values
// and the sum against the reference restated from kernels/quant_packed.h.
TEST_P(Packed, MatchesReference) {
  const auto [bits, n, bucket, kind] = GetParam();
  const std::vector<float> in = int8_input(kind, n, bucket, 31);
  const std::vector<float> start = int8_input(Bucket::spread, n, bucket, 32);
  const std::vector<float> dense = int8_input(Bucket::specials, n, bucket, 33);
  Mismatches m;
  for (bool with_residual : {false, true}) {
    std::vector<float> want_res = start, want_sum = dense;
    const std::vector<std::uint8_t> want = ref::quant_packed_compress(
        in.data(), with_residual ? want_res.data() : nullptr, n, bucket, bits);
    const std::vector<float> want_out = ref::quant_packed_decompress(want.data(), n, bucket, bits);
    ref::quant_packed_accumulate(want.data(), n, bucket, bits, want_sum.data());
    for (k::Isa isa : available_isas()) {
      std::vector<float> res = start, sum = dense, out(n);
      std::vector<std::uint8_t> block(k::quant_packed_bytes(n, bucket, bits));
      ASSERT_EQ(block.size(), want.size());
      k::quant_packed_compress(in.data(), with_residual ? res.data() : nullptr, n, bucket, bits,
                               block.data(), isa);
      compare_bits("block", block, want, m);
      compare_bits("residual", res, want_res, m);
      k::quant_packed_decompress(block.data(), n, bucket, bits, out.data(), isa);
      compare_bits("decoded", out, want_out, m);
      k::quant_packed_accumulate(block.data(), n, bucket, bits, sum.data(), isa);
      compare_bits("sum", sum, want_sum, m);
    }
  }
  EXPECT_EQ(m.count, 0u) << m.first;
}

std::string packed_name(const ::testing::TestParamInfo<PackedCase>& info) {
  const auto [bits, n, bucket, kind] = info.param;
  return "bits" + std::to_string(bits) + "_" + int8_name({Int8Case{n, bucket, kind}, info.index});
}

INSTANTIATE_TEST_SUITE_P(SizesBucketsData, Packed,
                         ::testing::Combine(::testing::Values(4, 2),
                                            ::testing::Values<std::size_t>(7, 513),
                                            ::testing::Values<std::size_t>(1, 7, 512),
                                            ::testing::Values(Bucket::spread, Bucket::zeros,
                                                              Bucket::constant, Bucket::huge,
                                                              Bucket::tiny, Bucket::threshold,
                                                              Bucket::halves, Bucket::specials)),
                         packed_name);

}  // namespace
}  // namespace slimreduce
