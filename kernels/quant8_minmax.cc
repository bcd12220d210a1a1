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
#include "kernels/minmax_scan.h"
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

// minmax_code for 8 lanes, as 32-bit integers (Special: whether the bucket
// holds an inf or a NaN; else no lane needs the special codes).
template <bool Stochastic, bool Special>
SR_AVX2 __m256i code8(__m256 acc, __m256 inv, __m256i j0, const Rounding& rounding, std::size_t i) {
  const __m256 r = _mm256_mul_ps(acc, inv);
  __m256i q = simd::round8(r, Stochastic ? rounding : Rounding{}, i);
  q = _mm256_sub_epi32(q, j0);
  q = _mm256_min_epi32(_mm256_max_epi32(q, _mm256_setzero_si256()),
                       _mm256_set1_epi32(kMinmaxMaxCode));
  if constexpr (!Special) return q;
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

// What the code loops need of a bucket.
struct Coder8 {
  __m256 inv, step, offset;
  __m256i j0;
};

// The codes (and residual) of values [i, i + t), t <= 8.
template <bool R, bool Stochastic, bool Special>
SR_AVX2 void code_step8(const float* in, float* res, std::size_t i, std::size_t t,
                        std::uint8_t* codes, const Coder8& c, const Rounding& rounding) {
  const __m256i mask = lanes8(t);
  const __m256 acc = acc8<R>(in + i, R ? res + i : nullptr, mask, t == 8);
  const __m256i q = code8<Stochastic, Special>(acc, c.inv, c.j0, rounding, i);
  store_ucodes8(codes + i, q, t);
  if constexpr (R) {
    const __m256 sent = decode8(q, c.step, c.offset);
    const __m256 kept = _mm256_and_ps(_mm256_sub_ps(acc, sent), finite_mask8(sent));
    t == 8 ? _mm256_storeu_ps(res + i, kept) : _mm256_maskstore_ps(res + i, mask, kept);
  }
}

// A bucket's codes: 32 values at a time (their bytes stored together), then 8 at a time.
template <bool R, bool Stochastic, bool Special>
SR_AVX2_ENTRY void code_bucket8(const float* in, float* res, std::size_t len, std::uint8_t* codes,
                                const Coder8& c, const Rounding& rounding) {
  std::size_t i = 0;
  for (; i + 32 <= len; i += 32) {
    __m256 acc[4];
    __m256i q[4];
    for (int k = 0; k < 4; ++k) {
      const std::size_t at = i + 8 * static_cast<std::size_t>(k);
      acc[k] = acc8<R>(in + at, R ? res + at : nullptr, lanes8(8), true);
      q[k] = code8<Stochastic, Special>(acc[k], c.inv, c.j0, rounding, at);
    }
    simd::store_ucodes32(codes + i, q[0], q[1], q[2], q[3]);
    if constexpr (R) {
      for (int k = 0; k < 4; ++k) {
        const __m256 sent = decode8(q[k], c.step, c.offset);
        _mm256_storeu_ps(res + i + 8 * k,
                         _mm256_and_ps(_mm256_sub_ps(acc[k], sent), finite_mask8(sent)));
      }
    }
  }
  for (; i < len; i += 8) {
    code_step8<R, Stochastic, Special>(in, res, i, std::min<std::size_t>(8, len - i), codes, c,
                                       rounding);
  }
}

template <bool R>
SR_AVX2_ENTRY MinmaxParams compress_bucket_avx2(const float* in, float* res, std::size_t len,
                                                std::uint8_t* codes, const Rounding& rounding) {
  const minmax_scan::Scan scan = minmax_scan::scan8<R>(in, res, len);
  const MinmaxParams p = minmax_params(scan.lo, scan.hi, rounding.stochastic);
  const Coder8 c{_mm256_set1_ps(p.inv), _mm256_set1_ps(p.step), _mm256_set1_ps(p.offset),
                 _mm256_set1_epi32(p.j0)};
  // A copy of the key the loop can keep in registers (codes, being bytes,
  // may alias the caller's), its flag taken out of the loop.
  const Rounding key = rounding;
  if (key.stochastic) {
    scan.special ? code_bucket8<R, true, true>(in, res, len, codes, c, key)
                 : code_bucket8<R, true, false>(in, res, len, codes, c, key);
  } else {
    scan.special ? code_bucket8<R, false, true>(in, res, len, codes, c, key)
                 : code_bucket8<R, false, false>(in, res, len, codes, c, key);
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

// code8 for 16 lanes.
template <bool Stochastic, bool Special>
SR_AVX512 __m512i code16(__m512 acc, __m512 inv, __m512i j0, const Rounding& rounding,
                         std::size_t i) {
  const __m512 r = _mm512_mul_ps(acc, inv);
  __m512i q = simd::round16(r, Stochastic ? rounding : Rounding{}, i);
  q = _mm512_sub_epi32(q, j0);
  q = _mm512_min_epi32(_mm512_max_epi32(q, _mm512_setzero_si512()),
                       _mm512_set1_epi32(kMinmaxMaxCode));
  if constexpr (!Special) return q;
  return simd::with_special_codes16(q, acc, kMinmaxPlusInf, kMinmaxMinusInf, kMinmaxNan);
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

// The codes (and residual) of values [i, i + t), t <= 16.
template <bool R, bool Stochastic, bool Special>
SR_AVX512 void code_step16(const float* in, float* res, std::size_t i, std::size_t t,
                           std::uint8_t* codes, const MinmaxParams& p, const Rounding& rounding) {
  const __mmask16 mask = lanes16(t);
  const __m512 acc = acc16<R>(in + i, R ? res + i : nullptr, mask);
  const __m512i q =
      code16<Stochastic, Special>(acc, _mm512_set1_ps(p.inv), _mm512_set1_epi32(p.j0), rounding, i);
  simd::store_bytes16(codes + i, q, t);
  if constexpr (R) {
    const __m512 sent = decode16(q, _mm512_set1_ps(p.step), _mm512_set1_ps(p.offset));
    _mm512_mask_storeu_ps(res + i, mask, _mm512_maskz_sub_ps(finite_mask16(sent), acc, sent));
  }
}

// A bucket's codes: its whole groups of 16, then the rest.
template <bool R, bool Stochastic, bool Special>
SR_AVX512_ENTRY void code_bucket16(const float* in, float* res, std::size_t len,
                                   std::uint8_t* codes, const MinmaxParams& p,
                                   const Rounding& rounding) {
  std::size_t i = 0;
  for (; i + 16 <= len; i += 16)
    code_step16<R, Stochastic, Special>(in, res, i, 16, codes, p, rounding);
  if (i < len) code_step16<R, Stochastic, Special>(in, res, i, len - i, codes, p, rounding);
}

template <bool R>
SR_AVX512_ENTRY MinmaxParams compress_bucket_avx512(const float* in, float* res, std::size_t len,
                                                    std::uint8_t* codes, const Rounding& rounding) {
  const minmax_scan::Scan scan = minmax_scan::scan16<R>(in, res, len);
  const MinmaxParams p = minmax_params(scan.lo, scan.hi, rounding.stochastic);
  const Rounding key = rounding;  // as compress_bucket_avx2
  if (key.stochastic) {
    scan.special ? code_bucket16<R, true, true>(in, res, len, codes, p, key)
                 : code_bucket16<R, true, false>(in, res, len, codes, p, key);
  } else {
    scan.special ? code_bucket16<R, false, true>(in, res, len, codes, p, key)
                 : code_bucket16<R, false, false>(in, res, len, codes, p, key);
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
