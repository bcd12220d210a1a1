// The per-bucket and per-value rules of the block-scaled fp8 codes
// (kernels/quant_fp8.h), host and device: quant_fp8.cc's scalar path and
// kernels/cuda/quant_fp8.cu call these, and the CPU's AVX2 path is tested
// against them bit for bit. Integer bit operations throughout, but for two
// products by powers of two (exact): no rounding mode, DAZ/FTZ or
// contraction can change a code.
#pragma once

#include <cstdint>

#include "kernels/element_rules.h"
#include "kernels/quant8_rules.h"

namespace slimreduce::kernels {

// The codes that are not e4m3 values: -0's bits are NaN's code (a decoded 0
// is +0, as the other quantizers'), e4m3fn's NaN bits +inf and -inf.
inline constexpr std::uint8_t kFp8Nan = 0x80, kFp8PlusInf = 0x7f, kFp8MinusInf = 0xff;
// 2^-6 as fp32 bits: below it a value is an e4m3 subnormal, m * 2^-9.
inline constexpr std::uint32_t kFp8NormalBits = 0x3c800000u;

// A bucket's exponent byte from the bits of its largest finite |x| = m: 0
// (the bucket codes every finite value 0) when m < 2^-100, else s + 127 for
// the scale 2^s that brings m into (128, 448]: s = e(m) - 8, one more where
// m's significand is above 1.75 (m / 2^s would pass 448, e4m3's largest);
// but at most 119, so that 448 2^s stays below FLT_MAX: m past 1.75 2^127
// saturates to it. So s is in [-108, 119] and the byte in [19, 246], and
// every code of such a bucket decodes to a finite value (or its NaN, inf).
inline constexpr int kFp8MaxScaleExponent = 119;
SR_HD inline std::uint8_t fp8_exponent(std::uint32_t max_abs_bits) {
  if (max_abs_bits < kQuant8TinyMaxBits) return 0;
  int s = static_cast<int>(max_abs_bits >> 23) - 127 - 8;
  if ((max_abs_bits & 0x7fffffu) > 0x600000u) ++s;
  return static_cast<std::uint8_t>((s < kFp8MaxScaleExponent ? s : kFp8MaxScaleExponent) + 127);
}

// 2^s and 2^-s from the exponent byte (0: both 0).
SR_HD inline float fp8_scale(std::uint8_t exponent) {
  return exponent == 0 ? 0.0f : bits_float(static_cast<std::uint32_t>(exponent) << 23);
}
SR_HD inline float fp8_inverse(std::uint8_t exponent) {
  return exponent == 0 ? 0.0f : bits_float(static_cast<std::uint32_t>(254 - exponent) << 23);
}

// The e4m3 magnitude (7 bits) of |y| < 512, rounded to nearest, ties to
// even: below 2^-6 a subnormal m (rint(|y| 2^9), 8 being 2^-6's own code),
// else the fp32 bits rebiased (exponent 127 to 7) and rounded from 23
// significand bits to 3 (a carry moves into the exponent, as it should),
// then saturated at 448 (0x7e: only a bucket scaled at 2^119 meets it).
inline constexpr std::uint32_t kFp8MaxMagnitude = 0x7eu;
SR_HD inline std::uint32_t fp8_magnitude(std::uint32_t abs_bits) {
  if (abs_bits < kFp8NormalBits)
    return static_cast<std::uint32_t>(quant8_round(bits_float(abs_bits) * 512.0f));
  const std::uint32_t t = abs_bits - (120u << 23);
  const std::uint32_t rounded = (t + 0x7ffffu + ((t >> 20) & 1u)) >> 20;
  return rounded < kFp8MaxMagnitude ? rounded : kFp8MaxMagnitude;
}

// The code of x in a bucket of inverse scale `inv` (fp8_inverse): NaN and
// +-inf their own codes; a finite x the e4m3 bits of x * inv (exact), its
// sign bit set only for a nonzero magnitude (0x80 is NaN's).
SR_HD inline std::uint8_t fp8_code(float x, float inv) {
  const std::uint32_t u = float_bits(x);
  if (!is_finite_bits(u)) {
    if (is_nan_bits(u)) return kFp8Nan;
    return (u >> 31) ? kFp8MinusInf : kFp8PlusInf;
  }
  const std::uint32_t y = float_bits(x * inv);
  const std::uint32_t magnitude = fp8_magnitude(y & 0x7fffffffu);
  return static_cast<std::uint8_t>(magnitude == 0 ? 0u : magnitude | ((y >> 31) << 7));
}

// The e4m3 value of a code's 7-bit magnitude, as fp32 (exact).
SR_HD inline float fp8_unscaled(std::uint32_t magnitude) {
  const std::uint32_t e = magnitude >> 3, m = magnitude & 7u;
  return e == 0 ? static_cast<float>(m) * 0.001953125f  // 2^-9
                : bits_float(((e + 120u) << 23) | (m << 20));
}

// The value a code decodes to: NaN, +-inf, or +-e4m3 value * scale (exact).
SR_HD inline float fp8_decode(std::uint8_t c, float scale) {
  if (c == kFp8Nan) return bits_float(kQuant8NanBits);
  if (c == kFp8PlusInf) return bits_float(0x7f800000u);
  if (c == kFp8MinusInf) return bits_float(0xff800000u);
  const float v = fp8_unscaled(c & 0x7fu);
  return bits_float(float_bits(v) | (static_cast<std::uint32_t>(c >> 7) << 31)) * scale;
}

}  // namespace slimreduce::kernels
