// The min-max codes' bucket scan on the CPU, shared by quant8_minmax.cc (8
// bits) and quant_packed_minmax.cc (4 and 2 bits): a bucket's smallest and
// largest finite values as order keys (minmax_key), whether it holds an inf
// (marked) and whether any value is not finite (special). Its whole groups of
// lanes are read with no check per lane, since the largest |x| bits show
// whether any value was not finite; only then (rarely), and for the tail, a
// checked pass leaves out the lanes past the bucket and those not finite.
// Internal to kernels/: include it only from a kernel's .cc, after
// kernels/simd.h.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/quant8_minmax_rules.h"
#include "kernels/simd.h"

namespace slimreduce::kernels::minmax_scan {

// What a scan found (lo = kMinmaxNoLo and hi = kMinmaxNoHi: no finite value).
struct Scan {
  std::int32_t lo, hi;
  bool marked, special;
};

// ------------------------------------------------------------------ AVX2 ----

// min and max of 8 lanes of signed integers.
SR_AVX2 std::int32_t lane_min(__m256i v) {
  __m128i m = _mm_min_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  m = _mm_min_epi32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm_cvtsi128_si32(_mm_min_epi32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1))));
}
SR_AVX2 std::int32_t lane_max(__m256i v) {
  __m128i m = _mm_max_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  m = _mm_max_epi32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm_cvtsi128_si32(_mm_max_epi32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1))));
}

// minmax_key of 8 lanes of fp32 bits.
SR_AVX2 __m256i key8(__m256i u) {
  return _mm256_xor_si256(u, _mm256_srli_epi32(_mm256_srai_epi32(u, 31), 1));
}

// The keys, the inf lanes and the largest |x| bits so far.
struct Keys8 {
  __m256i lo, hi, infs, abs_max;
};
SR_AVX2 Keys8 no_keys8() {
  const __m256i zero = _mm256_setzero_si256();
  return {_mm256_set1_epi32(kMinmaxNoLo), _mm256_set1_epi32(kMinmaxNoHi), zero, zero};
}

// Keys over values [first, len), each lane checked.
template <bool R>
SR_AVX2 void scan_checked8(const float* in, const float* res, std::size_t first, std::size_t len,
                           Keys8& keys) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  for (std::size_t i = first; i < len; i += 8) {
    const std::size_t t = std::min<std::size_t>(8, len - i);
    const __m256i mask = simd::lanes8(t);
    const __m256i u =
        _mm256_castps_si256(simd::acc8<R>(in + i, R ? res + i : nullptr, mask, t == 8));
    const __m256i abs = _mm256_and_si256(u, abs_mask);
    const __m256i key = key8(u);
    const __m256i use = _mm256_and_si256(_mm256_cmpgt_epi32(inf, abs), mask);
    keys.lo = _mm256_min_epi32(keys.lo, _mm256_blendv_epi8(keys.lo, key, use));
    keys.hi = _mm256_max_epi32(keys.hi, _mm256_blendv_epi8(keys.hi, key, use));
    keys.infs = _mm256_or_si256(keys.infs, _mm256_cmpeq_epi32(abs, inf));
    keys.abs_max = _mm256_max_epu32(keys.abs_max, abs);
  }
}

// A bucket of len values (acc8's acc: in, plus res where R).
template <bool R>
SR_AVX2 Scan scan8(const float* in, const float* res, std::size_t len) {
  Keys8 keys = no_keys8();
  const std::size_t whole = len - len % 8;
  for (std::size_t i = 0; i < whole; i += 8) {
    const __m256i u =
        _mm256_castps_si256(simd::acc8<R>(in + i, R ? res + i : nullptr, simd::lanes8(8), true));
    const __m256i key = key8(u);
    keys.lo = _mm256_min_epi32(keys.lo, key);
    keys.hi = _mm256_max_epi32(keys.hi, key);
    keys.abs_max =
        _mm256_max_epu32(keys.abs_max, _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)));
  }
  const bool all_finite = simd::reduce_max8(keys.abs_max) < 0x7f800000u;
  if (!all_finite) keys = no_keys8();  // rare: an inf or a NaN took part
  scan_checked8<R>(in, res, all_finite ? whole : 0, len, keys);
  return {lane_min(keys.lo), lane_max(keys.hi), !_mm256_testz_si256(keys.infs, keys.infs),
          simd::reduce_max8(keys.abs_max) >= 0x7f800000u};
}

// --------------------------------------------------------------- AVX-512 ----

SR_AVX512_WARNINGS_OFF

// minmax_key of 16 lanes of fp32 bits.
SR_AVX512 __m512i key16(__m512i u) {
  return _mm512_xor_si512(u, _mm512_srli_epi32(_mm512_srai_epi32(u, 31), 1));
}

// Keys8 for 16 lanes (special: the lanes that were not finite).
struct Keys16 {
  __m512i lo, hi;
  __mmask16 infs, special;
};

// scan_checked8 for 16 lanes at a time.
template <bool R>
SR_AVX512 void scan_checked16(const float* in, const float* res, std::size_t first, std::size_t len,
                              Keys16& keys) {
  const __m512i inf = _mm512_set1_epi32(0x7f800000);
  for (std::size_t i = first; i < len; i += 16) {
    const __mmask16 mask = simd::lanes16(len - i);
    const __m512 acc = simd::acc16<R>(in + i, R ? res + i : nullptr, mask);
    const __m512i u = _mm512_castps_si512(acc);
    const __m512i key = key16(u);
    const __mmask16 finite = simd::finite_mask16(acc), use = mask & finite;
    keys.lo = _mm512_mask_min_epi32(keys.lo, use, keys.lo, key);
    keys.hi = _mm512_mask_max_epi32(keys.hi, use, keys.hi, key);
    keys.infs |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), inf);
    keys.special |= static_cast<__mmask16>(mask & ~finite);
  }
}

// scan8 for 16 lanes at a time.
template <bool R>
SR_AVX512 Scan scan16(const float* in, const float* res, std::size_t len) {
  const Keys16 none{_mm512_set1_epi32(kMinmaxNoLo), _mm512_set1_epi32(kMinmaxNoHi), 0, 0};
  Keys16 keys = none;
  __m512i abs_max = _mm512_setzero_si512();
  const std::size_t whole = len - len % 16;
  for (std::size_t i = 0; i < whole; i += 16) {
    const __m512i u = _mm512_castps_si512(simd::acc16<R>(in + i, R ? res + i : nullptr, 0xffff));
    const __m512i key = key16(u);
    keys.lo = _mm512_min_epi32(keys.lo, key);
    keys.hi = _mm512_max_epi32(keys.hi, key);
    abs_max = _mm512_max_epu32(abs_max, _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)));
  }
  const bool all_finite =
      static_cast<std::uint32_t>(_mm512_reduce_max_epu32(abs_max)) < 0x7f800000u;
  if (!all_finite) keys = none;  // rare: an inf or a NaN took part
  scan_checked16<R>(in, res, all_finite ? whole : 0, len, keys);
  return {_mm512_reduce_min_epi32(keys.lo), _mm512_reduce_max_epi32(keys.hi), keys.infs != 0,
          !all_finite || keys.special != 0};
}

SR_AVX512_WARNINGS_ON

}  // namespace slimreduce::kernels::minmax_scan
