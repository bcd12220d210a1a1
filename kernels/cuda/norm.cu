// The fixed-order norm on the GPU: the twin of kernels/norm.cc, bit for bit
// (adaptive levels decide from it, and a rank whose buffers are on the host
// must reach the same decision as one whose buffers are on the device).
// The order is kernels/norm.h's: one thread per (block, lane) adds its
// lane's squares in value order; one thread per block adds its lanes in
// lane order; one thread adds the blocks in block order and takes the root.
// Every product and sum is rounded on its own (__dmul_rn, __dadd_rn; the
// build also passes --fmad=false), as the CPU twin's are.
#include "kernels/cuda/device_util.cuh"
#include "kernels/element_rules.h"
#include "kernels/norm.h"

namespace slimreduce::kernels::cuda {
namespace {

// Value i as fp32: the tensor's own, or a 16-bit float widened (exact).
struct Fp32 {
  const float* v;
  __device__ float operator()(std::size_t i) const { return v[i]; }
};
struct Fp16 {
  const std::uint16_t* v;
  __device__ float operator()(std::size_t i) const { return fp16_bits_to_float(v[i]); }
};
struct Bf16 {
  const std::uint16_t* v;
  __device__ float operator()(std::size_t i) const { return bf16_bits_to_float(v[i]); }
};

template <class Load>
__global__ void __launch_bounds__(detail::kBlock)
    lane_sums(Load v, std::size_t n, std::size_t blocks, double* lanes) {
  const std::size_t t = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (t >= blocks * kNormLanes) return;
  const std::size_t begin = t / kNormLanes * kNormBlock;
  const std::size_t end = n - begin < kNormBlock ? n : begin + kNormBlock;
  double sum = 0.0;
  for (std::size_t i = begin + t % kNormLanes; i < end; i += kNormLanes) {
    const double x = v(i);
    sum = __dadd_rn(sum, __dmul_rn(x, x));
  }
  lanes[t] = sum;
}

__global__ void __launch_bounds__(detail::kBlock)
    block_sums(const double* lanes, std::size_t blocks, double* sums) {
  const std::size_t b = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (b >= blocks) return;
  double sum = 0.0;
  for (std::size_t lane = 0; lane < kNormLanes; ++lane)
    sum = __dadd_rn(sum, lanes[b * kNormLanes + lane]);
  sums[b] = sum;
}

__global__ void __launch_bounds__(1)
    total_root(const double* sums, std::size_t blocks, double* norm) {
  double total = 0.0;
  for (std::size_t b = 0; b < blocks; ++b) total = __dadd_rn(total, sums[b]);
  *norm = __dsqrt_rn(total);
}

unsigned grid_of(std::size_t threads) {
  return static_cast<unsigned>((threads + detail::kBlock - 1) / detail::kBlock);
}

template <class Load>
cudaError_t norm_of(Load v, std::size_t n, double* norm, void* scratch, cudaStream_t stream) {
  const std::size_t blocks = (n + kNormBlock - 1) / kNormBlock;
  auto* lanes = static_cast<double*>(scratch);
  double* sums = lanes + device::round256(blocks * kNormLanes * sizeof(double)) / sizeof(double);
  if (blocks > 0) {
    lane_sums<<<grid_of(blocks * kNormLanes), detail::kBlock, 0, stream>>>(v, n, blocks, lanes);
    block_sums<<<grid_of(blocks), detail::kBlock, 0, stream>>>(lanes, blocks, sums);
  }
  total_root<<<1, 1, 0, stream>>>(sums, blocks, norm);
  return cudaGetLastError();
}

}  // namespace

cudaError_t fixed_order_norm(const float* v, std::size_t n, double* norm, void* scratch,
                             cudaStream_t stream) {
  return norm_of(Fp32{v}, n, norm, scratch, stream);
}

cudaError_t fixed_order_norm(HalfFormat format, const std::uint16_t* v, std::size_t n, double* norm,
                             void* scratch, cudaStream_t stream) {
  return format == HalfFormat::fp16 ? norm_of(Fp16{v}, n, norm, scratch, stream)
                                    : norm_of(Bf16{v}, n, norm, scratch, stream);
}

}  // namespace slimreduce::kernels::cuda
