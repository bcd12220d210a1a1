// 4- and 2-bit quantization on the CPU (SLIMREDUCE_COMPRESSOR=int4, int2, or
// quant with SLIMREDUCE_QUANT_BITS=4|2): absmax codes, one fp32 per bucket
// (its largest |x|; the step is that / top), the codes packed densely. A
// scalar path and an AVX2 path chosen at run time; both give the same bits.
//
// A block of n values is cut into buckets of `bucket` values (the last one
// shorter). Layout:
//   [m of bucket 0 .. m of bucket b-1][codes of bucket 0][codes of bucket 1]...
// Each bucket's codes start on a byte: value i of a bucket is the `bits`-bit
// field at bit i * bits (low bits first: two 4-bit codes or four 2-bit codes
// per byte), and its last byte's unused high bits are 0. So a block takes
// quant_packed_bytes = 4 b + (b - 1) ceil(bucket bits / 8) + ceil(last bits / 8)
// bytes: dense wherever bucket * bits is a multiple of 8 (any even bucket at 4
// bits, any multiple of 4 at 2 bits; the default 512 is both).
//
// Rules (kernels/quant_packed_rules.h; shared with the GPU when it has twins):
// - codes are two's complement in `bits` bits; top = 2^(bits-1) - 1 (7 or 1);
//   the code -2^(bits-1) (-8 or -2) is NaN in every bucket.
// - a bucket that holds an inf (+ or -) is *marked*: its fp32 is stored with
//   its sign bit set, its top is one less (6 or 0), and the codes top + 1 and
//   -(top + 1) are +inf and -inf. So every NaN and inf comes out where it
//   went in, and a plain sum of the decoded values has them where a plain
//   sum of the inputs has them.
// - the fp32 of a bucket is m, its largest finite |x| (0 when m < 2^-100, or
//   in a marked 2-bit bucket, whose finite values all code 0 and wait in the
//   residual for the next call); the step is m / top in fp32.
// - a finite x codes clamp(rint(x / step), -top, top), ties to even; the codes
//   +-top decode to +-m itself, the others to q * step (+0 for q = 0). So a
//   constant bucket decodes exactly, as does every bucket's largest value.
// - Step bound: one quantization's error on a finite value is at most half a
//   step plus the rounding of the fp32 division and product, which
//   test_quant_packed.cc checks as m / (2 top) + m 2^-21: about m / 14 at 4
//   bits and m / 2 at 2 bits (m / 12 in a marked 4-bit bucket; a marked 2-bit
//   bucket sends 0, an error of up to m); below m = 2^-100, at most m.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cast.h"
#include "kernels/rounding.h"

namespace slimreduce::kernels {

// The widths this file codes (8 bits is kernels/quant8.h).
constexpr bool quant_packed_width(int bits) { return bits == 4 || bits == 2; }

// Buckets of a block of n values (ceil(n / bucket)); bucket >= 1.
std::size_t quant_packed_buckets(std::size_t n, std::size_t bucket);
// Bytes of a block of n values (above).
std::size_t quant_packed_bytes(std::size_t n, std::size_t bucket, int bits);

// acc[i] = add_nan_first(in[i], residual[i]) (in[i] when residual == nullptr),
// coded into out (quant_packed_bytes bytes). With residual:
// residual[i] = residual_after(acc[i], decoded[i]) (0 where the decoded value
// is not finite). n == 0 writes nothing. `rounding`: to nearest, or
// stochastic from its key (kernels/rounding.h).
void quant_packed_compress(const float* in, float* residual, std::size_t n, std::size_t bucket,
                           int bits, void* out, Isa isa = best_isa(),
                           const Rounding& rounding = {});

// out[i] = the decoded value i of a block of n values.
void quant_packed_decompress(const void* block, std::size_t n, std::size_t bucket, int bits,
                             float* out, Isa isa = best_isa());

// dense[i] = add_nan_first(dense[i], decoded[i]): one rank's block added into a sum.
void quant_packed_accumulate(const void* block, std::size_t n, std::size_t bucket, int bits,
                             float* dense, Isa isa = best_isa());

// Whether a block from another rank is one quant_packed_compress could have
// written: every bucket's fp32 +-0 or +-m with m finite and >= 2^-100 (a
// marked 2-bit bucket's only -0); codes are any bits.
bool quant_packed_valid(const void* block, std::size_t n, std::size_t bucket, int bits);

}  // namespace slimreduce::kernels
