// 4- and 2-bit min-max codes on the CPU (int4, int2, or quant at
// SLIMREDUCE_QUANT_BITS=4|2, by default; SLIMREDUCE_QUANT_CODES=absmax takes the
// absmax codes instead): beside the absmax codes
// of kernels/quant_packed.h, each bucket carries its smallest and largest
// finite values (lo, hi) and its values code as unsigned `bits`-bit steps
// over [lo, hi], so that a bucket away from 0 (values in [1000, 1001]) errs
// by a step of its range rather than of its magnitude. A scalar path and an
// AVX2 path chosen at run time; both give the same bits.
//
// A block of n values is cut into buckets of `bucket` values (the last one
// shorter). Layout:
//   [a 0, b 0, a 1, b 1 .. a b-1, b b-1][codes of bucket 0][codes of bucket 1]...
// a and b two fp32s per bucket (below), each bucket's codes from a byte of its
// own, value i the `bits`-bit field at bit i * bits, low bits first, the last
// byte's unused high bits 0 (as quant_packed.h). So a block takes
// quant_packed_minmax_bytes = 8 b + (b - 1) ceil(bucket bits / 8) + ceil(last bits / 8).
//
// Rules (kernels/quant_packed_minmax_rules.h; shared with the GPU):
// - lo and hi are the bucket's smallest and largest finite values (-0 below
//   +0), both +0 when it has none or both are below 2^-100 in magnitude (as
//   absmax's tiny buckets: it sends 0). A bucket that holds +inf or -inf is
//   *marked*. Should hi - lo overflow in fp32 (values beyond about +-2^127 of
//   both signs), lo and hi are clipped to [-2^126, 2^126] first.
// - top, the largest finite code: 2^bits - 2 (14, 2), or 2^bits - 4 (12, 0)
//   in a marked bucket, whose codes top + 1 and top + 2 are -inf and +inf.
//   The code 2^bits - 1 (15, 3) is NaN in every bucket. So every NaN and inf
//   comes out where it went in, and a plain sum of decoded values has them
//   where a plain sum of the inputs has them.
// - The step is (hi - lo) / top in fp32, or 0 (a *flat* bucket) when
//   hi - lo < 2^-100 or top is 0. A finite x codes
//   clamp(rint((x - lo) / step), 0, top), ties to even (0 in a flat bucket);
//   code 0 decodes to lo itself, top to hi itself, c between them to
//   lo + c * step in fp32 (a product, then a sum). So a constant bucket, and
//   every bucket's smallest and largest values, decode exactly.
// - A marked flat bucket (every marked 2-bit bucket) decodes every finite
//   value to one v: lo + (hi - lo) * 0.5, or lo when hi - lo < 2^-100.
// - What is stored: (lo, hi) in a bucket that is not marked; (hi, lo), so
//   a > b, in a marked bucket with a step; (v, +inf) in a marked flat one.
// - Error bound: one call moves a finite value of a bucket with a step by at
//   most step / 2 plus the rounding of the fp32 difference, quotient, product
//   and sum, which test_quant_packed_minmax.cc checks as
//   (hi - lo) / (2 top) + (hi - lo + M) 2^-21, M = max(|lo|, |hi|): about
//   (hi - lo) / 28 at 4 bits and (hi - lo) / 4 at 2 bits. Since
//   hi - lo <= 2 M and top is twice absmax's, that bound is never above
//   absmax's m / (2 top) (quant_packed.h), and far less away from 0; but 0
//   itself is no code, so an exact 0 in a bucket that also holds nonzero
//   values comes back off by up to half a step. A flat bucket errs by less
//   than 2^-100 (a tiny one by |x|); a marked flat bucket by up to (hi - lo) / 2; values clipped
//   past +-2^126 by their distance to the clip.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cast.h"
#include "kernels/rounding.h"

namespace slimreduce::kernels {

// Bytes of a block of n values (above); buckets as quant_packed_buckets counts them.
std::size_t quant_packed_minmax_bytes(std::size_t n, std::size_t bucket, int bits);

// As quant_packed_compress: acc[i] = add_nan_first(in[i], residual[i])
// (in[i] when residual == nullptr), coded into out; with residual,
// residual[i] = residual_after(acc[i], decoded[i]). n == 0 writes nothing.
// `rounding`: to nearest, or stochastic from its key (kernels/rounding.h).
void quant_packed_minmax_compress(const float* in, float* residual, std::size_t n,
                                  std::size_t bucket, int bits, void* out, Isa isa = best_isa(),
                                  const Rounding& rounding = {});

// out[i] = the decoded value i of a block of n values.
void quant_packed_minmax_decompress(const void* block, std::size_t n, std::size_t bucket, int bits,
                                    float* out, Isa isa = best_isa());

// dense[i] = add_nan_first(dense[i], decoded[i]): one rank's block added into a sum.
void quant_packed_minmax_accumulate(const void* block, std::size_t n, std::size_t bucket, int bits,
                                    float* dense, Isa isa = best_isa());

// Whether a block from another rank has pairs compress could have written:
// per bucket a finite a, and b either +inf or finite with a - b finite in
// fp32; a > b only at 4 bits with a - b >= 2^-100; a <= b with a's key no
// more than b's (+0 before -0 is refused); no pair of values both below
// 2^-100 in magnitude but (+0, +0); in (v, +inf) v is +0 or a normal float
// (a marked flat bucket's midpoint, or its lo, may lie below 2^-100). Codes
// are any bits: every code of a valid bucket decodes to a finite value or to
// its NaN or inf.
bool quant_packed_minmax_valid(const void* block, std::size_t n, std::size_t bucket, int bits);

}  // namespace slimreduce::kernels
