// What the bucketed quantizers' kernels share (quant8.cu, quant8_minmax.cu,
// quant_fp8.cu, quant_packed.cu, quant_packed_minmax.cu): a bucket is the
// work of one group of threads, a warp up to kWarpBucketMax values and a
// whole block past that, launched alike; a block of codes may sit at any
// address, so its fp32 scales are read and written whole only where they are
// aligned; the layout of the codecs with one code byte per value.
#pragma once

#include "kernels/cuda/device_util.cuh"

namespace slimreduce::kernels::cuda::detail {

inline constexpr std::size_t kWarpBucketMax = 4096;
inline constexpr int kWarp = 32;

__device__ inline bool aligned4(const void* p) {
  return (reinterpret_cast<std::uintptr_t>(p) & 3u) == 0;
}

__device__ inline float load_scale(const unsigned char* block, std::size_t j) {
  const unsigned char* at = block + 4 * j;
  if (aligned4(at)) return *reinterpret_cast<const float*>(at);
  const std::uint32_t bits = std::uint32_t{at[0]} | std::uint32_t{at[1]} << 8 |
                             std::uint32_t{at[2]} << 16 | std::uint32_t{at[3]} << 24;
  return bits_float(bits);
}

__device__ inline void store_scale(unsigned char* block, std::size_t j, float scale) {
  unsigned char* at = block + 4 * j;
  if (aligned4(at)) {
    *reinterpret_cast<float*>(at) = scale;
    return;
  }
  const std::uint32_t bits = float_bits(scale);
  for (int b = 0; b < 4; ++b) at[b] = static_cast<unsigned char>(bits >> (8 * b));
}

__device__ inline std::uint32_t warp_max(std::uint32_t v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    v = max(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

// The largest v over the group (a warp, or the whole block), in every thread.
// Every thread of the group calls it.
template <int G>
__device__ inline std::uint32_t group_max(std::uint32_t v) {
  v = warp_max(v);
  if constexpr (G == kBlock) {
    __shared__ std::uint32_t partial[kBlock / kWarp];
    const unsigned warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    v = warp_max(lane < kBlock / kWarp ? partial[lane] : 0u);
    __syncthreads();  // before the next bucket writes partial again
  }
  return v;
}

// Calls fn(j, rank) for each bucket j of this thread's group, rank being the
// thread's place in it. With G == kBlock every thread of a block sees the
// same buckets, so fn may synchronize the block.
template <int G, class Fn>
__device__ inline void for_each_bucket(std::size_t buckets, Fn fn) {
  const std::size_t groups = static_cast<std::size_t>(gridDim.x) * (kBlock / G);
  const unsigned rank = threadIdx.x % G;
  for (std::size_t j = static_cast<std::size_t>(blockIdx.x) * (kBlock / G) + threadIdx.x / G;
       j < buckets; j += groups) {
    fn(j, rank);
  }
}

__device__ inline float acc_at(const float* in, const float* res, std::size_t i) {
  return res ? add_nan_first(in[i], res[i]) : in[i];
}

// The blocks of one code byte per value (quant8.cu, quant8_minmax.cu,
// quant_fp8.cu): b per-bucket headers, then n codes.
struct ByteLayout {
  std::size_t n, bucket, buckets;
};

inline ByteLayout byte_layout_of(std::size_t n, std::size_t bucket) {
  return {n, bucket, n / bucket + (n % bucket != 0)};
}

// One past the last value of the bucket that starts at first.
__device__ inline std::size_t end_of(const ByteLayout& l, std::size_t first) {
  return l.n - first < l.bucket ? l.n : first + l.bucket;
}

// `kernel` over a layout's buckets, G threads a bucket, enqueued on `stream`.
template <int G, class Kernel, class L, class... Args>
cudaError_t launch(Kernel kernel, const L& l, cudaStream_t stream, Args... args) {
  kernel<<<grid_for(l.buckets * G), kBlock, 0, stream>>>(args...);
  return cudaGetLastError();
}

}  // namespace slimreduce::kernels::cuda::detail
