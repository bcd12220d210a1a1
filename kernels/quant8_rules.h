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
#include "kernels/rounding.h"

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
// operations only: the same on every path whatever the rounding mode, and
// without a branch (which way a value rounds is as good as random).
SR_HD inline int quant8_round(float r) {
  const std::uint32_t u = float_bits(r);
  const std::uint32_t a = u & 0x7fffffffu;
  // |r| = significand / 2^shift; shift 17..24 for |r| in [0.5, 128). Below
  // 0.5 (zeros and subnormals too) a shift of 25 leaves 0 as it should.
  const std::uint32_t significand = (a & 0x7fffffu) | 0x800000u;
  const std::uint32_t field = a >> 23;
  const std::uint32_t shift = field >= 125u ? 150u - field : 25u;
  // Adding half - 1, and 1 more when the kept part is odd, carries exactly
  // when the dropped part is above half, or is half and the kept part odd.
  const std::uint32_t kept_odd = (significand >> shift) & 1u;
  const std::uint32_t magnitude = (significand + (1u << (shift - 1u)) - 1u + kept_odd) >> shift;
  const std::uint32_t negative = u >> 31;
  return static_cast<int>((magnitude ^ (0u - negative)) + negative);
}

// The code of x in a bucket of the given scale: inf, -inf and NaN have their
// own codes; a finite x codes clamp(rint(x / scale), -126, 126), or 0 when the
// scale is 0. (Clamping before rounding gives the same integer: the bounds
// are integers and rint is monotonic.) Stochastic `rounding` rounds the
// clamped x / scale with value i's draw instead (kernels/rounding.h).
SR_HD inline std::int8_t quant8_code(float x, float scale, const Rounding& rounding = {},
                                     std::uint64_t i = 0) {
  const std::uint32_t u = float_bits(x);
  if (!is_finite_bits(u)) {
    if (is_nan_bits(u)) return kQuant8Nan;
    return (u >> 31) ? kQuant8MinusInf : kQuant8PlusInf;
  }
  if (scale == 0.0f) return 0;
  constexpr float kMax = static_cast<float>(kQuant8MaxCode);
  float r = x / scale;
  r = r < -kMax ? -kMax : r > kMax ? kMax : r;
  if (rounding.stochastic)
    return static_cast<std::int8_t>(stochastic_round(r, rounding_draw(rounding, i)));
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
