// The rules of the 8-bit min-max codes (kernels/quant8_minmax.h), host and
// device: quant8_minmax.cc's scalar path and kernels/cuda/quant8_minmax.cu
// both call these, and the CPU's SIMD paths are tested against them bit for
// bit. A bucket's step and offset are worked out once per bucket, in double
// (exact here: products by powers of two and integers below 2^53) with
// integer rounding, so no rounding mode, DAZ/FTZ or contraction can change
// them; per value there is one exact product, an integer rint and, to
// decode, an exact product and sum (the build keeps them apart anyway:
// -ffp-contract=off, nvcc --fmad=false).
#pragma once

#include <cstdint>

#include "kernels/element_rules.h"
#include "kernels/quant8_minmax.h"
#include "kernels/quant8_rules.h"

namespace slimreduce::kernels {

// The largest k (step 2^k) the rules use, and the smallest (M >= 2^-100).
inline constexpr int kMinmaxMaxExponent = 120;  // 252 * 2^120 < FLT_MAX: c * step stays finite
inline constexpr int kMinmaxMinExponent = -123;
// The decoded NaN (code 255): the positive quiet NaN, as absmax's.
inline constexpr std::uint32_t kMinmaxNanBits = kQuant8NanBits;

// A float's bits as a signed key that orders as the floats do (-0 just below
// +0): the smallest and largest keys over a bucket give its lo and hi on
// every path, whatever order a SIMD min or max takes its operands in. The
// map is its own inverse.
SR_HD inline std::int32_t minmax_key(float x) {
  const std::uint32_t u = float_bits(x);
  return static_cast<std::int32_t>(
      u ^ (static_cast<std::uint32_t>(static_cast<std::int32_t>(u) >> 31) >> 1));
}
SR_HD inline float minmax_from_key(std::int32_t key) {
  const auto u = static_cast<std::uint32_t>(key);
  return bits_float(u ^ (static_cast<std::uint32_t>(key >> 31) >> 1));
}
// The keys of a value for the bucket's lo and hi: a value that is not finite
// takes part in neither.
inline constexpr std::int32_t kMinmaxNoLo = 0x7fffffff;
inline constexpr std::int32_t kMinmaxNoHi = -0x7fffffff - 1;
SR_HD inline std::int32_t minmax_lo_key(float x) {
  return is_finite_bits(float_bits(x)) ? minmax_key(x) : kMinmaxNoLo;
}
SR_HD inline std::int32_t minmax_hi_key(float x) {
  return is_finite_bits(float_bits(x)) ? minmax_key(x) : kMinmaxNoHi;
}

// What one bucket is coded with: step = 2^k and offset = j0 * step (both +0
// for a bucket that codes 0), inv = 2^-k (0 then).
struct MinmaxParams {
  float step, offset, inv;
  std::int32_t j0;
};

namespace minmax_detail {

SR_HD inline double pow2(int k) {  // 2^k for |k| <= 1022, from its bits
  std::uint64_t bits = static_cast<std::uint64_t>(1023 + k) << 52;
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}
SR_HD inline int exponent_of(double d) {  // ilogb of a normal double
  std::uint64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  return static_cast<int>((bits >> 52) & 0x7ffu) - 1023;
}
// floor and rint (ties to even) of |y| < 2^31, with integer conversions only.
SR_HD inline std::int64_t floor_int(double y) {
  const auto t = static_cast<std::int64_t>(y);  // toward zero
  return t - (static_cast<double>(t) > y ? 1 : 0);
}
SR_HD inline std::int64_t clamp_int(std::int64_t v, std::int64_t lo, std::int64_t hi) {
  return v < lo ? lo : v > hi ? hi : v;
}
SR_HD inline std::int64_t rint_int(double y) {
  const std::int64_t f = floor_int(y);
  const double rest = y - static_cast<double>(f);  // exact: [0, 1)
  return f + (rest > 0.5 || (rest == 0.5 && (f & 1)) ? 1 : 0);
}

}  // namespace minmax_detail

namespace minmax_detail {

// A grid of step 2^k for a bucket's [lo, hi]: its first point j0 (in steps)
// and whether it spans the bucket: hi rounded to nearest, or up where
// rounding is stochastic (so that rounding up never meets the clamp, which
// would bias hi down). Its points stay finite: j0 within
// [-top, top - 252], top = floor(FLT_MAX / 2^k), so a value within a step of
// -FLT_MAX or FLT_MAX (steps above 2^104) may meet the grid's last point.
struct Grid {
  std::int64_t j0, top;
  bool fits;
};
SR_HD inline Grid grid_at(double lo, double hi, int k, bool round_up) {
  const double inv = pow2(-k), limit = 3.4028234663852886e38 * inv;
  const std::int64_t top = limit < 0x1p30 ? floor_int(limit) : std::int64_t{1} << 30;
  const std::int64_t floor_lo = floor_int(lo * inv);
  const std::int64_t last = round_up ? -floor_int(-hi * inv) : rint_int(hi * inv);
  const std::int64_t j0 = clamp_int(floor_lo, -top, top - kMinmaxMaxCode);
  return {j0, top, (last < top ? last : top) - j0 <= kMinmaxMaxCode};
}

}  // namespace minmax_detail

// The step and offset of a bucket from its smallest and largest keys
// (minmax_lo_key / minmax_hi_key over its values): the rules of
// kernels/quant8_minmax.h. `round_up`: the grid holds ceil(hi / step), for
// stochastic rounding (Grid).
SR_HD inline MinmaxParams minmax_params(std::int32_t lo_key, std::int32_t hi_key,
                                        bool round_up = false) {
  using namespace minmax_detail;
  const MinmaxParams zero = {0.0f, 0.0f, 0.0f, 0};
  if (lo_key > hi_key) return zero;  // no finite value
  const float lo_f = minmax_from_key(lo_key), hi_f = minmax_from_key(hi_key);
  const std::uint32_t lo_abs = float_bits(lo_f) & 0x7fffffffu;
  const std::uint32_t hi_abs = float_bits(hi_f) & 0x7fffffffu;
  const std::uint32_t m_bits = lo_abs > hi_abs ? lo_abs : hi_abs;
  if (m_bits < kQuant8TinyMaxBits) return zero;
  const double lo = lo_f, hi = hi_f;
  int k = static_cast<int>(m_bits >> 23) - 127 - 23;  // 2^k = ulp(M)
  // A lower bound for the k that fits (2^k >= range / 253.5), then up.
  if (hi > lo && exponent_of(hi - lo) - 8 > k) k = exponent_of(hi - lo) - 8;
  Grid g = grid_at(lo, hi, k, round_up);
  while (!g.fits && k < kMinmaxMaxExponent) g = grid_at(lo, hi, ++k, round_up);
  if (!g.fits) {
    // Wider than any grid (values beyond about +-2^127 of both signs): the
    // grid centred on the bucket's midpoint, keeping 0 on it so that error
    // feedback stays exact, its ends clipped.
    const std::int64_t centred = rint_int((lo + hi) * 0.5 * pow2(-k)) - kMinmaxMaxCode / 2;
    g.j0 = clamp_int(clamp_int(centred, -kMinmaxMaxCode, 0), -g.top, g.top - kMinmaxMaxCode);
  }
  return {static_cast<float>(pow2(k)), static_cast<float>(static_cast<double>(g.j0) * pow2(k)),
          static_cast<float>(pow2(-k)), static_cast<std::int32_t>(g.j0)};
}

// rint (ties to even) of |r| < 2^24 as an integer: quant8_round below 2^23,
// and r itself (already whole) from there.
SR_HD inline int minmax_round(float r) {
  if ((float_bits(r) & 0x7fffffffu) >= 0x4b000000u) return static_cast<int>(r);
  return quant8_round(r);
}

// The code of x in a bucket: inf, -inf and NaN have their own; a finite x
// codes clamp(rint(x * inv) - j0, 0, 252) (0 in a bucket of step 0: inv 0).
// Stochastic `rounding` rounds x * inv with value i's draw instead
// (kernels/rounding.h), on a grid made for it (minmax_params' round_up), so
// that the clamp never cuts a code rounded up.
SR_HD inline std::uint8_t minmax_code(float x, const MinmaxParams& p, const Rounding& rounding = {},
                                      std::uint64_t i = 0) {
  const std::uint32_t u = float_bits(x);
  if (!is_finite_bits(u)) {
    if (is_nan_bits(u)) return kMinmaxNan;
    return (u >> 31) ? kMinmaxMinusInf : kMinmaxPlusInf;
  }
  const float r = x * p.inv;
  const int c =
      (rounding.stochastic ? stochastic_round(r, rounding_draw(rounding, i)) : minmax_round(r)) -
      p.j0;
  return static_cast<std::uint8_t>(c < 0 ? 0 : c > kMinmaxMaxCode ? kMinmaxMaxCode : c);
}

// The value a code decodes to: offset + c * step in fp32, or inf, -inf, NaN.
SR_HD inline float minmax_decode(std::uint8_t c, float step, float offset) {
  if (c == kMinmaxPlusInf) return bits_float(0x7f800000u);
  if (c == kMinmaxMinusInf) return bits_float(0xff800000u);
  if (c == kMinmaxNan) return bits_float(kMinmaxNanBits);
  const float scaled = static_cast<float>(c) * step;
  return offset + scaled;
}

}  // namespace slimreduce::kernels
