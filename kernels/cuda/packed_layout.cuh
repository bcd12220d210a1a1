// Where the packed 4- and 2-bit codes' blocks keep their parts on the GPU,
// for both codes (quant_packed.cu's absmax, quant_packed_minmax.cu's min-max):
// b per-bucket headers (one fp32, or a pair), then each bucket's codes from a
// byte of its own, `stride` bytes a bucket and the last one shorter
// (kernels/quant_packed.h and quant_packed_minmax.h lay them out so).
#pragma once

#include <cstddef>

namespace slimreduce::kernels::cuda::detail {

struct Layout {
  std::size_t n, bucket, buckets, stride;
  int bits;
};

// Bytes of the codes of a bucket of len values.
__host__ __device__ inline std::size_t code_bytes(std::size_t len, int bits) {
  return (len * static_cast<std::size_t>(bits) + 7) / 8;
}

inline Layout layout_of(std::size_t n, std::size_t bucket, int bits) {
  return {n, bucket, n / bucket + (n % bucket != 0), code_bytes(bucket, bits), bits};
}

// One past the last value of the bucket that starts at `first`.
__device__ inline std::size_t end_of(const Layout& l, std::size_t first) {
  return l.n - first < l.bucket ? l.n : first + l.bucket;
}

}  // namespace slimreduce::kernels::cuda::detail
