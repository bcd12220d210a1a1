#include "kernels/low_rank.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/blas_loader.h"
#include "kernels/element_rules.h"
#include "kernels/splitmix.h"

namespace slimreduce::kernels {
namespace {

constexpr std::size_t kMaxRank = 64;  // SLIMREDUCE_POWERSGD_RANK's upper bound
// The most elongated exact view taken (cols / rows): its factors cost at most
// about (sqrt(16) + 1 / sqrt(16)) / 2 = 2.1 times the square view's.
constexpr std::size_t kMaxAspect = 16;

// The loop bodies, inlined into one entry point per ISA. Each output element
// is one accumulator, summed in ascending order; the compiler may vectorise
// across independent accumulators (k, or j) but, without -ffast-math, never
// reorders a sum, so the ISAs differ in speed only.
#define SR_BODY __attribute__((always_inline)) inline

// B rows of P at once (independent accumulators: B times the additions in
// flight); each P[i][k] still sums over j in ascending order.
template <int B>
SR_BODY void project_rows(const float* rows, std::size_t cols, std::size_t length, const float* q,
                          std::size_t r, float* p) {
  float acc[B][kMaxRank] = {};
  for (std::size_t j = 0; j < length; ++j) {
    float value[B];
    for (int b = 0; b < B; ++b) value[b] = rows[b * cols + j];
    const float* qj = q + j * r;
    for (std::size_t k = 0; k < r; ++k)
      for (int b = 0; b < B; ++b) acc[b][k] += value[b] * qj[k];
  }
  for (int b = 0; b < B; ++b) std::memcpy(p + b * r, acc[b], r * sizeof(float));
}

constexpr int kRowBlock = 4;

SR_BODY void project_body(const float* m, const LowRankShape& s, const float* q, float* p) {
  const std::size_t r = s.rank;
  const std::size_t full = s.count / s.cols;  // rows without padding
  std::size_t i = 0;
  for (; i + kRowBlock <= full; i += kRowBlock)
    project_rows<kRowBlock>(m + i * s.cols, s.cols, s.cols, q, r, p + i * r);
  for (; i < s.rows; ++i) project_rows<1>(m + i * s.cols, s.cols, s.row_length(i), q, r, p + i * r);
}

// B rows of M into Q at once: Q's row j is read and written once per block
// rather than once per row; each Q[j][k] still adds the rows in ascending order.
template <int B>
SR_BODY void back_project_rows(const float* rows, std::size_t cols, std::size_t length,
                               const float* p, std::size_t r, float* q) {
  for (std::size_t j = 0; j < length; ++j) {
    float value[B];
    for (int b = 0; b < B; ++b) value[b] = rows[b * cols + j];
    float* qj = q + j * r;
    for (std::size_t k = 0; k < r; ++k) {
      float sum = qj[k];
      for (int b = 0; b < B; ++b) sum += value[b] * p[b * r + k];
      qj[k] = sum;
    }
  }
}

SR_BODY void back_project_body(const float* m, const LowRankShape& s, const float* p, float* q) {
  const std::size_t r = s.rank;
  std::memset(q, 0, s.q_floats() * sizeof(float));
  const std::size_t full = s.count / s.cols;
  std::size_t i = 0;
  for (; i + kRowBlock <= full; i += kRowBlock)
    back_project_rows<kRowBlock>(m + i * s.cols, s.cols, s.cols, p + i * r, r, q);
  for (; i < s.rows; ++i)
    back_project_rows<1>(m + i * s.cols, s.cols, s.row_length(i), p + i * r, r, q);
}

// out[j] = sum over k ascending of pi[k] qt[k][j], for a row of outputs at
// once (qt: Q transposed, rank rows of cols): each output is the dot product
// 0 + pi[0] q[j][0] + pi[1] q[j][1] + ..., added in that order.
SR_BODY void row_times(const float* pi, const float* qt, std::size_t cols, std::size_t r,
                       std::size_t length, float* out) {
  for (std::size_t j = 0; j < length; ++j) out[j] = 0.0f;
  for (std::size_t k = 0; k < r; ++k) {
    const float pk = pi[k];
    const float* row = qt + k * cols;
    for (std::size_t j = 0; j < length; ++j) out[j] += pk * row[j];
  }
}

// residual first (it reads m), so out may be m itself.
SR_BODY void finish_body(const float* m, const LowRankShape& s, const float* p, const float* qt_sum,
                         const float* qt_local, float* out, float* residual) {
  const std::size_t r = s.rank;
  for (std::size_t i = 0; i < s.rows; ++i) {
    const std::size_t begin = i * s.cols;
    const std::size_t length = s.row_length(i);
    const float* pi = p + i * r;
    if (residual) {
      row_times(pi, qt_local, s.cols, r, length, residual + begin);
      for (std::size_t j = 0; j < length; ++j)
        residual[begin + j] = m[begin + j] - residual[begin + j];
    }
    row_times(pi, qt_sum, s.cols, r, length, out + begin);
  }
}

// The scalar path is kept scalar, so that the tests compare real vector code with it.
#define SR_SCALAR __attribute__((optimize("no-tree-vectorize")))
#define SR_AVX2 __attribute__((target("avx2")))
#define SR_AVX512 __attribute__((target("avx512f,avx512vl,avx2")))

SR_SCALAR void project_scalar(const float* m, const LowRankShape& s, const float* q, float* p) {
  project_body(m, s, q, p);
}
SR_AVX2 void project_avx2(const float* m, const LowRankShape& s, const float* q, float* p) {
  project_body(m, s, q, p);
}
SR_AVX512 void project_avx512(const float* m, const LowRankShape& s, const float* q, float* p) {
  project_body(m, s, q, p);
}
SR_SCALAR void back_scalar(const float* m, const LowRankShape& s, const float* p, float* q) {
  back_project_body(m, s, p, q);
}
SR_AVX2 void back_avx2(const float* m, const LowRankShape& s, const float* p, float* q) {
  back_project_body(m, s, p, q);
}
SR_AVX512 void back_avx512(const float* m, const LowRankShape& s, const float* p, float* q) {
  back_project_body(m, s, p, q);
}
SR_SCALAR void finish_scalar(const float* m, const LowRankShape& s, const float* p,
                             const float* qt_sum, const float* qt_local, float* out,
                             float* residual) {
  finish_body(m, s, p, qt_sum, qt_local, out, residual);
}
SR_AVX2 void finish_avx2(const float* m, const LowRankShape& s, const float* p, const float* qt_sum,
                         const float* qt_local, float* out, float* residual) {
  finish_body(m, s, p, qt_sum, qt_local, out, residual);
}
SR_AVX512 void finish_avx512(const float* m, const LowRankShape& s, const float* p,
                             const float* qt_sum, const float* qt_local, float* out,
                             float* residual) {
  finish_body(m, s, p, qt_sum, qt_local, out, residual);
}

// q (cols x r) into qt (r x cols).
void transpose(const float* q, std::size_t cols, std::size_t r, float* qt) {
  for (std::size_t j = 0; j < cols; ++j)
    for (std::size_t k = 0; k < r; ++k) qt[k * cols + j] = q[j * r + k];
}

std::size_t ceil_sqrt(std::size_t n) {
  auto root = static_cast<std::size_t>(std::sqrt(static_cast<double>(n)));
  while (root * root < n) ++root;
  while (root > 0 && (root - 1) * (root - 1) >= n) --root;
  return root;
}

// A column that lost all but this fraction of its norm to the projections
// holds rounding noise (the matrix has rank below the column's index).
constexpr double kNoiseFraction = 1e-5;

// The dot product of columns a and b in double, in the order a GPU block of
// kOrthonormaliseLanes threads runs in parallel (kernels/cuda/low_rank.cu):
// lane l adds rows l, l + L, l + 2L, ... in ascending order from zero, then
// the lanes are combined pairwise, partial[l] += partial[l + h] for
// h = L/2, L/4, ..., 1. The order depends on L alone, not on the ISA (the
// vector paths only run the independent lanes side by side).
double column_dot(const float* p, std::size_t rows, std::size_t r, std::size_t a, std::size_t b) {
  constexpr std::size_t kLanes = kOrthonormaliseLanes;
  double partial[kLanes] = {};
  for (std::size_t base = 0; base < rows; base += kLanes) {
    const std::size_t lanes = rows - base < kLanes ? rows - base : kLanes;
    const float* block = p + base * r;
    for (std::size_t l = 0; l < lanes; ++l)
      partial[l] += static_cast<double>(block[l * r + a]) * static_cast<double>(block[l * r + b]);
  }
  for (std::size_t half = kLanes / 2; half > 0; half /= 2)
    for (std::size_t l = 0; l < half; ++l) partial[l] += partial[l + half];
  return partial[0];
}

}  // namespace

// The view's rank: the requested one clamped to min(rows, cols) and 64, or 0
// where the factors would not be min_compression times smaller than the tensor.
LowRankShape with_rank(LowRankShape shape, std::size_t rank, double min_compression) {
  std::size_t r = rank < kMaxRank ? rank : kMaxRank;
  if (r > shape.rows) r = shape.rows;
  if (r > shape.cols) r = shape.cols;
  const double factors = static_cast<double>(r * (shape.rows + shape.cols));
  shape.rank = factors * min_compression <= static_cast<double>(shape.count) ? r : 0;
  return shape;
}

LowRankShape low_rank_shape(std::size_t count, std::size_t rank, double min_compression,
                            std::size_t given_rows) {
  LowRankShape shape;
  shape.count = count;
  if (count == 0) return shape;
  if (given_rows > 0 && count % given_rows == 0) {
    shape.rows = given_rows;
    shape.cols = count / given_rows;
    return with_rank(shape, rank, min_compression);
  }
  // The most square exact factorisation first: a row-major layer of R x C
  // viewed as rows x cols where one of C, cols divides the other keeps its
  // low rank (at most C / cols or cols / C times it), and layer sizes are
  // mostly powers of two. Too elongated (a prime: 1 x count), the factors
  // would cost more than the padded square view's.
  std::size_t rows = ceil_sqrt(count);
  while (rows * rows > count || count % rows != 0) --rows;
  if (count / rows <= kMaxAspect * rows) {
    shape.rows = rows;
    shape.cols = count / rows;
  } else {
    shape.cols = ceil_sqrt(count);
    shape.rows = (count + shape.cols - 1) / shape.cols;
  }
  return with_rank(shape, rank, min_compression);
}

void low_rank_project(const float* m, const LowRankShape& shape, const float* q, float* p,
                      Isa isa) {
  pick_isa(isa, &project_scalar, &project_avx2, &project_avx512)(m, shape, q, p);
}

void low_rank_back_project(const float* m, const LowRankShape& shape, const float* p, float* q,
                           Isa isa) {
  pick_isa(isa, &back_scalar, &back_avx2, &back_avx512)(m, shape, p, q);
}

bool low_rank_blas_fits(const LowRankShape& shape) {
  return shape.cols <= INT_MAX && shape.rows <= INT_MAX && shape.rank <= INT_MAX;
}

void low_rank_project_blas(const PrivateBlas& blas, const float* m, const LowRankShape& s,
                           const float* q, float* p) {
  if (!low_rank_blas_fits(s)) return low_rank_project(m, s, q, p);
  const auto cols = static_cast<int>(s.cols);
  const auto r = static_cast<int>(s.rank);
  const std::size_t full = s.count / s.cols;
  if (full > 0 && r == 1) {
    blas.sgemv(false, static_cast<int>(full), cols, m, cols, q, p);
  } else if (full > 0) {
    blas.sgemm(false, static_cast<int>(full), r, cols, m, cols, q, r, p, r);
  }
  if (full < s.rows)  // the short last row
    project_rows<1>(m + full * s.cols, s.cols, s.row_length(full), q, s.rank, p + full * s.rank);
}

void low_rank_back_project_blas(const PrivateBlas& blas, const float* m, const LowRankShape& s,
                                const float* p, float* q) {
  if (!low_rank_blas_fits(s)) return low_rank_back_project(m, s, p, q);
  const auto cols = static_cast<int>(s.cols);
  const auto r = static_cast<int>(s.rank);
  const std::size_t full = s.count / s.cols;
  if (full > 0 && r == 1) {
    blas.sgemv(true, static_cast<int>(full), cols, m, cols, p, q);
  } else if (full > 0) {
    blas.sgemm(true, cols, r, static_cast<int>(full), m, cols, p, r, q, r);
  } else {
    std::memset(q, 0, s.q_floats() * sizeof(float));
  }
  if (full < s.rows)  // the short last row, added last
    back_project_rows<1>(m + full * s.cols, s.cols, s.row_length(full), p + full * s.rank, s.rank,
                         q);
}

void low_rank_finish(const float* m, const LowRankShape& shape, const float* p, const float* q_sum,
                     const float* q_local, float* out, float* residual, Isa isa) {
  // Both Qs transposed, kept per thread (grown, never shrunk: no allocation
  // in steady state); threads on different communicators finish at once.
  thread_local std::vector<float> transposed;
  const std::size_t q_floats = shape.q_floats();
  if (transposed.size() < 2 * q_floats) transposed.resize(2 * q_floats);
  float* qt_sum = transposed.data();
  float* qt_local = qt_sum + q_floats;
  transpose(q_sum, shape.cols, shape.rank, qt_sum);
  if (residual) transpose(q_local, shape.cols, shape.rank, qt_local);
  pick_isa(isa, &finish_scalar, &finish_avx2, &finish_avx512)(m, shape, p, qt_sum, qt_local, out,
                                                              residual);
}

void orthonormalise(float* p, std::size_t rows, std::size_t rank) {
  for (std::size_t k = 0; k < rank; ++k) {
    const double before = std::sqrt(column_dot(p, rows, rank, k, k));
    // Twice ("twice is enough", Giraud et al. 2005): one pass in float
    // leaves P^T P off the identity by about cond(P) x 2^-24, and P P^T M is a
    // projection only as far as P is orthonormal.
    for (int pass = 0; pass < 2; ++pass) {
      for (std::size_t l = 0; l < k; ++l) {
        const auto along = static_cast<float>(column_dot(p, rows, rank, l, k));
        for (std::size_t i = 0; i < rows; ++i) p[i * rank + k] -= along * p[i * rank + l];
      }
    }
    const double norm = std::sqrt(column_dot(p, rows, rank, k, k));
    const bool noise = norm <= kNoiseFraction * before;  // also 0 of 0; a NaN stays a NaN
    for (std::size_t i = 0; i < rows; ++i) {
      float& value = p[i * rank + k];
      value = noise ? 0.0f : static_cast<float>(static_cast<double>(value) / norm);
    }
  }
}

void low_rank_seed(const LowRankShape& shape, float* q) {
  const std::uint64_t seed =
      splitmix64(splitmix64(splitmix64(shape.rows) ^ shape.cols) ^ shape.rank);
  for (std::size_t e = 0; e < shape.q_floats(); ++e) {
    const std::uint64_t bits = splitmix64(seed + e) >> 40;  // 24 bits
    q[e] = static_cast<float>((static_cast<double>(bits) + 0.5) / 8388608.0 - 1.0);
  }
}

void low_rank_settle(bool bad, float* out, float* residual, std::size_t n, int divisor,
                     const float* q_sum, float* q_state, std::size_t q_floats) {
  if (bad) {
    std::fill_n(out, n, bits_float(kDefaultNanBits));
    if (residual) std::fill_n(residual, n, 0.0f);
    return;
  }
  if (divisor != 1) {
    for (std::size_t e = 0; e < n; ++e) out[e] = divide_keeping_nan(out[e], divisor);
  }
  if (q_state) std::copy_n(q_sum, q_floats, q_state);
}

void flag_not_finite(const float* values, std::size_t n, unsigned* bad) {
  if (!all_finite(values, n)) *bad = 1;
}

bool all_finite(const float* values, std::size_t n) {
  std::uint32_t bad = 0;
  for (std::size_t e = 0; e < n; ++e) {
    std::uint32_t bits;
    std::memcpy(&bits, values + e, sizeof(bits));
    bad |= (bits & 0x7f800000u) == 0x7f800000u;
  }
  return bad == 0;
}

}  // namespace slimreduce::kernels
