// The per-value rules of the packed 4- and 2-bit quantization
// (kernels/quant_packed.h), host and device: quant_packed.cc's scalar path
// calls these, and its SIMD path is tested against them bit for bit. As
// quant8_rules.h: integer bit operations where they can, one IEEE-rounded
// division and one product, kept apart from any add.
#pragma once

#include <cstdint>

#include "kernels/element_rules.h"
#include "kernels/quant8_rules.h"

namespace slimreduce::kernels {

// The largest finite code of a bucket: 2^(bits-1) - 1 (7 at 4 bits, 1 at 2
// bits), one less in a bucket that holds an inf, whose top codes are then
// +inf and -inf (6 at 4 bits; 0 at 2 bits, where every finite value codes 0).
SR_HD inline int quant_packed_top(int bits, bool marked) {
  return (1 << (bits - 1)) - 1 - (marked ? 1 : 0);
}

// Whether x marks its bucket: +inf or -inf (NaN has its own code).
SR_HD inline bool quant_packed_marks(float x) {
  return (float_bits(x) & 0x7fffffffu) == 0x7f800000u;
}

// The NaN code, -2^(bits-1): the one two's-complement code with no
// positive twin, NaN in every bucket, marked or not.
SR_HD inline int quant_packed_nan_code(int bits) { return -(1 << (bits - 1)); }

// What a bucket stores, from the bits of its largest finite |x|: m itself,
// or 0 when m < 2^-100 or top is 0 (no step ever meets a subnormal, and a
// marked 2-bit bucket sends no finite value).
SR_HD inline float quant_packed_max(std::uint32_t max_abs_bits, int top) {
  if (max_abs_bits < kQuant8TinyMaxBits || top == 0) return 0.0f;
  return bits_float(max_abs_bits);
}

// The step between codes: m / top in fp32 (0 for m = 0).
SR_HD inline float quant_packed_step(float max, int top) {
  return max == 0.0f ? 0.0f : max / static_cast<float>(top);
}

// The stored fp32: m, its sign bit set in a marked bucket (one that holds an
// inf). -0 is a marked bucket with no finite value sent.
SR_HD inline float quant_packed_stored(float max, bool marked) {
  return bits_float(float_bits(max) | (marked ? 0x80000000u : 0u));
}
SR_HD inline bool quant_packed_marked(float stored) { return (float_bits(stored) >> 31) != 0; }
SR_HD inline float quant_packed_unsigned(float stored) {
  return bits_float(float_bits(stored) & 0x7fffffffu);
}

// The code of x (an integer in [-2^(bits-1), 2^(bits-1) - 1]): NaN its own
// code, +-inf the codes +-(top + 1) (only in a marked bucket, which every
// bucket holding an inf is), a finite x clamp(rint(x / step), -top, top), or
// 0 when the step is 0. Stochastic `rounding` rounds the clamped x / step
// with value i's draw instead (kernels/rounding.h).
SR_HD inline int quant_packed_code(float x, float step, int top, int bits,
                                   const Rounding& rounding = {}, std::uint64_t i = 0) {
  const std::uint32_t u = float_bits(x);
  if (!is_finite_bits(u)) {
    if (is_nan_bits(u)) return quant_packed_nan_code(bits);
    return (u >> 31) ? -(top + 1) : top + 1;
  }
  if (step == 0.0f) return 0;
  const float limit = static_cast<float>(top);
  float r = x / step;
  r = r < -limit ? -limit : r > limit ? limit : r;
  return rounding.stochastic ? stochastic_round(r, rounding_draw(rounding, i)) : quant8_round(r);
}

// The value of code q: the quiet NaN, +-inf in a marked bucket, +-m itself for
// +-top (so a constant bucket, and every bucket's largest value, decode
// exactly), else q * step in fp32 (a code 0 is +0).
SR_HD inline float quant_packed_decode(int q, float max, float step, int top, bool marked,
                                       int bits) {
  if (q == quant_packed_nan_code(bits)) return bits_float(kQuant8NanBits);
  if (marked && q == top + 1) return bits_float(0x7f800000u);
  if (marked && q == -(top + 1)) return bits_float(0xff800000u);
  if (top != 0 && q == top) return max;
  if (top != 0 && q == -top) return -max;
  return static_cast<float>(q) * step;
}

// A code as its `bits` low bits, and back (sign-extended).
SR_HD inline std::uint32_t quant_packed_field(int q, int bits) {
  return static_cast<std::uint32_t>(q) & ((1u << bits) - 1u);
}
SR_HD inline int quant_packed_from_field(std::uint32_t field, int bits) {
  const std::uint32_t sign = 1u << (bits - 1);
  return static_cast<int>((field ^ sign)) - static_cast<int>(sign);
}

}  // namespace slimreduce::kernels
