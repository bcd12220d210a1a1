// 4- and 2-bit quantization on the GPU: the twin of kernels/quant_packed.cc,
// bit for bit, through the same per-value rules (kernels/quant_packed_rules.h).
// As quant8.cu, a bucket is the work of one group of threads: a warp for
// buckets of up to kWarpBucketMax values, a whole block past that. Compress
// reads its bucket twice (its largest finite |acc| and whether it holds an
// inf, then its codes); each thread then writes whole bytes of codes (two or
// four values each), so no two threads ever share a byte and no atomics are needed.
#include "kernels/cuda/bucket_groups.cuh"
#include "kernels/cuda/packed_layout.cuh"
#include "kernels/quant_packed_rules.h"

namespace slimreduce::kernels::cuda {
namespace {

using namespace detail;

// Blocks as kernels/cuda/packed_layout.cuh says; a block may sit at any
// address (a gathered buffer of several), so an fp32 is read and written
// whole only where it is aligned; codes are bytes.

template <int G>
__global__ void __launch_bounds__(kBlock)
    compress_kernel(const float* in, float* res, Layout l, unsigned char* out, Rounding rounding) {
  const int per_byte = 8 / l.bits;
  for_each_bucket<G>(l.buckets, [&](std::size_t j, unsigned rank) {
    const std::size_t first = j * l.bucket, last = end_of(l, first);
    std::uint32_t max_bits = 0, marks = 0;
    for (std::size_t i = first + rank; i < last; i += G) {
      const float acc = acc_at(in, res, i);
      max_bits = max(max_bits, quant8_finite_abs_bits(acc));
      marks |= quant_packed_marks(acc) ? 1u : 0u;
    }
    max_bits = group_max<G>(max_bits);
    const bool marked = group_max<G>(marks) != 0;
    const int top = quant_packed_top(l.bits, marked);
    const float m = quant_packed_max(max_bits, top), step = quant_packed_step(m, top);
    if (rank == 0) store_scale(out, j, quant_packed_stored(m, marked));
    unsigned char* codes = out + 4 * l.buckets + j * l.stride;
    const std::size_t bytes = code_bytes(last - first, l.bits);
    for (std::size_t b = rank; b < bytes; b += G) {
      unsigned byte = 0;  // the unused high bits of a bucket's last byte stay 0
      for (int k = 0; k < per_byte; ++k) {
        const std::size_t i = first + b * per_byte + k;
        if (i >= last) break;
        const float acc = acc_at(in, res, i);
        const int q = quant_packed_code(acc, step, top, l.bits, rounding, i);
        byte |= quant_packed_field(q, l.bits) << (k * l.bits);
        if (res) res[i] = residual_after(acc, quant_packed_decode(q, m, step, top, marked, l.bits));
      }
      codes[b] = static_cast<unsigned char>(byte);
    }
  });
}

// Accumulate: out[i] = add_nan_first(out[i], decoded); else out[i] = decoded / divisor.
template <int G, bool Accumulate>
__global__ void __launch_bounds__(kBlock)
    decode_kernel(const unsigned char* block, Layout l, float* out, int divisor) {
  const std::uint32_t field_mask = (1u << l.bits) - 1u;
  for_each_bucket<G>(l.buckets, [&](std::size_t j, unsigned rank) {
    const float stored = load_scale(block, j);
    const bool marked = quant_packed_marked(stored);
    const int top = quant_packed_top(l.bits, marked);
    const float m = quant_packed_unsigned(stored), step = quant_packed_step(m, top);
    const unsigned char* codes = block + 4 * l.buckets + j * l.stride;
    const std::size_t first = j * l.bucket, last = end_of(l, first);
    for (std::size_t i = first + rank; i < last; i += G) {
      const std::size_t bit = (i - first) * static_cast<std::size_t>(l.bits);
      const int q = quant_packed_from_field((codes[bit / 8] >> (bit % 8)) & field_mask, l.bits);
      const float value = quant_packed_decode(q, m, step, top, marked, l.bits);
      out[i] = Accumulate ? add_nan_first(out[i], value) : divide_keeping_nan(value, divisor);
    }
  });
}

bool valid_width(int bits) { return bits == 4 || bits == 2; }

}  // namespace

cudaError_t quant_packed_compress(const float* in, float* residual, std::size_t n,
                                  std::size_t bucket, int bits, void* out, cudaStream_t stream,
                                  const Rounding& rounding) {
  if (bucket == 0 || !valid_width(bits)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const Layout l = layout_of(n, bucket, bits);
  auto* block = static_cast<unsigned char*>(out);
  if (bucket <= kWarpBucketMax) {
    return launch<kWarp>(compress_kernel<kWarp>, l, stream, in, residual, l, block, rounding);
  }
  return launch<kBlock>(compress_kernel<kBlock>, l, stream, in, residual, l, block, rounding);
}

cudaError_t quant_packed_decompress(const void* block, std::size_t n, std::size_t bucket, int bits,
                                    float* out, int divisor, cudaStream_t stream) {
  if (bucket == 0 || !valid_width(bits) || divisor < 1) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const Layout l = layout_of(n, bucket, bits);
  const auto* bytes = static_cast<const unsigned char*>(block);
  if (bucket <= kWarpBucketMax) {
    return launch<kWarp>(decode_kernel<kWarp, false>, l, stream, bytes, l, out, divisor);
  }
  return launch<kBlock>(decode_kernel<kBlock, false>, l, stream, bytes, l, out, divisor);
}

cudaError_t quant_packed_accumulate(const void* block, std::size_t n, std::size_t bucket, int bits,
                                    float* dense, cudaStream_t stream) {
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
