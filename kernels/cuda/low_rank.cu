// Low-rank (PowerSGD) steps on the GPU: the twins of kernels/low_rank.cc.
// low_rank_add, low_rank_finish and orthonormalise give the CPU twins' bits
// (the same adds in the same order, each rounded alone: nvcc gets
// --fmad=false, and the intrinsics below say so again); the two products go
// through cuBLAS's sgemm, which adds in an order of its own, as the CPU's
// BLAS variants do (docs/architecture.md, "Low rank", "A private BLAS").
#include <climits>

#include "kernels/cuda/cublas_loader.h"
#include "kernels/cuda/device_util.cuh"

namespace slimreduce::kernels::cuda {
namespace {

using namespace detail;

constexpr std::size_t kMaxRank = 64;  // SLIMREDUCE_POWERSGD_RANK's upper bound

// m = input + residual, NaNs as an x86 CPU's `+` gives them (add_nan_first):
// the twin of the CPU path's loop in algorithms/powersgd.cc.
// No __restrict__: m may be input.
__global__ void __launch_bounds__(kBlock)
    add_kernel(const float* input, const float* residual, float* m, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t e = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += stride)
    m[e] = add_nan_first(input[e], residual[e]);
}

// 0 + p[0] q[j][0] + p[1] q[j][1] + ..., added in that order (the CPU's row_times).
__device__ inline float row_dot(const float* pi, const float* q, std::size_t j, std::size_t r) {
  float sum = 0.0f;
  for (std::size_t k = 0; k < r; ++k) sum = __fadd_rn(sum, __fmul_rn(pi[k], q[j * r + k]));
  return sum;
}

// Blocks take rows (grid-stride), threads take the row's columns; the row of
// P sits in shared memory. The residual is computed from m before out is
// written, so out may be m.
__global__ void __launch_bounds__(kBlock)
    finish_kernel(const float* m, LowRankShape s, const float* __restrict__ p,
                  const float* __restrict__ q_sum, const float* __restrict__ q_local, float* out,
                  float* __restrict__ residual) {
  __shared__ float pi[kMaxRank];
  const std::size_t r = s.rank;
  for (std::size_t i = blockIdx.x; i < s.rows; i += gridDim.x) {
    __syncthreads();  // the previous row's pi is no longer read
    for (std::size_t k = threadIdx.x; k < r; k += blockDim.x) pi[k] = p[i * r + k];
    __syncthreads();
    const std::size_t begin = i * s.cols;
    const std::size_t length = s.count - begin < s.cols ? s.count - begin : s.cols;  // row_length
    for (std::size_t j = threadIdx.x; j < length; j += blockDim.x) {
      const float value = m[begin + j];
      if (residual) residual[begin + j] = __fsub_rn(value, row_dot(pi, q_local, j, r));
      out[begin + j] = row_dot(pi, q_sum, j, r);
    }
  }
}

// *bad = 1 when one of v[0..n) is not finite (the caller zeroed it); the CPU
// twin is kernels::flag_not_finite.
__global__ void __launch_bounds__(kBlock)
    flag_kernel(const float* __restrict__ v, std::size_t n, unsigned* bad) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  bool seen = false;
  for (std::size_t e = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += stride)
    seen |= !is_finite_bits(float_bits(v[e]));
  if (__syncthreads_or(seen) && threadIdx.x == 0) atomicOr(bad, 1u);
}

// kernels::low_rank_settle: every thread reads *bad, then takes its elements.
__global__ void __launch_bounds__(kBlock)
    settle_kernel(const unsigned* bad, float* out, float* residual, std::size_t n, int divisor,
                  const float* __restrict__ q_sum, float* __restrict__ q_state,
                  std::size_t q_floats) {
  const bool failed = *bad != 0;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (failed) {
    for (std::size_t e = first; e < n; e += stride) {
      out[e] = bits_float(kDefaultNanBits);
      if (residual) residual[e] = 0.0f;
    }
    return;
  }
  if (divisor != 1) {
    for (std::size_t e = first; e < n; e += stride) out[e] = divide_keeping_nan(out[e], divisor);
  }
  if (q_state) {
    for (std::size_t e = first; e < q_floats; e += stride) q_state[e] = q_sum[e];
  }
}

constexpr std::size_t kFinishRows = 16;  // rows a block of finish_tiled_kernel takes

// finish_kernel for rank <= R: each thread keeps its column's Q values in
// registers for kFinishRows rows, where finish_kernel reads them again from
// L2 for every row (2 GB of L2 reads for an 8192 x 8192 matrix at rank 4: 48%
// of copy on the H200, 2026-12-04). The same adds in the same order as
// row_dot, so the same bits; out may be m (each element is read before it is
// written, by the thread that writes it).
template <int R>
__global__ void __launch_bounds__(kBlock)
    finish_tiled_kernel(const float* m, LowRankShape s, const float* __restrict__ p,
                        const float* __restrict__ q_sum, const float* __restrict__ q_local,
                        float* out, float* __restrict__ residual) {
  __shared__ float p_rows[kFinishRows][R];
  const std::size_t r = s.rank;
  const std::size_t j = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool column = j < s.cols;
  float qs[R], ql[R];
#pragma unroll
  for (int k = 0; k < R; ++k) {
    const bool used = column && static_cast<std::size_t>(k) < r;
    qs[k] = used ? q_sum[j * r + k] : 0.0f;
    ql[k] = used && residual ? q_local[j * r + k] : 0.0f;
  }
  const std::size_t groups = (s.rows + kFinishRows - 1) / kFinishRows;
  for (std::size_t g = blockIdx.y; g < groups; g += gridDim.y) {
    const std::size_t first = g * kFinishRows;
    const std::size_t rows = s.rows - first < kFinishRows ? s.rows - first : kFinishRows;
    __syncthreads();  // the last group's rows of P are no longer read
    for (std::size_t e = threadIdx.x; e < rows * r; e += blockDim.x)
      p_rows[e / r][e % r] = p[first * r + e];
    __syncthreads();
    if (!column) continue;
    for (std::size_t t = 0; t < rows; ++t) {
      const std::size_t at = (first + t) * s.cols + j;
      if (at >= s.count) break;  // past the short last row
      const float value = m[at];
      if (residual) {
        float dot = 0.0f;
#pragma unroll
        for (int k = 0; k < R; ++k)
          if (static_cast<std::size_t>(k) < r) dot = __fadd_rn(dot, __fmul_rn(p_rows[t][k], ql[k]));
        residual[at] = __fsub_rn(value, dot);
      }
      float sum = 0.0f;
#pragma unroll
      for (int k = 0; k < R; ++k)
        if (static_cast<std::size_t>(k) < r) sum = __fadd_rn(sum, __fmul_rn(p_rows[t][k], qs[k]));
      out[at] = sum;
    }
  }
}

template <int R>
cudaError_t launch_finish_tiled(const float* m, const LowRankShape& s, const float* p,
                                const float* q_sum, const float* q_local, float* out,
                                float* residual, cudaStream_t stream) {
  const std::size_t column_blocks = (s.cols + kBlock - 1) / kBlock;
  const std::size_t groups = (s.rows + kFinishRows - 1) / kFinishRows;
  const dim3 grid(static_cast<unsigned>(column_blocks),
                  static_cast<unsigned>(groups < 65535 ? groups : 65535));
  finish_tiled_kernel<R><<<grid, kBlock, 0, stream>>>(m, s, p, q_sum, q_local, out, residual);
  return cudaGetLastError();
}

// The CPU twin's column_dot (kernels/low_rank.cc), in its order: thread l
// is lane l, adding rows l, l + L, ... in double, then the lanes are combined
// in the same pairwise tree. Every thread returns the result.
__device__ double column_dot(const float* p, std::size_t rows, std::size_t r, std::size_t a,
                             std::size_t b, double* partial) {
  double sum = 0.0;
  for (std::size_t i = threadIdx.x; i < rows; i += kOrthonormaliseLanes)
    sum = __dadd_rn(
        sum, __dmul_rn(static_cast<double>(p[i * r + a]), static_cast<double>(p[i * r + b])));
  __syncthreads();  // every thread has read the previous result from partial[0]
  partial[threadIdx.x] = sum;
  for (unsigned half = kOrthonormaliseLanes / 2; half > 0; half /= 2) {
    __syncthreads();
    if (threadIdx.x < half)
      partial[threadIdx.x] = __dadd_rn(partial[threadIdx.x], partial[threadIdx.x + half]);
  }
  __syncthreads();
  return partial[0];
}

// The CPU twin's modified Gram-Schmidt, each column's projections twice, in
// one block of kOrthonormaliseLanes threads: the dot products in the CPU's
// lane-and-tree order, the projections and the scaling one row per thread
// (independent elements, each rounded as on the CPU). A thread writes only
// its own rows, the ones it reads in its lane, so the barriers inside
// column_dot are all the ordering needed.
__global__ void __launch_bounds__(kOrthonormaliseLanes)
    orthonormalise_kernel(float* p, std::size_t rows, std::size_t r) {
  constexpr double kNoiseFraction = 1e-5;  // kernels/low_rank.cc's
  __shared__ double partial[kOrthonormaliseLanes];
  for (std::size_t k = 0; k < r; ++k) {
    const double before = __dsqrt_rn(column_dot(p, rows, r, k, k, partial));
    for (int pass = 0; pass < 2; ++pass) {
      for (std::size_t l = 0; l < k; ++l) {
        const float along = __double2float_rn(column_dot(p, rows, r, l, k, partial));
        for (std::size_t i = threadIdx.x; i < rows; i += kOrthonormaliseLanes)
          p[i * r + k] = __fsub_rn(p[i * r + k], __fmul_rn(along, p[i * r + l]));
      }
    }
    const double norm = __dsqrt_rn(column_dot(p, rows, r, k, k, partial));
    const bool noise = norm <= __dmul_rn(kNoiseFraction, before);  // also 0 of 0; NaN stays NaN
    for (std::size_t i = threadIdx.x; i < rows; i += kOrthonormaliseLanes) {
      float& value = p[i * r + k];
      value = noise ? 0.0f : __double2float_rn(__ddiv_rn(static_cast<double>(value), norm));
    }
  }
}

// P's short last row: p[t][k] = sum over j of row[j] q[j][k], one block per k,
// the block's partial sums added in a tree (an order of its own, as cuBLAS's).
__global__ void __launch_bounds__(kBlock)
    project_tail_kernel(const float* __restrict__ row, std::size_t length,
                        const float* __restrict__ q, std::size_t r, float* p_row) {
  __shared__ float partial[kBlock];
  const std::size_t k = blockIdx.x;
  float sum = 0.0f;
  for (std::size_t j = threadIdx.x; j < length; j += blockDim.x)
    sum = __fadd_rn(sum, __fmul_rn(row[j], q[j * r + k]));
  partial[threadIdx.x] = sum;
  for (unsigned half = kBlock / 2; half > 0; half /= 2) {
    __syncthreads();
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
  }
  if (threadIdx.x == 0) p_row[k] = partial[0];
}

// Q += the short last row's part: q[j][k] += row[j] p_row[k], added last (as
// the CPU's BLAS variant does).
__global__ void __launch_bounds__(kBlock)
    back_project_tail_kernel(const float* __restrict__ row, std::size_t length,
                             const float* __restrict__ p_row, std::size_t r, float* q) {
  const std::size_t n = length * r;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t e = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += stride)
    q[e] = __fadd_rn(q[e], __fmul_rn(row[e / r], p_row[e % r]));
}

bool fits_int(const LowRankShape& s) {
  return s.rows <= INT_MAX && s.cols <= INT_MAX && s.rank <= INT_MAX;
}

cudaError_t from_cublas(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS ? cudaSuccess : cudaErrorUnknown;
}

}  // namespace

cudaError_t low_rank_add(const float* input, const float* residual, float* m, std::size_t n,
                         cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (!residual) {  // no error feedback: M is the input
    if (m == input) return cudaSuccess;
    return cudaMemcpyAsync(m, input, n * sizeof(float), cudaMemcpyDeviceToDevice, stream);
  }
  add_kernel<<<grid_for(n), kBlock, 0, stream>>>(input, residual, m, n);
  return cudaGetLastError();
}

cudaError_t flag_not_finite(const float* v, std::size_t n, unsigned* bad, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  flag_kernel<<<grid_for(n), kBlock, 0, stream>>>(v, n, bad);
  return cudaGetLastError();
}

cudaError_t low_rank_settle(const unsigned* bad, float* out, float* residual, std::size_t n,
                            int divisor, const float* q_sum, float* q_state, std::size_t q_floats,
                            cudaStream_t stream) {
  if (divisor < 1) return cudaErrorInvalidValue;
  const std::size_t most = n > q_floats ? n : q_floats;
  if (most == 0) return cudaSuccess;
  settle_kernel<<<grid_for(most), kBlock, 0, stream>>>(bad, out, residual, n, divisor, q_sum,
                                                       q_state, q_floats);
  return cudaGetLastError();
}

cudaError_t low_rank_finish(const float* m, const LowRankShape& shape, const float* p,
                            const float* q_sum, const float* q_local, float* out, float* residual,
                            cudaStream_t stream) {
  if (shape.rank == 0 || shape.rank > kMaxRank || shape.cols == 0) return cudaErrorInvalidValue;
  if (shape.count == 0) return cudaSuccess;
  // Ranks up to 16 (the usual 1 to 8) keep Q in registers; past that, one
  // block per row up to the device's fill (a row is usually thousands of columns).
  const bool columns_fit = (shape.cols + kBlock - 1) / kBlock <= 0x7fffffffu;
  if (shape.rank <= 4 && columns_fit)
    return launch_finish_tiled<4>(m, shape, p, q_sum, q_local, out, residual, stream);
  if (shape.rank <= 8 && columns_fit)
    return launch_finish_tiled<8>(m, shape, p, q_sum, q_local, out, residual, stream);
  if (shape.rank <= 16 && columns_fit)
    return launch_finish_tiled<16>(m, shape, p, q_sum, q_local, out, residual, stream);
  const int blocks = grid_for(shape.rows * kBlock);
  finish_kernel<<<blocks, kBlock, 0, stream>>>(m, shape, p, q_sum, q_local, out, residual);
  return cudaGetLastError();
}

cudaError_t orthonormalise(float* p, std::size_t rows, std::size_t rank, cudaStream_t stream) {
  if (rows == 0 || rank == 0) return cudaSuccess;
  orthonormalise_kernel<<<1, kOrthonormaliseLanes, 0, stream>>>(p, rows, rank);
  return cudaGetLastError();
}

cudaError_t low_rank_project(const float* m, const LowRankShape& s, const float* q, float* p,
                             cudaStream_t stream) {
  if (s.rank == 0 || s.cols == 0 || !fits_int(s)) return cudaErrorInvalidValue;
  cublasHandle_t handle = detail::cublas_handle(stream);
  if (!handle) return cudaErrorNotSupported;
  const std::size_t full = s.count / s.cols;  // rows without padding
  const auto cols = static_cast<int>(s.cols);
  const auto r = static_cast<int>(s.rank);
  const float one = 1.0f, zero = 0.0f;
  if (full > 0) {
    // Row-major M (full x cols) is column-major M^T, and likewise for P and
    // Q: P^T (r x full) = Q^T (r x cols) M^T (cols x full).
    const cublasStatus_t status =
        detail::cublas_sgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, r, static_cast<int>(full), cols,
                             &one, q, r, m, cols, &zero, p, r);
    if (status != CUBLAS_STATUS_SUCCESS) return from_cublas(status);
  }
  if (full < s.rows) {
    project_tail_kernel<<<static_cast<unsigned>(s.rank), kBlock, 0, stream>>>(
        m + full * s.cols, s.row_length(full), q, s.rank, p + full * s.rank);
  }
  return cudaGetLastError();
}

cudaError_t low_rank_back_project(const float* m, const LowRankShape& s, const float* p, float* q,
                                  cudaStream_t stream) {
  if (s.rank == 0 || s.cols == 0 || !fits_int(s)) return cudaErrorInvalidValue;
  cublasHandle_t handle = detail::cublas_handle(stream);
  if (!handle) return cudaErrorNotSupported;
  const std::size_t full = s.count / s.cols;
  const auto cols = static_cast<int>(s.cols);
  const auto r = static_cast<int>(s.rank);
  const float one = 1.0f, zero = 0.0f;
  if (full > 0) {
    // Q^T (r x cols) = P^T (r x full) M (full x cols), M being the transpose
    // of the column-major M^T (cols x full) that row-major M is.
    const cublasStatus_t status =
        detail::cublas_sgemm(handle, CUBLAS_OP_N, CUBLAS_OP_T, r, cols, static_cast<int>(full),
                             &one, p, r, m, cols, &zero, q, r);
    if (status != CUBLAS_STATUS_SUCCESS) return from_cublas(status);
  } else if (const cudaError_t rc = cudaMemsetAsync(q, 0, s.q_floats() * sizeof(float), stream);
             rc != cudaSuccess) {
    return rc;
  }
  if (full < s.rows) {
    const std::size_t length = s.row_length(full);
    back_project_tail_kernel<<<grid_for(length * s.rank), kBlock, 0, stream>>>(
        m + full * s.cols, length, p + full * s.rank, s.rank, q);
  }
  return cudaGetLastError();
}

}  // namespace slimreduce::kernels::cuda
