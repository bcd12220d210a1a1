// 8-bit quantization on the CPU (SLIMREDUCE_COMPRESSOR=int8): the reference
// twin of the CUDA kernels. Every entry point has a scalar path and SIMD paths
// chosen at run time; all paths give the same bits.
//
// A block of n values is cut into buckets of `bucket` values (the last one
// shorter). Each bucket travels as one fp32 scale and one signed byte per
// value:
//   [scale of bucket 0 .. scale of bucket b-1][code 0 .. code n-1]
// so a block of n values takes quant8_bytes(n, bucket) = 4 b + n bytes. A block
// may sit at any address (one of several in a gathered buffer): its scales
// are read and written unaligned.
//
// Rules (shared with the GPU):
// - scale = m / 126, m the largest |x| over the bucket's finite values, in
//   fp32; when m < 2^-100 the scale is 0 and every finite value codes 0 (so
//   no step ever meets a subnormal scale, and DAZ/FTZ change no scale and no
//   code; a subnormal residual is another matter). A scale is +0 or in
//   [2^-100 / 126, FLT_MAX / 126] (those divisions in fp32): 126 times the
//   largest decodes to at most FLT_MAX, never to inf.
// - a finite x codes q = clamp(rint(x / scale), -126, 126), rint rounding to
//   nearest even, the division in fp32; it decodes as q * scale (fp32), q the
//   integer code: a code 0 is +0 whatever the sign of x (so with error
//   feedback acc - decoded is exact, and decoded + residual == acc).
// - codes 127 and -127 are +inf and -inf, code -128 is NaN (the positive
//   quiet NaN 0x7fc00000 when decoded; its payload is not kept): a value that
//   is not finite stays so, where it was, and never becomes a finite value or
//   spreads to its bucket's other values.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cast.h"
#include "kernels/rounding.h"

namespace slimreduce::kernels {

inline constexpr int kQuant8MaxCode = 126;
inline constexpr std::int8_t kQuant8PlusInf = 127;
inline constexpr std::int8_t kQuant8MinusInf = -127;
inline constexpr std::int8_t kQuant8Nan = -128;

// Buckets of a block of n values (ceil(n / bucket)). Every function here
// needs bucket >= 1.
std::size_t quant8_buckets(std::size_t n, std::size_t bucket);
// Bytes of a block of n values: 4 per bucket plus 1 per value.
std::size_t quant8_bytes(std::size_t n, std::size_t bucket);

// acc[i] = add_nan_first(in[i], residual[i]) (in[i] when residual == nullptr),
// coded into out (quant8_bytes(n, bucket) bytes). With residual:
// residual[i] = residual_after(acc[i], decoded[i]) (kernels/element_rules.h:
// 0 where the decoded value is not finite). n == 0 writes nothing.
// `rounding`: to nearest, or stochastic from its key (kernels/rounding.h).
void quant8_compress(const float* in, float* residual, std::size_t n, std::size_t bucket, void* out,
                     Isa isa = best_isa(), const Rounding& rounding = {});

// out[i] = the decoded value i of a block of n values.
void quant8_decompress(const void* block, std::size_t n, std::size_t bucket, float* out,
                       Isa isa = best_isa());

// dense[i] = add_nan_first(dense[i], decoded[i]): one rank's block added into a sum.
void quant8_accumulate(const void* block, std::size_t n, std::size_t bucket, float* dense,
                       Isa isa = best_isa());

// Whether a block of n values as it arrived from another rank is one that
// quant8_compress could have written: every scale +0 or in [2^-100 / 126,
// FLT_MAX / 126] (codes are any bytes; a -0, negative, subnormal, inf or NaN
// scale is refused). A bad scale would otherwise decode finite codes as inf
// or NaN.
bool quant8_valid(const void* block, std::size_t n, std::size_t bucket);

}  // namespace slimreduce::kernels
