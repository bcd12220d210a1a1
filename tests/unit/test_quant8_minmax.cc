// Tests for kernels/quant8_minmax.h: every ISA this CPU has against the
// scalar path and against tests/reference/independent.h (which calls no
// kernel), over sizes, buckets and inputs; the rules one by one (the step
// bound, constant buckets, offset ramps against absmax, non-finite values,
// error feedback, the edges of fp32); and which blocks from another rank are
// refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/quant8.h"
#include "kernels/quant8_minmax.h"
#include "tests/reference/independent.h"

namespace slimreduce::kernels {
namespace {

namespace ref = reference;
using ref::bits_of;
using ref::float_of;

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNan = float_of(0x7fc00000u);
constexpr Isa kIsas[] = {Isa::scalar, Isa::avx2, Isa::avx512};

bool available(Isa isa) { return static_cast<int>(isa) <= static_cast<int>(best_isa()); }

template <class T>
void expect_same_bits(const std::vector<T>& got, const std::vector<T>& want,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(T)), 0)
        << what << " differs at " << i << ": " << +got[i] << " vs " << +want[i];
  }
}

enum class Data { gradients, offsets, specials, constant };

// Gradient-like values at a magnitude per bucket; buckets far from zero
// (a ramp on a large offset); the same with NaNs, infinities, -0 and
// subnormals; one value per bucket.
std::vector<float> values(Data kind, std::size_t n, std::size_t bucket, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  int exponent = 0;
  float base = 0.0f;
  for (std::size_t i = 0; i < n; ++i) {
    if (i % bucket == 0) {
      exponent = static_cast<int>(rng() % 60) - 30;
      base = std::ldexp(normal(rng) * 1000.0f, exponent);
    }
    switch (kind) {
      case Data::gradients:
        v[i] = std::ldexp(normal(rng), exponent);
        break;
      case Data::offsets:
        v[i] = base + std::ldexp(static_cast<float>(i % bucket), exponent);
        break;
      case Data::specials: {
        const std::uint32_t s[7] = {0x7fc12345u, 0xffa00001u, 0x7f800000u, 0xff800000u,
                                    0x00000abcu, 0x80000000u, 0x7f7fffffu};
        const unsigned pick = rng() % 100;
        v[i] = pick < 7 ? float_of(s[pick]) : base + std::ldexp(normal(rng), exponent);
        break;
      }
      case Data::constant:
        v[i] = base;
        break;
    }
  }
  return v;
}

// ------------------------------------------------ every ISA, bit for bit ----

enum class Size { zero, one, bucket_less_one, bucket, bucket_plus_one, large };

std::size_t size_of(Size s, std::size_t bucket) {
  const std::size_t sizes[] = {0, 1, bucket - 1, bucket, bucket + 1, 100'003};
  return sizes[static_cast<int>(s)];
}

using Param = std::tuple<Size, std::size_t, Isa, bool>;

class Minmax : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    Size size;
    std::tie(size, bucket_, isa_, residual_) = GetParam();
    if (!available(isa_)) GTEST_SKIP() << isa_name(isa_) << " not supported by this CPU";
    n_ = size_of(size, bucket_);
    rng_.seed(static_cast<unsigned>(n_ * 31 + bucket_));
  }
  std::size_t n_, bucket_;
  Isa isa_;
  bool residual_;
  std::mt19937 rng_;
};

// The block (at an odd address, nothing written around it), the residual,
// the decoded values and the sum: the same bits as the scalar path and as
// the independent reference.
TEST_P(Minmax, SameBitsAsScalarAndReference) {
  for (Data kind : {Data::gradients, Data::offsets, Data::specials, Data::constant}) {
    const std::vector<float> in = values(kind, n_, bucket_, rng_);
    const std::vector<float> res0 = values(Data::gradients, n_, bucket_, rng_);
    const std::vector<float> dense0 = values(Data::specials, n_, bucket_, rng_);
    std::vector<float> want_res = res0, want_sum = dense0;
    const std::vector<std::uint8_t> want =
        ref::quant8_minmax_compress(in.data(), residual_ ? want_res.data() : nullptr, n_, bucket_);
    ASSERT_EQ(quant8_minmax_bytes(n_, bucket_), want.size());
    for (Isa isa : {isa_, Isa::scalar}) {
      const std::string what =
          std::string(isa_name(isa)) + " data " + std::to_string(static_cast<int>(kind));
      std::vector<std::uint8_t> buffer(want.size() + 65, 0xA5);
      std::vector<float> res = res0, sum = dense0, out(n_);
      quant8_minmax_compress(in.data(), residual_ ? res.data() : nullptr, n_, bucket_,
                             buffer.data() + 1, isa);
      EXPECT_EQ(buffer[0], 0xA5);
      for (std::size_t i = want.size() + 1; i < buffer.size(); ++i) ASSERT_EQ(buffer[i], 0xA5);
      const std::vector<std::uint8_t> block(buffer.begin() + 1, buffer.begin() + 1 + want.size());
      expect_same_bits(block, want, "block " + what);
      expect_same_bits(res, want_res, "residual " + what);
      EXPECT_TRUE(quant8_minmax_valid(buffer.data() + 1, n_, bucket_)) << what;
      quant8_minmax_decompress(buffer.data() + 1, n_, bucket_, out.data(), isa);
      expect_same_bits(out, ref::quant8_minmax_decompress(want.data(), n_, bucket_),
                       "decoded " + what);
      ref::quant8_minmax_accumulate(want.data(), n_, bucket_, want_sum.data());
      quant8_minmax_accumulate(buffer.data() + 1, n_, bucket_, sum.data(), isa);
      expect_same_bits(sum, want_sum, "sum " + what);
      want_sum = dense0;
    }
  }
}

// Blocks no compress wrote (valid steps and offsets, every code byte):
// each ISA decodes and accumulates as the scalar path does.
TEST_P(Minmax, ArbitraryBlocksDecodeAsScalar) {
  std::vector<std::uint8_t> block(quant8_minmax_bytes(n_, bucket_));
  for (auto& b : block) b = static_cast<std::uint8_t>(rng_());
  for (std::size_t j = 0; j < quant8_buckets(n_, bucket_); ++j) {
    const int k = static_cast<int>(rng_() % 200) - 100;
    const float step = j % 5 == 0 ? 0.0f : std::ldexp(1.0f, k);
    const float offset =
        j % 5 == 0 ? 0.0f : std::ldexp(static_cast<float>(rng_() % 20001) - 1e4f, k);
    std::memcpy(&block[8 * j], &step, 4);
    std::memcpy(&block[8 * j + 4], &offset, 4);
  }
  ASSERT_TRUE(quant8_minmax_valid(block.data(), n_, bucket_));
  std::vector<float> out(n_), scalar(n_);
  quant8_minmax_decompress(block.data(), n_, bucket_, out.data(), isa_);
  quant8_minmax_decompress(block.data(), n_, bucket_, scalar.data(), Isa::scalar);
  expect_same_bits(out, scalar, "decompress vs scalar");
  expect_same_bits(out, ref::quant8_minmax_decompress(block.data(), n_, bucket_), "vs reference");
  std::vector<float> dense(n_, kNan), dense_scalar(n_, kNan);  // dense's NaN wins
  for (std::size_t i = 0; i < n_; i += 2) dense[i] = dense_scalar[i] = -kInf;
  quant8_minmax_accumulate(block.data(), n_, bucket_, dense.data(), isa_);
  quant8_minmax_accumulate(block.data(), n_, bucket_, dense_scalar.data(), Isa::scalar);
  expect_same_bits(dense, dense_scalar, "accumulate vs scalar");
}

// With a residual, decoded + residual == acc exactly wherever acc is finite
// (0 kept where it is not); every finite value within its bucket's bound.
TEST_P(Minmax, ErrorFeedbackIsExactAndErrorWithinTheBound) {
  for (Data kind : {Data::gradients, Data::offsets, Data::specials, Data::constant}) {
    const std::vector<float> in = values(kind, n_, bucket_, rng_);
    const std::vector<float> res0 =
        residual_ ? values(Data::gradients, n_, bucket_, rng_) : std::vector<float>(n_, 0.0f);
    std::vector<float> res = res0, decoded(n_), acc(n_);
    std::vector<std::uint8_t> block(quant8_minmax_bytes(n_, bucket_));
    quant8_minmax_compress(in.data(), res.data(), n_, bucket_, block.data(), isa_);
    quant8_minmax_decompress(block.data(), n_, bucket_, decoded.data(), isa_);
    for (std::size_t i = 0; i < n_; ++i) acc[i] = ref::add_nan_first(in[i], res0[i]);
    for (std::size_t first = 0; first < n_; first += bucket_) {
      const std::size_t last = std::min(n_, first + bucket_);
      float lo = kInf, hi = -kInf;
      for (std::size_t i = first; i < last; ++i) {
        if (std::isfinite(acc[i])) lo = std::min(lo, acc[i]), hi = std::max(hi, acc[i]);
      }
      const double bound = lo <= hi ? quant8_minmax_error_bound(lo, hi) : 0.0;
      for (std::size_t i = first; i < last; ++i) {
        if (!std::isfinite(acc[i])) {
          ASSERT_EQ(bits_of(res[i]), 0u) << i;
          continue;
        }
        ASSERT_TRUE(std::isfinite(decoded[i])) << i;
        ASSERT_EQ(decoded[i] + res[i], acc[i]) << i;  // exact
        ASSERT_LE(std::fabs(double{decoded[i]} - acc[i]), bound)
            << i << " in [" << lo << ", " << hi << "]";
      }
    }
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const auto [size, bucket, isa, residual] = info.param;
  const char* sizes[] = {"0", "1", "bucket_less_1", "bucket", "bucket_plus_1", "100003"};
  return std::string(isa_name(isa)) + "_bucket" + std::to_string(bucket) + "_n" +
         sizes[static_cast<int>(size)] + (residual ? "_ef" : "");
}

INSTANTIATE_TEST_SUITE_P(quant8_minmax, Minmax,
                         ::testing::Combine(::testing::Values(Size::zero, Size::one,
                                                              Size::bucket_less_one, Size::bucket,
                                                              Size::bucket_plus_one, Size::large),
                                            ::testing::Values<std::size_t>(1, 7, 512, 4096),
                                            ::testing::ValuesIn(kIsas), ::testing::Bool()),
                         param_name);

// ----------------------------------------------------- the rules by hand ----

struct Coded {
  std::vector<float> steps, offsets, decoded, residual;
  std::vector<int> codes;
};

Coded code(const std::vector<float>& in, std::size_t bucket, Isa isa) {
  const std::size_t n = in.size(), buckets = quant8_buckets(n, bucket);
  std::vector<std::uint8_t> block(quant8_minmax_bytes(n, bucket));
  Coded c;
  c.residual.assign(n, 0.0f);
  quant8_minmax_compress(in.data(), c.residual.data(), n, bucket, block.data(), isa);
  for (std::size_t j = 0; j < buckets; ++j) {
    float pair[2];
    std::memcpy(pair, &block[8 * j], 8);
    c.steps.push_back(pair[0]), c.offsets.push_back(pair[1]);
  }
  for (std::size_t i = 0; i < n; ++i) c.codes.push_back(block[8 * buckets + i]);
  c.decoded.resize(n);
  quant8_minmax_decompress(block.data(), n, bucket, c.decoded.data(), isa);
  return c;
}

class MinmaxIsa : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!available(GetParam())) GTEST_SKIP() << isa_name(GetParam()) << " not supported";
  }
};

TEST_P(MinmaxIsa, ConstantBucketsDecodeExactly) {
  for (float x : {1e6f, -0.7f, 3.0e-30f, -FLT_MAX, FLT_MAX, 1.0f, std::ldexp(1.0f, -100)}) {
    const Coded c = code(std::vector<float>(37, x), 16, GetParam());
    for (std::size_t i = 0; i < 37; ++i) {
      ASSERT_EQ(bits_of(c.decoded[i]), bits_of(x)) << x << " at " << i;
      ASSERT_EQ(bits_of(c.residual[i]), 0u) << x;
    }
  }
}

// arange(n) * (rank + 1) plus a large offset, as four ranks hold it: each
// bucket's step is a power of two near its range / 252, so every value is
// within (hi - lo) / 251 of itself, where absmax (a step of the bucket's
// magnitude / 126) misses by more than that bound.
TEST_P(MinmaxIsa, OffsetRampsDecodeFarBetterThanAbsmax) {
  const std::size_t n = 1 << 16, bucket = 512;
  for (int rank = 0; rank < 4; ++rank) {
    std::vector<float> in(n);
    for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<float>(i) * (rank + 1) + 1e6f;
    std::vector<std::uint8_t> absmax_block(quant8_bytes(n, bucket));
    std::vector<float> absmax(n);
    quant8_compress(in.data(), nullptr, n, bucket, absmax_block.data(), GetParam());
    quant8_decompress(absmax_block.data(), n, bucket, absmax.data(), GetParam());
    const Coded c = code(in, bucket, GetParam());
    for (std::size_t first = 0; first < n; first += bucket) {
      const float lo = in[first], hi = in[first + bucket - 1];
      const double bound = (double{hi} - lo) / 251.0;
      ASSERT_EQ(quant8_minmax_error_bound(lo, hi), bound);
      double minmax_err = 0, absmax_err = 0;
      for (std::size_t i = first; i < first + bucket; ++i) {
        minmax_err = std::max(minmax_err, std::fabs(double{c.decoded[i]} - in[i]));
        absmax_err = std::max(absmax_err, std::fabs(double{absmax[i]} - in[i]));
      }
      ASSERT_LE(minmax_err, bound) << "rank " << rank << " bucket at " << first;
      ASSERT_GT(absmax_err, bound) << "rank " << rank << " bucket at " << first;
    }
  }
}

TEST_P(MinmaxIsa, NonFiniteValuesStayWhereTheyWereAndSetNoStep) {
  const std::vector<float> finite = {1.0f, -2.0f, 0.25f, 3.0f, 7.0f, -1.0f, 0.5f, 6.0f};
  std::vector<float> in = finite;
  in[1] = kNan, in[3] = kInf, in[4] = -kInf, in[7] = float_of(0xffa00001u);
  const Coded c = code(in, 4, GetParam()), plain = code(finite, 4, GetParam());
  std::vector<float> without = finite;  // the finite values of in, specials dropped
  without[1] = 1.0f, without[3] = 0.25f, without[4] = 0.5f, without[7] = -1.0f;
  const Coded same = code(without, 4, GetParam());
  EXPECT_EQ(c.steps, same.steps);
  EXPECT_EQ(c.offsets, same.offsets);
  EXPECT_NE(c.steps, plain.steps);  // the specials' neighbours did change the buckets
  const int special[] = {-1, 255, -1, 253, 254, -1, -1, 255};
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (special[i] >= 0) {
      EXPECT_EQ(c.codes[i], special[i]) << i;
      EXPECT_EQ(bits_of(c.residual[i]), 0u) << i;
    } else {
      EXPECT_TRUE(std::isfinite(c.decoded[i])) << i;
      EXPECT_EQ(c.codes[i], same.codes[i]) << i;
    }
  }
  EXPECT_EQ(bits_of(c.decoded[1]), 0x7fc00000u);
  EXPECT_EQ(c.decoded[3], kInf);
  EXPECT_EQ(c.decoded[4], -kInf);
  EXPECT_EQ(bits_of(c.decoded[7]), 0x7fc00000u);
}

// Below 2^-100 (or with nothing finite) the step and offset are +0 and the
// values stay in the residual.
TEST_P(MinmaxIsa, TinyAndEmptyBucketsCodeZero) {
  const float below = std::nextafter(std::ldexp(1.0f, -100), 0.0f);
  const std::vector<float> in = {below, -below, float_of(1), -0.0f, kNan, kInf, -kInf, kNan};
  const Coded c = code(in, 4, GetParam());
  for (std::size_t j = 0; j < 2; ++j) {
    EXPECT_EQ(bits_of(c.steps[j]), 0u);
    EXPECT_EQ(bits_of(c.offsets[j]), 0u);
  }
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(c.codes[i], 0);
    EXPECT_EQ(bits_of(c.decoded[i]), 0u);
    EXPECT_EQ(bits_of(c.residual[i]), bits_of(in[i] + 0.0f)) << i;
  }
}

// Buckets across fp32's whole range: every decoded value finite, error
// feedback exact, and (where the grid spans the bucket) within the bound.
TEST_P(MinmaxIsa, ValuesNearFltMaxStayFinite) {
  const std::vector<std::vector<float>> buckets = {
      {FLT_MAX, -FLT_MAX, 1.0f, FLT_MAX / 3},
      {FLT_MAX, std::nextafter(FLT_MAX, 0.0f), FLT_MAX / 2, 0.0f},
      {-FLT_MAX, -FLT_MAX / 2, -1e30f, -FLT_MAX / 1.5f},
      {FLT_MAX / 2, -FLT_MAX / 2, 0.0f, 1e38f}};
  for (const auto& in : buckets) {
    const Coded c = code(in, in.size(), GetParam());
    ASSERT_TRUE(quant8_minmax_valid(nullptr, 0, 4));
    for (std::size_t i = 0; i < in.size(); ++i) {
      ASSERT_TRUE(std::isfinite(c.decoded[i])) << in[i];
      ASSERT_EQ(c.decoded[i] + c.residual[i], in[i]) << in[i];
    }
  }
  // Those that span less than FLT_MAX keep the bound.
  for (std::size_t b = 1; b < buckets.size(); ++b) {
    const auto& in = buckets[b];
    const Coded c = code(in, in.size(), GetParam());
    const auto [lo, hi] = std::minmax_element(in.begin(), in.end());
    for (std::size_t i = 0; i < in.size(); ++i) {
      EXPECT_LE(std::fabs(double{c.decoded[i]} - in[i]), quant8_minmax_error_bound(*lo, *hi));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(quant8_minmax, MinmaxIsa, ::testing::ValuesIn(kIsas),
                         [](const ::testing::TestParamInfo<Isa>& info) {
                           return std::string(isa_name(info.param));
                         });

// ------------------------------------------------------------ validity ----

// Blocks of three buckets and a bit; bucket j gets the pair under test.
bool valid_with(std::size_t j, float step, float offset) {
  const std::size_t bucket = 7, n = 3 * bucket + 1;
  std::vector<std::uint8_t> block(quant8_minmax_bytes(n, bucket), 0xff);
  std::memset(block.data(), 0, 8 * quant8_buckets(n, bucket));
  std::memcpy(&block[8 * j], &step, 4);
  std::memcpy(&block[8 * j + 4], &offset, 4);
  return quant8_minmax_valid(block.data(), n, bucket);
}

TEST(MinmaxValid, AcceptsWhatCompressWrites) {
  for (std::size_t j = 0; j < 4; ++j) {
    EXPECT_TRUE(valid_with(j, 0.0f, 0.0f));
    EXPECT_TRUE(valid_with(j, 1.0f, -3.0f));
    EXPECT_TRUE(valid_with(j, std::ldexp(1.0f, -123), std::ldexp(-16777216.0f, -123)));
    EXPECT_TRUE(valid_with(j, std::ldexp(1.0f, 120), std::ldexp(-255.0f, 120)));
    EXPECT_TRUE(valid_with(j, 0.5f, 1e6f));
  }
  EXPECT_TRUE(quant8_minmax_valid(nullptr, 0, 7));
  EXPECT_EQ(quant8_minmax_bytes(0, 7), 0u);
  EXPECT_EQ(quant8_minmax_bytes(22, 7), 4 * 8 + 22u);
}

TEST(MinmaxValid, RefusesStepsAndOffsetsCompressNeverWrites) {
  const float one = 1.0f;
  const std::vector<std::pair<float, float>> bad = {
      {0.0f, 1.0f},   // step 0 with an offset
      {0.0f, -0.0f},  // -0 offset
      {-0.0f, 0.0f},  // -0 step
      {1.0f, -0.0f},  // -0 offset
      {-1.0f, 0.0f},  // negative step
      {1.5f, 0.0f},   // not a power of two
      {kInf, 0.0f},
      {kNan, 0.0f},  // not finite
      {one, kNan},
      {one, kInf},
      {one, -kInf},
      {1.0f, 0.5f},                                       // offset not a multiple of the step
      {std::ldexp(1.0f, -124), 0.0f},                     // step below 2^-123
      {std::ldexp(1.0f, 121), 0.0f},                      // step above 2^120
      {float_of(1), 0.0f},                                // subnormal step
      {1.0f, 16777217.0f * 2},                            // j beyond 2^24
      {std::ldexp(1.0f, 120), std::ldexp(4.0f, 120)},     // offset + 252 step beyond FLT_MAX
      {std::ldexp(1.0f, 120), std::ldexp(-256.0f, 120)},  // offset -2^128: -inf
  };
  for (std::size_t j = 0; j < 4; ++j) {
    for (const auto& [step, offset] : bad) {
      EXPECT_FALSE(valid_with(j, step, offset))
          << "bucket " << j << " step " << std::hexfloat << step << " offset " << offset;
    }
  }
}

}  // namespace
}  // namespace slimreduce::kernels
