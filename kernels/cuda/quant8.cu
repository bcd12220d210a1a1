// 8-bit quantization on the GPU: the twin of kernels/quant8.cc, bit for bit,
// through the same per-value rules (kernels/quant8_rules.h). A bucket is the
// work of one group of threads: a warp for buckets of up to kWarpBucketMax
// values, a whole block past that. compress reads its bucket twice, for the
// largest finite |acc| and then to code it (the second time from the cache).
#include "kernels/cuda/bucket_groups.cuh"
#include "kernels/quant8_rules.h"

namespace slimreduce::kernels::cuda {
namespace {

using namespace detail;

// Blocks as kernels/quant8.h lays them out: b scales, then n codes. A block
// may sit at any address (a gathered buffer of several), so a scale is read
// and written whole only where it is aligned.
template <int G>
__global__ void __launch_bounds__(kBlock) compress_kernel(const float* in, float* res, ByteLayout l,
                                                          unsigned char* out, Rounding rounding) {
  auto* codes = reinterpret_cast<std::int8_t*>(out + 4 * l.buckets);
  for_each_bucket<G>(l.buckets, [&](std::size_t j, unsigned rank) {
    const std::size_t first = j * l.bucket, last = end_of(l, first);
    std::uint32_t max_bits = 0;
    for (std::size_t i = first + rank; i < last; i += G) {
      max_bits = max(max_bits, quant8_finite_abs_bits(acc_at(in, res, i)));
    }
    const float scale = quant8_scale(group_max<G>(max_bits));
    if (rank == 0) store_scale(out, j, scale);
    for (std::size_t i = first + rank; i < last; i += G) {
      const float acc = acc_at(in, res, i);
      const std::int8_t q = quant8_code(acc, scale, rounding, i);
      codes[i] = q;
      if (res) res[i] = residual_after(acc, quant8_decode(q, scale));
    }
  });
}

// Accumulate: out[i] = add_nan_first(out[i], decoded); else out[i] = decoded / divisor.
template <int G, bool Accumulate>
__global__ void __launch_bounds__(kBlock)
    decode_kernel(const unsigned char* block, ByteLayout l, float* out, int divisor) {
  const auto* codes = reinterpret_cast<const std::int8_t*>(block + 4 * l.buckets);
  for_each_bucket<G>(l.buckets, [&](std::size_t j, unsigned rank) {
    const float scale = load_scale(block, j);
    const std::size_t first = j * l.bucket, last = end_of(l, first);
    for (std::size_t i = first + rank; i < last; i += G) {
      const float value = quant8_decode(codes[i], scale);
      out[i] = Accumulate ? add_nan_first(out[i], value) : divide_keeping_nan(value, divisor);
    }
  });
}

}  // namespace

cudaError_t quant8_compress(const float* in, float* residual, std::size_t n, std::size_t bucket,
                            void* out, cudaStream_t stream, const Rounding& rounding) {
  if (bucket == 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const ByteLayout l = byte_layout_of(n, bucket);
  auto* block = static_cast<unsigned char*>(out);
  if (bucket <= kWarpBucketMax) {
    return launch<kWarp>(compress_kernel<kWarp>, l, stream, in, residual, l, block, rounding);
  }
  return launch<kBlock>(compress_kernel<kBlock>, l, stream, in, residual, l, block, rounding);
}

cudaError_t quant8_decompress(const void* block, std::size_t n, std::size_t bucket, float* out,
                              int divisor, cudaStream_t stream) {
  if (bucket == 0 || divisor < 1) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const ByteLayout l = byte_layout_of(n, bucket);
  const auto* bytes = static_cast<const unsigned char*>(block);
  if (bucket <= kWarpBucketMax) {
    return launch<kWarp>(decode_kernel<kWarp, false>, l, stream, bytes, l, out, divisor);
  }
  return launch<kBlock>(decode_kernel<kBlock, false>, l, stream, bytes, l, out, divisor);
}

cudaError_t quant8_accumulate(const void* block, std::size_t n, std::size_t bucket, float* dense,
                              cudaStream_t stream) {
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
