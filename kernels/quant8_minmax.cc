// 8-bit min-max codes on the CPU: a scalar path built on
// quant8_minmax_rules.h and AVX2 / AVX-512 paths that give the same bits.
// Every path walks the block one bucket at a time: compress reads a bucket
// twice, once for its smallest and largest finite acc (as order keys, so
// that -0 and +0 are told apart the same way on every path) and once to code
// it, the second time from the cache; decompress and accumulate read each
// step and offset once.
#include "kernels/quant8_minmax.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/element_rules.h"
#include "kernels/quant8.h"
#include "kernels/quant8_minmax_rules.h"
#include "kernels/simd.h"

namespace slimreduce::kernels {
namespace {

// ---------------------------------------------------------------- layout ----

// Bucket j's step at 8 j, its offset at 8 j + 4, read and written through
// memcpy: a block may sit at any address.
float load_float(const void* block, std::size_t at) {
  float f;
  std::memcpy(&f, static_cast<const unsigned char*>(block) + at, sizeof f);
  return f;
}

void store_float(void* block, std::size_t at, float f) {
  std::memcpy(static_cast<unsigned char*>(block) + at, &f, sizeof f);
}

template <class Fn>
void for_each_bucket(std::size_t n, std::size_t bucket, Fn fn) {
  for (std::size_t j = 0, first = 0; first < n; ++j, first += bucket) {
    fn(j, first, std::min(bucket, n - first));
  }
}

// `rounding`: the bucket's, from its first value.
using CompressBucket = MinmaxParams (*)(const float* in, float* res, std::size_t len,
                                        std::uint8_t* codes, const Rounding& rounding);
using DecodeBucket = void (*)(const std::uint8_t* codes, std::size_t len, float step, float offset,
                              float* out);

void compress_with(CompressBucket fn, const float* in, float* res, std::size_t n,
                   std::size_t bucket, void* out, const Rounding& rounding) {
  const std::size_t buckets = quant8_buckets(n, bucket);
  auto* codes = static_cast<std::uint8_t*>(out) + 8 * buckets;
  for_each_bucket(n, bucket, [&](std::size_t j, std::size_t first, std::size_t len) {
    const MinmaxParams p =
        fn(in + first, res ? res + first : nullptr, len, codes + first, rounding.at(first));
    store_float(out, 8 * j, p.step);
    store_float(out, 8 * j + 4, p.offset);
  });
}

void decode_with(DecodeBucket fn, const void* block, std::size_t n, std::size_t bucket,
                 float* out) {
  const std::size_t buckets = quant8_buckets(n, bucket);
  const auto* codes = static_cast<const std::uint8_t*>(block) + 8 * buckets;
  for_each_bucket(n, bucket, [&](std::size_t j, std::size_t first, std::size_t len) {
    fn(codes + first, len, load_float(block, 8 * j), load_float(block, 8 * j + 4), out + first);
  });
}

// ---------------------------------------------------------------- scalar ----

inline float acc_at(const float* in, const float* res, std::size_t i) {
  return res ? add_nan_first(in[i], res[i]) : in[i];
}

MinmaxParams compress_bucket_scalar(const float* in, float* res, std::size_t len,
                                    std::uint8_t* codes, const Rounding& rounding) {
  std::int32_t lo = kMinmaxNoLo, hi = kMinmaxNoHi;
  for (std::size_t i = 0; i < len; ++i) {
    const float acc = acc_at(in, res, i);
    lo = std::min(lo, minmax_lo_key(acc));
    hi = std::max(hi, minmax_hi_key(acc));
  }
  const MinmaxParams p = minmax_params(lo, hi, rounding.stochastic);
  for (std::size_t i = 0; i < len; ++i) {
    const float acc = acc_at(in, res, i);
    codes[i] = minmax_code(acc, p, rounding, i);
    if (res) res[i] = residual_after(acc, minmax_decode(codes[i], p.step, p.offset));
  }
  return p;
}

void decompress_bucket_scalar(const std::uint8_t* codes, std::size_t len, float step, float offset,
                              float* out) {
  for (std::size_t i = 0; i < len; ++i) out[i] = minmax_decode(codes[i], step, offset);
}

void accumulate_bucket_scalar(const std::uint8_t* codes, std::size_t len, float step, float offset,
                              float* dense) {
  for (std::size_t i = 0; i < len; ++i) {
    dense[i] = add_nan_first(dense[i], minmax_decode(codes[i], step, offset));
  }
}

// ------------------------------------------------------------------ AVX2 ----

using simd::acc8;
using simd::add_nan_first8;
using simd::finite_mask8;
using simd::lanes8;
using simd::replace8;

// minmax_key for 8 lanes.
SR_AVX2 __m256i key8(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  return _mm256_xor_si256(u, _mm256_srli_epi32(_mm256_srai_epi32(u, 31), 1));
}

SR_AVX2 std::int32_t reduce_min8(__m256i v) {
  __m128i m = _mm_min_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  m = _mm_min_epi32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
  m = _mm_min_epi32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(m);
}

SR_AVX2 std::int32_t reduce_max8(__m256i v) {
  __m128i m = _mm_max_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  m = _mm_max_epi32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
  m = _mm_max_epi32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(m);
}

// minmax_code for 8 lanes, as 32-bit integers.
SR_AVX2 __m256i code8(__m256 acc, __m256 inv, __m256i j0, const Rounding& rounding, std::size_t i) {
  const __m256 r = _mm256_mul_ps(acc, inv);
  __m256i q = simd::round8(r, rounding, i);
  q = _mm256_sub_epi32(q, j0);
  q = _mm256_min_epi32(_mm256_max_epi32(q, _mm256_setzero_si256()),
                       _mm256_set1_epi32(kMinmaxMaxCode));
  return simd::with_special_codes8(q, acc, kMinmaxPlusInf, kMinmaxMinusInf, kMinmaxNan);
}

// minmax_decode for 8 lanes of codes 0..255.
SR_AVX2 __m256 decode8(__m256i q, __m256 step, __m256 offset) {
  const __m256 value = _mm256_add_ps(offset, _mm256_mul_ps(_mm256_cvtepi32_ps(q), step));
  const __m256i special = _mm256_cmpgt_epi32(q, _mm256_set1_epi32(kMinmaxMaxCode));
  if (__builtin_expect(_mm256_testz_si256(special, special), 1)) return value;
  __m256 out = replace8(value, q, kMinmaxPlusInf, 0x7f800000u);
  out = replace8(out, q, kMinmaxMinusInf, 0xff800000u);
  return replace8(out, q, kMinmaxNan, kMinmaxNanBits);
}

using simd::load_ucodes8;
using simd::store_ucodes8;

template <bool R>
SR_AVX2_ENTRY MinmaxParams compress_bucket_avx2(const float* in, float* res, std::size_t len,
                                                std::uint8_t* codes, const Rounding& rounding) {
  __m256i lo = _mm256_set1_epi32(kMinmaxNoLo), hi = _mm256_set1_epi32(kMinmaxNoHi);
  for (std::size_t i = 0; i < len; i += 8) {
    const std::size_t t = std::min<std::size_t>(8, len - i);
    const __m256i mask = lanes8(t);
    const __m256 acc = acc8<R>(in + i, R ? res + i : nullptr, mask, t == 8);
    // Lanes past the bucket and values that are not finite take no part.
    const __m256i use = _mm256_and_si256(mask, _mm256_castps_si256(finite_mask8(acc)));
    const __m256i key = key8(acc);
    lo = _mm256_min_epi32(lo, _mm256_blendv_epi8(_mm256_set1_epi32(kMinmaxNoLo), key, use));
    hi = _mm256_max_epi32(hi, _mm256_blendv_epi8(_mm256_set1_epi32(kMinmaxNoHi), key, use));
  }
  const MinmaxParams p = minmax_params(reduce_min8(lo), reduce_max8(hi), rounding.stochastic);
  const __m256 inv = _mm256_set1_ps(p.inv), step = _mm256_set1_ps(p.step);
  const __m256 offset = _mm256_set1_ps(p.offset);
  const __m256i j0 = _mm256_set1_epi32(p.j0);
  for (std::size_t i = 0; i < len; i += 8) {
    const std::size_t t = std::min<std::size_t>(8, len - i);
    const __m256i mask = lanes8(t);
    const __m256 acc = acc8<R>(in + i, R ? res + i : nullptr, mask, t == 8);
    const __m256i q = code8(acc, inv, j0, rounding, i);
    store_ucodes8(codes + i, q, t);
    if constexpr (R) {
      const __m256 sent = decode8(q, step, offset);
      const __m256 kept = _mm256_and_ps(_mm256_sub_ps(acc, sent), finite_mask8(sent));
      if (t == 8) {
        _mm256_storeu_ps(res + i, kept);
      } else {
        _mm256_maskstore_ps(res + i, mask, kept);
      }
    }
  }
  return p;
}

MinmaxParams compress_bucket_avx2_any(const float* in, float* res, std::size_t len,
                                      std::uint8_t* codes, const Rounding& rounding) {
  return res ? compress_bucket_avx2<true>(in, res, len, codes, rounding)
             : compress_bucket_avx2<false>(in, nullptr, len, codes, rounding);
}

template <bool Accumulate>
SR_AVX2_ENTRY void decode_bucket_avx2(const std::uint8_t* codes, std::size_t len, float step,
                                      float offset, float* out) {
  const __m256 vstep = _mm256_set1_ps(step), voffset = _mm256_set1_ps(offset);
  for (std::size_t i = 0; i < len; i += 8) {
    const std::size_t t = std::min<std::size_t>(8, len - i);
    const __m256 value = decode8(load_ucodes8(codes + i, t), vstep, voffset);
    const __m256i mask = lanes8(t);
    if constexpr (Accumulate) {
      const __m256 old = t == 8 ? _mm256_loadu_ps(out + i) : _mm256_maskload_ps(out + i, mask);
      const __m256 sum = add_nan_first8(old, value);
      t == 8 ? _mm256_storeu_ps(out + i, sum) : _mm256_maskstore_ps(out + i, mask, sum);
    } else {
      t == 8 ? _mm256_storeu_ps(out + i, value) : _mm256_maskstore_ps(out + i, mask, value);
    }
  }
}

// --------------------------------------------------------------- AVX-512 ----

SR_AVX512_WARNINGS_OFF

using simd::acc16;
using simd::add_nan_first16;
using simd::finite_mask16;
using simd::lanes16;

SR_AVX512 __m512i key16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  return _mm512_xor_si512(u, _mm512_srli_epi32(_mm512_srai_epi32(u, 31), 1));
}

SR_AVX512 __m512i code16(__m512 acc, __m512 inv, __m512i j0, const Rounding& rounding,
                         std::size_t i) {
  const __m512 r = _mm512_mul_ps(acc, inv);
  __m512i q = simd::round16(r, rounding, i);
  q = _mm512_sub_epi32(q, j0);
  q = _mm512_min_epi32(_mm512_max_epi32(q, _mm512_setzero_si512()),
                       _mm512_set1_epi32(kMinmaxMaxCode));
  const __mmask16 finite = finite_mask16(acc);
  if (__builtin_expect(finite == 0xffff, 1)) return q;  // no inf, no NaN
  const __mmask16 negative =
      _mm512_cmplt_epi32_mask(_mm512_castps_si512(acc), _mm512_setzero_si512());
  const __mmask16 nan = _mm512_cmp_ps_mask(acc, acc, _CMP_UNORD_Q);
  __m512i special = _mm512_mask_mov_epi32(_mm512_set1_epi32(kMinmaxPlusInf), negative,
                                          _mm512_set1_epi32(kMinmaxMinusInf));
  special = _mm512_mask_mov_epi32(special, nan, _mm512_set1_epi32(kMinmaxNan));
  return _mm512_mask_mov_epi32(q, static_cast<__mmask16>(~finite), special);
}

SR_AVX512 __m512 replace16(__m512 v, __m512i q, int code, std::uint32_t bits) {
  const __mmask16 where = _mm512_cmpeq_epi32_mask(q, _mm512_set1_epi32(code));
  return _mm512_mask_mov_ps(v, where,
                            _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(bits))));
}

SR_AVX512 __m512 decode16(__m512i q, __m512 step, __m512 offset) {
  const __m512 value = _mm512_add_ps(offset, _mm512_mul_ps(_mm512_cvtepi32_ps(q), step));
  const __mmask16 special = _mm512_cmpgt_epi32_mask(q, _mm512_set1_epi32(kMinmaxMaxCode));
  if (__builtin_expect(special == 0, 1)) return value;
  __m512 out = replace16(value, q, kMinmaxPlusInf, 0x7f800000u);
  out = replace16(out, q, kMinmaxMinusInf, 0xff800000u);
  return replace16(out, q, kMinmaxNan, kMinmaxNanBits);
}

template <bool R>
SR_AVX512_ENTRY MinmaxParams compress_bucket_avx512(const float* in, float* res, std::size_t len,
                                                    std::uint8_t* codes, const Rounding& rounding) {
  __m512i lo = _mm512_set1_epi32(kMinmaxNoLo), hi = _mm512_set1_epi32(kMinmaxNoHi);
  for (std::size_t i = 0; i < len; i += 16) {
    const __mmask16 mask = lanes16(len - i);
    const __m512 acc = acc16<R>(in + i, R ? res + i : nullptr, mask);
    const __mmask16 use = mask & finite_mask16(acc);
    const __m512i key = key16(acc);
    lo = _mm512_mask_min_epi32(lo, use, lo, key);
    hi = _mm512_mask_max_epi32(hi, use, hi, key);
  }
  const MinmaxParams p =
      minmax_params(_mm512_reduce_min_epi32(lo), _mm512_reduce_max_epi32(hi), rounding.stochastic);
  const __m512 inv = _mm512_set1_ps(p.inv), step = _mm512_set1_ps(p.step);
  const __m512 offset = _mm512_set1_ps(p.offset);
  const __m512i j0 = _mm512_set1_epi32(p.j0);
  for (std::size_t i = 0; i < len; i += 16) {
    const __mmask16 mask = lanes16(len - i);
    const __m512 acc = acc16<R>(in + i, R ? res + i : nullptr, mask);
    const __m512i q = code16(acc, inv, j0, rounding, i);
    simd::store_bytes16(codes + i, q, len - i);
    if constexpr (R) {
      const __m512 sent = decode16(q, step, offset);
      _mm512_mask_storeu_ps(res + i, mask, _mm512_maskz_sub_ps(finite_mask16(sent), acc, sent));
    }
  }
  return p;
}

MinmaxParams compress_bucket_avx512_any(const float* in, float* res, std::size_t len,
                                        std::uint8_t* codes, const Rounding& rounding) {
  return res ? compress_bucket_avx512<true>(in, res, len, codes, rounding)
             : compress_bucket_avx512<false>(in, nullptr, len, codes, rounding);
}

template <bool Accumulate>
SR_AVX512_ENTRY void decode_bucket_avx512(const std::uint8_t* codes, std::size_t len, float step,
                                          float offset, float* out) {
  const __m512 vstep = _mm512_set1_ps(step), voffset = _mm512_set1_ps(offset);
  for (std::size_t i = 0; i < len; i += 16) {
    const __mmask16 mask = lanes16(len - i);
    const __m512i q = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(mask, codes + i));
    __m512 value = decode16(q, vstep, voffset);
    if constexpr (Accumulate) value = add_nan_first16(_mm512_maskz_loadu_ps(mask, out + i), value);
    _mm512_mask_storeu_ps(out + i, mask, value);
  }
}

SR_AVX512_WARNINGS_ON

// -------------------------------------------------------------- dispatch ----

// Whether one bucket's step and offset are ones minmax_params writes.
bool params_valid(float step, float offset) {
  const std::uint32_t step_bits = float_bits(step), offset_bits = float_bits(offset);
  if (step_bits == 0) return offset_bits == 0;
  const int k = static_cast<int>(step_bits >> 23) - 127;  // a power of two: no mantissa, sign +
  if ((step_bits & 0x807fffffu) != 0 || k < kMinmaxMinExponent || k > kMinmaxMaxExponent)
    return false;
  if (!is_finite_bits(offset_bits) || offset_bits == 0x80000000u) return false;
  const double j = static_cast<double>(offset) / static_cast<double>(step);  // exact
  return j == std::floor(j) && j >= -0x1p24 && j < 0x1p24 &&
         (j + kMinmaxMaxCode) * static_cast<double>(step) <= 3.4028234663852886e38;
}

}  // namespace

std::size_t quant8_minmax_bytes(std::size_t n, std::size_t bucket) {
  return 8 * quant8_buckets(n, bucket) + n;
}

double quant8_minmax_error_bound(float lo, float hi) {
  const double low = lo, high = hi, m = std::max(std::fabs(low), std::fabs(high));
  if (m < 0x1p-100) return m;
  // No grid of 252 steps spans the bucket: a value may go as far as its
  // clipped grid, which keeps 0 on it.
  if (high - low > kMinmaxMaxCode * std::ldexp(1.0, kMinmaxMaxExponent)) {
    return std::max(high, 0.0) - std::min(low, 0.0);
  }
  int e = 0;
  std::frexp(m, &e);  // m in [2^(e-1), 2^e): ulp(m) = 2^(e - 24)
  const double half_step = std::max((high - low) / 251.0, std::ldexp(1.0, e - 25));
  // Past 2^127 a value within a step of +-FLT_MAX may meet the grid's last
  // finite point: up to a whole step.
  return m >= 0x1p127 ? 2 * half_step : half_step;
}

void quant8_minmax_compress(const float* in, float* residual, std::size_t n, std::size_t bucket,
                            void* out, Isa isa, const Rounding& rounding) {
  compress_with(pick_isa<CompressBucket>(isa, &compress_bucket_scalar, &compress_bucket_avx2_any,
                                         &compress_bucket_avx512_any),
                in, residual, n, bucket, out, rounding);
}

void quant8_minmax_decompress(const void* block, std::size_t n, std::size_t bucket, float* out,
                              Isa isa) {
  decode_with(pick_isa<DecodeBucket>(isa, &decompress_bucket_scalar, &decode_bucket_avx2<false>,
                                     &decode_bucket_avx512<false>),
              block, n, bucket, out);
}

void quant8_minmax_accumulate(const void* block, std::size_t n, std::size_t bucket, float* dense,
                              Isa isa) {
  decode_with(pick_isa<DecodeBucket>(isa, &accumulate_bucket_scalar, &decode_bucket_avx2<true>,
                                     &decode_bucket_avx512<true>),
              block, n, bucket, dense);
}

bool quant8_minmax_valid(const void* block, std::size_t n, std::size_t bucket) {
  bool valid = true;
  for (std::size_t j = 0; j < quant8_buckets(n, bucket); ++j) {
    valid &= params_valid(load_float(block, 8 * j), load_float(block, 8 * j + 4));
  }
  return valid;
}

}  // namespace slimreduce::kernels
