// PowerSGD's CPU kernels (kernels/low_rank.h) against independent float64
// references written here element by element: the products, the
// reconstruction and its residual, and the orthonormalisation (classical
// Gram-Schmidt applied twice, in double: another algorithm than the kernel's
// modified Gram-Schmidt). Every ISA the CPU has must give the scalar path's bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/element_rules.h"
#include "kernels/low_rank.h"
#include "tests/unit/low_rank_reference.h"

namespace sk = slimreduce::kernels;
using namespace slimreduce::kernels::testing;
using sk::Isa;
using sk::LowRankShape;

namespace {

class LowRankKernels : public ::testing::TestWithParam<ShapeParam> {
 protected:
  LowRankShape shape() const { return shape_of(GetParam()); }
};

TEST_P(LowRankKernels, ProjectMatchesDoubleReference) {
  const LowRankShape s = shape();
  const auto m = random_floats(s.count, 1);
  const auto q = random_floats(s.q_floats(), 2);
  std::vector<float> p(s.p_floats());
  sk::low_rank_project(m.data(), s, q.data(), p.data());
  for (std::size_t i = 0; i < s.rows; ++i) {
    for (std::size_t k = 0; k < s.rank; ++k) {
      const Reference r = project_reference(m, s, q, i, k);
      // A float sum of cols rounded products: at most (cols + 1) roundings.
      ASSERT_LE(std::fabs(p[i * s.rank + k] - r.exact), (s.cols + 1) * kUnit * r.magnitude + 1e-30)
          << "p[" << i << "][" << k << "]";
    }
  }
}

TEST_P(LowRankKernels, BackProjectMatchesDoubleReference) {
  const LowRankShape s = shape();
  const auto m = random_floats(s.count, 3);
  const auto p = random_floats(s.p_floats(), 4);
  std::vector<float> q(s.q_floats(), 42.0f);  // overwritten, not added to
  sk::low_rank_back_project(m.data(), s, p.data(), q.data());
  for (std::size_t j = 0; j < s.cols; ++j) {
    for (std::size_t k = 0; k < s.rank; ++k) {
      const Reference r = back_project_reference(m, s, p, j, k);
      ASSERT_LE(std::fabs(q[j * s.rank + k] - r.exact), (s.rows + 1) * kUnit * r.magnitude + 1e-30)
          << "q[" << j << "][" << k << "]";
    }
  }
}

TEST_P(LowRankKernels, FinishMatchesDoubleReference) {
  const LowRankShape s = shape();
  const auto m = random_floats(s.count, 5);
  const auto p = random_floats(s.p_floats(), 6);
  const auto q_sum = random_floats(s.q_floats(), 7);
  const auto q_local = random_floats(s.q_floats(), 8);
  std::vector<float> out(s.count), residual(s.count);
  sk::low_rank_finish(m.data(), s, p.data(), q_sum.data(), q_local.data(), out.data(),
                      residual.data());
  for (std::size_t e = 0; e < s.count; ++e) {
    const std::size_t i = e / s.cols, j = e % s.cols;
    double sent = 0, local = 0, magnitude = 0, local_magnitude = 0;
    for (std::size_t k = 0; k < s.rank; ++k) {
      sent += double(p[i * s.rank + k]) * q_sum[j * s.rank + k];
      magnitude += std::fabs(double(p[i * s.rank + k]) * q_sum[j * s.rank + k]);
      local += double(p[i * s.rank + k]) * q_local[j * s.rank + k];
      local_magnitude += std::fabs(double(p[i * s.rank + k]) * q_local[j * s.rank + k]);
    }
    ASSERT_LE(std::fabs(out[e] - sent), (s.rank + 1) * kUnit * magnitude + 1e-30) << e;
    const double kept = double(m[e]) - local;
    ASSERT_LE(std::fabs(residual[e] - kept),
              (s.rank + 2) * kUnit * (local_magnitude + std::fabs(m[e])) + 1e-30)
        << e;
  }
  // Without a residual only out is written (the same bits).
  std::vector<float> again(s.count);
  sk::low_rank_finish(m.data(), s, p.data(), q_sum.data(), q_local.data(), again.data(), nullptr);
  EXPECT_TRUE(same_bits(out, again));
}

// Scalar and vector code give the same bits, so ranks on different CPUs agree.
TEST_P(LowRankKernels, EveryIsaGivesTheScalarBits) {
  const LowRankShape s = shape();
  const auto m = random_floats(s.count, 9);
  const auto q = random_floats(s.q_floats(), 10);
  const auto q2 = random_floats(s.q_floats(), 11);
  const auto p_in = random_floats(s.p_floats(), 12);
  auto run = [&](Isa isa) {
    std::vector<float> p(s.p_floats()), back(s.q_floats()), out(s.count), residual(s.count);
    sk::low_rank_project(m.data(), s, q.data(), p.data(), isa);
    sk::low_rank_back_project(m.data(), s, p_in.data(), back.data(), isa);
    sk::low_rank_finish(m.data(), s, p_in.data(), q.data(), q2.data(), out.data(), residual.data(),
                        isa);
    return std::vector<std::vector<float>>{p, back, out, residual};
  };
  const auto scalar = run(Isa::scalar);
  for (Isa isa : {Isa::avx2, Isa::avx512}) {
    if (static_cast<int>(isa) > static_cast<int>(sk::best_isa())) continue;  // not on this CPU
    const auto vector = run(isa);
    for (std::size_t part = 0; part < scalar.size(); ++part)
      EXPECT_TRUE(same_bits(scalar[part], vector[part])) << sk::isa_name(isa) << " part " << part;
  }
}

// The reference: classical Gram-Schmidt twice over each column, in double.
std::vector<double> reference_orthonormal(const std::vector<float>& p, std::size_t rows,
                                          std::size_t rank) {
  std::vector<double> out(p.begin(), p.end());
  auto column_dot = [&](std::size_t a, std::size_t b) {
    double sum = 0;
    for (std::size_t i = 0; i < rows; ++i) sum += out[i * rank + a] * out[i * rank + b];
    return sum;
  };
  for (std::size_t k = 0; k < rank; ++k) {
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<double> along(k);
      for (std::size_t l = 0; l < k; ++l) along[l] = column_dot(l, k);
      for (std::size_t l = 0; l < k; ++l)
        for (std::size_t i = 0; i < rows; ++i) out[i * rank + k] -= along[l] * out[i * rank + l];
    }
    const double norm = std::sqrt(column_dot(k, k));
    for (std::size_t i = 0; i < rows; ++i) out[i * rank + k] /= norm;
  }
  return out;
}

TEST_P(LowRankKernels, OrthonormaliseMatchesIndependentReference) {
  const auto [rows, cols, rank, missing] = GetParam();
  (void)cols, (void)missing;
  auto p = random_floats(rows * rank, 13);
  const auto original = p;
  sk::orthonormalise(p.data(), rows, rank);
  // Random columns are independent up to the row count; past it a column is
  // rounding noise after its projections, and the kernel makes it zero.
  const std::size_t independent = std::min(rows, rank);
  std::vector<double> reference;
  if (independent == rank) reference = reference_orthonormal(original, rows, rank);
  for (std::size_t k = 0; k < rank; ++k) {
    for (std::size_t i = 0; i < rows; ++i) {
      const float got = p[i * rank + k];
      if (k >= independent) {
        ASSERT_EQ(got, 0.0f) << "column " << k << " row " << i;
      } else if (independent == rank) {
        ASSERT_NEAR(got, reference[i * rank + k], 1e-4) << "column " << k << " row " << i;
      }
    }
  }
  for (std::size_t a = 0; a < independent; ++a) {
    for (std::size_t b = 0; b <= a; ++b) {
      double dot = 0;
      for (std::size_t i = 0; i < rows; ++i) dot += double(p[i * rank + a]) * p[i * rank + b];
      EXPECT_NEAR(dot, a == b ? 1.0 : 0.0, 1e-4) << a << "," << b;
    }
  }
}

std::string shape_name(const ::testing::TestParamInfo<ShapeParam>& info) {
  const auto& [rows, cols, rank, missing] = info.param;
  return std::to_string(rows) + "x" + std::to_string(cols) + "_r" + std::to_string(rank) +
         "_short" + std::to_string(missing);
}

INSTANTIATE_TEST_SUITE_P(Shapes, LowRankKernels,
                         ::testing::Values(ShapeParam{1, 1000, 1, 0}, ShapeParam{1, 1000, 4, 0},
                                           ShapeParam{1000, 1, 1, 0}, ShapeParam{1000, 1, 4, 0},
                                           ShapeParam{7, 13, 4, 5}, ShapeParam{97, 101, 4, 0},
                                           ShapeParam{97, 101, 13, 100}, ShapeParam{64, 64, 64, 0},
                                           ShapeParam{257, 31, 4, 30}, ShapeParam{100, 100, 1, 0},
                                           ShapeParam{300, 200, 64, 7}),
                         shape_name);

TEST(LowRankOrthonormalise, DependentColumnBecomesZeroAndNaNStays) {
  // Column 1 equals column 0: nothing of it is left after the projection.
  std::vector<float> p = {1, 1, 2, 2, 3, 3};
  sk::orthonormalise(p.data(), 3, 2);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(p[i * 2 + 1], 0.0f);
  std::vector<float> nan = {1, 2, std::numeric_limits<float>::quiet_NaN(), 4};
  sk::orthonormalise(nan.data(), 2, 2);
  EXPECT_TRUE(std::isnan(nan[0]) || std::isnan(nan[2])) << "a NaN is never made finite";
}

// A tensor's real shape (the native API's slimreduce_enqueue_matrix) is the
// view as given, even where another would be chosen; rows that do not
// divide the count are ignored.
TEST(LowRankShapeTest, GivenRowsAreTheView) {
  const LowRankShape tall = sk::low_rank_shape(2048 * 64, 4, 2.0, 2048);
  EXPECT_EQ(tall.rows, 2048u);
  EXPECT_EQ(tall.cols, 64u);
  EXPECT_EQ(tall.rank, 4u);
  EXPECT_EQ(tall.row_length(2047), 64u) << "no padding";
  const LowRankShape thin = sk::low_rank_shape(3 * 1000, 8, 0.5, 3);
  EXPECT_EQ(thin.rows, 3u);
  EXPECT_EQ(thin.rank, 3u) << "clamped to min(rows, cols)";
  EXPECT_EQ(sk::low_rank_shape(1000, 4, 2.0, 1000).rank, 0u) << "1000 x 1: not worth it";
  const LowRankShape chosen = sk::low_rank_shape(64 * 1000, 4, 2.0);
  const LowRankShape ignored = sk::low_rank_shape(64 * 1000, 4, 2.0, 7);
  EXPECT_EQ(ignored.rows, chosen.rows);
  EXPECT_EQ(ignored.cols, chosen.cols);
}

TEST(LowRankShapeTest, MostSquareViewWithPadding) {
  const LowRankShape one = sk::low_rank_shape(1, 4, 1.0);
  EXPECT_EQ(one.rows, 1u);
  EXPECT_EQ(one.cols, 1u);
  EXPECT_EQ(one.rank, 0u) << "1 x (1 + 1) floats are not smaller than 1";
  const LowRankShape prime = sk::low_rank_shape(7919, 4, 2.0);
  EXPECT_EQ(prime.cols, 89u);  // 1 x 7919 is too elongated: ceil(sqrt(7919)) = 89
  EXPECT_EQ(prime.rows, 89u);  // ceil(7919 / 89)
  EXPECT_EQ(prime.rank, 4u);
  EXPECT_EQ(prime.row_length(88), 7919u - 88 * 89);
  const LowRankShape square = sk::low_rank_shape(1 << 20, 4, 2.0);
  EXPECT_EQ(square.rows, 1024u);
  EXPECT_EQ(square.cols, 1024u);
  EXPECT_EQ(sk::low_rank_shape(1 << 20, 100, 2.0).rank, 64u) << "clamped to 64";
  // Exact factorisations: a 256 x 2048 layer as 512 x 1024 (each view row a
  // half of a layer row: rank at most twice the layer's).
  const LowRankShape layer = sk::low_rank_shape(256 * 2048, 4, 2.0);
  EXPECT_EQ(layer.rows, 512u);
  EXPECT_EQ(layer.cols, 1024u);
  const LowRankShape oblong = sk::low_rank_shape(64 * 1000, 4, 2.0);
  EXPECT_EQ(oblong.rows, 250u);
  EXPECT_EQ(oblong.cols, 256u);
  // 64 x 10273 (10273 is prime) is more than 16 times wider than high: padded.
  const LowRankShape fused = sk::low_rank_shape(64 * 10273, 4, 2.0);
  EXPECT_EQ(fused.cols, 811u);
  EXPECT_EQ(fused.rows, 811u);
  const LowRankShape sixteen = sk::low_rank_shape(16 * 16 * 16, 4, 2.0);
  EXPECT_EQ(sixteen.rows * sixteen.cols, 4096u);
  EXPECT_EQ(sk::low_rank_shape(6, 4, 1.0).rank, 0u) << "4 x (2 + 3) > 6";
  EXPECT_EQ(sk::low_rank_shape(6, 1, 1.0).rank, 1u);
  // Minimum compression: 4 x (32 + 32) = 256 floats against 1024.
  EXPECT_EQ(sk::low_rank_shape(1024, 4, 4.0).rank, 4u);
  EXPECT_EQ(sk::low_rank_shape(1024, 4, 4.01).rank, 0u);
}

TEST(LowRankSeed, FromTheShapeAloneNeverZero) {
  const LowRankShape s = sk::low_rank_shape(10000, 4, 2.0);
  std::vector<float> a(s.q_floats()), b(s.q_floats());
  sk::low_rank_seed(s, a.data());
  sk::low_rank_seed(s, b.data());
  EXPECT_TRUE(same_bits(a, b));
  for (float v : a) {
    EXPECT_GT(std::fabs(v), 0.0f);
    EXPECT_LT(std::fabs(v), 1.0f);
  }
  const LowRankShape other = sk::low_rank_shape(10000, 5, 2.0);
  std::vector<float> c(other.q_floats());
  sk::low_rank_seed(other, c.data());
  EXPECT_NE(a[0], c[0]) << "another rank, another seed";
}

TEST(LowRankFinite, FindsInfAndNaNAnywhere) {
  std::vector<float> v(1001, 1.0f);
  EXPECT_TRUE(sk::all_finite(v.data(), v.size()));
  v[1000] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(sk::all_finite(v.data(), v.size()));
  v[1000] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(sk::all_finite(v.data(), v.size()));
  EXPECT_TRUE(sk::all_finite(v.data(), 1000));
}

// The device flag's twin, by hand: inf or NaN anywhere sets it; a set flag stays set.
TEST(LowRankFinite, FlagSetsOnInfOrNaNAndNeverClears) {
  std::vector<float> v(513, -2.5f);
  unsigned bad = 0;
  sk::flag_not_finite(v.data(), v.size(), &bad);
  EXPECT_EQ(bad, 0u);
  v[512] = -std::numeric_limits<float>::infinity();
  sk::flag_not_finite(v.data(), v.size(), &bad);
  EXPECT_EQ(bad, 1u);
  v[512] = 0.0f;
  sk::flag_not_finite(v.data(), v.size(), &bad);  // Q after a bad P: the word stays set
  EXPECT_EQ(bad, 1u);
  bad = 0;
  v[0] = std::numeric_limits<float>::quiet_NaN();
  sk::flag_not_finite(v.data() + 1, v.size() - 1, &bad);
  EXPECT_EQ(bad, 0u) << "only the n values given are read";
  sk::flag_not_finite(v.data(), 0, &bad);
  EXPECT_EQ(bad, 0u);
  sk::flag_not_finite(v.data(), 1, &bad);
  EXPECT_EQ(bad, 1u);
}

using sk::bits_float;
using sk::float_bits;

// low_rank_settle's two ends, against values written out by hand.
TEST(LowRankSettle, GoodSumsDivideOutAndKeepTheSummedQ) {
  std::vector<float> out = {6.0f, -3.0f, 0.0f, bits_float(0x7fa00001u), 1.5f};
  std::vector<float> residual = {0.25f, 0.5f, -1.0f, 2.0f, 4.0f};
  const std::vector<float> q_sum = {1.0f, 2.0f, 3.0f};
  std::vector<float> q_state = {9.0f, 9.0f, 9.0f};
  sk::low_rank_settle(false, out.data(), residual.data(), out.size(), 3, q_sum.data(),
                      q_state.data(), q_sum.size());
  EXPECT_EQ(out[0], 2.0f);
  EXPECT_EQ(out[1], -1.0f);
  EXPECT_EQ(float_bits(out[2]), 0u);
  EXPECT_EQ(float_bits(out[3]), 0x7fe00001u) << "the NaN kept, its quiet bit set";
  EXPECT_EQ(out[4], 0.5f);
  EXPECT_EQ(residual, (std::vector<float>{0.25f, 0.5f, -1.0f, 2.0f, 4.0f})) << "left alone";
  EXPECT_EQ(q_state, q_sum) << "the key's Q is the summed Q: the next call starts warm";
}

TEST(LowRankSettle, DivisorOneLeavesEveryBitEvenASignallingNaN) {
  std::vector<float> out = {7.0f, bits_float(0x7f800001u)};
  sk::low_rank_settle(false, out.data(), nullptr, out.size(), 1, nullptr, nullptr, 0);
  EXPECT_EQ(out[0], 7.0f);
  EXPECT_EQ(float_bits(out[1]), 0x7f800001u);
}

TEST(LowRankSettle, BadSumsGiveNaNZeroResidualAndKeepTheOldQ) {
  std::vector<float> out = {6.0f, -3.0f, 0.0f};
  std::vector<float> residual = {0.25f, 0.5f, -1.0f};
  const std::vector<float> q_sum = {1.0f, std::numeric_limits<float>::infinity()};
  std::vector<float> q_state = {9.0f, 8.0f};
  sk::low_rank_settle(true, out.data(), residual.data(), out.size(), 2, q_sum.data(),
                      q_state.data(), q_sum.size());
  for (float v : out) EXPECT_EQ(float_bits(v), sk::kDefaultNanBits);
  EXPECT_EQ(residual, (std::vector<float>{0.0f, 0.0f, 0.0f}));
  EXPECT_EQ(q_state, (std::vector<float>{9.0f, 8.0f})) << "a bad Q never becomes the key's";
}

TEST(LowRankSettle, WithoutResidualOrStateTouchesOnlyOut) {
  std::vector<float> out = {4.0f};
  sk::low_rank_settle(true, out.data(), nullptr, 1, 4, nullptr, nullptr, 0);
  EXPECT_EQ(float_bits(out[0]), sk::kDefaultNanBits);
  out[0] = 4.0f;
  sk::low_rank_settle(false, out.data(), nullptr, 1, 4, nullptr, nullptr, 0);
  EXPECT_EQ(out[0], 1.0f);
}

}  // namespace
