// 8-bit min-max codes on the GPU: the twin of kernels/quant8_minmax.cc, bit
// for bit, through the same rules (kernels/quant8_minmax_rules.h): a bucket's
// step and offset come from its smallest and largest order keys (integers,
// so the reduction's order cannot change them) and every thread of its group
// works them out alike (in double, exact there). A bucket is the work of one
// group of threads, as in quant8.cu: a warp up to kWarpBucketMax values, a
// whole block past that.
#include "kernels/cuda/bucket_groups.cuh"
#include "kernels/quant8_minmax_rules.h"

namespace slimreduce::kernels::cuda {
namespace {

using namespace detail;

// Blocks as kernels/quant8_minmax.h lays them out: b (step, offset) pairs,
// then n codes; at any address, so a float is read or written whole only
// where it is aligned.
__device__ inline float load_float(const unsigned char* at) {
  if ((reinterpret_cast<std::uintptr_t>(at) & 3u) == 0) return *reinterpret_cast<const float*>(at);
  const std::uint32_t bits = std::uint32_t{at[0]} | std::uint32_t{at[1]} << 8 |
                             std::uint32_t{at[2]} << 16 | std::uint32_t{at[3]} << 24;
  return bits_float(bits);
}

__device__ inline void store_float(unsigned char* at, float f) {
  if ((reinterpret_cast<std::uintptr_t>(at) & 3u) == 0) {
    *reinterpret_cast<float*>(at) = f;
    return;
  }
  const std::uint32_t bits = float_bits(f);
  for (int b = 0; b < 4; ++b) at[b] = static_cast<unsigned char>(bits >> (8 * b));
}

struct Keys {
  std::int32_t lo, hi;
};

__device__ inline Keys warp_keys(Keys k) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    k.lo = min(k.lo, __shfl_xor_sync(0xffffffffu, k.lo, offset));
    k.hi = max(k.hi, __shfl_xor_sync(0xffffffffu, k.hi, offset));
  }
  return k;
}

// The smallest lo and largest hi over the group, in every thread; every
// thread of the group calls it.
template <int G>
__device__ inline Keys group_keys(Keys k) {
  k = warp_keys(k);
  if constexpr (G == kBlock) {
    __shared__ Keys partial[kBlock / kWarp];
    const unsigned warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    if (lane == 0) partial[warp] = k;
    __syncthreads();
    k = warp_keys(lane < kBlock / kWarp ? partial[lane] : Keys{kMinmaxNoLo, kMinmaxNoHi});
    __syncthreads();  // before the next bucket writes partial again
  }
  return k;
}

template <int G>
__global__ void __launch_bounds__(kBlock) compress_kernel(const float* in, float* res, ByteLayout l,
                                                          unsigned char* out, Rounding rounding) {
  std::uint8_t* codes = out + 8 * l.buckets;
  for_each_bucket<G>(l.buckets, [&](std::size_t j, unsigned rank) {
    const std::size_t first = j * l.bucket, last = end_of(l, first);
    Keys k{kMinmaxNoLo, kMinmaxNoHi};
    for (std::size_t i = first + rank; i < last; i += G) {
      const float acc = acc_at(in, res, i);
      k.lo = min(k.lo, minmax_lo_key(acc));
      k.hi = max(k.hi, minmax_hi_key(acc));
    }
    k = group_keys<G>(k);
    const MinmaxParams p = minmax_params(k.lo, k.hi, rounding.stochastic);
    if (rank == 0) {
      store_float(out + 8 * j, p.step);
      store_float(out + 8 * j + 4, p.offset);
    }
    for (std::size_t i = first + rank; i < last; i += G) {
      const float acc = acc_at(in, res, i);
      const std::uint8_t c = minmax_code(acc, p, rounding, i);
      codes[i] = c;
      if (res) res[i] = residual_after(acc, minmax_decode(c, p.step, p.offset));
    }
  });
}

// Accumulate: out[i] = add_nan_first(out[i], decoded); else out[i] = decoded / divisor.
template <int G, bool Accumulate>
__global__ void __launch_bounds__(kBlock)
    decode_kernel(const unsigned char* block, ByteLayout l, float* out, int divisor) {
  const std::uint8_t* codes = block + 8 * l.buckets;
  for_each_bucket<G>(l.buckets, [&](std::size_t j, unsigned rank) {
    const float step = load_float(block + 8 * j), offset = load_float(block + 8 * j + 4);
    const std::size_t first = j * l.bucket, last = end_of(l, first);
    for (std::size_t i = first + rank; i < last; i += G) {
      const float value = minmax_decode(codes[i], step, offset);
      out[i] = Accumulate ? add_nan_first(out[i], value) : divide_keeping_nan(value, divisor);
    }
  });
}

}  // namespace

cudaError_t quant8_minmax_compress(const float* in, float* residual, std::size_t n,
                                   std::size_t bucket, void* out, cudaStream_t stream,
                                   const Rounding& rounding) {
  if (bucket == 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const ByteLayout l = byte_layout_of(n, bucket);
  auto* block = static_cast<unsigned char*>(out);
  if (bucket <= kWarpBucketMax) {
    return launch<kWarp>(compress_kernel<kWarp>, l, stream, in, residual, l, block, rounding);
  }
  return launch<kBlock>(compress_kernel<kBlock>, l, stream, in, residual, l, block, rounding);
}

cudaError_t quant8_minmax_decompress(const void* block, std::size_t n, std::size_t bucket,
                                     float* out, int divisor, cudaStream_t stream) {
  if (bucket == 0 || divisor < 1) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const ByteLayout l = byte_layout_of(n, bucket);
  const auto* bytes = static_cast<const unsigned char*>(block);
  if (bucket <= kWarpBucketMax) {
    return launch<kWarp>(decode_kernel<kWarp, false>, l, stream, bytes, l, out, divisor);
  }
  return launch<kBlock>(decode_kernel<kBlock, false>, l, stream, bytes, l, out, divisor);
}

cudaError_t quant8_minmax_accumulate(const void* block, std::size_t n, std::size_t bucket,
                                     float* dense, cudaStream_t stream) {
  if (bucket == 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const ByteLayout l = byte_layout_of(n, bucket);
  const auto* bytes = static_cast<const unsigned char*>(block);
  if (bucket <= kWarpBucketMax) {
    return launch<kWarp>(decode_kernel<kWarp, true>, l, stream, bytes, l, dense, 1);
  }
  return launch<kBlock>(decode_kernel<kBlock, true>, l, stream, bytes, l, dense, 1);
}

}  // namespace slimreduce::kernels::cuda
