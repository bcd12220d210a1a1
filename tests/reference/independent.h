// Independent references for what the library computes element by element:
// fp32 <-> binary16 and bfloat16, top-k selection and its payload, 8-, 4-
// and 2-bit quantization. A test that builds its expectation with the library's own
// kernels (kernels/) shares their bugs, so nothing here includes or calls
// kernels/: the arithmetic is written again from the formats' definitions,
// by other means (double arithmetic, frexp's exponent, powers of two made by
// ldexp and an explicit ties-to-even instead of the kernels' integer bit
// tricks on the fp32 pattern; a selection by one total order instead of a
// radix select). The rules that are choices of the library, not
// arithmetic (which NaN bits survive a cast, NaN ordering in top-k, the int8
// scale and code rules, the NaN rule of a sum), are restated from their
// documentation in kernels/element_rules.h, topk.h, quant8.h, quant8_minmax.h
// and quant_packed.h.
// The 4- and 2-bit min-max codes are restated beside this file, in
// independent_packed_minmax.h, by the same means.
// Slow and plain on purpose: tests and the host simulation's model only.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "tests/reference/largest_keys.h"

namespace slimreduce::reference {

inline std::uint32_t bits_of(float f) { return std::bit_cast<std::uint32_t>(f); }
inline float float_of(std::uint32_t u) { return std::bit_cast<float>(u); }

// ------------------------------------------------------- the NaN rules ----

// An x86 CPU's NaN from non-NaN operands (inf - inf): negative, quiet.
inline constexpr std::uint32_t kDefaultNanBits = 0xffc00000u;
// fp32's quiet bit: the fraction's top bit.
inline constexpr std::uint32_t kQuietBit = 1u << 22;

inline float quieted(float nan) { return float_of(bits_of(nan) | kQuietBit); }

// a + b with the library's NaN rule: a NaN operand comes out quieted, a's
// before b's; a NaN the sum itself makes is the x86 default NaN.
inline float add_nan_first(float a, float b) {
  if (std::isnan(a)) return quieted(a);
  if (std::isnan(b)) return quieted(b);
  const float sum = a + b;
  return std::isnan(sum) ? float_of(kDefaultNanBits) : sum;
}

// Error feedback keeps acc - sent, or 0 where what was sent is inf or NaN.
inline float residual_after(float acc, float sent) {
  return std::isfinite(sent) ? acc - sent : 0.0f;
}

// ncclAvg's division: by 1 nothing at all (a signalling NaN stays as it is), a
// NaN quieted, else the fp32 quotient.
inline float divide_keeping_nan(float x, int divisor) {
  if (divisor == 1) return x;
  if (std::isnan(x)) return quieted(x);
  return x / static_cast<float>(divisor);
}

// ------------------------------------------------ binary16 and bfloat16 ----

// v 2^k, exact: a power of two from a table made once by ldexp, so that the
// casts' hot loops (every rank's values in the host simulation's model) do
// not call libm for each value; ldexp itself outside the table's span.
inline double scaled(double v, int k) {
  constexpr int kSpan = 300;
  static const std::array<double, 2 * kSpan + 1> powers = [] {
    std::array<double, 2 * kSpan + 1> table{};
    for (int i = -kSpan; i <= kSpan; ++i) table[i + kSpan] = std::ldexp(1.0, i);
    return table;
  }();
  return k < -kSpan || k > kSpan ? std::ldexp(v, k) : v * powers[k + kSpan];
}

// v rounded to a whole number, ties to even, spelled out rather than left to
// nearbyint and the current rounding mode. v - whole is exact. For v in
// [0, 2^52) the whole part is the truncating conversion to an integer (no
// libm call: the host simulation's model rounds every value of every rank),
// whose lowest bit says even; elsewhere floor and whole / 2 (exact: an even
// whole number halves to a whole number).
inline double round_half_even(double v) {
  if (v >= 0.0 && v < 0x1p52) {
    const auto truncated = static_cast<std::int64_t>(v);
    const double whole = static_cast<double>(truncated);
    const double fraction = v - whole;
    // Up past the half, or at it from an odd whole number; without branches,
    // which random fractions mispredict.
    const bool up = (fraction > 0.5) | ((fraction == 0.5) & ((truncated & 1) != 0));
    return whole + static_cast<double>(up);
  }
  const double whole = std::floor(v);
  const double fraction = v - whole;
  if (fraction > 0.5) return whole + 1.0;
  if (fraction < 0.5) return whole;
  return std::floor(whole / 2.0) * 2.0 == whole ? whole : whole + 1.0;
}

// frexp's exponent of a finite a != 0: a = m 2^e with |m| in [0.5, 1). Read
// from a normal double's exponent field (every float is one), frexp otherwise.
inline int frexp_exponent(double a) {
  const auto field = static_cast<int>((std::bit_cast<std::uint64_t>(a) >> 52) & 0x7ffu);
  if (field == 0 || field == 0x7ff) {
    int e = 0;
    std::frexp(a, &e);
    return e;
  }
  return field - 1022;
}

// A binary interchange format with a hidden bit: exp_bits of exponent (bias
// 2^(exp_bits - 1) - 1, all ones for inf and NaN), mant_bits of fraction.
struct Format {
  int exp_bits;
  int mant_bits;

  int bias() const { return (1 << (exp_bits - 1)) - 1; }
  int emin() const { return 1 - bias(); }  // the smallest normal is 2^emin
  std::uint32_t all_ones() const { return (1u << exp_bits) - 1u; }
  std::uint32_t sign_bit() const { return 1u << (exp_bits + mant_bits); }
  double max_finite() const { return scaled(2.0 - scaled(1.0, -mant_bits), bias()); }
};
inline constexpr Format kFp16{5, 10};
inline constexpr Format kBf16{8, 7};

// a > 0 (a float's value, exact in a double) rounded to the format's
// precision, ties to even: mant_bits + 1 significant bits, or whole multiples
// of the smallest subnormal below the smallest normal. The exponent is left
// unbounded above: IEEE 754 judges overflow on exactly this result.
inline double round_to_format(double a, Format f) {
  const int e = frexp_exponent(a);  // a = m 2^e with m in [0.5, 1): the leading bit is 2^(e - 1)
  const double quantum = scaled(1.0, std::max(e - 1, f.emin()) - f.mant_bits);
  return round_half_even(a / quantum) * quantum;
}

// The encoding of v >= 0, a value the format holds exactly.
inline std::uint32_t encode_magnitude(double v, Format f) {
  if (v == 0.0) return 0;
  const int e = frexp_exponent(v);
  if (e - 1 < f.emin()) {  // subnormal: a count of the smallest subnormal
    return static_cast<std::uint32_t>(scaled(v, f.mant_bits - f.emin()));
  }
  const auto significand = static_cast<std::uint32_t>(scaled(v, f.mant_bits - (e - 1)));
  const auto field = static_cast<std::uint32_t>(e - 1 + f.bias());
  return field << f.mant_bits | (significand - (1u << f.mant_bits));
}

// x (not NaN) in the format: rounded to nearest even, inf past max_finite.
inline std::uint16_t narrow_number(float x, Format f) {
  const std::uint32_t sign = std::signbit(x) ? f.sign_bit() : 0u;
  const std::uint32_t inf = f.all_ones() << f.mant_bits;
  const double a = std::fabs(static_cast<double>(x));
  if (std::isinf(a)) return static_cast<std::uint16_t>(sign | inf);
  const double rounded = a == 0.0 ? 0.0 : round_to_format(a, f);
  if (rounded > f.max_finite()) return static_cast<std::uint16_t>(sign | inf);
  return static_cast<std::uint16_t>(sign | encode_magnitude(rounded, f));
}

// The value of a non-NaN encoding.
inline float widen_number(std::uint16_t h, Format f) {
  const std::uint32_t field = (h >> f.mant_bits) & f.all_ones();
  const std::uint32_t fraction = h & ((1u << f.mant_bits) - 1u);
  double a = INFINITY;
  if (field == 0) {
    a = scaled(static_cast<double>(fraction), f.emin() - f.mant_bits);
  } else if (field != f.all_ones()) {
    const double significand = static_cast<double>(fraction + (1u << f.mant_bits));
    a = scaled(significand, static_cast<int>(field) - f.bias() - f.mant_bits);
  }
  return static_cast<float>((h & f.sign_bit()) ? -a : a);
}

// NaN's sign and the top of its fraction, with the target's quiet bit set
// (the rule of Intel's F16C VCVTPS2PH, which the library uses for bf16 too).
inline std::uint16_t narrow_nan(float nan, Format f) {
  const std::uint32_t u = bits_of(nan);
  const std::uint32_t top = (u & 0x7fffffu) >> (23 - f.mant_bits);
  const std::uint32_t quiet = 1u << (f.mant_bits - 1);
  return static_cast<std::uint16_t>(((u >> 31) ? f.sign_bit() : 0u) | f.all_ones() << f.mant_bits |
                                    quiet | top);
}

inline std::uint16_t float_to_fp16(float x) {
  return std::isnan(x) ? narrow_nan(x, kFp16) : narrow_number(x, kFp16);
}

inline std::uint16_t float_to_bf16(float x) {
  return std::isnan(x) ? narrow_nan(x, kBf16) : narrow_number(x, kBf16);
}

// A binary16 NaN widens as F16C's VCVTPH2PS does: sign and payload kept at the
// top of the fraction, the quiet bit forced on.
inline float fp16_to_float(std::uint16_t h) {
  const std::uint32_t fraction = h & 0x3ffu;
  if ((h & 0x7c00u) == 0x7c00u && fraction != 0) {
    return float_of((h & 0x8000u ? 0x80000000u : 0u) | 0x7f800000u | kQuietBit | fraction << 13);
  }
  return widen_number(h, kFp16);
}

// A bfloat16 is the top half of an fp32: any pattern, NaNs too, widens as is.
inline float bf16_to_float(std::uint16_t h) {
  if ((h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0) return float_of(std::uint32_t{h} << 16);
  return widen_number(h, kBf16);
}

// ------------------------------------------ the 16-bit cast compressors ----

enum class Half { fp16, bf16 };

inline std::uint16_t narrow(Half h, float x) {
  return h == Half::fp16 ? float_to_fp16(x) : float_to_bf16(x);
}
// Every pattern's widening, made once by the functions above (their bits, NaN
// payloads too): the model widens each value of every rank's wire again and again.
inline float widen(Half h, std::uint16_t b) {
  auto table_of = [](float (*widen_one)(std::uint16_t)) {
    std::vector<std::uint32_t> table(1u << 16);
    for (std::uint32_t i = 0; i < table.size(); ++i)
      table[i] = bits_of(widen_one(static_cast<std::uint16_t>(i)));
    return table;
  };
  static const std::vector<std::uint32_t> fp16 = table_of(fp16_to_float);
  static const std::vector<std::uint32_t> bf16 = table_of(bf16_to_float);
  return float_of((h == Half::fp16 ? fp16 : bf16)[b]);
}

// out = narrow(acc), acc = in + residual; residual = what was lost.
inline void cast_compress(Half h, const float* in, float* residual, std::uint16_t* out,
                          std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const float acc = residual ? add_nan_first(in[i], residual[i]) : in[i];
    out[i] = narrow(h, acc);
    if (residual) residual[i] = residual_after(acc, widen(h, out[i]));
  }
}

// One ring step: the two values summed in fp32, rounded once.
inline void cast_accumulate(Half h, const std::uint16_t* in, std::uint16_t* inout, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    inout[i] = narrow(h, add_nan_first(widen(h, in[i]), widen(h, inout[i])));
  }
}

inline void cast_decompress(Half h, const std::uint16_t* in, float* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = widen(h, in[i]);
}

// ------------------------------------------------------------- top-k ----

// k = ceil(ratio n) kept between 1 and n (0 for n == 0); a product a hair
// above a whole number (0.07 x 100 = 7.000000000000001 in double) counts as
// that number, within a relative 1e-12 (kernels/topk.cc's rule).
inline std::size_t topk_count(std::size_t n, double ratio) {
  if (n == 0) return 0;
  const double x = ratio * static_cast<double>(n);
  if (std::isnan(x) || x <= 1.0) return 1;
  if (x >= static_cast<double>(n)) return n;
  const double whole = std::floor(x);
  const bool a_hair_above = x - whole <= x * 1e-12;
  return std::min(n, static_cast<std::size_t>(a_hair_above ? whole : whole + 1.0));
}

// Whether a ranks above b: numbers by |x| (-0 ties +0), inf above every
// number, NaN above inf so that no NaN is dropped unseen; NaNs among
// themselves by their payloads (the kernels order by the 31 magnitude bits).
inline bool larger_magnitude(float a, float b) {
  const auto rank = [](float x) { return std::isnan(x) ? 2 : std::isinf(x) ? 1 : 0; };
  if (rank(a) != rank(b)) return rank(a) > rank(b);
  if (rank(a) == 2) return (bits_of(a) & 0x7fffffu) > (bits_of(b) & 0x7fffffu);
  return std::fabs(a) > std::fabs(b);
}

// The k indices kept, ascending: the first k of the order by magnitude in
// which equal magnitudes keep index order, so ties go to the lower index
// (what a stable sort by magnitude would keep; a selection by that total
// order, since the host simulation's model selects every rank's k each call).
// Each value's place in that order is worked out once, into one 64-bit key
// that the selection compares in place, largest first: larger_magnitude's
// order in the high half (NaNs by payload above inf above numbers by |x|,
// whose fp32 bits order as the values do), the index's complement in the low
// half (the lower index larger). Comparing values through their indices, and
// then a four-field key, was the larger part of a top-k model's time in the
// host simulation, which selects every rank's k each call (largest_keys.h
// says how the k largest keys are found).
inline std::vector<std::uint32_t> topk_select(const std::vector<float>& acc, std::size_t k) {
  std::vector<std::uint64_t> keys(acc.size());
  for (std::size_t i = 0; i < acc.size(); ++i) {
    const float x = acc[i];
    const std::uint32_t first =
        std::isnan(x) ? 0x80000000u | (bits_of(x) & 0x7fffffu) : bits_of(std::fabs(x));
    keys[i] =
        std::uint64_t{first} << 32 | static_cast<std::uint32_t>(~static_cast<std::uint32_t>(i));
  }
  const std::size_t kept = std::min(k, keys.size());
  move_largest_to_front(keys, kept);
  std::vector<std::uint32_t> order(kept);
  for (std::size_t j = 0; j < kept; ++j) order[j] = ~static_cast<std::uint32_t>(keys[j]);
  std::sort(order.begin(), order.end());
  return order;
}

// One rank's payload: ascending indices and each value's bits as it travels
// (fp32, or binary16 in the low half).
struct TopkPayload {
  bool fp16 = false;
  std::vector<std::uint32_t> index;
  std::vector<std::uint32_t> value_bits;

  float value(std::size_t j) const {
    return fp16 ? fp16_to_float(static_cast<std::uint16_t>(value_bits[j]))
                : float_of(value_bits[j]);
  }

  // The wire layout: k uint32 indices, then k values of 4 or 2 bytes.
  std::vector<std::uint8_t> bytes() const {
    const std::size_t width = fp16 ? 2 : 4;
    std::vector<std::uint8_t> out(index.size() * (4 + width));
    for (std::size_t j = 0; j < index.size(); ++j) {
      std::memcpy(out.data() + 4 * j, &index[j], 4);
      const auto half = static_cast<std::uint16_t>(value_bits[j]);
      std::memcpy(out.data() + 4 * index.size() + width * j,
                  fp16 ? static_cast<const void*>(&half) : &value_bits[j], width);
    }
    return out;
  }
};

// acc = in + residual; the k entries of largest magnitude are sent; with a
// residual, it becomes acc less what was sent (all of acc where nothing was).
// k == 0 or n == 0 sends nothing and leaves the residual alone.
inline TopkPayload topk_compress(const float* in, float* residual, std::size_t n, std::size_t k,
                                 bool fp16_values) {
  TopkPayload p;
  p.fp16 = fp16_values;
  if (n == 0 || k == 0) return p;
  std::vector<float> acc(n);
  for (std::size_t i = 0; i < n; ++i) acc[i] = residual ? add_nan_first(in[i], residual[i]) : in[i];
  p.index = topk_select(acc, k);
  if (residual) std::copy(acc.begin(), acc.end(), residual);
  for (std::size_t j = 0; j < p.index.size(); ++j) {
    const float a = acc[p.index[j]];
    p.value_bits.push_back(fp16_values ? float_to_fp16(a) : bits_of(a));
    if (residual) residual[p.index[j]] = residual_after(a, p.value(j));
  }
  return p;
}

// dense[index] += value, entry by entry, with the NaN rule of a sum.
inline void topk_accumulate(const TopkPayload& p, float* dense) {
  for (std::size_t j = 0; j < p.index.size(); ++j) {
    dense[p.index[j]] = add_nan_first(dense[p.index[j]], p.value(j));
  }
}

inline std::size_t topk_payload_bytes(std::size_t k, bool fp16_values) {
  return k * (4 + (fp16_values ? 2 : 4));
}

// -------------------------------------------------------------- int8 ----

// Codes: -126..126 scale a value; 127 and -127 are +inf and -inf, -128 NaN.
inline constexpr int kQuant8MaxCode = 126;

// A bucket's scale: its largest finite |x| over 126 in fp32, or 0 where that
// is below 2^-100 (so that no scale is subnormal).
inline float quant8_scale(const float* x, std::size_t len) {
  float largest = 0.0f;
  for (std::size_t i = 0; i < len; ++i) {
    if (std::isfinite(x[i])) largest = std::max(largest, std::fabs(x[i]));
  }
  if (largest < std::ldexp(1.0f, -100)) return 0.0f;
  return largest / static_cast<float>(kQuant8MaxCode);
}

// x / scale (an fp32 quotient) to the nearest whole number, ties to even, at
// most 126 in size; non-finite values get their own codes.
inline std::int8_t quant8_code(float x, float scale) {
  if (std::isnan(x)) return -128;
  if (std::isinf(x)) return x > 0 ? 127 : -127;
  if (scale == 0.0f) return 0;
  const float r = x / scale;
  const double q = std::min<double>(kQuant8MaxCode, round_half_even(std::fabs(r)));
  return static_cast<std::int8_t>(r < 0 ? -q : q);
}

// q * scale in fp32; a code 0 is +0 whatever was coded; NaN is 0x7fc00000.
inline float quant8_decode(std::int8_t q, float scale) {
  if (q == 127) return INFINITY;
  if (q == -127) return -INFINITY;
  if (q == -128) return float_of(0x7fc00000u);
  if (q == 0) return 0.0f;
  return static_cast<float>(q) * scale;
}

inline std::size_t quant8_bytes(std::size_t n, std::size_t bucket) {
  return 4 * ((n + bucket - 1) / bucket) + n;
}

// A block: every bucket's fp32 scale, then one code per value. With a
// residual: acc = in + residual is coded and residual becomes what was lost.
inline std::vector<std::uint8_t> quant8_compress(const float* in, float* residual, std::size_t n,
                                                 std::size_t bucket) {
  const std::size_t buckets = (n + bucket - 1) / bucket;
  std::vector<std::uint8_t> block(quant8_bytes(n, bucket));
  std::vector<float> acc;  // each bucket's in + residual, one allocation for all
  for (std::size_t b = 0; b < buckets; ++b) {
    const std::size_t first = b * bucket, len = std::min(bucket, n - first);
    acc.assign(in + first, in + first + len);
    for (std::size_t i = 0; residual && i < len; ++i) {
      acc[i] = add_nan_first(acc[i], residual[first + i]);
    }
    const float scale = quant8_scale(acc.data(), len);
    std::memcpy(block.data() + 4 * b, &scale, 4);
    for (std::size_t i = 0; i < len; ++i) {
      const std::int8_t q = quant8_code(acc[i], scale);
      std::memcpy(block.data() + 4 * buckets + first + i, &q, 1);
      if (residual) residual[first + i] = residual_after(acc[i], quant8_decode(q, scale));
    }
  }
  return block;
}

// The values a block of n decodes to.
inline std::vector<float> quant8_decompress(const std::uint8_t* block, std::size_t n,
                                            std::size_t bucket) {
  const std::size_t buckets = (n + bucket - 1) / bucket;
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    float scale;
    std::memcpy(&scale, block + 4 * (i / bucket), 4);
    std::int8_t q;
    std::memcpy(&q, block + 4 * buckets + i, 1);
    out[i] = quant8_decode(q, scale);
  }
  return out;
}

// dense += the block's values, with the NaN rule of a sum.
inline void quant8_accumulate(const std::uint8_t* block, std::size_t n, std::size_t bucket,
                              float* dense) {
  const std::vector<float> values = quant8_decompress(block, n, bucket);
  for (std::size_t i = 0; i < n; ++i) dense[i] = add_nan_first(dense[i], values[i]);
}

// ------------------------------------------------------ int4, int2 ----

// Restated from kernels/quant_packed.h: codes are two's complement in `bits`
// bits; -2^(bits-1) is NaN; top = 2^(bits-1) - 1, one less in a bucket that
// holds an inf ("marked": its fp32 stored with the sign bit set), whose codes
// +-(top + 1) are then +-inf; a bucket stores m, its largest finite |x| (0
// below 2^-100, or where top is 0); the step is m / top; a finite x codes
// rint(clamp(x / step, -top, top)), ties to even; +-top decode to +-m, the
// rest to q * step. Each bucket's codes start on a byte, low bits first.
struct PackedBucket {
  bool marked = false;
  int top = 0;
  float m = 0.0f, step = 0.0f;
};

inline PackedBucket packed_bucket(const float* x, std::size_t len, int bits) {
  PackedBucket b;
  float largest = 0.0f;
  for (std::size_t i = 0; i < len; ++i) {
    b.marked = b.marked || std::isinf(x[i]);
    if (std::isfinite(x[i])) largest = std::max(largest, std::fabs(x[i]));
  }
  b.top = (1 << (bits - 1)) - 1 - (b.marked ? 1 : 0);
  b.m = b.top == 0 || largest < std::ldexp(1.0f, -100) ? 0.0f : largest;
  b.step = b.m == 0.0f ? 0.0f : b.m / static_cast<float>(b.top);
  return b;
}

inline int packed_code(float x, const PackedBucket& b, int bits) {
  if (std::isnan(x)) return -(1 << (bits - 1));
  if (std::isinf(x)) return x > 0 ? b.top + 1 : -(b.top + 1);
  if (b.step == 0.0f) return 0;
  const float r = std::clamp(x / b.step, -static_cast<float>(b.top), static_cast<float>(b.top));
  const double q = round_half_even(std::fabs(r));
  return static_cast<int>(r < 0 ? -q : q);
}

inline float packed_decode(int q, const PackedBucket& b, int bits) {
  if (q == -(1 << (bits - 1))) return float_of(0x7fc00000u);
  if (b.marked && q == b.top + 1) return INFINITY;
  if (b.marked && q == -(b.top + 1)) return -INFINITY;
  if (b.top != 0 && q == b.top) return b.m;
  if (b.top != 0 && q == -b.top) return -b.m;
  return static_cast<float>(q) * b.step;
}

// Bytes of a bucket's codes, and of a block of n values.
inline std::size_t packed_code_bytes(std::size_t len, int bits) { return (len * bits + 7) / 8; }
inline std::size_t quant_packed_bytes(std::size_t n, std::size_t bucket, int bits) {
  std::size_t bytes = 0;
  for (std::size_t first = 0; first < n; first += bucket)
    bytes += 4 + packed_code_bytes(std::min(bucket, n - first), bits);
  return bytes;
}

inline std::vector<std::uint8_t> quant_packed_compress(const float* in, float* residual,
                                                       std::size_t n, std::size_t bucket,
                                                       int bits) {
  const std::size_t buckets = (n + bucket - 1) / bucket;
  std::vector<std::uint8_t> block(quant_packed_bytes(n, bucket, bits), 0);
  std::size_t codes_at = 4 * buckets;
  std::vector<float> acc;  // each bucket's in + residual, one allocation for all
  for (std::size_t j = 0; j < buckets; ++j) {
    const std::size_t first = j * bucket, len = std::min(bucket, n - first);
    acc.assign(in + first, in + first + len);
    for (std::size_t i = 0; residual && i < len; ++i)
      acc[i] = add_nan_first(acc[i], residual[first + i]);
    const PackedBucket b = packed_bucket(acc.data(), len, bits);
    const float stored = b.marked ? -b.m : b.m;  // -0 in a marked bucket with m = 0
    std::memcpy(block.data() + 4 * j, &stored, 4);
    for (std::size_t i = 0; i < len; ++i) {
      const int q = packed_code(acc[i], b, bits);
      const auto field = static_cast<unsigned>(q) & ((1u << bits) - 1u);
      block[codes_at + i * bits / 8] |= static_cast<std::uint8_t>(field << (i * bits % 8));
      if (residual) residual[first + i] = residual_after(acc[i], packed_decode(q, b, bits));
    }
    codes_at += packed_code_bytes(len, bits);
  }
  return block;
}

inline std::vector<float> quant_packed_decompress(const std::uint8_t* block, std::size_t n,
                                                  std::size_t bucket, int bits) {
  const std::size_t buckets = (n + bucket - 1) / bucket;
  std::vector<float> out(n);
  std::size_t codes_at = 4 * buckets;
  for (std::size_t j = 0; j < buckets; ++j) {
    const std::size_t first = j * bucket, len = std::min(bucket, n - first);
    float stored;
    std::memcpy(&stored, block + 4 * j, 4);
    PackedBucket b;
    b.marked = std::signbit(stored);
    b.top = (1 << (bits - 1)) - 1 - (b.marked ? 1 : 0);
    b.m = std::fabs(stored);
    b.step = b.m == 0.0f ? 0.0f : b.m / static_cast<float>(b.top);
    for (std::size_t i = 0; i < len; ++i) {
      const unsigned field =
          (block[codes_at + i * bits / 8] >> (i * bits % 8)) & ((1u << bits) - 1u);
      const int q = field >= (1u << (bits - 1)) ? static_cast<int>(field) - (1 << bits)
                                                : static_cast<int>(field);
      out[first + i] = packed_decode(q, b, bits);
    }
    codes_at += packed_code_bytes(len, bits);
  }
  return out;
}

inline void quant_packed_accumulate(const std::uint8_t* block, std::size_t n, std::size_t bucket,
                                    int bits, float* dense) {
  const std::vector<float> values = quant_packed_decompress(block, n, bucket, bits);
  for (std::size_t i = 0; i < n; ++i) dense[i] = add_nan_first(dense[i], values[i]);
}

// ------------------------------------------------------ int8 min-max ----

// Codes 0..252 are offset + code * step; 253, 254, 255 are +inf, -inf, NaN.
// Restated from kernels/quant8_minmax.h with libm (ldexp, floor, frexp) and
// long arithmetic, not the kernels' bit tricks.
inline constexpr int kMinmaxMaxCode = 252;

struct MinmaxBucket {
  float step = 0.0f, offset = 0.0f;
  long j0 = 0;
  int k = 0;
};

// -0 orders below +0 for the bucket's lo and hi.
inline bool minmax_less(float a, float b) {
  return a < b || (a == b && std::signbit(a) && !std::signbit(b));
}

inline MinmaxBucket minmax_bucket(const float* x, std::size_t len) {
  bool any = false;
  float lo = 0.0f, hi = 0.0f;
  for (std::size_t i = 0; i < len; ++i) {
    if (!std::isfinite(x[i])) continue;
    if (!any || minmax_less(x[i], lo)) lo = x[i];
    if (!any || minmax_less(hi, x[i])) hi = x[i];
    any = true;
  }
  const double m = std::max(std::fabs(double{lo}), std::fabs(double{hi}));
  if (!any || m < std::ldexp(1.0, -100)) return {};
  int e = 0;
  std::frexp(m, &e);  // m in [2^(e-1), 2^e)
  // Grids of 2^k stop at their last finite points, +-floor(FLT_MAX / 2^k).
  const auto top_at = [](int k) {
    return static_cast<long>(std::min(std::floor(std::ldexp(double{FLT_MAX}, -k)), 1e12));
  };
  const auto j0_at = [&](int k) {
    return std::clamp(static_cast<long>(std::floor(std::ldexp(double{lo}, -k))), -top_at(k),
                      top_at(k) - kMinmaxMaxCode);
  };
  const auto fits = [&](int k) {
    const long hi_k = static_cast<long>(round_half_even(std::ldexp(double{hi}, -k)));
    return std::min(hi_k, top_at(k)) - j0_at(k) <= kMinmaxMaxCode;
  };
  int k = e - 24;  // ulp(m) = 2^(e-24)
  while (!fits(k) && k < 120) ++k;
  MinmaxBucket b;
  b.k = k, b.j0 = j0_at(k);
  if (!fits(k)) {  // no grid spans it: centred on the midpoint, 0 kept on it
    const double mid = std::ldexp(double{lo}, -k) / 2 + std::ldexp(double{hi}, -k) / 2;
    b.j0 = std::clamp(static_cast<long>(round_half_even(mid)) - kMinmaxMaxCode / 2,
                      -static_cast<long>(kMinmaxMaxCode), 0L);
  }
  b.step = static_cast<float>(std::ldexp(1.0, k));
  b.offset = static_cast<float>(std::ldexp(static_cast<double>(b.j0), k));
  return b;
}

inline std::uint8_t minmax_code(float x, const MinmaxBucket& b) {
  if (std::isnan(x)) return 255;
  if (std::isinf(x)) return x > 0 ? 253 : 254;
  if (b.step == 0.0f) return 0;
  const long c = static_cast<long>(round_half_even(std::ldexp(double{x}, -b.k))) - b.j0;
  return static_cast<std::uint8_t>(std::clamp<long>(c, 0, kMinmaxMaxCode));
}

// offset + code * step, worked out in double and rounded once to fp32 (the
// kernels' two fp32 steps are exact for what compress writes).
inline float minmax_decode(std::uint8_t c, float step, float offset) {
  if (c == 253) return INFINITY;
  if (c == 254) return -INFINITY;
  if (c == 255) return float_of(0x7fc00000u);
  return static_cast<float>(double{offset} + double{step} * c);
}

inline std::size_t quant8_minmax_bytes(std::size_t n, std::size_t bucket) {
  return 8 * ((n + bucket - 1) / bucket) + n;
}

// A block: each bucket's step and offset (fp32 pairs), then one code per value.
inline std::vector<std::uint8_t> quant8_minmax_compress(const float* in, float* residual,
                                                        std::size_t n, std::size_t bucket) {
  const std::size_t buckets = (n + bucket - 1) / bucket;
  std::vector<std::uint8_t> block(quant8_minmax_bytes(n, bucket));
  std::vector<float> acc;  // each bucket's in + residual, one allocation for all
  for (std::size_t b = 0; b < buckets; ++b) {
    const std::size_t first = b * bucket, len = std::min(bucket, n - first);
    acc.assign(in + first, in + first + len);
    for (std::size_t i = 0; residual && i < len; ++i) {
      acc[i] = add_nan_first(acc[i], residual[first + i]);
    }
    const MinmaxBucket mb = minmax_bucket(acc.data(), len);
    std::memcpy(block.data() + 8 * b, &mb.step, 4);
    std::memcpy(block.data() + 8 * b + 4, &mb.offset, 4);
    for (std::size_t i = 0; i < len; ++i) {
      const std::uint8_t c = minmax_code(acc[i], mb);
      block[8 * buckets + first + i] = c;
      if (residual)
        residual[first + i] = residual_after(acc[i], minmax_decode(c, mb.step, mb.offset));
    }
  }
  return block;
}

inline std::vector<float> quant8_minmax_decompress(const std::uint8_t* block, std::size_t n,
                                                   std::size_t bucket) {
  const std::size_t buckets = (n + bucket - 1) / bucket;
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    float step, offset;
    std::memcpy(&step, block + 8 * (i / bucket), 4);
    std::memcpy(&offset, block + 8 * (i / bucket) + 4, 4);
    out[i] = minmax_decode(block[8 * buckets + i], step, offset);
  }
  return out;
}

inline void quant8_minmax_accumulate(const std::uint8_t* block, std::size_t n, std::size_t bucket,
                                     float* dense) {
  const std::vector<float> values = quant8_minmax_decompress(block, n, bucket);
  for (std::size_t i = 0; i < n; ++i) dense[i] = add_nan_first(dense[i], values[i]);
}

}  // namespace slimreduce::reference
