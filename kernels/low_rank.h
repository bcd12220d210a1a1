// Low-rank (PowerSGD) building blocks on the CPU: the products of a tensor
// viewed as a matrix with skinny factors, the orthonormalisation of P, and
// the reconstruction with its residual (docs/architecture.md, "Low rank").
//
// Every result has one fixed order of adds that does not depend on the
// instruction set: each output element is a sum over one index in ascending
// order, started from zero, with no fused multiply-add (the build passes
// -ffp-contract=off). The vector paths only process independent outputs side
// by side, so every ISA gives the same bits (tests compare them), and ranks
// on CPUs with and without AVX-512 agree.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cast.h"

namespace slimreduce::kernels {

// A flat buffer of `count` floats viewed as a row-major rows x cols matrix:
// the most square exact factorisation rows x cols = count (rows <= cols) if
// cols <= 16 rows (it keeps a layer's low rank: docs/architecture.md, "Low
// rank"), else cols = ceil(sqrt(count)), rows = ceil(count / cols), the last
// row padded with zeros that are never stored (fewer than cols of them).
// rank: the factors' width, at most min(rows, cols); 0 when not worth compressing.
struct LowRankShape {
  std::size_t count = 0;
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::size_t rank = 0;
  // Floats of P (rows x rank) and of Q (cols x rank), row-major.
  std::size_t p_floats() const { return rows * rank; }
  std::size_t q_floats() const { return cols * rank; }
  // Elements of row i actually stored (the last row may be short).
  std::size_t row_length(std::size_t i) const {
    const std::size_t begin = i * cols;
    return count - begin < cols ? count - begin : cols;
  }
};

// The most square view of count floats with the requested rank (clamped to
// min(rows, cols)); rank 0 when rank x (rows + cols) x min_compression > count
// (the factors would not be that many times smaller than the tensor).
// given_rows: a tensor's real shape (the native API's slimreduce_enqueue_matrix),
// used as the view rows x count / rows when it divides count; 0: choose.
LowRankShape low_rank_shape(std::size_t count, std::size_t rank, double min_compression,
                            std::size_t given_rows = 0);

// p (rows x rank) = M q, q (cols x rank). p[i][k] = sum over j ascending of M[i][j] q[j][k].
void low_rank_project(const float* m, const LowRankShape& shape, const float* q, float* p,
                      Isa isa = best_isa());
// q (cols x rank) = M^T p. q[j][k] = sum over i ascending of M[i][j] p[i][k].
void low_rank_back_project(const float* m, const LowRankShape& shape, const float* p, float* q,
                           Isa isa = best_isa());
class PrivateBlas;

// The same two products through a BLAS's sgemm (sgemv at rank 1; kernels/blas_loader.h) for
// the rows without padding, and our loop for a short last row: the BLAS adds
// in an order of its own (blocked, and by the kernel it picks for this CPU),
// so the bits differ from the loops' above within float rounding; a serial
// BLAS gives the same bits run to run on one CPU. Only the sums over ranks of
// these products are shared, so every rank still holds the same summed P and
// Q (docs/architecture.md, "Low rank", "A private BLAS").
void low_rank_project_blas(const PrivateBlas& blas, const float* m, const LowRankShape& shape,
                           const float* q, float* p);
void low_rank_back_project_blas(const PrivateBlas& blas, const float* m, const LowRankShape& shape,
                                const float* p, float* q);
// Whether the BLAS variants take this shape (its sizes fit cblas's int).
bool low_rank_blas_fits(const LowRankShape& shape);

// For each stored element e = (i, j): out[e] = sum over k ascending of p[i][k] q_sum[j][k];
// with residual != nullptr, residual[e] = m[e] - sum over k of p[i][k] q_local[j][k].
// out may be m itself; residual may not. Keeps a per-thread scratch of 2 x cols x rank
// floats (the Qs transposed), grown to the largest call and kept.
void low_rank_finish(const float* m, const LowRankShape& shape, const float* p, const float* q_sum,
                     const float* q_local, float* out, float* residual, Isa isa = best_isa());

// The lanes of orthonormalise's dot products (one GPU block's threads).
inline constexpr std::size_t kOrthonormaliseLanes = 256;

// Modified Gram-Schmidt, each column's projections done twice, on the
// columns of p (rows x rank, row-major), in place; dot products and norms
// in double, in a fixed order a GPU runs in parallel: kOrthonormaliseLanes
// lanes, lane l adding rows l, l + L, ... ascending, then the lanes combined
// in a pairwise tree (partial[l] += partial[l + h], h = L/2, ..., 1). A
// column that is (relative to its norm before) no more than rounding noise
// after the projections becomes zero rather than noise scaled up.
void orthonormalise(float* p, std::size_t rows, std::size_t rank);

// Q's first value for a shape: a pseudo-random matrix in (-1, 1), never 0,
// from a seed of (rows, cols, rank) alone, so every rank starts alike.
void low_rank_seed(const LowRankShape& shape, float* q);

// Whether all n floats are finite (one pass, no early exit).
bool all_finite(const float* values, std::size_t n);

// The device flag's CPU twin (kernels/cuda: flag_not_finite): *bad = 1 when
// one of values[0..n) is inf or NaN, else *bad as it was, so that P's and Q's
// flags accumulate into one word the caller zeroed before the call.
void flag_not_finite(const float* values, std::size_t n, unsigned* bad);

// The end of a low-rank call whose sums' finiteness is known only on the
// device (a stream-ordered path, NCCL): when `bad` (a summed P or Q was not
// finite), out[e] = NaN (kDefaultNanBits) and residual[e] = 0 over n
// elements, and the key's Q is left as it was; else out[e] =
// divide_keeping_nan(out[e], divisor) and q_state = q_sum (q_floats floats).
// residual, q_state: nullptr for none.
void low_rank_settle(bool bad, float* out, float* residual, std::size_t n, int divisor,
                     const float* q_sum, float* q_state, std::size_t q_floats);

}  // namespace slimreduce::kernels
