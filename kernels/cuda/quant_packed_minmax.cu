// 4- and 2-bit min-max codes on the GPU: the twin of
// kernels/quant_packed_minmax.cc, bit for bit, through the same rules
// (kernels/quant_packed_minmax_rules.h). As quant_packed.cu: a bucket is the
// work of one group of threads (a warp up to kWarpBucketMax values, a whole
// block past that); compress reads its bucket twice (its smallest and largest
// order keys and whether it holds an inf, then its codes), and each thread
// writes whole bytes of codes, so no two threads share a byte.
#include "kernels/cuda/bucket_groups.cuh"
#include "kernels/cuda/packed_layout.cuh"
#include "kernels/quant_packed_minmax_rules.h"

namespace slimreduce::kernels::cuda {
namespace {

using namespace detail;

// Blocks as kernels/cuda/packed_layout.cuh says; a block may sit at any
// address (a gathered buffer of several), so an fp32 is read and written
// whole only where it is aligned; codes are bytes.

// Order keys as unsigned integers (the sign bit flipped), so that group_max
// finds the largest, and the smallest as the largest of their complements.
__device__ inline std::uint32_t unsigned_key(std::int32_t key) {
  return static_cast<std::uint32_t>(key) ^ 0x80000000u;
}
__device__ inline std::int32_t signed_key(std::uint32_t key) {
  return static_cast<std::int32_t>(key ^ 0x80000000u);
}

template <int G>
__global__ void __launch_bounds__(kBlock)
    compress_kernel(const float* in, float* res, Layout l, unsigned char* out, Rounding rounding) {
  const int per_byte = 8 / l.bits;
  for_each_bucket<G>(l.buckets, [&](std::size_t j, unsigned rank) {
    const std::size_t first = j * l.bucket, last = end_of(l, first);
    std::uint32_t lo_flipped = ~unsigned_key(kMinmaxNoLo), hi = unsigned_key(kMinmaxNoHi);
    std::uint32_t marks = 0;
    for (std::size_t i = first + rank; i < last; i += G) {
      const float acc = acc_at(in, res, i);
      lo_flipped = max(lo_flipped, ~unsigned_key(minmax_lo_key(acc)));
      hi = max(hi, unsigned_key(minmax_hi_key(acc)));
      marks |= quant_packed_marks(acc) ? 1u : 0u;
    }
    const std::int32_t lo_key = signed_key(~group_max<G>(lo_flipped));
    const std::int32_t hi_key = signed_key(group_max<G>(hi));
    const bool marked = group_max<G>(marks) != 0;
    const PackedMinmax p = packed_minmax_params(lo_key, hi_key, marked, l.bits);
    if (rank == 0) {
      float a, b;
      packed_minmax_store(p, &a, &b);
      store_scale(out, 2 * j, a);
      store_scale(out, 2 * j + 1, b);
    }
    unsigned char* codes = out + 8 * l.buckets + j * l.stride;
    const std::size_t bytes = code_bytes(last - first, l.bits);
    for (std::size_t b = rank; b < bytes; b += G) {
      unsigned byte = 0;  // the unused high bits of a bucket's last byte stay 0
      for (int k = 0; k < per_byte; ++k) {
        const std::size_t i = first + b * per_byte + k;
        if (i >= last) break;
        const float acc = acc_at(in, res, i);
        const int c = packed_minmax_code(acc, p, l.bits, rounding, i);
        byte |= static_cast<unsigned>(c) << (k * l.bits);
        if (res) res[i] = residual_after(acc, packed_minmax_decode(c, p, l.bits));
      }
      codes[b] = static_cast<unsigned char>(byte);
    }
  });
}

// Accumulate: out[i] = add_nan_first(out[i], decoded); else out[i] = decoded / divisor.
template <int G, bool Accumulate>
__global__ void __launch_bounds__(kBlock)
    decode_kernel(const unsigned char* block, Layout l, float* out, int divisor) {
  const unsigned field_mask = (1u << l.bits) - 1u;
  for_each_bucket<G>(l.buckets, [&](std::size_t j, unsigned rank) {
    const PackedMinmax p =
        packed_minmax_load(load_scale(block, 2 * j), load_scale(block, 2 * j + 1), l.bits);
    const unsigned char* codes = block + 8 * l.buckets + j * l.stride;
    const std::size_t first = j * l.bucket, last = end_of(l, first);
    for (std::size_t i = first + rank; i < last; i += G) {
      const std::size_t bit = (i - first) * static_cast<std::size_t>(l.bits);
      const int c = static_cast<int>((codes[bit / 8] >> (bit % 8)) & field_mask);
      const float value = packed_minmax_decode(c, p, l.bits);
      out[i] = Accumulate ? add_nan_first(out[i], value) : divide_keeping_nan(value, divisor);
    }
  });
}

bool valid_width(int bits) { return bits == 4 || bits == 2; }

}  // namespace

cudaError_t quant_packed_minmax_compress(const float* in, float* residual, std::size_t n,
                                         std::size_t bucket, int bits, void* out,
                                         cudaStream_t stream, const Rounding& rounding) {
  if (bucket == 0 || !valid_width(bits)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const Layout l = layout_of(n, bucket, bits);
  auto* block = static_cast<unsigned char*>(out);
  if (bucket <= kWarpBucketMax) {
    return launch<kWarp>(compress_kernel<kWarp>, l, stream, in, residual, l, block, rounding);
  }
  return launch<kBlock>(compress_kernel<kBlock>, l, stream, in, residual, l, block, rounding);
}

cudaError_t quant_packed_minmax_decompress(const void* block, std::size_t n, std::size_t bucket,
                                           int bits, float* out, int divisor, cudaStream_t stream) {
  if (bucket == 0 || !valid_width(bits) || divisor < 1) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const Layout l = layout_of(n, bucket, bits);
  const auto* bytes = static_cast<const unsigned char*>(block);
  if (bucket <= kWarpBucketMax) {
    return launch<kWarp>(decode_kernel<kWarp, false>, l, stream, bytes, l, out, divisor);
  }
  return launch<kBlock>(decode_kernel<kBlock, false>, l, stream, bytes, l, out, divisor);
}

cudaError_t quant_packed_minmax_accumulate(const void* block, std::size_t n, std::size_t bucket,
                                           int bits, float* dense, cudaStream_t stream) {
  if (bucket == 0 || !valid_width(bits)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const Layout l = layout_of(n, bucket, bits);
  const auto* bytes = static_cast<const unsigned char*>(block);
  if (bucket <= kWarpBucketMax) {
    return launch<kWarp>(decode_kernel<kWarp, true>, l, stream, bytes, l, dense, 1);
  }
  return launch<kBlock>(decode_kernel<kBlock, true>, l, stream, bytes, l, dense, 1);
}

}  // namespace slimreduce::kernels::cuda
