// What the low-rank kernels' tests share (tests/unit/test_low_rank.cc, our
// loops; tests/unit/test_blas_loader.cc, the private BLAS's): inputs, the
// view's elements, shapes as test parameters, and the products in double
// with the magnitude their float error is bounded by.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <vector>

#include "kernels/low_rank.h"

namespace slimreduce::kernels::testing {

constexpr double kUnit = 1.0 / (1 << 24);  // float's unit roundoff

// Floats in [-1, 1), the same for a seed on every machine (splitmix64).
inline std::vector<float> random_floats(std::size_t n, std::uint64_t seed) {
  std::vector<float> out(n);
  std::uint64_t s = seed;
  for (auto& value : out) {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    value = static_cast<float>(static_cast<double>(z >> 40) / 8388608.0 - 1.0);
  }
  return out;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// M[i][j] of the view (zero past count).
inline double at(const std::vector<float>& m, const LowRankShape& s, std::size_t i, std::size_t j) {
  const std::size_t e = i * s.cols + j;
  return e < s.count ? m[e] : 0.0;
}

// (rows, cols, rank, missing): missing elements of the last row.
using ShapeParam = std::tuple<std::size_t, std::size_t, std::size_t, std::size_t>;
inline LowRankShape shape_of(const ShapeParam& param) {
  const auto [rows, cols, rank, missing] = param;
  return {rows * cols - missing, rows, cols, rank};
}

// An element of a product in double, and the sum of its terms' magnitudes
// (a float sum of n rounded products is within (n + 1) roundings of it).
struct Reference {
  double exact = 0;
  double magnitude = 0;
};
// (M q)[i][k].
inline Reference project_reference(const std::vector<float>& m, const LowRankShape& s,
                                   const std::vector<float>& q, std::size_t i, std::size_t k) {
  Reference r;
  for (std::size_t j = 0; j < s.cols; ++j) {
    r.exact += at(m, s, i, j) * q[j * s.rank + k];
    r.magnitude += std::fabs(at(m, s, i, j) * q[j * s.rank + k]);
  }
  return r;
}
// (M^T p)[j][k].
inline Reference back_project_reference(const std::vector<float>& m, const LowRankShape& s,
                                        const std::vector<float>& p, std::size_t j, std::size_t k) {
  Reference r;
  for (std::size_t i = 0; i < s.rows; ++i) {
    r.exact += at(m, s, i, j) * p[i * s.rank + k];
    r.magnitude += std::fabs(at(m, s, i, j) * p[i * s.rank + k]);
  }
  return r;
}

}  // namespace slimreduce::kernels::testing
