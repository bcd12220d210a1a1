// The per-bucket and per-value rules of the packed 4- and 2-bit min-max codes
// (kernels/quant_packed_minmax.h), host and device: quant_packed_minmax.cc's
// scalar path and kernels/cuda/quant_packed_minmax.cu call these, and the
// CPU's AVX2 path is tested against them bit for bit. A bucket's lo and hi
// come from integer keys (minmax_key: the same whatever order a min or max
// meets the values in); everything after is IEEE fp32 (a difference, a
// quotient, a product and a sum, kept apart: -ffp-contract=off, nvcc
// --fmad=false) on normal numbers: the 2^-100 floor keeps every step and
// quotient that matters away from subnormals, so DAZ/FTZ changes no code.
#pragma once

#include <cstdint>

#include "kernels/element_rules.h"
#include "kernels/quant8_minmax_rules.h"
#include "kernels/quant8_rules.h"
#include "kernels/quant_packed_rules.h"

namespace slimreduce::kernels {

// What one bucket codes with: its lo and hi (hi = lo = v in a marked flat
// bucket), step (0: flat), top (its largest finite code) and mark.
struct PackedMinmax {
  float lo, hi, step;
  int top;
  bool marked;
};

// The clip of a bucket whose hi - lo overflows: 2^126, so that hi - lo <= 2^127.
inline constexpr std::uint32_t kPackedMinmaxClipBits = 0x7e800000u;

// The NaN code, 2^bits - 1, in every bucket.
SR_HD inline int packed_minmax_nan_code(int bits) { return (1 << bits) - 1; }

// The largest finite code: 2^bits - 2, two less in a marked bucket.
SR_HD inline int packed_minmax_top(int bits, bool marked) { return (1 << bits) - (marked ? 4 : 2); }

// Whether a range is wide enough for a step: hi - lo >= 2^-100 (a subnormal,
// flushed or not, is below).
SR_HD inline bool packed_minmax_wide(float range) {
  return range >= bits_float(kQuant8TinyMaxBits);
}

// The step over [lo, hi] with codes 0..top: (hi - lo) / top, or 0.
SR_HD inline float packed_minmax_step(float lo, float hi, int top) {
  const float range = hi - lo;
  return top == 0 || !packed_minmax_wide(range) ? 0.0f : range / static_cast<float>(top);
}

// A bucket's parameters from its smallest and largest keys (minmax_lo_key /
// minmax_hi_key over its values: lo_key > hi_key when none is finite) and
// whether it holds an inf.
SR_HD inline PackedMinmax packed_minmax_params(std::int32_t lo_key, std::int32_t hi_key,
                                               bool marked, int bits) {
  float lo = 0.0f, hi = 0.0f;
  if (lo_key <= hi_key) lo = minmax_from_key(lo_key), hi = minmax_from_key(hi_key);
  // Values all below 2^-100 send 0, as absmax's tiny buckets (not lo, which
  // would err by up to twice the largest of them).
  const std::uint32_t lo_abs = float_bits(lo) & 0x7fffffffu, hi_abs = float_bits(hi) & 0x7fffffffu;
  if (lo_abs < kQuant8TinyMaxBits && hi_abs < kQuant8TinyMaxBits) lo = 0.0f, hi = 0.0f;
  if (!is_finite_bits(float_bits(hi - lo))) {  // beyond about +-2^127 of both signs
    const float clip = bits_float(kPackedMinmaxClipBits);
    lo = lo < -clip ? -clip : lo;
    hi = hi > clip ? clip : hi;
  }
  const int top = packed_minmax_top(bits, marked);
  const float step = packed_minmax_step(lo, hi, top);
  if (marked && step == 0.0f) {  // one finite value for all: the middle
    const float range = hi - lo;
    if (packed_minmax_wide(range)) lo = lo + range * 0.5f;
    hi = lo;
  }
  return {lo, hi, step, top, marked};
}

// The two fp32s a bucket stores (quant_packed_minmax.h): (lo, hi), (hi, lo)
// in a marked bucket with a step, (v, +inf) in a marked flat one.
SR_HD inline void packed_minmax_store(const PackedMinmax& p, float* a, float* b) {
  *a = p.marked && p.step != 0.0f ? p.hi : p.lo;
  *b = !p.marked ? p.hi : p.step != 0.0f ? p.lo : bits_float(0x7f800000u);
}

// The parameters back from the two stored fp32s: the same step as compress
// worked out, from the same lo and hi.
SR_HD inline PackedMinmax packed_minmax_load(float a, float b, int bits) {
  if (float_bits(b) == 0x7f800000u) return {a, a, 0.0f, packed_minmax_top(bits, true), true};
  const bool marked = a > b;
  const float lo = marked ? b : a, hi = marked ? a : b;
  const int top = packed_minmax_top(bits, marked);
  return {lo, hi, packed_minmax_step(lo, hi, top), top, marked};
}

// The code of x (in [0, 2^bits - 1]): NaN its own code, -inf and +inf the
// codes top + 1 and top + 2 (only in a marked bucket, which every bucket
// holding an inf is), a finite x clamp(rint((x - lo) / step), 0, top), or 0
// in a flat bucket. (x - lo overflows only in a clipped bucket, to +inf,
// which clamps to top as it should.) Stochastic `rounding` rounds the
// clamped (x - lo) / step with value i's draw instead (kernels/rounding.h).
SR_HD inline int packed_minmax_code(float x, const PackedMinmax& p, int bits,
                                    const Rounding& rounding = {}, std::uint64_t i = 0) {
  const std::uint32_t u = float_bits(x);
  if (!is_finite_bits(u)) {
    if (is_nan_bits(u)) return packed_minmax_nan_code(bits);
    return (u >> 31) ? p.top + 1 : p.top + 2;
  }
  if (p.step == 0.0f) return 0;
  const float limit = static_cast<float>(p.top);
  float r = (x - p.lo) / p.step;
  r = r < 0.0f ? 0.0f : r > limit ? limit : r;
  return rounding.stochastic ? stochastic_round(r, rounding_draw(rounding, i)) : quant8_round(r);
}

// The value of code c: the quiet NaN, -inf and +inf in a marked bucket, lo
// itself for 0, hi itself for top, else lo + c * step in fp32.
SR_HD inline float packed_minmax_decode(int c, const PackedMinmax& p, int bits) {
  if (c == packed_minmax_nan_code(bits)) return bits_float(kQuant8NanBits);
  if (c > p.top) return bits_float(c == p.top + 1 ? 0xff800000u : 0x7f800000u);
  if (c == 0) return p.lo;
  if (c == p.top) return p.hi;
  const float scaled = static_cast<float>(c) * p.step;
  return p.lo + scaled;
}

}  // namespace slimreduce::kernels
