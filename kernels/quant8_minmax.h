// 8-bit min-max codes on the CPU (SLIMREDUCE_QUANT_CODES=minmax): beside
// absmax (kernels/quant8.h), a step and an offset per bucket, so that the
// error is a step of the bucket's range (max - min) rather than of its
// largest magnitude, as CGX and ByteGrad do. The reference twin of the CUDA
// kernels (kernels/cuda/quant8_minmax.cu); every entry point has a scalar
// path and SIMD paths chosen at run time, all with the same bits.
//
// A block of n values is cut into buckets of `bucket` values (the last one
// shorter). Each bucket travels as an fp32 step and an fp32 offset, then one
// unsigned byte per value:
//   [step 0, offset 0, step 1, offset 1 .. step b-1, offset b-1][code 0 .. code n-1]
// so a block of n values takes quant8_minmax_bytes(n, bucket) = 8 b + n
// bytes. A block may sit at any address: steps and offsets are read and
// written unaligned.
//
// Rules (shared with the GPU, kernels/quant8_minmax_rules.h):
// - lo and hi are the bucket's smallest and largest finite values, M the
//   larger of |lo| and |hi|. When there is none, or M < 2^-100, the step and
//   the offset are +0 and every finite value codes 0 and decodes +0 (as
//   absmax's scale 0).
// - Otherwise the step is a power of two, 2^k: the smallest k >= e - 23
//   (e: M's binary exponent, so 2^k >= ulp(M)) for which
//   rint(hi / 2^k) - floor(lo / 2^k) <= 252; the offset is
//   j0 * 2^k, j0 = floor(lo / 2^k). So step <= max(2 (hi - lo) / 251, ulp(M)).
//   (k is at most 120, so that 252 steps stay finite, and j0 within
//   [ceil(-FLT_MAX / 2^k), floor(FLT_MAX / 2^k) - 252], so that every code
//   decodes to a finite value. A bucket no such grid spans, values beyond
//   about +-2^127 of both signs, gets k = 120 and a grid centred on its
//   midpoint, j0 = rint((lo + hi) / 2^121) - 126 kept in those bounds: its
//   extreme values are clipped to the grid's ends.)
// - A finite x codes c = clamp(rint(x / 2^k) - j0, 0, 252), rint rounding to
//   nearest even (x / 2^k is exact: a product by 2^-k); it decodes as
//   offset + c * step in fp32, which is exact: every decoded value is a
//   multiple of the step below 2^24 steps. So one call's error is at most
//   half a step (quant8_minmax_error_bound), a constant bucket decodes
//   exactly, and with error feedback acc - decoded is exact too
//   (decoded + residual == acc).
// - Why powers of two: an fp32 step (max - min) / 252 would save up to one
//   bit, but its products and sums round, so decoded + residual would not
//   give acc back and the decode would depend on contraction. Here no path
//   rounds anything but rint.
// - codes 253, 254 and 255 are +inf, -inf and NaN (the positive quiet NaN
//   0x7fc00000 when decoded): a value that is not finite stays so, where it
//   was, and never becomes a finite value or spreads to its bucket's others.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cast.h"
#include "kernels/rounding.h"

namespace slimreduce::kernels {

inline constexpr int kMinmaxMaxCode = 252;
inline constexpr std::uint8_t kMinmaxPlusInf = 253;
inline constexpr std::uint8_t kMinmaxMinusInf = 254;
inline constexpr std::uint8_t kMinmaxNan = 255;

// Bytes of a block of n values: 8 per bucket plus 1 per value (bucket >= 1;
// buckets as quant8_buckets counts them).
std::size_t quant8_minmax_bytes(std::size_t n, std::size_t bucket);

// The most one call may move a finite value of a bucket whose finite values
// span [lo, hi] (lo <= hi): half its step, max((hi - lo) / 251, ulp(M) / 2),
// M = max(|lo|, |hi|); M when M < 2^-100 (the bucket codes 0). Past 2^127 a
// whole step (a value within a step of +-FLT_MAX meets the grid's last finite
// point), and max(hi, 0) - min(lo, 0) for a bucket no grid spans.
double quant8_minmax_error_bound(float lo, float hi);

// As quant8_compress: acc[i] = add_nan_first(in[i], residual[i]) (in[i]
// when residual == nullptr), coded into out (quant8_minmax_bytes(n, bucket)
// bytes); with residual, residual[i] = residual_after(acc[i], decoded[i]).
// `rounding`: to nearest, or stochastic from its key (kernels/rounding.h).
void quant8_minmax_compress(const float* in, float* residual, std::size_t n, std::size_t bucket,
                            void* out, Isa isa = best_isa(), const Rounding& rounding = {});

// out[i] = the decoded value i of a block of n values.
void quant8_minmax_decompress(const void* block, std::size_t n, std::size_t bucket, float* out,
                              Isa isa = best_isa());

// dense[i] = add_nan_first(dense[i], decoded[i]): one rank's block added into a sum.
void quant8_minmax_accumulate(const void* block, std::size_t n, std::size_t bucket, float* dense,
                              Isa isa = best_isa());

// Whether a block of n values from another rank has steps and offsets that
// quant8_minmax_compress could have written: each bucket's step and offset
// both +0, or the step 2^k with k in [-123, 120] and the offset j * 2^k,
// j an integer in [-2^24, 2^24 - 1] (an offset of -0 is refused) with
// offset >= -FLT_MAX and offset + 252 * step <= FLT_MAX. Codes are any bytes:
// every code of a valid bucket decodes to a finite value or to its special.
bool quant8_minmax_valid(const void* block, std::size_t n, std::size_t bucket);

}  // namespace slimreduce::kernels
