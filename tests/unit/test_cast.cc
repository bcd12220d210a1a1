// Tests for kernels/cast.h. The references here are written independently of
// kernels/element_rules.h: decoding with ldexp, rounding with double arithmetic
// and nearbyint (ties to even in the default rounding mode). Only the NaN rules,
// which are a choice rather than arithmetic, are restated as bit formulas.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cast.h"

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

bool available(Isa isa) { return static_cast<int>(isa) <= static_cast<int>(best_isa()); }

std::vector<Isa> available_isas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    if (available(isa)) isas.push_back(isa);
  }
  return isas;
}

const char* format_name(HalfFormat f) { return f == HalfFormat::fp16 ? "fp16" : "bf16"; }

}  // namespace

// Readable test parameters in gtest messages (found by argument lookup).
void PrintTo(HalfFormat f, std::ostream* os) { *os << format_name(f); }
void PrintTo(Isa isa, std::ostream* os) { *os << isa_name(isa); }

namespace {

// ------------------------------------------------ independent references ----

// Layout of a binary16-like format: explicit mantissa bits, bias, all-ones exp.
struct Layout {
  int mant_bits, bias, max_exp;
};
constexpr Layout kFp16{10, 15, 31};
constexpr Layout kBf16{7, 127, 255};
Layout layout(HalfFormat f) { return f == HalfFormat::fp16 ? kFp16 : kBf16; }

// NaN rules: F16C's VCVTPH2PS sets the quiet bit; bf16 widening is bits << 16.
float ref_widen_nan(HalfFormat f, std::uint16_t h) {
  if (f == HalfFormat::bf16) return from_bits(std::uint32_t{h} << 16);
  return from_bits((std::uint32_t{h} & 0x8000u) << 16 | 0x7fc00000u | (h & 0x3ffu) << 13);
}

float ref_widen(HalfFormat f, std::uint16_t h) {
  const Layout l = layout(f);
  const bool negative = h & 0x8000;
  const int exp = (h >> l.mant_bits) & l.max_exp;
  const int mant = h & ((1 << l.mant_bits) - 1);
  double mag;
  if (exp == l.max_exp) {
    if (mant != 0) return ref_widen_nan(f, h);
    mag = INFINITY;
  } else if (exp == 0) {
    mag = std::ldexp(mant, 1 - l.bias - l.mant_bits);
  } else {
    mag = std::ldexp((1 << l.mant_bits) + mant, exp - l.bias - l.mant_bits);
  }
  return static_cast<float>(negative ? -mag : mag);
}

// NaN rules: F16C's VCVTPS2PH keeps sign and top 10 payload bits, quiet bit on;
// bf16 keeps the top 16 bits with the quiet bit on.
std::uint16_t ref_round_nan(HalfFormat f, float x) {
  const std::uint32_t u = bits_of(x);
  if (f == HalfFormat::bf16) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  return static_cast<std::uint16_t>(((u >> 16) & 0x8000u) | 0x7e00u | ((u >> 13) & 0x3ffu));
}

std::uint16_t ref_round(HalfFormat f, float x) {
  if (std::isnan(x)) return ref_round_nan(f, x);
  const Layout l = layout(f);
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const std::uint16_t inf = static_cast<std::uint16_t>(l.max_exp << l.mant_bits);
  const double a = std::fabs(static_cast<double>(x));
  if (std::isinf(a)) return sign | inf;
  if (a == 0) return sign;
  int e;
  std::frexp(a, &e);
  const int emin = 1 - l.bias;
  int k = std::max(e - 1, emin);  // Subnormals share the scale of emin.
  const double one = std::ldexp(1.0, l.mant_bits);
  double r = std::nearbyint(std::ldexp(a, l.mant_bits - k));  // Exact scaling, RNE.
  if (r == 2 * one) r = one, ++k;                             // Rounded into the next binade.
  if (r < one) return sign | static_cast<std::uint16_t>(r);   // Subnormal (or zero).
  if (k + l.bias >= l.max_exp) return sign | inf;
  return sign | static_cast<std::uint16_t>(((k + l.bias) << l.mant_bits) + (r - one));
}

std::uint16_t compress1(HalfFormat f, float x, Isa isa) {
  std::uint16_t h;
  compress(f, &x, nullptr, &h, 1, isa);
  return h;
}

// ------------------------------------------------------ (1) decompress ----

TEST(CastDecompress, AllPatternsMatchReferenceOnEveryIsa) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  std::vector<std::uint16_t> all(65536);
  for (std::uint32_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i);
  for (HalfFormat f : {HalfFormat::fp16, HalfFormat::bf16}) {
    for (Isa isa : available_isas()) {
      std::vector<float> out(all.size());
      decompress(f, all.data(), out.data(), all.size(), isa);
      int bad = 0;
      for (std::uint32_t i = 0; i < all.size(); ++i) {
        const std::uint32_t want = bits_of(ref_widen(f, all[i])), got = bits_of(out[i]);
        if (want != got && ++bad <= 5) {
          ADD_FAILURE() << format_name(f) << " " << isa_name(isa) << " pattern 0x" << std::hex << i
                        << ": got 0x" << got << " want 0x" << want;
        }
      }
      EXPECT_EQ(bad, 0) << format_name(f) << " " << isa_name(isa);
    }
  }
}

TEST(CastDecompress, NanSemantics) {
  for (Isa isa : available_isas()) {
    float out[3];
    const std::uint16_t h16[3] = {0x7c01, 0xfd00, 0x7e00};  // sNaN, -sNaN payload, qNaN
    decompress(HalfFormat::fp16, h16, out, 3, isa);
    EXPECT_EQ(bits_of(out[0]), 0x7fc02000u) << isa_name(isa);  // Quieted, payload kept.
    EXPECT_EQ(bits_of(out[1]), 0xffe00000u) << isa_name(isa);
    EXPECT_EQ(bits_of(out[2]), 0x7fc00000u) << isa_name(isa);
    const std::uint16_t hb[3] = {0x7f81, 0xffc1, 0xff80};  // sNaN stays signalling.
    decompress(HalfFormat::bf16, hb, out, 3, isa);
    EXPECT_EQ(bits_of(out[0]), 0x7f810000u) << isa_name(isa);
    EXPECT_EQ(bits_of(out[1]), 0xffc10000u) << isa_name(isa);
    EXPECT_EQ(bits_of(out[2]), 0xff800000u) << isa_name(isa);
  }
}

// --------------------------------------------------------- (2) rounding ----

struct Case {
  float x;
  std::uint16_t fp16, bf16;
};

TEST(CastRound, HandPickedCases) {
  const float p24 = std::ldexp(1.0f, -24), p25 = std::ldexp(1.0f, -25);
  const Case cases[] = {
      {65520.0f, 0x7c00, 0x4780},                        // fp16 boundary: tie to odd 65504 -> inf.
      {std::nextafter(65520.0f, 0.0f), 0x7bff, 0x4780},  // 65519.996 -> 65504.
      {65504.0f, 0x7bff, 0x4780},                        // bf16: 65504 = 0x477fe000 rounds up.
      {-65520.0f, 0xfc00, 0xc780},
      {1.0f + std::ldexp(1.0f, -11), 0x3c00, 0x3f80},      // fp16 tie, even below.
      {1.0f + 3 * std::ldexp(1.0f, -11), 0x3c02, 0x3f80},  // fp16 tie, odd below: up.
      {1.0f + std::ldexp(1.0f, -8), 0x3c04, 0x3f80},       // bf16 tie, even below.
      {1.0f + 3 * std::ldexp(1.0f, -8), 0x3c0c, 0x3f82},   // bf16 tie, odd below: up.
      {p24, 0x0001, 0x3380},                               // Smallest fp16 subnormal.
      {p25, 0x0000, 0x3300},                               // Tie between 0 and 2^-24: 0.
      {std::nextafter(p25, 1.0f), 0x0001, 0x3300},
      {1.5f * p24, 0x0002, 0x33c0},                // Subnormal tie, odd below: up.
      {2.5f * p24, 0x0002, 0x3420},                // Subnormal tie, even below: down.
      {std::ldexp(1023.5f, -24), 0x0400, 0x3880},  // Largest subnormal rounds up to min normal.
      {-p25, 0x8000, 0xb300},                      // Signed zero from underflow.
      {0.0f, 0x0000, 0x0000},
      {-0.0f, 0x8000, 0x8000},
      {INFINITY, 0x7c00, 0x7f80},
      {-INFINITY, 0xfc00, 0xff80},
      {from_bits(0x00000001), 0x0000, 0x0000},  // fp32 denormal: bf16 keeps it.
      {from_bits(0x00008001), 0x0000, 0x0001},  // bf16 rounds a denormal up.
      {from_bits(0x7f7fffff), 0x7c00, 0x7f80},  // FLT_MAX -> inf in both.
      {from_bits(0x7fc00000), 0x7e00, 0x7fc0},  // Quiet NaN.
      {from_bits(0x7f800001), 0x7e00, 0x7fc0},  // sNaN: low payload lost, quieted.
      {from_bits(0x7fa00000), 0x7f00, 0x7fe0},  // sNaN with high payload: kept, quieted.
      {from_bits(0xffc12345), 0xfe09, 0xffc1},  // Negative NaN keeps its sign.
      {from_bits(0x7fffffff), 0x7fff, 0x7fff},  // A payload that must not carry to inf.
  };
  for (Isa isa : available_isas()) {
    for (const Case& c : cases) {
      EXPECT_EQ(compress1(HalfFormat::fp16, c.x, isa), c.fp16)
          << isa_name(isa) << " fp16 of 0x" << std::hex << bits_of(c.x);
      EXPECT_EQ(compress1(HalfFormat::bf16, c.x, isa), c.bf16)
          << isa_name(isa) << " bf16 of 0x" << std::hex << bits_of(c.x);
      // The reference must agree with the hand-derived answers too.
      EXPECT_EQ(ref_round(HalfFormat::fp16, c.x), c.fp16) << std::hex << bits_of(c.x);
      EXPECT_EQ(ref_round(HalfFormat::bf16, c.x), c.bf16) << std::hex << bits_of(c.x);
    }
  }
}

// Compresses xs on every ISA and compares with ref_round; reports a few misses.
void expect_rounding(HalfFormat f, const std::vector<float>& xs) {
  std::vector<std::uint16_t> want(xs.size()), got(xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) want[i] = ref_round(f, xs[i]);
  for (Isa isa : available_isas()) {
    compress(f, xs.data(), nullptr, got.data(), xs.size(), isa);
    int bad = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      if (got[i] != want[i] && ++bad <= 5) {
        ADD_FAILURE() << format_name(f) << " " << isa_name(isa) << " x=0x" << std::hex
                      << bits_of(xs[i]) << ": got 0x" << got[i] << " want 0x" << want[i];
      }
    }
    EXPECT_EQ(bad, 0) << format_name(f) << " " << isa_name(isa);
  }
}

// Every midpoint between neighbouring 16-bit values, and the floats either
// side of it: every tie and every near-tie the format has.
TEST(CastRound, EveryMidpointAndNeighbours) {
  for (HalfFormat f : {HalfFormat::fp16, HalfFormat::bf16}) {
    const Layout l = layout(f);
    const std::uint16_t inf = static_cast<std::uint16_t>(l.max_exp << l.mant_bits);
    std::vector<float> xs;
    for (std::uint16_t h = 0; h < inf; ++h) {
      const double lo = ref_widen(f, h);
      const double hi =
          h + 1 < inf ? ref_widen(f, h + 1) : std::ldexp(1.0, l.max_exp - l.bias);  // Past the top.
      const float mid = static_cast<float>((lo + hi) / 2);
      ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2) << "midpoint not a float";
      // A tie rounds to the even one of its two neighbours.
      const std::uint16_t even = (h & 1) ? static_cast<std::uint16_t>(h + 1) : h;
      ASSERT_EQ(ref_round(f, mid), even) << "reference breaks ties wrongly at " << h;
      for (float x : {float(lo), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
        xs.push_back(x);
        xs.push_back(-x);
      }
    }
    expect_rounding(f, xs);
  }
}

// Several million random floats: uniform bit patterns (every exponent, NaNs
// and infinities included) plus a batch concentrated on the 16-bit range.
TEST(CastRound, RandomFloatsMatchReference) {
  std::mt19937 rng(12345);
  std::vector<float> xs;
  for (int i = 0; i < 2'000'000; ++i) xs.push_back(from_bits(static_cast<std::uint32_t>(rng())));
  std::uniform_int_distribution<std::uint32_t> exp(95, 150), mant(0, 0x7fffff), sign(0, 1);
  for (int i = 0; i < 2'000'000; ++i) {
    xs.push_back(from_bits(sign(rng) << 31 | exp(rng) << 23 | mant(rng)));
  }
  expect_rounding(HalfFormat::fp16, xs);
  expect_rounding(HalfFormat::bf16, xs);
}

// ----------------------------------------------- (3) SIMD equals scalar ----

// Mostly ordinary values, with specials (NaN, inf, denormals, huge) mixed in.
std::vector<float> mixed_floats(std::size_t n, std::mt19937& rng, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = rng() % 4 ? normal(rng) : from_bits(static_cast<std::uint32_t>(rng()));
  return v;
}

std::vector<std::uint16_t> random_halves(std::size_t n, std::mt19937& rng) {
  std::vector<std::uint16_t> v(n);
  for (auto& h : v) h = static_cast<std::uint16_t>(rng());
  return v;
}

template <class T>
void expect_same_bits(const std::vector<T>& got, const std::vector<T>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(T)), 0) << what << " differs at " << i;
  }
}

using SimdParam = std::tuple<std::size_t, HalfFormat, Isa>;

class CastSimd : public ::testing::TestWithParam<SimdParam> {
 protected:
  void SetUp() override {
    std::tie(n_, format_, isa_) = GetParam();
    if (!available(isa_)) GTEST_SKIP() << isa_name(isa_) << " not supported by this CPU";
  }
  std::size_t n_;
  HalfFormat format_;
  Isa isa_;
};

// offset shifts the arrays by one element so loads and stores are misaligned.
TEST_P(CastSimd, CompressMatchesScalar) {
  std::mt19937 rng(static_cast<unsigned>(n_));
  for (std::size_t offset : {0, 1}) {
    const std::vector<float> in = mixed_floats(n_ + offset, rng, 10.0f);
    std::vector<float> res = mixed_floats(n_ + offset, rng, 0.01f);
    std::vector<std::uint16_t> out_s(n_ + offset), out_v(n_ + offset);
    compress(format_, in.data() + offset, nullptr, out_s.data() + offset, n_, Isa::scalar);
    compress(format_, in.data() + offset, nullptr, out_v.data() + offset, n_, isa_);
    expect_same_bits(out_v, out_s, "compress");
    std::vector<float> res_s = res, res_v = res;
    compress(format_, in.data() + offset, res_s.data() + offset, out_s.data() + offset, n_,
             Isa::scalar);
    compress(format_, in.data() + offset, res_v.data() + offset, out_v.data() + offset, n_, isa_);
    expect_same_bits(out_v, out_s, "compress with residual: out");
    expect_same_bits(res_v, res_s, "compress with residual: residual");
  }
}

TEST_P(CastSimd, DecompressAndAccumulateMatchScalar) {
  std::mt19937 rng(static_cast<unsigned>(n_) + 1);
  for (std::size_t offset : {0, 1}) {
    const std::vector<std::uint16_t> in = random_halves(n_ + offset, rng);
    std::vector<float> f_s(n_ + offset), f_v(n_ + offset);
    decompress(format_, in.data() + offset, f_s.data() + offset, n_, Isa::scalar);
    decompress(format_, in.data() + offset, f_v.data() + offset, n_, isa_);
    expect_same_bits(f_v, f_s, "decompress");
    std::vector<std::uint16_t> acc_s = random_halves(n_ + offset, rng), acc_v = acc_s;
    accumulate(format_, in.data() + offset, acc_s.data() + offset, n_, Isa::scalar);
    accumulate(format_, in.data() + offset, acc_v.data() + offset, n_, isa_);
    expect_same_bits(acc_v, acc_s, "accumulate");
  }
}

std::string simd_name(const ::testing::TestParamInfo<SimdParam>& info) {
  return std::string(format_name(std::get<1>(info.param))) + "_" +
         isa_name(std::get<2>(info.param)) + "_n" + std::to_string(std::get<0>(info.param));
}

INSTANTIATE_TEST_SUITE_P(SizesFormatsIsas, CastSimd,
                         ::testing::Combine(::testing::Values<std::size_t>(0, 1, 7, 8, 15, 16, 17,
                                                                           1000, 65537),
                                            ::testing::Values(HalfFormat::fp16, HalfFormat::bf16),
                                            ::testing::Values(Isa::avx2, Isa::avx512)),
                         simd_name);

// Accumulate agrees with the reference: round(widen(a) + widen(b)).
TEST(CastAccumulate, MatchesReference) {
  std::mt19937 rng(7);
  for (HalfFormat f : {HalfFormat::fp16, HalfFormat::bf16}) {
    const std::vector<std::uint16_t> a = random_halves(100000, rng);
    const std::vector<std::uint16_t> b = random_halves(a.size(), rng);
    for (Isa isa : available_isas()) {
      std::vector<std::uint16_t> io = b;
      accumulate(f, a.data(), io.data(), a.size(), isa);
      for (std::size_t i = 0; i < a.size(); ++i) {
        const float wa = ref_widen(f, a[i]), wb = ref_widen(f, b[i]);
        if (std::isnan(wa) || std::isnan(wb)) {  // a's NaN wins, quieted.
          const float nan = std::isnan(wa) ? wa : wb;
          ASSERT_EQ(io[i], ref_round(f, from_bits(bits_of(nan) | 0x400000u))) << i;
        } else {
          ASSERT_EQ(io[i], ref_round(f, wa + wb)) << format_name(f) << " " << isa_name(isa);
        }
      }
    }
  }
}

// Opposite infinities make a NaN: x86's default NaN, which the GPU twin
// produces too (a GPU's own would be 0x7fffffff), rounded to 16 bits.
TEST(CastAccumulate, OppositeInfinitiesGiveTheDefaultNanOnEveryIsa) {
  struct Case {
    HalfFormat format;
    std::uint16_t plus_inf, minus_inf, default_nan;
  };
  for (const Case c : {Case{HalfFormat::fp16, 0x7c00, 0xfc00, 0xfe00},
                       Case{HalfFormat::bf16, 0x7f80, 0xff80, 0xffc0}}) {
    for (Isa isa : available_isas()) {
      const std::vector<std::uint16_t> in(37, c.plus_inf);  // past every vector width's tail
      std::vector<std::uint16_t> io(37, c.minus_inf);
      accumulate(c.format, in.data(), io.data(), in.size(), isa);
      for (std::uint16_t h : io)
        ASSERT_EQ(h, c.default_nan) << format_name(c.format) << " " << isa_name(isa);
    }
  }
}

// Requesting an ISA the CPU lacks runs a lower one; the bits are the same.
TEST(CastIsa, AnyIsaRequestWorks) {
  EXPECT_STREQ(isa_name(Isa::scalar), "scalar");
  EXPECT_STREQ(isa_name(Isa::avx2), "avx2");
  EXPECT_STREQ(isa_name(Isa::avx512), "avx512");
  if (available(Isa::avx2)) {
    EXPECT_TRUE(__builtin_cpu_supports("avx2"));
  }
  if (available(Isa::avx512)) {
    EXPECT_TRUE(__builtin_cpu_supports("avx512f"));
  }
  std::mt19937 rng(3);
  const std::vector<float> in = mixed_floats(333, rng, 1.0f);
  std::vector<std::uint16_t> want(in.size()), got(in.size());
  compress(HalfFormat::fp16, in.data(), nullptr, want.data(), in.size(), Isa::scalar);
  for (Isa isa : {Isa::avx2, Isa::avx512}) {
    compress(HalfFormat::fp16, in.data(), nullptr, got.data(), in.size(), isa);
    expect_same_bits(got, want, isa_name(isa));
  }
}

// ---------------------------------------------- (4), (5) error feedback ----

TEST(CastErrorFeedback, InvariantHolds) {
  std::mt19937 rng(99);
  for (HalfFormat f : {HalfFormat::fp16, HalfFormat::bf16}) {
    const std::vector<float> in = mixed_floats(200003, rng, 1000.0f);
    const std::vector<float> old_res = mixed_floats(in.size(), rng, 0.5f);
    for (Isa isa : available_isas()) {
      std::vector<float> res = old_res;
      std::vector<std::uint16_t> out(in.size());
      compress(f, in.data(), res.data(), out.data(), in.size(), isa);
      for (std::size_t i = 0; i < in.size(); ++i) {
        const float acc = in[i] + old_res[i];  // fp32, as the contract says.
        const float back = ref_widen(f, out[i]);
        if (!std::isfinite(back)) {
          ASSERT_EQ(bits_of(res[i]), 0u) << "residual must be +0 at " << i;
          continue;
        }
        ASSERT_TRUE(std::isfinite(acc));
        ASSERT_EQ(out[i], ref_round(f, acc)) << format_name(f) << " " << isa_name(isa) << " " << i;
        ASSERT_EQ(back + res[i], acc) << format_name(f) << " " << isa_name(isa) << " " << i;
      }
    }
  }
}

// Largest |sum of inputs - sum of widened outputs| over steps, in ulps of each
// element, for a constant vector compressed `steps` times.
double max_drift_ulps(HalfFormat f, Isa isa, const std::vector<float>& x, bool feedback,
                      int steps) {
  std::vector<float> res(x.size(), 0.0f);
  std::vector<std::uint16_t> out(x.size());
  std::vector<double> sum_in(x.size(), 0.0), sum_out(x.size(), 0.0);
  double worst = 0;
  for (int s = 0; s < steps; ++s) {
    compress(f, x.data(), feedback ? res.data() : nullptr, out.data(), x.size(), isa);
    for (std::size_t i = 0; i < x.size(); ++i) {
      sum_in[i] += x[i];
      sum_out[i] += ref_widen(f, out[i]);
      const double ulp = std::ldexp(1.0, std::ilogb(x[i]) - layout(f).mant_bits);
      worst = std::max(worst, std::fabs(sum_in[i] - sum_out[i]) / ulp);
    }
  }
  return worst;
}

TEST(CastErrorFeedback, ResidualCarriesAcrossSteps) {
  std::vector<float> x;
  for (int i = 0; i < 37; ++i) x.push_back((i % 2 ? -1.0f : 1.0f) * (0.001f + 0.0137f * i));
  for (HalfFormat f : {HalfFormat::fp16, HalfFormat::bf16}) {
    for (Isa isa : available_isas()) {
      EXPECT_LE(max_drift_ulps(f, isa, x, true, 1000), 1.0) << format_name(f) << isa_name(isa);
      // Without feedback the same data drifts far: the check above has teeth.
      EXPECT_GT(max_drift_ulps(f, isa, x, false, 1000), 10.0) << format_name(f);
    }
  }
}

}  // namespace
}  // namespace slimreduce::kernels

namespace slimreduce::kernels {
namespace {

// all_finite: an inf or a NaN anywhere in a 16-bit wire, at any length and
// position, in either format; the largest finite values are finite.
class AllFinite : public ::testing::TestWithParam<std::tuple<HalfFormat, std::size_t>> {};

TEST_P(AllFinite, FindsAnInfOrNaNAnywhere) {
  const auto [format, n] = GetParam();
  const bool fp16 = format == HalfFormat::fp16;
  const std::uint16_t largest = fp16 ? 0x7bff : 0x7f7f;  // 65504, and bf16's largest
  std::vector<std::uint16_t> wire(n, largest);
  for (std::size_t i = 0; i < n; i += 3) wire[i] |= 0x8000;  // negatives too
  EXPECT_TRUE(all_finite(format, wire.data(), n));
  const std::uint16_t specials[] = {std::uint16_t(fp16 ? 0x7c00 : 0x7f80),   // +inf
                                    std::uint16_t(fp16 ? 0xfc00 : 0xff80),   // -inf
                                    std::uint16_t(fp16 ? 0x7e00 : 0x7fc0)};  // NaN
  for (std::size_t at : {std::size_t{0}, n / 2, n - 1}) {
    for (std::uint16_t special : specials) {
      std::vector<std::uint16_t> bad = wire;
      bad[at] = special;
      EXPECT_FALSE(all_finite(format, bad.data(), n)) << std::hex << special << " at " << at;
    }
  }
  EXPECT_TRUE(all_finite(format, wire.data(), 0)) << "nothing is finite by default";
}

INSTANTIATE_TEST_SUITE_P(FormatsSizes, AllFinite,
                         ::testing::Combine(::testing::Values(HalfFormat::fp16, HalfFormat::bf16),
                                            ::testing::Values<std::size_t>(1, 2, 15, 16, 17, 1000,
                                                                           65537)));

}  // namespace
}  // namespace slimreduce::kernels
