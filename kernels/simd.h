// What the CPU kernels' SIMD paths share (cast.cc, the quantizers): the target
// attributes of their AVX2 and AVX-512 code, element_rules.h's add_nan_first
// for 8 and 16 lanes, and the quantizers' masked loads and special codes. Internal to kernels/:
// include it only from a kernel's .cc, after <immintrin.h>.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/rounding.h"

// Helpers inline into an entry point compiled for the same ISA; entry points
// are only called once best_isa() has found the ISA on this CPU.
#define SR_AVX2 __attribute__((target("avx2,f16c"), always_inline)) inline
#define SR_AVX2_ENTRY __attribute__((target("avx2,f16c")))
#define SR_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,f16c,avx2"), always_inline)) inline
#define SR_AVX512_ENTRY __attribute__((target("avx512f,avx512bw,avx512vl,f16c,avx2")))

// GCC 12's AVX-512 intrinsics seed results with _mm512_undefined_*(), which
// -Wuninitialized flags once inlined (GCC bug 105593, fixed in GCC 13). A .cc
// with AVX-512 code wraps it in these.
#if defined(__GNUC__) && !defined(__clang__)
#define SR_AVX512_WARNINGS_OFF                                                         \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wuninitialized\"") \
      _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")
#define SR_AVX512_WARNINGS_ON _Pragma("GCC diagnostic pop")
#else
#define SR_AVX512_WARNINGS_OFF
#define SR_AVX512_WARNINGS_ON
#endif

namespace slimreduce::kernels::simd {

// add_nan_first (kernels/element_rules.h) for 8 lanes.
SR_AVX2 __m256 add_nan_first8(__m256 a, __m256 b) {
  const __m256 quiet = _mm256_castsi256_ps(_mm256_set1_epi32(0x400000));
  __m256 sum = _mm256_add_ps(a, b);
  const __m256 any_nan = _mm256_cmp_ps(a, b, _CMP_UNORD_Q);
  if (__builtin_expect(_mm256_testz_ps(any_nan, any_nan), 1)) return sum;  // NaNs are rare.
  sum = _mm256_blendv_ps(sum, _mm256_or_ps(b, quiet), _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
  return _mm256_blendv_ps(sum, _mm256_or_ps(a, quiet), _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
}

// All ones in the lanes where v is finite (a NaN is not).
SR_AVX2 __m256 finite_mask8(__m256 v) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 inf = _mm256_castsi256_ps(_mm256_set1_epi32(0x7f800000));
  return _mm256_cmp_ps(_mm256_and_ps(v, abs_mask), inf, _CMP_LT_OQ);
}

// Lanes [0, t) of 8 set (all ones), for maskload / maskstore.
SR_AVX2 __m256i lanes8(std::size_t t) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(t)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// in + residual (R: with a residual; add_nan_first) for 8 lanes; `mask`
// selects the lanes read where !full (the rest are 0): the quantizers' input.
template <bool R>
SR_AVX2 __m256 acc8(const float* in, const float* res, __m256i mask, bool full) {
  const __m256 x = full ? _mm256_loadu_ps(in) : _mm256_maskload_ps(in, mask);
  if constexpr (!R) return x;
  return add_nan_first8(x, full ? _mm256_loadu_ps(res) : _mm256_maskload_ps(res, mask));
}

// The quantizers' codes for 8 lanes: q where acc is finite, elsewhere the
// code their scalar rules give +inf, -inf and NaN.
SR_AVX2 __m256i with_special_codes8(__m256i q, __m256 acc, int plus_inf, int minus_inf, int nan) {
  const __m256 finite = finite_mask8(acc);
  if (__builtin_expect(_mm256_movemask_ps(finite) == 0xff, 1)) return q;  // no inf, no NaN
  const __m256i negative = _mm256_srai_epi32(_mm256_castps_si256(acc), 31);
  __m256i special =
      _mm256_blendv_epi8(_mm256_set1_epi32(plus_inf), _mm256_set1_epi32(minus_inf), negative);
  special = _mm256_blendv_epi8(special, _mm256_set1_epi32(nan),
                               _mm256_castps_si256(_mm256_cmp_ps(acc, acc, _CMP_UNORD_Q)));
  return _mm256_blendv_epi8(special, q, _mm256_castps_si256(finite));
}

// v with the lanes whose code in q is `code` set to the float of `bits`: the
// quantizers' decoders place their exact and special values so.
SR_AVX2 __m256 replace8(__m256 v, __m256i q, int code, std::uint32_t bits) {
  const __m256i where = _mm256_cmpeq_epi32(q, _mm256_set1_epi32(code));
  return _mm256_blendv_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(bits))),
                          _mm256_castsi256_ps(where));
}

// quant8_finite_abs_bits for 8 lanes: |v|'s bits, 0 for an inf or a NaN.
SR_AVX2 __m256i finite_abs8(__m256 v) {
  const __m256i abs = _mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(0x7fffffff));
  return _mm256_and_si256(abs, _mm256_cmpgt_epi32(_mm256_set1_epi32(0x7f800000), abs));
}

// The largest of 8 unsigned lanes (a bucket's largest finite |x| bits).
SR_AVX2 std::uint32_t reduce_max8(__m256i v) {
  __m128i m = _mm_max_epu32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  m = _mm_max_epu32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
  m = _mm_max_epu32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
  return static_cast<std::uint32_t>(_mm_cvtsi128_si32(m));
}

// A bucket's largest |acc| bits (acc8's acc; the lanes past len read as
// 0): at or above inf's where a value is not finite; with finite_only, over
// the finite values only (the quantizers' rare second pass). Whole groups of
// 32 first, with no lane mask to make and two chains of max: the scan was a
// third of fp8's compression on AVX2 when it took 8 values a step.
template <bool R>
SR_AVX2 __m256i abs_at8(const float* in, const float* res, std::size_t i, std::size_t t,
                        bool finite_only) {
  const __m256 acc = acc8<R>(in + i, R ? res + i : nullptr, lanes8(t), t == 8);
  return finite_only ? finite_abs8(acc)
                     : _mm256_and_si256(_mm256_castps_si256(acc), _mm256_set1_epi32(0x7fffffff));
}
template <bool R>
SR_AVX2 std::uint32_t largest_abs8(const float* in, const float* res, std::size_t len,
                                   bool finite_only) {
  __m256i max0 = _mm256_setzero_si256(), max1 = _mm256_setzero_si256();
  std::size_t i = 0;
  for (; i + 32 <= len; i += 32) {
    max0 = _mm256_max_epu32(max0, _mm256_max_epu32(abs_at8<R>(in, res, i, 8, finite_only),
                                                   abs_at8<R>(in, res, i + 8, 8, finite_only)));
    max1 = _mm256_max_epu32(max1, _mm256_max_epu32(abs_at8<R>(in, res, i + 16, 8, finite_only),
                                                   abs_at8<R>(in, res, i + 24, 8, finite_only)));
  }
  for (; i < len; i += 8) {
    const std::size_t t = std::min<std::size_t>(8, len - i);
    max0 = _mm256_max_epu32(max0, abs_at8<R>(in, res, i, t, finite_only));
  }
  return reduce_max8(_mm256_max_epu32(max0, max1));
}

// 8 unsigned byte codes from memory (t < 8 of them through a zeroed
// buffer), as 32-bit lanes; and back, the low byte of each lane (values in
// [0, 255]: packus cannot saturate). The 8-bit min-max and fp8 codes'.
SR_AVX2 __m256i load_ucodes8(const std::uint8_t* codes, std::size_t t) {
  if (t == 8) return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes)));
  std::uint8_t buffer[8] = {};
  std::memcpy(buffer, codes, t);
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(buffer)));
}
SR_AVX2 void store_ucodes8(std::uint8_t* codes, __m256i q, std::size_t t) {
  const __m128i words = _mm_packus_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
  const __m128i bytes = _mm_packus_epi16(words, words);
  if (t == 8) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(codes), bytes);
    return;
  }
  std::uint8_t buffer[16];
  _mm_storeu_si128(reinterpret_cast<__m128i*>(buffer), bytes);
  std::memcpy(codes, buffer, t);
}

// store_ucodes8 for 32 codes in four vectors: packed together, then one
// permute puts the bytes in order (the packs work within 128-bit halves).
SR_AVX2 void store_ucodes32(std::uint8_t* codes, __m256i q0, __m256i q1, __m256i q2, __m256i q3) {
  const __m256i bytes =
      _mm256_packus_epi16(_mm256_packus_epi32(q0, q1), _mm256_packus_epi32(q2, q3));
  const __m256i ordered =
      _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes), ordered);
}

// mix32 (kernels/rounding.h) of 8 lanes.
SR_AVX2 __m256i mix32x8(__m256i x) {
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
  x = _mm256_mullo_epi32(x, _mm256_set1_epi32(0x7feb352d));
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 15));
  x = _mm256_mullo_epi32(x, _mm256_set1_epi32(static_cast<int>(0x846ca68bu)));
  return _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
}

// rounding_draw of values i .. i + 7 (elements first + i on, a carry into
// the high word where the low one wraps).
SR_AVX2 __m256i draws8(const Rounding& rounding, std::uint64_t i) {
  const std::uint64_t e = rounding.first + i;
  const __m256i sign = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  const __m256i lo0 = _mm256_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(e)));
  const __m256i lo = _mm256_add_epi32(lo0, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256i wrapped =
      _mm256_cmpgt_epi32(_mm256_xor_si256(lo0, sign), _mm256_xor_si256(lo, sign));
  // (hi ^ k1) * weight: the first lane's, or the next high word's where a lane carried.
  const auto hi0 = static_cast<std::uint32_t>(e >> 32);
  const __m256i weighted = _mm256_blendv_epi8(
      _mm256_set1_epi32(static_cast<int>((hi0 ^ rounding.k1) * kRoundingHighWeight)),
      _mm256_set1_epi32(static_cast<int>(((hi0 + 1) ^ rounding.k1) * kRoundingHighWeight)),
      wrapped);
  const __m256i k0 = _mm256_set1_epi32(static_cast<int>(rounding.k0));
  return mix32x8(_mm256_xor_si256(_mm256_xor_si256(lo, k0), weighted));
}

// r (|r| < 2^31) rounded as `rounding` says, values i .. i + 7: to nearest
// (ties to even, as the scalar rules' rint), or stochastic_round's bits.
SR_AVX2 __m256i round8(__m256 r, const Rounding& rounding, std::uint64_t i) {
  if (!rounding.stochastic)
    return _mm256_cvtps_epi32(_mm256_round_ps(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  const __m256 f = _mm256_round_ps(r, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  const __m256 frac = _mm256_sub_ps(r, f);
  const __m256i u = _mm256_srli_epi32(draws8(rounding, i), 9);
  const __m256 threshold =
      _mm256_cvtepi32_ps(_mm256_or_si256(_mm256_slli_epi32(u, 1), _mm256_set1_epi32(1)));
  const __m256 drawn = _mm256_and_ps(
      _mm256_cmp_ps(frac, _mm256_set1_ps(kRoundingSnap), _CMP_GE_OQ),
      _mm256_cmp_ps(threshold, _mm256_mul_ps(frac, _mm256_set1_ps(kRoundingScale)), _CMP_LT_OQ));
  const __m256 up =
      _mm256_or_ps(drawn, _mm256_cmp_ps(frac, _mm256_set1_ps(1.0f - kRoundingSnap), _CMP_GT_OQ));
  return _mm256_sub_epi32(_mm256_cvttps_epi32(f), _mm256_castps_si256(up));  // up: -1
}

SR_AVX512_WARNINGS_OFF

// mix32 of 16 lanes.
SR_AVX512 __m512i mix32x16(__m512i x) {
  x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 16));
  x = _mm512_mullo_epi32(x, _mm512_set1_epi32(0x7feb352d));
  x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 15));
  x = _mm512_mullo_epi32(x, _mm512_set1_epi32(static_cast<int>(0x846ca68bu)));
  return _mm512_xor_si512(x, _mm512_srli_epi32(x, 16));
}

// rounding_draw of values i .. i + 15.
SR_AVX512 __m512i draws16(const Rounding& rounding, std::uint64_t i) {
  const std::uint64_t e = rounding.first + i;
  const __m512i lo0 = _mm512_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(e)));
  const __m512i lo = _mm512_add_epi32(
      lo0, _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  const __mmask16 wrapped = _mm512_cmplt_epu32_mask(lo, lo0);
  const auto hi0 = static_cast<std::uint32_t>(e >> 32);
  const __m512i weighted = _mm512_mask_mov_epi32(
      _mm512_set1_epi32(static_cast<int>((hi0 ^ rounding.k1) * kRoundingHighWeight)), wrapped,
      _mm512_set1_epi32(static_cast<int>(((hi0 + 1) ^ rounding.k1) * kRoundingHighWeight)));
  const __m512i k0 = _mm512_set1_epi32(static_cast<int>(rounding.k0));
  return mix32x16(_mm512_xor_si512(_mm512_xor_si512(lo, k0), weighted));
}

// r (|r| < 2^31) rounded as `rounding` says, values i .. i + 15.
SR_AVX512 __m512i round16(__m512 r, const Rounding& rounding, std::uint64_t i) {
  if (!rounding.stochastic)
    return _mm512_cvt_roundps_epi32(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_roundscale_ps(r, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  const __m512 frac = _mm512_sub_ps(r, f);
  const __m512i u = _mm512_srli_epi32(draws16(rounding, i), 9);
  const __m512 threshold =
      _mm512_cvtepi32_ps(_mm512_or_si512(_mm512_slli_epi32(u, 1), _mm512_set1_epi32(1)));
  const __mmask16 drawn =
      _mm512_cmp_ps_mask(frac, _mm512_set1_ps(kRoundingSnap), _CMP_GE_OQ) &
      _mm512_cmp_ps_mask(threshold, _mm512_mul_ps(frac, _mm512_set1_ps(kRoundingScale)),
                         _CMP_LT_OQ);
  const __mmask16 up =
      drawn | _mm512_cmp_ps_mask(frac, _mm512_set1_ps(1.0f - kRoundingSnap), _CMP_GT_OQ);
  const __m512i whole = _mm512_cvttps_epi32(f);
  return _mm512_mask_add_epi32(whole, up, whole, _mm512_set1_epi32(1));
}

// add_nan_first for 16 lanes.
SR_AVX512 __m512 add_nan_first16(__m512 a, __m512 b) {
  const __m512i quiet = _mm512_set1_epi32(0x400000);
  const __m512 sum_ps = _mm512_add_ps(a, b);
  if (__builtin_expect(_mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q) == 0, 1)) return sum_ps;
  __m512i sum = _mm512_castps_si512(sum_ps);
  sum = _mm512_mask_or_epi32(sum, _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q), _mm512_castps_si512(b),
                             quiet);
  sum = _mm512_mask_or_epi32(sum, _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), _mm512_castps_si512(a),
                             quiet);
  return _mm512_castsi512_ps(sum);
}

// The lanes where v is finite.
SR_AVX512 __mmask16 finite_mask16(__m512 v) {
  const __m512i abs = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff));
  return _mm512_cmplt_epi32_mask(abs, _mm512_set1_epi32(0x7f800000));
}

// Lanes [0, t) of 16.
inline __mmask16 lanes16(std::size_t t) {
  return static_cast<__mmask16>(t >= 16 ? 0xffffu : (1u << t) - 1u);
}

// acc8 for 16 lanes: the lanes outside `mask` read as 0.
template <bool R>
SR_AVX512 __m512 acc16(const float* in, const float* res, __mmask16 mask) {
  const __m512 x = _mm512_maskz_loadu_ps(mask, in);
  if constexpr (!R) return x;
  return add_nan_first16(x, _mm512_maskz_loadu_ps(mask, res));
}

// finite_abs8 for 16 lanes.
SR_AVX512 __m512i finite_abs16(__m512 v) {
  const __m512i abs = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff));
  return _mm512_maskz_mov_epi32(_mm512_cmplt_epu32_mask(abs, _mm512_set1_epi32(0x7f800000)), abs);
}

// largest_abs8 for 16 lanes at a time (whole groups of 64 first).
template <bool R>
SR_AVX512 __m512i abs_at16(const float* in, const float* res, std::size_t i, std::size_t t,
                           bool finite_only) {
  const __m512 acc = acc16<R>(in + i, R ? res + i : nullptr, lanes16(t));
  return finite_only ? finite_abs16(acc)
                     : _mm512_and_si512(_mm512_castps_si512(acc), _mm512_set1_epi32(0x7fffffff));
}
template <bool R>
SR_AVX512 std::uint32_t largest_abs16(const float* in, const float* res, std::size_t len,
                                      bool finite_only) {
  __m512i max0 = _mm512_setzero_si512(), max1 = _mm512_setzero_si512();
  std::size_t i = 0;
  for (; i + 64 <= len; i += 64) {
    max0 = _mm512_max_epu32(max0, _mm512_max_epu32(abs_at16<R>(in, res, i, 16, finite_only),
                                                   abs_at16<R>(in, res, i + 16, 16, finite_only)));
    max1 = _mm512_max_epu32(max1, _mm512_max_epu32(abs_at16<R>(in, res, i + 32, 16, finite_only),
                                                   abs_at16<R>(in, res, i + 48, 16, finite_only)));
  }
  for (; i < len; i += 16)
    max0 = _mm512_max_epu32(max0, abs_at16<R>(in, res, i, len - i, finite_only));
  return static_cast<std::uint32_t>(_mm512_reduce_max_epu32(_mm512_max_epu32(max0, max1)));
}

// with_special_codes8 for 16 lanes.
SR_AVX512 __m512i with_special_codes16(__m512i q, __m512 acc, int plus_inf, int minus_inf,
                                       int nan) {
  const __mmask16 finite = finite_mask16(acc);
  if (__builtin_expect(finite == 0xffff, 1)) return q;  // no inf, no NaN
  const __mmask16 negative =
      _mm512_cmplt_epi32_mask(_mm512_castps_si512(acc), _mm512_setzero_si512());
  __m512i special =
      _mm512_mask_mov_epi32(_mm512_set1_epi32(plus_inf), negative, _mm512_set1_epi32(minus_inf));
  special = _mm512_mask_mov_epi32(special, _mm512_cmp_ps_mask(acc, acc, _CMP_UNORD_Q),
                                  _mm512_set1_epi32(nan));
  return _mm512_mask_mov_epi32(q, static_cast<__mmask16>(~finite), special);
}

// The low byte of each of 16 lanes stored at `codes`, lanes [0, t) of them.
// The empty asm keeps the compiler from folding the truncation (vpmovdb)
// into its store form: on AMD's Zen 4 fp8's AVX-512 compression ran at 76%
// of memcpy with the fold, 91 to 106% without (bench_quant_fewer).
SR_AVX512 void store_bytes16(std::uint8_t* codes, __m512i q, std::size_t t) {
  __m128i bytes = _mm512_cvtepi32_epi8(q);
  asm("" : "+v"(bytes));
  if (t >= 16) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes), bytes);
  } else {
    _mm_mask_storeu_epi8(codes, lanes16(t), bytes);
  }
}

SR_AVX512_WARNINGS_ON

}  // namespace slimreduce::kernels::simd
