// Block-scaled fp8 on the CPU: a scalar path built on quant_fp8_rules.h, and
// AVX2 and AVX-512 paths that give the same bits. Every
// path walks the block one bucket at a time: compress reads a bucket twice
// (its largest finite |acc|, then its codes).
#include "kernels/quant_fp8.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/element_rules.h"
#include "kernels/quant_fp8_rules.h"
#include "kernels/simd.h"

namespace slimreduce::kernels {
namespace {

// ---------------------------------------------------------------- layout ----

// fn(j, first, len) for each bucket j: values [first, first + len).
template <class Fn>
void for_each_bucket(std::size_t n, std::size_t bucket, Fn fn) {
  for (std::size_t j = 0, first = 0; first < n; ++j, first += bucket) {
    fn(j, first, std::min(bucket, n - first));
  }
}

// One bucket through one path: compress returns the bucket's exponent byte.
using CompressBucket = std::uint8_t (*)(const float* in, float* res, std::size_t len,
                                        std::uint8_t* codes);
using DecodeBucket = void (*)(const std::uint8_t* codes, std::size_t len, std::uint8_t exponent,
                              float* out);

void compress_with(CompressBucket fn, const float* in, float* res, std::size_t n,
                   std::size_t bucket, void* out) {
  auto* bytes = static_cast<std::uint8_t*>(out);
  std::uint8_t* codes = bytes + quant_fp8_buckets(n, bucket);
  for_each_bucket(n, bucket, [&](std::size_t j, std::size_t first, std::size_t len) {
    bytes[j] = fn(in + first, res ? res + first : nullptr, len, codes + first);
  });
}

void decode_with(DecodeBucket fn, const void* block, std::size_t n, std::size_t bucket,
                 float* out) {
  const auto* bytes = static_cast<const std::uint8_t*>(block);
  const std::uint8_t* codes = bytes + quant_fp8_buckets(n, bucket);
  for_each_bucket(n, bucket, [&](std::size_t j, std::size_t first, std::size_t len) {
    fn(codes + first, len, bytes[j], out + first);
  });
}

// ---------------------------------------------------------------- scalar ----

inline float acc_at(const float* in, const float* res, std::size_t i) {
  return res ? add_nan_first(in[i], res[i]) : in[i];
}

std::uint8_t compress_bucket_scalar(const float* in, float* res, std::size_t len,
                                    std::uint8_t* codes) {
  std::uint32_t max_bits = 0;
  for (std::size_t i = 0; i < len; ++i) {
    max_bits = std::max(max_bits, quant8_finite_abs_bits(acc_at(in, res, i)));
  }
  const std::uint8_t exponent = fp8_exponent(max_bits);
  const float inv = fp8_inverse(exponent), scale = fp8_scale(exponent);
  for (std::size_t i = 0; i < len; ++i) {
    const float acc = acc_at(in, res, i);
    codes[i] = fp8_code(acc, inv);
    if (res) res[i] = residual_after(acc, fp8_decode(codes[i], scale));
  }
  return exponent;
}

template <bool Add>
void decode_bucket_scalar(const std::uint8_t* codes, std::size_t len, std::uint8_t exponent,
                          float* out) {
  const float scale = fp8_scale(exponent);
  for (std::size_t i = 0; i < len; ++i) {
    const float value = fp8_decode(codes[i], scale);
    out[i] = Add ? add_nan_first(out[i], value) : value;
  }
}

// ------------------------------------------------------------------ AVX2 ----

using simd::acc8;
using simd::add_nan_first8;
using simd::finite_mask8;
using simd::lanes8;
using simd::load_ucodes8;
using simd::replace8;
using simd::store_ucodes8;

using simd::finite_abs8;
using simd::reduce_max8;

// fp8_magnitude for 8 lanes of |y|'s bits, but unsaturated: exact for
// |y| <= 448, which every bucket's values meet but for a bucket scaled at
// 2^119 (code8 saturates those).
SR_AVX2 __m256i magnitude8(__m256i abs) {
  // Subnormal e4m3: rint(|y| 2^9), ties to even (|y| 2^9 < 8: exact in fp32).
  const __m256 scaled = _mm256_mul_ps(_mm256_castsi256_ps(abs), _mm256_set1_ps(512.0f));
  const __m256i small =
      _mm256_cvtps_epi32(_mm256_round_ps(scaled, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  // Normal: rebiased, rounded from 23 significand bits to 3.
  const __m256i t = _mm256_sub_epi32(abs, _mm256_set1_epi32(120 << 23));
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(t, 20), _mm256_set1_epi32(1));
  const __m256i normal =
      _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(t, _mm256_set1_epi32(0x7ffff)), odd), 20);
  const __m256i is_normal =
      _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(static_cast<int>(kFp8NormalBits - 1)));
  return _mm256_blendv_epi8(small, normal, is_normal);
}

// fp8_code for 8 lanes, as 32-bit integers (Special: whether the bucket
// holds an inf or a NaN, or is scaled at 2^119; else no lane needs the
// special codes or the saturation).
template <bool Special>
SR_AVX2 __m256i code8(__m256 acc, __m256 inv) {
  const __m256i y = _mm256_castps_si256(_mm256_mul_ps(acc, inv));
  __m256i magnitude = magnitude8(_mm256_and_si256(y, _mm256_set1_epi32(0x7fffffff)));
  if constexpr (Special)
    magnitude = _mm256_min_epu32(magnitude, _mm256_set1_epi32(kFp8MaxMagnitude));
  // The sign only where the magnitude is not 0.
  const __m256i sign = _mm256_slli_epi32(_mm256_srli_epi32(y, 31), 7);
  const __m256i zero = _mm256_cmpeq_epi32(magnitude, _mm256_setzero_si256());
  const __m256i q = _mm256_or_si256(magnitude, _mm256_andnot_si256(zero, sign));
  if constexpr (!Special) return q;
  return simd::with_special_codes8(q, acc, kFp8PlusInf, kFp8MinusInf, kFp8Nan);
}

// The codes of 32 finite values of a bucket that needs neither special
// codes nor saturation, stored: the magnitudes packed to bytes, and the
// signs packed beside them by signed saturation (a negative float's bits
// saturate to 0x80, a positive's to at most 0x7f), kept where the magnitude
// is not 0 (vpsignb zeroes a byte where the magnitude's is 0).
SR_AVX2 void store_codes32(const float* in, __m256 inv, std::uint8_t* codes) {
  __m256i y[4], magnitude[4];
  for (int k = 0; k < 4; ++k) {
    y[k] = _mm256_castps_si256(_mm256_mul_ps(_mm256_loadu_ps(in + 8 * k), inv));
    magnitude[k] = magnitude8(_mm256_and_si256(y[k], _mm256_set1_epi32(0x7fffffff)));
  }
  const __m256i magnitudes = _mm256_packus_epi16(_mm256_packus_epi32(magnitude[0], magnitude[1]),
                                                 _mm256_packus_epi32(magnitude[2], magnitude[3]));
  const __m256i signs =
      _mm256_packs_epi16(_mm256_packs_epi32(y[0], y[1]), _mm256_packs_epi32(y[2], y[3]));
  const __m256i kept =
      _mm256_and_si256(_mm256_sign_epi8(signs, magnitudes), _mm256_set1_epi8(-128));
  const __m256i bytes = _mm256_or_si256(magnitudes, kept);
  _mm256_storeu_si256(
      reinterpret_cast<__m256i*>(codes),
      _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

// fp8_decode for 8 lanes of codes 0..255.
SR_AVX2 __m256 decode8(__m256i q, __m256 scale) {
  const __m256i magnitude = _mm256_and_si256(q, _mm256_set1_epi32(0x7f));
  const __m256i e = _mm256_srli_epi32(magnitude, 3),
                m = _mm256_and_si256(magnitude, _mm256_set1_epi32(7));
  const __m256i normal = _mm256_or_si256(
      _mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(120)), 23), _mm256_slli_epi32(m, 20));
  const __m256 small = _mm256_mul_ps(_mm256_cvtepi32_ps(m), _mm256_set1_ps(0.001953125f));
  const __m256i is_small = _mm256_cmpeq_epi32(e, _mm256_setzero_si256());
  __m256i v = _mm256_blendv_epi8(normal, _mm256_castps_si256(small), is_small);
  v = _mm256_or_si256(v, _mm256_slli_epi32(_mm256_srli_epi32(q, 7), 31));
  const __m256 out = _mm256_mul_ps(_mm256_castsi256_ps(v), scale);
  // The specials: 0x7f, 0xff and 0x80 only.
  const __m256i special = _mm256_or_si256(_mm256_cmpeq_epi32(magnitude, _mm256_set1_epi32(0x7f)),
                                          _mm256_cmpeq_epi32(q, _mm256_set1_epi32(kFp8Nan)));
  if (__builtin_expect(_mm256_testz_si256(special, special), 1)) return out;
  __m256 fixed = replace8(out, q, kFp8PlusInf, 0x7f800000u);
  fixed = replace8(fixed, q, kFp8MinusInf, 0xff800000u);
  return replace8(fixed, q, kFp8Nan, kQuant8NanBits);
}

// The codes (and residual) of values [i, i + t), t <= 8.
template <bool R, bool Special>
SR_AVX2 void code_step8(const float* in, float* res, std::size_t i, std::size_t t,
                        std::uint8_t* codes, __m256 inv, __m256 scale) {
  const __m256i mask = lanes8(t);
  const __m256 acc = acc8<R>(in + i, R ? res + i : nullptr, mask, t == 8);
  const __m256i q = code8<Special>(acc, inv);
  store_ucodes8(codes + i, q, t);
  if constexpr (R) {
    const __m256 sent = decode8(q, scale);
    const __m256 kept = _mm256_and_ps(_mm256_sub_ps(acc, sent), finite_mask8(sent));
    t == 8 ? _mm256_storeu_ps(res + i, kept) : _mm256_maskstore_ps(res + i, mask, kept);
  }
}

// A bucket's codes: 32 values at a time (their bytes packed and stored
// together), then 8 at a time.
template <bool R, bool Special>
SR_AVX2_ENTRY void code_bucket8(const float* in, float* res, std::size_t len, std::uint8_t* codes,
                                std::uint8_t exponent) {
  const __m256 inv = _mm256_set1_ps(fp8_inverse(exponent));
  const __m256 scale = _mm256_set1_ps(fp8_scale(exponent));
  std::size_t i = 0;
  if constexpr (!R && !Special) {
    for (; i + 32 <= len; i += 32) store_codes32(in + i, inv, codes + i);
  }
  for (; i + 32 <= len; i += 32) {
    __m256 acc[4];
    __m256i q[4];
    for (int k = 0; k < 4; ++k) {
      const std::size_t at = i + 8 * static_cast<std::size_t>(k);
      acc[k] = acc8<R>(in + at, R ? res + at : nullptr, lanes8(8), true);
      q[k] = code8<Special>(acc[k], inv);
    }
    simd::store_ucodes32(codes + i, q[0], q[1], q[2], q[3]);
    if constexpr (R) {
      for (int k = 0; k < 4; ++k) {
        const __m256 sent = decode8(q[k], scale);
        _mm256_storeu_ps(res + i + 8 * k,
                         _mm256_and_ps(_mm256_sub_ps(acc[k], sent), finite_mask8(sent)));
      }
    }
  }
  for (; i < len; i += 8) {
    code_step8<R, Special>(in, res, i, std::min<std::size_t>(8, len - i), codes, inv, scale);
  }
}

template <bool R>
SR_AVX2_ENTRY std::uint8_t compress_bucket_avx2(const float* in, float* res, std::size_t len,
                                                std::uint8_t* codes) {
  const std::uint32_t largest = simd::largest_abs8<R>(in, res, len, false);
  const bool finite = largest < 0x7f800000u;
  const std::uint8_t exponent =
      fp8_exponent(finite ? largest : simd::largest_abs8<R>(in, res, len, true));
  const bool special = !finite || exponent == 127 + kFp8MaxScaleExponent;
  special ? code_bucket8<R, true>(in, res, len, codes, exponent)
          : code_bucket8<R, false>(in, res, len, codes, exponent);
  return exponent;
}

std::uint8_t compress_bucket_avx2_any(const float* in, float* res, std::size_t len,
                                      std::uint8_t* codes) {
  return res ? compress_bucket_avx2<true>(in, res, len, codes)
             : compress_bucket_avx2<false>(in, nullptr, len, codes);
}

template <bool Add>
SR_AVX2_ENTRY void decode_bucket_avx2(const std::uint8_t* codes, std::size_t len,
                                      std::uint8_t exponent, float* out) {
  const __m256 scale = _mm256_set1_ps(fp8_scale(exponent));
  for (std::size_t i = 0; i < len; i += 8) {
    const std::size_t t = std::min<std::size_t>(8, len - i);
    __m256 value = decode8(load_ucodes8(codes + i, t), scale);
    if (t == 8) {
      if constexpr (Add) value = add_nan_first8(_mm256_loadu_ps(out + i), value);
      _mm256_storeu_ps(out + i, value);
    } else {
      const __m256i mask = lanes8(t);
      if constexpr (Add) value = add_nan_first8(_mm256_maskload_ps(out + i, mask), value);
      _mm256_maskstore_ps(out + i, mask, value);
    }
  }
}

// --------------------------------------------------------------- AVX-512 ----

SR_AVX512_WARNINGS_OFF

using simd::acc16;
using simd::finite_mask16;
using simd::lanes16;

// magnitude8 for 16 lanes.
SR_AVX512 __m512i magnitude16(__m512i abs) {
  const __m512 scaled = _mm512_mul_ps(_mm512_castsi512_ps(abs), _mm512_set1_ps(512.0f));
  const __m512i small =
      _mm512_cvt_roundps_epi32(scaled, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512i t = _mm512_sub_epi32(abs, _mm512_set1_epi32(120 << 23));
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(t, 20), _mm512_set1_epi32(1));
  const __m512i normal =
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(t, _mm512_set1_epi32(0x7ffff)), odd), 20);
  const __mmask16 is_small =
      _mm512_cmplt_epi32_mask(abs, _mm512_set1_epi32(static_cast<int>(kFp8NormalBits)));
  return _mm512_mask_mov_epi32(normal, is_small, small);
}

// code8 for 16 lanes.
template <bool Special>
SR_AVX512 __m512i code16(__m512 acc, __m512 inv) {
  const __m512i y = _mm512_castps_si512(_mm512_mul_ps(acc, inv));
  __m512i magnitude = magnitude16(_mm512_and_si512(y, _mm512_set1_epi32(0x7fffffff)));
  if constexpr (Special)
    magnitude = _mm512_min_epu32(magnitude, _mm512_set1_epi32(kFp8MaxMagnitude));
  const __m512i sign = _mm512_slli_epi32(_mm512_srli_epi32(y, 31), 7);
  const __mmask16 nonzero = _mm512_test_epi32_mask(magnitude, magnitude);
  const __m512i q = _mm512_mask_or_epi32(magnitude, nonzero, magnitude, sign);
  if constexpr (!Special) return q;
  return simd::with_special_codes16(q, acc, kFp8PlusInf, kFp8MinusInf, kFp8Nan);
}

// store_codes32 for 64 values: the sign bytes set by mask where the value
// is negative and its magnitude not 0.
SR_AVX512 void store_codes64(const float* in, __m512 inv, std::uint8_t* codes) {
  __m512i y[4], magnitude[4];
  for (int k = 0; k < 4; ++k) {
    y[k] = _mm512_castps_si512(_mm512_mul_ps(_mm512_loadu_ps(in + 16 * k), inv));
    magnitude[k] = magnitude16(_mm512_and_si512(y[k], _mm512_set1_epi32(0x7fffffff)));
  }
  const __m512i magnitudes = _mm512_packus_epi16(_mm512_packus_epi32(magnitude[0], magnitude[1]),
                                                 _mm512_packus_epi32(magnitude[2], magnitude[3]));
  const __m512i signs =
      _mm512_packs_epi16(_mm512_packs_epi32(y[0], y[1]), _mm512_packs_epi32(y[2], y[3]));
  const __mmask64 negative =
      _mm512_movepi8_mask(signs) & _mm512_test_epi8_mask(magnitudes, magnitudes);
  // A magnitude is below 0x80, so adding 0x80 sets its sign bit.
  const __m512i coded =
      _mm512_mask_add_epi8(magnitudes, negative, magnitudes, _mm512_set1_epi8(-128));
  _mm512_storeu_si512(
      codes, _mm512_permutexvar_epi32(
                 _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), coded));
}

// decode8 for 16 lanes.
SR_AVX512 __m512 decode16(__m512i q, __m512 scale) {
  const __m512i magnitude = _mm512_and_si512(q, _mm512_set1_epi32(0x7f));
  const __m512i e = _mm512_srli_epi32(magnitude, 3),
                m = _mm512_and_si512(magnitude, _mm512_set1_epi32(7));
  const __m512i normal = _mm512_or_si512(
      _mm512_slli_epi32(_mm512_add_epi32(e, _mm512_set1_epi32(120)), 23), _mm512_slli_epi32(m, 20));
  const __m512 small = _mm512_mul_ps(_mm512_cvtepi32_ps(m), _mm512_set1_ps(0.001953125f));
  const __mmask16 is_small = _mm512_testn_epi32_mask(e, e);
  __m512i v = _mm512_mask_mov_epi32(normal, is_small, _mm512_castps_si512(small));
  v = _mm512_or_si512(v, _mm512_slli_epi32(_mm512_srli_epi32(q, 7), 31));
  const __m512 out = _mm512_mul_ps(_mm512_castsi512_ps(v), scale);
  // The specials: 0x7f, 0xff and 0x80 only.
  const __mmask16 special = _mm512_cmpeq_epi32_mask(magnitude, _mm512_set1_epi32(0x7f)) |
                            _mm512_cmpeq_epi32_mask(q, _mm512_set1_epi32(kFp8Nan));
  if (__builtin_expect(special == 0, 1)) return out;
  const __m512i inf = _mm512_or_si512(_mm512_set1_epi32(0x7f800000),
                                      _mm512_slli_epi32(_mm512_srli_epi32(q, 7), 31));
  const __mmask16 nan = _mm512_cmpeq_epi32_mask(q, _mm512_set1_epi32(kFp8Nan));
  __m512i fixed = _mm512_mask_mov_epi32(_mm512_castps_si512(out), special, inf);
  fixed = _mm512_mask_mov_epi32(fixed, nan, _mm512_set1_epi32(static_cast<int>(kQuant8NanBits)));
  return _mm512_castsi512_ps(fixed);
}

// The codes (and residual) of values [i, i + t), t <= 16.
template <bool R, bool Special>
SR_AVX512 void code_step16(const float* in, float* res, std::size_t i, std::size_t t,
                           std::uint8_t* codes, __m512 inv, __m512 scale) {
  const __mmask16 mask = lanes16(t);
  const __m512 acc = acc16<R>(in + i, R ? res + i : nullptr, mask);
  const __m512i q = code16<Special>(acc, inv);
  simd::store_bytes16(codes + i, q, t);
  if constexpr (R) {
    const __m512 sent = decode16(q, scale);
    _mm512_mask_storeu_ps(res + i, mask, _mm512_maskz_sub_ps(finite_mask16(sent), acc, sent));
  }
}

// A bucket's codes: its whole groups of 16 (no mask to make), then the rest.
template <bool R, bool Special>
SR_AVX512_ENTRY void code_bucket16(const float* in, float* res, std::size_t len,
                                   std::uint8_t* codes, std::uint8_t exponent) {
  const __m512 inv = _mm512_set1_ps(fp8_inverse(exponent));
  const __m512 scale = _mm512_set1_ps(fp8_scale(exponent));
  std::size_t i = 0;
  if constexpr (!R && !Special) {
    for (; i + 64 <= len; i += 64) store_codes64(in + i, inv, codes + i);
  }
  for (; i + 16 <= len; i += 16) code_step16<R, Special>(in, res, i, 16, codes, inv, scale);
  if (i < len) code_step16<R, Special>(in, res, i, len - i, codes, inv, scale);
}

template <bool R>
SR_AVX512_ENTRY std::uint8_t compress_bucket_avx512(const float* in, float* res, std::size_t len,
                                                    std::uint8_t* codes) {
  std::uint32_t largest = simd::largest_abs16<R>(in, res, len, false);
  const bool finite = largest < 0x7f800000u;
  if (!finite) largest = simd::largest_abs16<R>(in, res, len, true);  // rare
  const std::uint8_t exponent = fp8_exponent(largest);
  const bool special = !finite || exponent == 127 + kFp8MaxScaleExponent;
  special ? code_bucket16<R, true>(in, res, len, codes, exponent)
          : code_bucket16<R, false>(in, res, len, codes, exponent);
  return exponent;
}

std::uint8_t compress_bucket_avx512_any(const float* in, float* res, std::size_t len,
                                        std::uint8_t* codes) {
  return res ? compress_bucket_avx512<true>(in, res, len, codes)
             : compress_bucket_avx512<false>(in, nullptr, len, codes);
}

template <bool Add>
SR_AVX512_ENTRY void decode_bucket_avx512(const std::uint8_t* codes, std::size_t len,
                                          std::uint8_t exponent, float* out) {
  const __m512 scale = _mm512_set1_ps(fp8_scale(exponent));
  for (std::size_t i = 0; i < len; i += 16) {
    const __mmask16 mask = lanes16(len - i);
    __m512 value = decode16(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(mask, codes + i)), scale);
    if constexpr (Add) value = simd::add_nan_first16(_mm512_maskz_loadu_ps(mask, out + i), value);
    _mm512_mask_storeu_ps(out + i, mask, value);
  }
}

SR_AVX512_WARNINGS_ON

}  // namespace

std::size_t quant_fp8_buckets(std::size_t n, std::size_t bucket) {
  return n / bucket + (n % bucket != 0);
}

std::size_t quant_fp8_bytes(std::size_t n, std::size_t bucket) {
  return quant_fp8_buckets(n, bucket) + n;
}

void quant_fp8_compress(const float* in, float* residual, std::size_t n, std::size_t bucket,
                        void* out, Isa isa) {
  compress_with(pick_isa<CompressBucket>(isa, &compress_bucket_scalar, &compress_bucket_avx2_any,
                                         &compress_bucket_avx512_any),
                in, residual, n, bucket, out);
}

void quant_fp8_decompress(const void* block, std::size_t n, std::size_t bucket, float* out,
                          Isa isa) {
  decode_with(pick_isa<DecodeBucket>(isa, &decode_bucket_scalar<false>, &decode_bucket_avx2<false>,
                                     &decode_bucket_avx512<false>),
              block, n, bucket, out);
}

void quant_fp8_accumulate(const void* block, std::size_t n, std::size_t bucket, float* dense,
                          Isa isa) {
  decode_with(pick_isa<DecodeBucket>(isa, &decode_bucket_scalar<true>, &decode_bucket_avx2<true>,
                                     &decode_bucket_avx512<true>),
              block, n, bucket, dense);
}

bool quant_fp8_valid(const void* block, std::size_t n, std::size_t bucket) {
  // What fp8_exponent writes: 0, or s + 127 for s in [-108, 119]. Any other
  // byte would scale codes past fp32's range or into its subnormals.
  const auto* bytes = static_cast<const std::uint8_t*>(block);
  bool valid = true;
  for (std::size_t j = 0, buckets = quant_fp8_buckets(n, bucket); j < buckets; ++j) {
    valid &= bytes[j] == 0 || (bytes[j] >= 19 && bytes[j] <= 246);
  }
  return valid;
}

}  // namespace slimreduce::kernels
