// 8-bit quantization on the CPU: a scalar path built on quant8_rules.h and
// AVX2 / AVX-512 paths that give the same bits. Every path walks the block
// one bucket at a time (for_each_bucket): compress reads a bucket twice, once
// for its largest finite |acc| and once to code it, the second time from the
// cache; decompress and accumulate read each scale once.
#include "kernels/quant8.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/element_rules.h"
#include "kernels/quant8_rules.h"
#include "kernels/simd.h"

namespace slimreduce::kernels {
namespace {

// ---------------------------------------------------------------- layout ----

// A block from another rank or inside a gathered buffer may sit at any
// address: scales are read and written through memcpy.
float load_scale(const void* block, std::size_t j) {
  float scale;
  std::memcpy(&scale, static_cast<const unsigned char*>(block) + 4 * j, sizeof scale);
  return scale;
}

void store_scale(void* block, std::size_t j, float scale) {
  std::memcpy(static_cast<unsigned char*>(block) + 4 * j, &scale, sizeof scale);
}

// The codes follow the scales of every bucket.
std::int8_t* codes_of(void* block, std::size_t buckets) {
  return reinterpret_cast<std::int8_t*>(static_cast<unsigned char*>(block) + 4 * buckets);
}
const std::int8_t* codes_of(const void* block, std::size_t buckets) {
  return reinterpret_cast<const std::int8_t*>(static_cast<const unsigned char*>(block) +
                                              4 * buckets);
}

// fn(j, first, len) for each bucket j: values [first, first + len).
template <class Fn>
void for_each_bucket(std::size_t n, std::size_t bucket, Fn fn) {
  for (std::size_t j = 0, first = 0; first < n; ++j, first += bucket) {
    fn(j, first, std::min(bucket, n - first));
  }
}

// One bucket through one path: compress returns the bucket's scale.
// `rounding`: the bucket's, from its first value.
using CompressBucket = float (*)(const float* in, float* res, std::size_t len, std::int8_t* codes,
                                 const Rounding& rounding);
using DecodeBucket = void (*)(const std::int8_t* codes, std::size_t len, float scale, float* out);

void compress_with(CompressBucket fn, const float* in, float* res, std::size_t n,
                   std::size_t bucket, void* out, const Rounding& rounding) {
  std::int8_t* codes = codes_of(out, quant8_buckets(n, bucket));
  for_each_bucket(n, bucket, [&](std::size_t j, std::size_t first, std::size_t len) {
    store_scale(
        out, j,
        fn(in + first, res ? res + first : nullptr, len, codes + first, rounding.at(first)));
  });
}

void decode_with(DecodeBucket fn, const void* block, std::size_t n, std::size_t bucket,
                 float* out) {
  const std::int8_t* codes = codes_of(block, quant8_buckets(n, bucket));
  for_each_bucket(n, bucket, [&](std::size_t j, std::size_t first, std::size_t len) {
    fn(codes + first, len, load_scale(block, j), out + first);
  });
}

// ---------------------------------------------------------------- scalar ----

inline float acc_at(const float* in, const float* res, std::size_t i) {
  return res ? add_nan_first(in[i], res[i]) : in[i];
}

float compress_bucket_scalar(const float* in, float* res, std::size_t len, std::int8_t* codes,
                             const Rounding& rounding) {
  std::uint32_t max_bits = 0;
  for (std::size_t i = 0; i < len; ++i) {
    max_bits = std::max(max_bits, quant8_finite_abs_bits(acc_at(in, res, i)));
  }
  const float scale = quant8_scale(max_bits);
  for (std::size_t i = 0; i < len; ++i) {
    const float acc = acc_at(in, res, i);
    codes[i] = quant8_code(acc, scale, rounding, i);
    if (res) res[i] = residual_after(acc, quant8_decode(codes[i], scale));
  }
  return scale;
}

void decompress_bucket_scalar(const std::int8_t* codes, std::size_t len, float scale, float* out) {
  for (std::size_t i = 0; i < len; ++i) out[i] = quant8_decode(codes[i], scale);
}

void accumulate_bucket_scalar(const std::int8_t* codes, std::size_t len, float scale,
                              float* dense) {
  for (std::size_t i = 0; i < len; ++i) {
    dense[i] = add_nan_first(dense[i], quant8_decode(codes[i], scale));
  }
}

// ------------------------------------------------------------------ AVX2 ----

using simd::acc8;
using simd::add_nan_first8;
using simd::finite_mask8;
using simd::lanes8;
using simd::replace8;

using simd::finite_abs8;
using simd::reduce_max8;

// quant8_code for 8 lanes, as 32-bit integers; `divisor` is the scale, or
// +inf where it is 0 (every finite value then codes 0: x / inf is +-0), so
// the loop takes no branch. Special: whether the bucket holds an inf or a
// NaN (else no lane needs the special codes).
template <bool Stochastic, bool Special>
SR_AVX2 __m256i code8(__m256 acc, __m256 divisor, const Rounding& rounding, std::size_t i) {
  const __m256 top = _mm256_set1_ps(static_cast<float>(kQuant8MaxCode));
  __m256 r = _mm256_div_ps(acc, divisor);
  r = _mm256_min_ps(_mm256_max_ps(r, _mm256_sub_ps(_mm256_setzero_ps(), top)), top);
  const __m256i q = simd::round8(r, Stochastic ? rounding : Rounding{}, i);
  if constexpr (!Special) return q;
  return simd::with_special_codes8(q, acc, kQuant8PlusInf, kQuant8MinusInf, kQuant8Nan);
}

// quant8_decode for 8 lanes of 32-bit codes.
SR_AVX2 __m256 decode8(__m256i q, __m256 scale) {
  const __m256 value = _mm256_mul_ps(_mm256_cvtepi32_ps(q), scale);
  const __m256i top = _mm256_set1_epi32(kQuant8MaxCode);
  const __m256i special =
      _mm256_or_si256(_mm256_cmpgt_epi32(q, top),
                      _mm256_cmpgt_epi32(_mm256_sub_epi32(_mm256_setzero_si256(), top), q));
  if (__builtin_expect(_mm256_testz_si256(special, special), 1)) return value;
  __m256 out = value;
  out = replace8(out, q, kQuant8PlusInf, 0x7f800000u);
  out = replace8(out, q, kQuant8MinusInf, 0xff800000u);
  return replace8(out, q, kQuant8Nan, kQuant8NanBits);
}

// 8 codes from memory (t < 8 of them through a zeroed buffer), as 32-bit integers.
SR_AVX2 __m256i load_codes8(const std::int8_t* codes, std::size_t t) {
  if (t == 8) return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes)));
  std::int8_t buffer[8] = {};
  std::memcpy(buffer, codes, t);
  return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(buffer)));
}

// The low byte of each of 8 lanes (values in [-128, 127]: packs cannot saturate).
SR_AVX2 void store_codes8(std::int8_t* codes, __m256i q, std::size_t t) {
  const __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
  const __m128i bytes = _mm_packs_epi16(words, words);
  if (t == 8) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(codes), bytes);
    return;
  }
  std::int8_t buffer[16];
  _mm_storeu_si128(reinterpret_cast<__m128i*>(buffer), bytes);
  std::memcpy(codes, buffer, t);
}

// The codes (and residual) of values [i, i + t), t <= 8.
template <bool R, bool Stochastic, bool Special>
SR_AVX2 void code_step8(const float* in, float* res, std::size_t i, std::size_t t,
                        std::int8_t* codes, __m256 divisor, __m256 scale,
                        const Rounding& rounding) {
  const __m256i mask = lanes8(t);
  const __m256 acc = acc8<R>(in + i, R ? res + i : nullptr, mask, t == 8);
  const __m256i q = code8<Stochastic, Special>(acc, divisor, rounding, i);
  store_codes8(codes + i, q, t);
  if constexpr (R) {
    const __m256 sent = decode8(q, scale);
    const __m256 kept = _mm256_and_ps(_mm256_sub_ps(acc, sent), finite_mask8(sent));
    t == 8 ? _mm256_storeu_ps(res + i, kept) : _mm256_maskstore_ps(res + i, mask, kept);
  }
}

// A bucket's codes: 32 values at a time (their bytes packed and stored
// together: packs within 128-bit halves, then one permute), then 8 at a time.
template <bool R, bool Stochastic, bool Special>
SR_AVX2_ENTRY void code_bucket8(const float* in, float* res, std::size_t len, std::int8_t* codes,
                                float scale, const Rounding& rounding) {
  const __m256 divisor = _mm256_set1_ps(scale != 0.0f ? scale : bits_float(0x7f800000u));
  const __m256 vscale = _mm256_set1_ps(scale);
  std::size_t i = 0;
  for (; i + 32 <= len; i += 32) {
    __m256 acc[4];
    __m256i q[4];
    for (int k = 0; k < 4; ++k) {
      const std::size_t at = i + 8 * static_cast<std::size_t>(k);
      acc[k] = acc8<R>(in + at, R ? res + at : nullptr, lanes8(8), true);
      q[k] = code8<Stochastic, Special>(acc[k], divisor, rounding, at);
    }
    const __m256i bytes =
        _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(codes + i),
        _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    if constexpr (R) {
      for (int k = 0; k < 4; ++k) {
        const __m256 sent = decode8(q[k], vscale);
        _mm256_storeu_ps(res + i + 8 * k,
                         _mm256_and_ps(_mm256_sub_ps(acc[k], sent), finite_mask8(sent)));
      }
    }
  }
  for (; i < len; i += 8) {
    code_step8<R, Stochastic, Special>(in, res, i, std::min<std::size_t>(8, len - i), codes,
                                       divisor, vscale, rounding);
  }
}

template <bool R>
SR_AVX2_ENTRY float compress_bucket_avx2(const float* in, float* res, std::size_t len,
                                         std::int8_t* codes, const Rounding& rounding) {
  std::uint32_t largest = simd::largest_abs8<R>(in, res, len, false);
  const bool special = largest >= 0x7f800000u;
  if (special) largest = simd::largest_abs8<R>(in, res, len, true);
  const float scale = quant8_scale(largest);
  // A copy of the key the loop can keep in registers (codes may alias the
  // caller's), its flag taken out of the loop.
  const Rounding key = rounding;
  if (key.stochastic) {
    special ? code_bucket8<R, true, true>(in, res, len, codes, scale, key)
            : code_bucket8<R, true, false>(in, res, len, codes, scale, key);
  } else {
    special ? code_bucket8<R, false, true>(in, res, len, codes, scale, key)
            : code_bucket8<R, false, false>(in, res, len, codes, scale, key);
  }
  return scale;
}

float compress_bucket_avx2_any(const float* in, float* res, std::size_t len, std::int8_t* codes,
                               const Rounding& rounding) {
  return res ? compress_bucket_avx2<true>(in, res, len, codes, rounding)
             : compress_bucket_avx2<false>(in, nullptr, len, codes, rounding);
}

SR_AVX2_ENTRY void decompress_bucket_avx2(const std::int8_t* codes, std::size_t len, float scale,
                                          float* out) {
  const __m256 vscale = _mm256_set1_ps(scale);
  for (std::size_t i = 0; i < len; i += 8) {
    const std::size_t t = std::min<std::size_t>(8, len - i);
    const __m256 value = decode8(load_codes8(codes + i, t), vscale);
    if (t == 8) {
      _mm256_storeu_ps(out + i, value);
    } else {
      _mm256_maskstore_ps(out + i, lanes8(t), value);
    }
  }
}

SR_AVX2_ENTRY void accumulate_bucket_avx2(const std::int8_t* codes, std::size_t len, float scale,
                                          float* dense) {
  const __m256 vscale = _mm256_set1_ps(scale);
  for (std::size_t i = 0; i < len; i += 8) {
    const std::size_t t = std::min<std::size_t>(8, len - i);
    const __m256 value = decode8(load_codes8(codes + i, t), vscale);
    if (t == 8) {
      _mm256_storeu_ps(dense + i, add_nan_first8(_mm256_loadu_ps(dense + i), value));
    } else {
      const __m256i mask = lanes8(t);
      _mm256_maskstore_ps(dense + i, mask,
                          add_nan_first8(_mm256_maskload_ps(dense + i, mask), value));
    }
  }
}

// --------------------------------------------------------------- AVX-512 ----

SR_AVX512_WARNINGS_OFF

using simd::acc16;
using simd::add_nan_first16;
using simd::finite_mask16;
using simd::lanes16;

SR_AVX512 __m512i code16(__m512 acc, __m512 scale, bool zero_scale, const Rounding& rounding,
                         std::size_t i) {
  __m512i q = _mm512_setzero_si512();
  if (!zero_scale) {
    const float top = static_cast<float>(kQuant8MaxCode);
    __m512 r = _mm512_div_ps(acc, scale);
    r = _mm512_min_ps(_mm512_max_ps(r, _mm512_set1_ps(-top)), _mm512_set1_ps(top));
    q = simd::round16(r, rounding, i);
  }
  const __mmask16 finite = finite_mask16(acc);
  if (__builtin_expect(finite == 0xffff, 1)) return q;  // no inf, no NaN
  const __mmask16 negative =
      _mm512_cmplt_epi32_mask(_mm512_castps_si512(acc), _mm512_setzero_si512());
  const __mmask16 nan = _mm512_cmp_ps_mask(acc, acc, _CMP_UNORD_Q);
  __m512i special = _mm512_mask_mov_epi32(_mm512_set1_epi32(kQuant8PlusInf), negative,
                                          _mm512_set1_epi32(kQuant8MinusInf));
  special = _mm512_mask_mov_epi32(special, nan, _mm512_set1_epi32(kQuant8Nan));
  return _mm512_mask_mov_epi32(q, static_cast<__mmask16>(~finite), special);
}

SR_AVX512 __m512 replace16(__m512 v, __m512i q, int code, std::uint32_t bits) {
  const __mmask16 where = _mm512_cmpeq_epi32_mask(q, _mm512_set1_epi32(code));
  return _mm512_mask_mov_ps(v, where,
                            _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(bits))));
}

SR_AVX512 __m512 decode16(__m512i q, __m512 scale) {
  const __m512 value = _mm512_mul_ps(_mm512_cvtepi32_ps(q), scale);
  const __m512i top = _mm512_set1_epi32(kQuant8MaxCode);
  const __mmask16 special =
      _mm512_cmpgt_epi32_mask(q, top) |
      _mm512_cmplt_epi32_mask(q, _mm512_sub_epi32(_mm512_setzero_si512(), top));
  if (__builtin_expect(special == 0, 1)) return value;
  __m512 out = value;
  out = replace16(out, q, kQuant8PlusInf, 0x7f800000u);
  out = replace16(out, q, kQuant8MinusInf, 0xff800000u);
  return replace16(out, q, kQuant8Nan, kQuant8NanBits);
}

SR_AVX512 __m512i load_codes16(const std::int8_t* codes, __mmask16 mask) {
  return _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(mask, codes));
}

template <bool R>
SR_AVX512_ENTRY float compress_bucket_avx512(const float* in, float* res, std::size_t len,
                                             std::int8_t* codes, const Rounding& rounding) {
  const float scale = quant8_scale(simd::largest_abs16<R>(in, res, len, true));
  const __m512 vscale = _mm512_set1_ps(scale);
  for (std::size_t i = 0; i < len; i += 16) {
    const __mmask16 mask = lanes16(len - i);
    const __m512 acc = acc16<R>(in + i, R ? res + i : nullptr, mask);
    const __m512i q = code16(acc, vscale, scale == 0.0f, rounding, i);
    simd::store_bytes16(reinterpret_cast<std::uint8_t*>(codes + i), q, len - i);
    if constexpr (R) {
      const __m512 sent = decode16(q, vscale);
      _mm512_mask_storeu_ps(res + i, mask, _mm512_maskz_sub_ps(finite_mask16(sent), acc, sent));
    }
  }
  return scale;
}

float compress_bucket_avx512_any(const float* in, float* res, std::size_t len, std::int8_t* codes,
                                 const Rounding& rounding) {
  return res ? compress_bucket_avx512<true>(in, res, len, codes, rounding)
             : compress_bucket_avx512<false>(in, nullptr, len, codes, rounding);
}

SR_AVX512_ENTRY void decompress_bucket_avx512(const std::int8_t* codes, std::size_t len,
                                              float scale, float* out) {
  const __m512 vscale = _mm512_set1_ps(scale);
  for (std::size_t i = 0; i < len; i += 16) {
    const __mmask16 mask = lanes16(len - i);
    _mm512_mask_storeu_ps(out + i, mask, decode16(load_codes16(codes + i, mask), vscale));
  }
}

SR_AVX512_ENTRY void accumulate_bucket_avx512(const std::int8_t* codes, std::size_t len,
                                              float scale, float* dense) {
  const __m512 vscale = _mm512_set1_ps(scale);
  for (std::size_t i = 0; i < len; i += 16) {
    const __mmask16 mask = lanes16(len - i);
    const __m512 value = decode16(load_codes16(codes + i, mask), vscale);
    _mm512_mask_storeu_ps(dense + i, mask,
                          add_nan_first16(_mm512_maskz_loadu_ps(mask, dense + i), value));
  }
}

SR_AVX512_WARNINGS_ON

// -------------------------------------------------------------- dispatch ----

}  // namespace

std::size_t quant8_buckets(std::size_t n, std::size_t bucket) {
  return n / bucket + (n % bucket != 0);
}

std::size_t quant8_bytes(std::size_t n, std::size_t bucket) {
  return 4 * quant8_buckets(n, bucket) + n;
}

void quant8_compress(const float* in, float* residual, std::size_t n, std::size_t bucket, void* out,
                     Isa isa, const Rounding& rounding) {
  compress_with(pick_isa<CompressBucket>(isa, &compress_bucket_scalar, &compress_bucket_avx2_any,
                                         &compress_bucket_avx512_any),
                in, residual, n, bucket, out, rounding);
}

void quant8_decompress(const void* block, std::size_t n, std::size_t bucket, float* out, Isa isa) {
  decode_with(pick_isa<DecodeBucket>(isa, &decompress_bucket_scalar, &decompress_bucket_avx2,
                                     &decompress_bucket_avx512),
              block, n, bucket, out);
}

void quant8_accumulate(const void* block, std::size_t n, std::size_t bucket, float* dense,
                       Isa isa) {
  decode_with(pick_isa<DecodeBucket>(isa, &accumulate_bucket_scalar, &accumulate_bucket_avx2,
                                     &accumulate_bucket_avx512),
              block, n, bucket, dense);
}

bool quant8_valid(const void* block, std::size_t n, std::size_t bucket) {
  // The scales compress writes for m = 2^-100 and m = FLT_MAX; positive
  // floats order as their bits, so one unsigned range holds every scale
  // between them and nothing negative, infinite or NaN.
  static const std::uint32_t lowest = float_bits(quant8_scale(kQuant8TinyMaxBits));
  static const std::uint32_t highest = float_bits(quant8_scale(0x7f7fffffu));
  const std::size_t buckets = quant8_buckets(n, bucket);
  bool valid = true;
  for (std::size_t j = 0; j < buckets; ++j) {
    const std::uint32_t bits = float_bits(load_scale(block, j));
    valid &= bits == 0 || (bits >= lowest && bits <= highest);
  }
  return valid;
}

}  // namespace slimreduce::kernels
