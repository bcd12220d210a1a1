// The per-value rules of the 8-bit quantization (kernels/quant8.h), host and
// device: quant8.cc's scalar path and kernels/cuda/quant8.cu both call these,
// and the CPU's SIMD paths are tested against them bit for bit. Like
// element_rules.h they lean on integer bit operations where they can; the two
// fp32 steps (a division, a product) are IEEE-rounded on every path, and the
// build keeps them apart from any add (-ffp-contract=off, nvcc --fmad=false).
#pragma once

#include <cstdint>

#include "kernels/element_rules.h"
#include "kernels/quant8.h"

namespace slimreduce::kernels {

// 2^-100 as fp32 bits: a bucket whose largest finite |x| is below it gets the
// scale 0.
inline constexpr std::uint32_t kQuant8TinyMaxBits = 0x0d800000u;
// The decoded NaN (code -128): the positive quiet NaN.
inline constexpr std::uint32_t kQuant8NanBits = 0x7fc00000u;

// |x| as its bits when x is finite, 0 for an inf or a NaN: the largest of
// these over a bucket is the bits of its largest finite |x| (positive floats
// order as their bits), and non-finite values never raise it.
SR_HD inline std::uint32_t quant8_finite_abs_bits(float x) {
  const std::uint32_t a = float_bits(x) & 0x7fffffffu;
  return a < 0x7f800000u ? a : 0u;
}

// The scale of a bucket from the bits of its largest finite |x|: m / 126 in
// fp32, or 0 when m < 2^-100.
SR_HD inline float quant8_scale(std::uint32_t max_abs_bits) {
  if (max_abs_bits < kQuant8TinyMaxBits) return 0.0f;
  return bits_float(max_abs_bits) / static_cast<float>(kQuant8MaxCode);
}

// r (|r| <= 126) rounded to the nearest integer, ties to even, with integer
// operations only: the same on every path whatever the rounding mode.
SR_HD inline int quant8_round(float r) {
  const std::uint32_t u = float_bits(r);
  const std::uint32_t a = u & 0x7fffffffu;
  const int exponent = static_cast<int>(a >> 23) - 127;
  if (exponent < -1) return 0;  // |r| < 0.5
  // |r| = significand / 2^(23 - exponent), the shift 17..24 for |r| in [0.5, 128).
  const std::uint32_t significand = (a & 0x7fffffu) | 0x800000u;
  const int magnitude =
      static_cast<int>(shift_right_rne(significand, static_cast<unsigned>(23 - exponent)));
  return (u >> 31) ? -magnitude : magnitude;
}

// The code of x in a bucket of the given scale: inf, -inf and NaN have their
// own codes; a finite x codes clamp(rint(x / scale), -126, 126), or 0 when the
// scale is 0. (Clamping before rounding gives the same integer: the bounds
// are integers and rint is monotonic.)
SR_HD inline std::int8_t quant8_code(float x, float scale) {
  const std::uint32_t u = float_bits(x);
  if (!is_finite_bits(u)) {
    if (is_nan_bits(u)) return kQuant8Nan;
    return (u >> 31) ? kQuant8MinusInf : kQuant8PlusInf;
  }
  if (scale == 0.0f) return 0;
  constexpr float kMax = static_cast<float>(kQuant8MaxCode);
  float r = x / scale;
  r = r < -kMax ? -kMax : r > kMax ? kMax : r;
  return static_cast<std::int8_t>(quant8_round(r));
}

// The value a code decodes to: q * scale in fp32, or inf, -inf, the quiet NaN.
SR_HD inline float quant8_decode(std::int8_t q, float scale) {
  if (q == kQuant8PlusInf) return bits_float(0x7f800000u);
  if (q == kQuant8MinusInf) return bits_float(0xff800000u);
  if (q == kQuant8Nan) return bits_float(kQuant8NanBits);
  return static_cast<float>(q) * scale;
}

}  // namespace slimreduce::kernels
