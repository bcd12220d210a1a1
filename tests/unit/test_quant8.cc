// Tests for kernels/quant8.h. The reference model here is written from the
// header's rules alone, with the C library's float functions (fabs, isfinite,
// nearbyint in the default rounding mode: ties to even), not from
// kernels/quant8_rules.h. Only the NaN rules, a choice rather than arithmetic,
// are restated as bit formulas (add_nan_first's, and the decoded NaN).
#include <gtest/gtest.h>

#include <algorithm>
#include <cfenv>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/quant8.h"

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

// ------------------------------------------------------ independent model ----

// add_nan_first: a's NaN, then b's, quieted; inf + -inf is the x86 default NaN.
float model_add(float a, float b) {
  if (std::isnan(a)) return from_bits(bits_of(a) | 0x400000u);
  if (std::isnan(b)) return from_bits(bits_of(b) | 0x400000u);
  const float sum = a + b;
  return std::isnan(sum) ? from_bits(0xffc00000u) : sum;
}

struct Model {
  std::vector<std::uint8_t> block;  // scales, then codes
  std::vector<float> acc, decoded, residual;
};

Model model_compress(const std::vector<float>& in, const std::vector<float>* res, std::size_t n,
                     std::size_t bucket) {
  Model m;
  const std::size_t buckets = n == 0 ? 0 : (n - 1) / bucket + 1;
  m.block.assign(4 * buckets + n, 0);
  for (std::size_t i = 0; i < n; ++i) m.acc.push_back(res ? model_add(in[i], (*res)[i]) : in[i]);
  m.decoded.resize(n);
  m.residual.resize(n);
  for (std::size_t j = 0; j < buckets; ++j) {
    const std::size_t first = j * bucket, last = std::min(n, first + bucket);
    float max = 0.0f;
    for (std::size_t i = first; i < last; ++i) {
      if (std::isfinite(m.acc[i])) max = std::max(max, std::fabs(m.acc[i]));
    }
    const float scale = max < std::ldexp(1.0f, -100) ? 0.0f : max / 126.0f;
    std::memcpy(&m.block[4 * j], &scale, 4);
    for (std::size_t i = first; i < last; ++i) {
      const float x = m.acc[i];
      float q;
      if (std::isnan(x)) {
        q = -128.0f, m.decoded[i] = kNan;
      } else if (std::isinf(x)) {
        q = x > 0 ? 127.0f : -127.0f, m.decoded[i] = x;
      } else {
        q = scale == 0.0f ? 0.0f : std::clamp(std::nearbyint(x / scale), -126.0f, 126.0f);
        // The code is an integer: a -0 from nearbyint decodes as +0.
        m.decoded[i] = static_cast<float>(static_cast<int>(q)) * scale;
      }
      m.block[4 * buckets + i] = static_cast<std::uint8_t>(static_cast<std::int8_t>(q));
      m.residual[i] = std::isfinite(m.decoded[i]) ? x - m.decoded[i] : 0.0f;
    }
  }
  return m;
}

// The decoded values of any block (not only one compress wrote).
std::vector<float> model_decode(const std::vector<std::uint8_t>& block, std::size_t n,
                                std::size_t bucket) {
  const std::size_t buckets = n == 0 ? 0 : (n - 1) / bucket + 1;
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    float scale;
    std::memcpy(&scale, &block[4 * (i / bucket)], 4);
    const int q = static_cast<std::int8_t>(block[4 * buckets + i]);
    out[i] = q == 127 ? kInf : q == -127 ? -kInf : q == -128 ? kNan : static_cast<float>(q) * scale;
  }
  return out;
}

// ------------------------------------------------------------- helpers ----

template <class T>
void expect_same_bits(const std::vector<T>& got, const std::vector<T>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(T)), 0)
        << what << " differs at " << i << ": " << got[i] << " vs " << want[i];
  }
}

// Gradient-like values, each bucket at its own magnitude, with zeros, ties
// for rint (halves), and (with specials) NaNs with payloads, infinities and
// subnormals now and then.
std::vector<float> values(std::size_t n, std::size_t bucket, std::mt19937& rng, bool specials) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  int exponent = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (i % bucket == 0) exponent = static_cast<int>(rng() % 60) - 30;
    const unsigned pick = rng() % 1000;
    if (specials && pick < 6) {
      const std::uint32_t s[6] = {0x7fc12345u, 0xffa00001u, 0x7f800000u,
                                  0xff800000u, 0x00000abcu, 0x80400000u};
      v[i] = from_bits(s[pick]);
    } else if (pick < 20) {
      v[i] = pick < 12 ? 0.0f : std::ldexp(static_cast<float>(rng() % 9) - 4.5f, exponent);
    } else {
      v[i] = std::ldexp(normal(rng), exponent);
    }
  }
  return v;
}

// ---------------------------------------------------------- parameters ----

enum class Size { zero, one, bucket_less_one, bucket, bucket_plus_one, large_odd };

std::size_t size_of(Size s, std::size_t bucket) {
  switch (s) {
    case Size::zero:
      return 0;
    case Size::one:
      return 1;
    case Size::bucket_less_one:
      return bucket - 1;
    case Size::bucket:
      return bucket;
    case Size::bucket_plus_one:
      return bucket + 1;
    case Size::large_odd:
      break;
  }
  return 100'003;
}

const char* size_name(Size s) {
  constexpr const char* names[] = {"0", "1", "bucket_less_1", "bucket", "bucket_plus_1", "100003"};
  return names[static_cast<int>(s)];
}

using Param = std::tuple<Size, std::size_t, Isa, bool>;

class Quant8 : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    ASSERT_EQ(std::fegetround(), FE_TONEAREST);  // the model's nearbyint
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

// The block at an odd address inside a guarded buffer: offset 1 byte.
constexpr std::size_t kGuard = 64;
constexpr std::uint8_t kPoison = 0xA5;

TEST_P(Quant8, CompressMatchesModel) {
  for (bool specials : {false, true}) {
    const std::vector<float> in = values(n_, bucket_, rng_, specials);
    const std::vector<float> res0 = values(n_, bucket_, rng_, specials);
    const Model want = model_compress(in, residual_ ? &res0 : nullptr, n_, bucket_);
    ASSERT_EQ(quant8_bytes(n_, bucket_), want.block.size());
    std::vector<std::uint8_t> buffer(want.block.size() + 2 * kGuard + 1, kPoison);
    std::vector<float> res = res0;
    quant8_compress(in.data(), residual_ ? res.data() : nullptr, n_, bucket_,
                    buffer.data() + kGuard + 1, isa_);
    const std::vector<std::uint8_t> block(buffer.begin() + kGuard + 1, buffer.end() - kGuard);
    expect_same_bits(block, want.block, "block");
    for (std::size_t i = 0; i < buffer.size(); ++i) {
      if (i <= kGuard || i >= buffer.size() - kGuard) {
        ASSERT_EQ(buffer[i], kPoison) << "wrote outside the block at " << i;
      }
    }
    expect_same_bits(res, residual_ ? want.residual : res0, "residual");
    EXPECT_TRUE(quant8_valid(block.data(), n_, bucket_));
  }
}

TEST_P(Quant8, DecompressAndAccumulateMatchModel) {
  const std::vector<float> in = values(n_, bucket_, rng_, true);
  const Model m = model_compress(in, nullptr, n_, bucket_);
  // One byte past an aligned start, so the codes and outputs are misaligned too.
  std::vector<std::uint8_t> block(m.block.size() + 1);
  std::copy(m.block.begin(), m.block.end(), block.begin() + 1);
  std::vector<float> out(n_ + 1, 1.0f);
  quant8_decompress(block.data() + 1, n_, bucket_, out.data() + 1, isa_);
  expect_same_bits(std::vector<float>(out.begin() + 1, out.end()), m.decoded, "decompress");
  expect_same_bits(model_decode(m.block, n_, bucket_), m.decoded, "the model's own decode");

  std::vector<float> dense = values(n_, bucket_, rng_, true), want = dense;
  for (std::size_t i = 0; i < n_; ++i) want[i] = model_add(want[i], m.decoded[i]);
  quant8_accumulate(block.data() + 1, n_, bucket_, dense.data(), isa_);
  expect_same_bits(dense, want, "accumulate");
}

// Blocks no compress wrote (valid scales, every code byte): the SIMD paths
// decode as the scalar one and the model do.
TEST_P(Quant8, ArbitraryBlocksDecodeAsScalar) {
  std::vector<std::uint8_t> block(quant8_bytes(n_, bucket_));
  for (auto& b : block) b = static_cast<std::uint8_t>(rng_());
  for (std::size_t j = 0; j < quant8_buckets(n_, bucket_); ++j) {
    const float scale = j % 5 == 0 ? 0.0f
                                   : std::ldexp(1.0f + (rng_() % 1000) / 1000.0f,
                                                static_cast<int>(rng_() % 200) - 100);
    std::memcpy(&block[4 * j], &scale, 4);
  }
  ASSERT_TRUE(quant8_valid(block.data(), n_, bucket_));
  std::vector<float> out(n_), scalar(n_);
  quant8_decompress(block.data(), n_, bucket_, out.data(), isa_);
  quant8_decompress(block.data(), n_, bucket_, scalar.data(), Isa::scalar);
  expect_same_bits(out, scalar, "decompress vs scalar");
  expect_same_bits(out, model_decode(block, n_, bucket_), "decompress vs model");
  std::vector<float> dense(n_, kNan), dense_scalar(n_, kNan);  // dense's NaN wins
  for (std::size_t i = 0; i < n_; i += 2) dense[i] = dense_scalar[i] = -kInf;
  quant8_accumulate(block.data(), n_, bucket_, dense.data(), isa_);
  quant8_accumulate(block.data(), n_, bucket_, dense_scalar.data(), Isa::scalar);
  expect_same_bits(dense, dense_scalar, "accumulate vs scalar");
}

// decoded + residual == acc wherever acc is finite; 0 left where it is not.
// Always with a residual: the parameter says whether it starts at zero (a
// key's first step) or holds values.
TEST_P(Quant8, ErrorFeedbackKeepsTheRest) {
  const std::vector<float> in = values(n_, bucket_, rng_, true);
  const std::vector<float> res0 =
      residual_ ? values(n_, bucket_, rng_, false) : std::vector<float>(n_, 0.0f);
  std::vector<float> res = res0, decoded(n_);
  std::vector<std::uint8_t> block(quant8_bytes(n_, bucket_));
  quant8_compress(in.data(), res.data(), n_, bucket_, block.data(), isa_);
  quant8_decompress(block.data(), n_, bucket_, decoded.data(), isa_);
  for (std::size_t i = 0; i < n_; ++i) {
    const float acc = model_add(in[i], res0[i]);
    if (std::isfinite(acc)) {
      ASSERT_TRUE(std::isfinite(decoded[i])) << i;
      ASSERT_EQ(decoded[i] + res[i], acc) << i;  // exact (a zero of either sign)
    } else {
      ASSERT_EQ(bits_of(res[i]), 0u) << i;
    }
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const auto [size, bucket, isa, residual] = info.param;
  return std::string(isa_name(isa)) + "_bucket" + std::to_string(bucket) + "_n" + size_name(size) +
         (residual ? "_ef" : "");
}

INSTANTIATE_TEST_SUITE_P(
    quant8, Quant8,
    ::testing::Combine(::testing::Values(Size::zero, Size::one, Size::bucket_less_one, Size::bucket,
                                         Size::bucket_plus_one, Size::large_odd),
                       ::testing::Values<std::size_t>(1, 7, 512, 4096),
                       ::testing::Values(Isa::scalar, Isa::avx2, Isa::avx512), ::testing::Bool()),
    param_name);

// --------------------------------------------- rules, each path, by hand ----

class Quant8Isa : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    isa_ = GetParam();
    if (!available(isa_)) GTEST_SKIP() << isa_name(isa_) << " not supported by this CPU";
  }
  Isa isa_;
};

struct Coded {
  std::vector<float> scales;
  std::vector<int> codes;
  std::vector<float> decoded, residual;
};

Coded code(const std::vector<float>& in, std::size_t bucket, Isa isa, bool residual = true) {
  const std::size_t n = in.size(), buckets = quant8_buckets(n, bucket);
  std::vector<std::uint8_t> block(quant8_bytes(n, bucket));
  Coded c;
  c.residual.assign(n, 0.0f);
  quant8_compress(in.data(), residual ? c.residual.data() : nullptr, n, bucket, block.data(), isa);
  c.scales.resize(buckets);
  std::memcpy(c.scales.data(), block.data(), 4 * buckets);
  for (std::size_t i = 0; i < n; ++i)
    c.codes.push_back(static_cast<std::int8_t>(block[4 * buckets + i]));
  c.decoded.resize(n);
  quant8_decompress(block.data(), n, bucket, c.decoded.data(), isa);
  return c;
}

// Scale 1 (a bucket whose max is 126): halves round to even, and the clamp holds.
TEST_P(Quant8Isa, RoundsHalvesToEven) {
  const std::vector<float> in = {126.0f, 0.5f, 1.5f, 2.5f, -0.5f, -2.5f, -125.5f, 3.49f, -0.0f};
  const Coded c = code(in, in.size(), isa_);
  EXPECT_EQ(c.scales[0], 1.0f);
  EXPECT_EQ(c.codes, (std::vector<int>{126, 0, 2, 2, 0, -2, -126, 3, 0})) << isa_name(isa_);
}

// With scale 1, x / scale is x: every half k + 0.5, its neighbours, and a
// sweep over the floats of [-126, 126] code as nearbyint rounds them.
TEST_P(Quant8Isa, RoundsEveryQuotientAsNearbyint) {
  std::vector<float> in = {126.0f};  // the bucket's max: scale 1
  for (int k = -126; k < 126; ++k) {
    const float half = static_cast<float>(k) + 0.5f;
    for (float x : {half, std::nextafter(half, -kInf), std::nextafter(half, kInf)}) in.push_back(x);
  }
  for (std::uint32_t u = 0; u <= bits_of(126.0f); u += 997) {
    in.push_back(from_bits(u));
    in.push_back(-from_bits(u));
  }
  const Coded c = code(in, in.size(), isa_, false);
  ASSERT_EQ(c.scales[0], 1.0f);
  for (std::size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(c.codes[i], static_cast<int>(std::nearbyint(in[i])))
        << std::hexfloat << in[i] << " " << isa_name(isa_);
  }
}

TEST_P(Quant8Isa, NonFiniteValuesStayWhereTheyWere) {
  const std::vector<float> in = {kNan, 1.0f, kInf, -2.0f, -kInf, from_bits(0xffa00001u), 0.25f};
  const Coded c = code(in, 4, isa_);
  EXPECT_EQ(c.codes, (std::vector<int>{-128, 63, 127, -126, -127, -128, 126})) << isa_name(isa_);
  EXPECT_EQ(c.scales[0], 2.0f / 126.0f);  // from the finite values alone
  EXPECT_EQ(c.scales[1], 0.25f / 126.0f);
  const float s0 = 2.0f / 126.0f, s1 = 0.25f / 126.0f;
  const std::vector<float> decoded = {kNan, 63 * s0, kInf, -126 * s0, -kInf, kNan, 126 * s1};
  expect_same_bits(c.decoded, decoded, "decoded");
  for (std::size_t i : {0, 2, 4, 5}) EXPECT_EQ(bits_of(c.residual[i]), 0u) << i;
}

TEST_P(Quant8Isa, AllZeroBucket) {
  const std::vector<float> in(37, 0.0f);
  const Coded c = code(in, 16, isa_);
  for (float s : c.scales) EXPECT_EQ(bits_of(s), 0u);
  for (std::size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(c.codes[i], 0);
    EXPECT_EQ(bits_of(c.decoded[i]), 0u);
    EXPECT_EQ(bits_of(c.residual[i]), 0u);
  }
}

// Below 2^-100 the scale is 0 and every value stays in the residual; at
// 2^-100 the bucket is coded (with a normal scale).
TEST_P(Quant8Isa, TinyBucketsStayInTheResidual) {
  const float just_below = std::nextafter(std::ldexp(1.0f, -100), 0.0f);
  const std::vector<float> in = {just_below,
                                 -std::ldexp(1.0f, -120),
                                 from_bits(1),
                                 -0.0f,
                                 std::ldexp(1.0f, -100),
                                 std::ldexp(1.0f, -101),
                                 0.0f,
                                 0.0f};
  const Coded c = code(in, 4, isa_);
  EXPECT_EQ(bits_of(c.scales[0]), 0u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(c.codes[i], 0);
    EXPECT_EQ(bits_of(c.decoded[i]), 0u);
    EXPECT_EQ(bits_of(c.residual[i]), bits_of(in[i] + 0.0f)) << i;  // acc: -0 + 0 is +0
  }
  EXPECT_GE(c.scales[1], FLT_MIN);
  EXPECT_EQ(c.codes[4], 126);
  EXPECT_EQ(c.codes[5], 63);
}

TEST_P(Quant8Isa, ValuesNearFltMaxDoNotOverflow) {
  const std::vector<float> in = {FLT_MAX,     -FLT_MAX, std::nextafter(FLT_MAX, 0.0f),
                                 FLT_MAX / 3, 1.0f,     -FLT_MAX / 126 * 125.5f};
  const Coded c = code(in, in.size(), isa_);
  for (std::size_t i = 0; i < in.size(); ++i) {
    ASSERT_TRUE(std::isfinite(c.decoded[i])) << i << " " << isa_name(isa_);
    EXPECT_EQ(c.decoded[i] + c.residual[i], in[i]) << i;
  }
  EXPECT_EQ(c.codes[0], 126);
  EXPECT_EQ(c.codes[1], -126);
}

TEST_P(Quant8Isa, AccumulateIsDecompressThenAdd) {
  std::mt19937 rng(11);
  const std::size_t n = 5000, bucket = 96;
  const std::vector<float> in = values(n, bucket, rng, true);
  std::vector<std::uint8_t> block(quant8_bytes(n, bucket));
  quant8_compress(in.data(), nullptr, n, bucket, block.data(), Isa::scalar);
  const std::vector<float> dense0 = values(n, bucket, rng, true);
  std::vector<float> decoded(n), want = dense0, dense = dense0;
  quant8_decompress(block.data(), n, bucket, decoded.data(), isa_);
  for (std::size_t i = 0; i < n; ++i) want[i] = model_add(want[i], decoded[i]);
  quant8_accumulate(block.data(), n, bucket, dense.data(), isa_);
  expect_same_bits(dense, want, isa_name(isa_));
}

std::string isa_param_name(const ::testing::TestParamInfo<Isa>& info) {
  return isa_name(info.param);
}

INSTANTIATE_TEST_SUITE_P(quant8, Quant8Isa, ::testing::Values(Isa::scalar, Isa::avx2, Isa::avx512),
                         isa_param_name);

// ------------------------------------------------------------ validity ----

// Blocks of three buckets and a bit: a scale under test in each of them.
class Quant8Valid : public ::testing::TestWithParam<std::size_t> {
 protected:
  void SetUp() override {
    bucket_ = GetParam();
    n_ = 3 * bucket_ + 1;
  }
  // Every scale 0 but bucket j's; codes all 0x80 (NaN): any byte goes.
  bool valid_with_scale(std::size_t j, float scale) const {
    std::vector<std::uint8_t> block(quant8_bytes(n_, bucket_), 0x80);
    std::memset(block.data(), 0, 4 * quant8_buckets(n_, bucket_));
    std::memcpy(block.data() + 4 * j, &scale, 4);
    return quant8_valid(block.data(), n_, bucket_);
  }
  std::size_t bucket_, n_;
};

const float kLowest = std::ldexp(1.0f, -100) / 126.0f, kHighest = FLT_MAX / 126.0f;

TEST_P(Quant8Valid, BucketsAndBytes) {
  EXPECT_EQ(quant8_buckets(0, bucket_), 0u);
  EXPECT_EQ(quant8_buckets(1, bucket_), 1u);
  EXPECT_EQ(quant8_buckets(bucket_, bucket_), 1u);
  EXPECT_EQ(quant8_buckets(bucket_ + 1, bucket_), 2u);
  EXPECT_EQ(quant8_buckets(n_, bucket_), 4u);
  EXPECT_EQ(quant8_bytes(0, bucket_), 0u);
  EXPECT_EQ(quant8_bytes(bucket_, bucket_), 4u + bucket_);
  EXPECT_EQ(quant8_bytes(n_, bucket_), 16u + n_);
}

TEST_P(Quant8Valid, AcceptsWhatCompressWrites) {
  for (std::size_t j = 0; j < 4; ++j) {
    for (float scale : {0.0f, kLowest, kHighest, 1.0f, std::nextafter(kLowest, kInf)}) {
      EXPECT_TRUE(valid_with_scale(j, scale)) << "bucket " << j << " scale " << scale;
    }
  }
  EXPECT_TRUE(quant8_valid(nullptr, 0, bucket_));
  // The bounds are exactly the scales of the extreme maxima, on every path.
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    std::vector<float> in(2 * bucket_, 0.0f);
    in[0] = std::ldexp(1.0f, -100);
    in[bucket_] = FLT_MAX;
    const Coded c = code(in, bucket_, isa);
    EXPECT_EQ(c.scales[0], kLowest) << isa_name(isa);
    EXPECT_EQ(c.scales[1], kHighest) << isa_name(isa);
  }
}

TEST_P(Quant8Valid, RejectsScalesCompressNeverWrites) {
  for (std::size_t j = 0; j < 4; ++j) {
    for (float bad : {kNan, from_bits(0xffc00000u), from_bits(0x7f800001u), kInf, -kInf, -1.0f,
                      -kLowest, -0.0f, std::nextafter(kLowest, 0.0f), from_bits(1), FLT_MIN,
                      std::nextafter(kHighest, kInf), FLT_MAX}) {
      EXPECT_FALSE(valid_with_scale(j, bad))
          << "bucket " << j << " bits " << std::hex << bits_of(bad);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(quant8, Quant8Valid, ::testing::Values<std::size_t>(1, 7, 512, 4096),
                         [](const ::testing::TestParamInfo<std::size_t>& info) {
                           return "bucket" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace slimreduce::kernels
