// Block-scaled fp8 (SLIMREDUCE_COMPRESSOR=fp8) on the CPU: each value an
// e4m3 code (OCP FP8's E4M3: 4 exponent bits, 3 significand bits, largest
// 448), each bucket of `bucket` values (SLIMREDUCE_QUANT_BUCKET) scaled by a
// power of two stored as one byte, as MXFP8 scales blocks of 32 with its
// E8M0 exponent. A scalar path and an AVX2 path (an AVX-512 CPU runs AVX2's)
// chosen at run time; both give the same bits.
//
// Layout of a block of n values in b buckets: [b exponent bytes][n codes],
// so quant_fp8_bytes = b + n (1 + 1 / bucket bytes per value).
//
// Rules (kernels/quant_fp8_rules.h; shared with the GPU):
// - m, a bucket's largest finite |x|, gives its scale 2^s: s = e(m) - 8, one
//   more where m's significand passes 1.75, so that m / 2^s is in (224, 448];
//   but s at most 119 (448 2^119 < FLT_MAX), so that values past 1.75 2^127
//   saturate to it, the only ones that do. Stored as s + 127 (in [19, 246]).
//   A bucket with m below 2^-100 (or no finite value) stores 0 and codes
//   every finite value 0.
// - A finite x codes the e4m3 bits of x / 2^s (exact: a product by 2^-s),
//   rounded to nearest, ties to even, subnormals (k 2^-9) included; a code
//   whose magnitude is 0 is +0 (code 0), so 0x80, -0's bits, is free for
//   NaN, and e4m3fn's NaN bits 0x7f and 0xff are +inf and -inf. Every NaN
//   and inf comes out where it went in.
// - A code decodes to its e4m3 value times 2^s, exact in fp32.
// - Error bound: half an e4m3 step, |x| 2^-4 for a normal code, 2^(s-10)
//   below 2^(s-6); with 2^s < m / 224, at most max(|x| / 16, m 2^-17)
//   (values past 1.75 2^127: their distance to it, at most an eighth). So
//   unlike int8 (an absolute m / 252) the error is relative to each value,
//   at 3 significand bits: larger for the bucket's largest values, far
//   smaller for its small ones.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cast.h"

namespace slimreduce::kernels {

std::size_t quant_fp8_buckets(std::size_t n, std::size_t bucket);
std::size_t quant_fp8_bytes(std::size_t n, std::size_t bucket);

// acc[i] = add_nan_first(in[i], residual[i]) (in[i] when residual ==
// nullptr), coded into out; with residual, residual[i] =
// residual_after(acc[i], decoded[i]). n == 0 writes nothing.
void quant_fp8_compress(const float* in, float* residual, std::size_t n, std::size_t bucket,
                        void* out, Isa isa = best_isa());

// out[i] = the decoded value i of a block of n values.
void quant_fp8_decompress(const void* block, std::size_t n, std::size_t bucket, float* out,
                          Isa isa = best_isa());

// dense[i] = add_nan_first(dense[i], decoded[i]): one rank's block added into a sum.
void quant_fp8_accumulate(const void* block, std::size_t n, std::size_t bucket, float* dense,
                          Isa isa = best_isa());

// Whether a block from another rank has exponent bytes compress could have
// written (0, or in [19, 246]); codes are any bytes (each decodes to a
// finite value, NaN or an inf).
bool quant_fp8_valid(const void* block, std::size_t n, std::size_t bucket);

}  // namespace slimreduce::kernels
