// Element-wise fp32 <-> fp16/bf16 rules, written with integer bit operations
// only, so that the result never depends on a rounding mode, on DAZ/FTZ, or on
// which compiler or device runs it. The CPU scalar path, the CPU SIMD paths and
// (later) the CUDA kernels all follow these rules; the SIMD paths are tested
// against them bit for bit.
#pragma once

#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define SR_HD __host__ __device__
#else
#define SR_HD
#endif

namespace slimreduce::kernels {

SR_HD inline std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

SR_HD inline float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

SR_HD inline bool is_nan_bits(std::uint32_t u) { return (u & 0x7fffffffu) > 0x7f800000u; }
SR_HD inline bool is_finite_bits(std::uint32_t u) { return (u & 0x7f800000u) != 0x7f800000u; }

// Rounds the integer m / 2^shift to nearest, ties to even (1 <= shift <= 31).
SR_HD inline std::uint32_t shift_right_rne(std::uint32_t m, unsigned shift) {
  const std::uint32_t q = m >> shift;
  const std::uint32_t rem = m & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1u);
  return q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
}

// 65520's bits: the midpoint between 65504 (odd mantissa) and 2^16, the
// smallest magnitude fp16 rounds to inf (ties go up).
inline constexpr std::uint32_t kFp16InfFromBits = 0x477ff000u;

// Whether a finite x is beyond fp16's range (float_to_fp16_bits makes it inf).
SR_HD inline bool beyond_fp16(float x) {
  const std::uint32_t ax = float_bits(x) & 0x7fffffffu;
  return ax >= kFp16InfFromBits && ax < 0x7f800000u;
}

// fp32 -> fp16, round to nearest even. NaN follows Intel F16C (VCVTPS2PH): the
// sign and the top 10 mantissa bits are kept and the quiet bit is forced on.
SR_HD inline std::uint16_t float_to_fp16_bits(float f) {
  const std::uint32_t x = float_bits(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7e00u | ((ax >> 13) & 0x3ffu);
  if (ax >= kFp16InfFromBits) return sign | 0x7c00u;
  if (ax >= 0x38800000u) {  // Normal fp16 (>= 2^-14): rebias, round 13 bits.
    const std::uint32_t rounded = ax + 0xfffu + ((ax >> 13) & 1u);  // Carries into exp.
    return sign | static_cast<std::uint16_t>((rounded - 0x38000000u) >> 13);
  }
  // 2^-25 is the midpoint between 0 and the smallest subnormal: ties to 0.
  if (ax <= 0x33000000u) return sign;
  // Subnormal fp16: value / 2^-24 = significand * 2^(exp - 126), exp in [102, 112].
  const std::uint32_t significand = (ax & 0x7fffffu) | 0x800000u;
  const unsigned shift = 126u - (ax >> 23);
  // A round-up to 0x400 is exactly the encoding of the smallest normal.
  return sign | static_cast<std::uint16_t>(shift_right_rne(significand, shift));
}

// fp16 -> fp32, exact. NaN follows Intel F16C (VCVTPH2PS): the quiet bit is
// forced on (a signalling NaN becomes quiet), sign and payload are kept.
SR_HD inline float fp16_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  if (exp == 0x1fu) {
    return bits_float(sign | 0x7f800000u | (mant ? 0x400000u | (mant << 13) : 0u));
  }
  if (exp != 0) return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return bits_float(sign);
  // Subnormal: normalize. A mantissa with bit 9 set is 1.x * 2^-15 (field 112).
  std::uint32_t fexp = 113u;
  do {
    mant <<= 1;
    --fexp;
  } while (!(mant & 0x400u));
  return bits_float(sign | (fexp << 23) | ((mant & 0x3ffu) << 13));
}

// fp32 -> bf16, round to nearest even; overflow reaches inf through the carry.
// NaN: sign and top 7 payload bits kept, quiet bit forced on.
SR_HD inline std::uint16_t float_to_bf16_bits(float f) {
  const std::uint32_t x = float_bits(f);
  if (is_nan_bits(x)) return static_cast<std::uint16_t>((x >> 16) | 0x0040u);
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// bf16 -> fp32, exact; NaNs (signalling ones too) pass through unchanged.
SR_HD inline float bf16_bits_to_float(std::uint16_t h) {
  return bits_float(static_cast<std::uint32_t>(h) << 16);
}

// The NaN an x86 CPU makes from non-NaN operands (inf - inf, 0 * inf): the
// "default NaN", negative and quiet. GPUs make 0x7fffffff instead.
inline constexpr std::uint32_t kDefaultNanBits = 0xffc00000u;

// a + b, with a fixed rule when an operand is NaN: a's NaN wins over b's, and
// the result is that operand with its quiet bit set. Hardware leaves the
// choice between two NaNs to operand order, which compilers may swap; GPUs
// return a canonical NaN instead. A NaN made from two infinities of opposite
// signs is the x86 default NaN on every path. This rule makes every path agree.
SR_HD inline float add_nan_first(float a, float b) {
  const std::uint32_t ua = float_bits(a), ub = float_bits(b);
  if (is_nan_bits(ua)) return bits_float(ua | 0x400000u);
  if (is_nan_bits(ub)) return bits_float(ub | 0x400000u);
  const float sum = a + b;
  return is_nan_bits(float_bits(sum)) ? bits_float(kDefaultNanBits) : sum;
}

// x / divisor for an average, with divisor 1 dividing nothing (x / 1 would
// still quiet a signalling NaN) and a NaN kept as x with its quiet bit set, as
// an x86 CPU keeps it (a GPU would return its canonical NaN). The divisor is
// a rank count, so no division of a number makes a NaN.
SR_HD inline float divide_keeping_nan(float x, int divisor) {
  if (divisor == 1) return x;
  const std::uint32_t ux = float_bits(x);
  if (is_nan_bits(ux)) return bits_float(ux | 0x400000u);
  return x / static_cast<float>(divisor);
}

// What error feedback keeps of one value after compression: acc (the input
// plus the old residual) minus what was sent; 0 when what was sent is not
// finite (an fp16 overflow, a NaN), or the key's every later step would be
// inf or NaN. The casts and top-k, CPU and GPU, keep exactly this.
SR_HD inline float residual_after(float acc, float sent) {
  return is_finite_bits(float_bits(sent)) ? acc - sent : 0.0f;
}

// Top-k's ordering key: |x| as its bits, compared unsigned, so NaN > inf >
// numbers (equal keys go to the lower index, by the selection itself).
SR_HD inline std::uint32_t magnitude_key(float x) { return float_bits(x) & 0x7fffffffu; }

}  // namespace slimreduce::kernels
