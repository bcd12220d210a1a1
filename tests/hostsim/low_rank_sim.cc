// The low-rank (PowerSGD) entry points of kernels/cuda/kernels.h carried out
// by their CPU twins (kernels/low_rank.h) on the simulated streams, as
// kernels_sim.cc does for the other kernels: the products by the CPU loops,
// standing in for cuBLAS, which the simulation reports as available.
#include <climits>

#include "kernels/cuda/kernels.h"
#include "kernels/element_rules.h"
#include "kernels/low_rank.h"
#include "tests/hostsim/sim.h"

namespace slimreduce::kernels::cuda {
namespace {

namespace sim = hostsim;

bool fits_int(const LowRankShape& s) {
  return s.rows <= INT_MAX && s.cols <= INT_MAX && s.rank <= INT_MAX;
}

}  // namespace

cudaError_t low_rank_add(const float* input, const float* residual, float* m, std::size_t n,
                         cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  sim::launch_kernel(stream, [=]() mutable {
    input = sim::on_device("low_rank_add input", input, n * 4);
    if (residual) residual = sim::on_device("low_rank_add residual", residual, n * 4);
    m = sim::on_device("low_rank_add m", m, n * 4);
    for (std::size_t e = 0; e < n; ++e)
      m[e] = residual ? add_nan_first(input[e], residual[e]) : input[e];
  });
  return cudaSuccess;
}

cudaError_t low_rank_finish(const float* m, const LowRankShape& shape, const float* p,
                            const float* q_sum, const float* q_local, float* out, float* residual,
                            cudaStream_t stream) {
  if (shape.rank == 0 || shape.rank > 64 || shape.cols == 0) return cudaErrorInvalidValue;
  if (shape.count == 0) return cudaSuccess;
  sim::launch_kernel(stream, [=]() mutable {
    m = sim::on_device("low_rank_finish m", m, shape.count * 4);
    p = sim::on_device("low_rank_finish p", p, shape.p_floats() * 4);
    q_sum = sim::on_device("low_rank_finish q_sum", q_sum, shape.q_floats() * 4);
    out = sim::on_device("low_rank_finish out", out, shape.count * 4);
    if (residual) {
      q_local = sim::on_device("low_rank_finish q_local", q_local, shape.q_floats() * 4);
      residual = sim::on_device("low_rank_finish residual", residual, shape.count * 4);
    }
    kernels::low_rank_finish(m, shape, p, q_sum, q_local, out, residual, Isa::scalar);
  });
  return cudaSuccess;
}

cudaError_t orthonormalise(float* p, std::size_t rows, std::size_t rank, cudaStream_t stream) {
  if (rows == 0 || rank == 0) return cudaSuccess;
  sim::launch_kernel(stream, [=]() mutable {
    p = sim::on_device("orthonormalise p", p, rows * rank * 4);
    kernels::orthonormalise(p, rows, rank);
  });
  return cudaSuccess;
}

cudaError_t flag_not_finite(const float* v, std::size_t n, unsigned* bad, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  sim::launch_kernel(stream, [=]() mutable {
    v = sim::on_device("flag_not_finite v", v, n * 4);
    bad = sim::on_device("flag_not_finite bad", bad, 4);
    kernels::flag_not_finite(v, n, bad);
  });
  return cudaSuccess;
}

cudaError_t low_rank_settle(const unsigned* bad, float* out, float* residual, std::size_t n,
                            int divisor, const float* q_sum, float* q_state, std::size_t q_floats,
                            cudaStream_t stream) {
  if (divisor < 1) return cudaErrorInvalidValue;
  sim::launch_kernel(stream, [=]() mutable {
    bad = sim::on_device("low_rank_settle bad", bad, 4);
    out = sim::on_device("low_rank_settle out", out, n * 4);
    if (residual) residual = sim::on_device("low_rank_settle residual", residual, n * 4);
    if (q_state) {
      q_sum = sim::on_device("low_rank_settle q_sum", q_sum, q_floats * 4);
      q_state = sim::on_device("low_rank_settle q_state", q_state, q_floats * 4);
    }
    kernels::low_rank_settle(*bad != 0, out, residual, n, divisor, q_sum, q_state, q_floats);
  });
  return cudaSuccess;
}

bool cublas_available(std::string* /*why*/) { return true; }
bool cublas_loadable(std::string* /*why*/) { return true; }

cudaError_t low_rank_project(const float* m, const LowRankShape& s, const float* q, float* p,
                             cudaStream_t stream) {
  if (s.rank == 0 || s.cols == 0 || !fits_int(s)) return cudaErrorInvalidValue;
  sim::launch_kernel(stream, [=]() mutable {
    m = sim::on_device("low_rank_project m", m, s.count * 4);
    q = sim::on_device("low_rank_project q", q, s.q_floats() * 4);
    p = sim::on_device("low_rank_project p", p, s.p_floats() * 4);
    kernels::low_rank_project(m, s, q, p, Isa::scalar);
  });
  return cudaSuccess;
}

cudaError_t low_rank_back_project(const float* m, const LowRankShape& s, const float* p, float* q,
                                  cudaStream_t stream) {
  if (s.rank == 0 || s.cols == 0 || !fits_int(s)) return cudaErrorInvalidValue;
  sim::launch_kernel(stream, [=]() mutable {
    m = sim::on_device("low_rank_back_project m", m, s.count * 4);
    p = sim::on_device("low_rank_back_project p", p, s.p_floats() * 4);
    q = sim::on_device("low_rank_back_project q", q, s.q_floats() * 4);
    kernels::low_rank_back_project(m, s, p, q, Isa::scalar);
  });
  return cudaSuccess;
}

}  // namespace slimreduce::kernels::cuda
