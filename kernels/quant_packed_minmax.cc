// 4- and 2-bit min-max codes on the CPU: a scalar path built on
// quant_packed_minmax_rules.h and an AVX2 path that gives the same bits (an
// AVX-512 CPU runs the AVX2 path, as quant_packed.cc). Every path walks the
// block one bucket at a time; compress reads a bucket twice (its smallest
// and largest finite acc and whether it holds an inf, then its codes).
#include "kernels/quant_packed_minmax.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/element_rules.h"
#include "kernels/packed_fields.h"
#include "kernels/quant_packed.h"
#include "kernels/quant_packed_minmax_rules.h"
#include "kernels/simd.h"

namespace slimreduce::kernels {
namespace {

// ---------------------------------------------------------------- layout ----

using packed::code_bytes;

// A bucket's two stored fp32s, read and written unaligned.
struct Pair {
  float a, b;
};

Pair load_pair(const void* block, std::size_t j) {
  Pair pair;
  std::memcpy(&pair, static_cast<const unsigned char*>(block) + 8 * j, sizeof pair);
  return pair;
}

void store_pair(void* block, std::size_t j, const PackedMinmax& p) {
  Pair pair;
  packed_minmax_store(p, &pair.a, &pair.b);
  std::memcpy(static_cast<unsigned char*>(block) + 8 * j, &pair, sizeof pair);
}

// fn(j, first, len, codes offset) for each bucket j: values [first, first + len).
template <class Fn>
void for_each_bucket(std::size_t n, std::size_t bucket, int bits, Fn fn) {
  const std::size_t stride = code_bytes(bucket, bits);
  std::size_t offset = 8 * quant_packed_buckets(n, bucket);
  for (std::size_t j = 0, first = 0; first < n; ++j, first += bucket, offset += stride) {
    fn(j, first, std::min(bucket, n - first), offset);
  }
}

// `rounding`: the bucket's, from its first value.
using CompressBucket = PackedMinmax (*)(const float* in, float* res, std::size_t len, int bits,
                                        std::uint8_t* codes, const Rounding& rounding);
using DecodeBucket = void (*)(const std::uint8_t* codes, std::size_t len, int bits,
                              const PackedMinmax& p, float* out);

// ---------------------------------------------------------------- scalar ----

inline float acc_at(const float* in, const float* res, std::size_t i) {
  return res ? add_nan_first(in[i], res[i]) : in[i];
}

PackedMinmax compress_bucket_scalar(const float* in, float* res, std::size_t len, int bits,
                                    std::uint8_t* codes, const Rounding& rounding) {
  std::int32_t lo = kMinmaxNoLo, hi = kMinmaxNoHi;
  bool marked = false;
  for (std::size_t i = 0; i < len; ++i) {
    const float acc = acc_at(in, res, i);
    lo = std::min(lo, minmax_lo_key(acc));
    hi = std::max(hi, minmax_hi_key(acc));
    marked |= quant_packed_marks(acc);
  }
  const PackedMinmax p = packed_minmax_params(lo, hi, marked, bits);
  std::memset(codes, 0, code_bytes(len, bits));
  for (std::size_t i = 0; i < len; ++i) {
    const float acc = acc_at(in, res, i);
    const int c = packed_minmax_code(acc, p, bits, rounding, i);
    const std::size_t bit = i * static_cast<std::size_t>(bits);
    codes[bit / 8] |= static_cast<std::uint8_t>(c << (bit % 8));
    if (res) res[i] = residual_after(acc, packed_minmax_decode(c, p, bits));
  }
  return p;
}

template <bool Add>
void decode_bucket_scalar(const std::uint8_t* codes, std::size_t len, int bits,
                          const PackedMinmax& p, float* out) {
  for (std::size_t i = 0; i < len; ++i) {
    const std::size_t bit = i * static_cast<std::size_t>(bits);
    const int c = (codes[bit / 8] >> (bit % 8)) & ((1 << bits) - 1);
    const float value = packed_minmax_decode(c, p, bits);
    out[i] = Add ? add_nan_first(out[i], value) : value;
  }
}

// ------------------------------------------------------------------ AVX2 ----

using simd::acc8;
using simd::add_nan_first8;
using simd::finite_mask8;
using simd::lanes8;
using simd::replace8;

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

// packed_minmax_code for 8 lanes, as 32-bit integers.
template <int Bits>
SR_AVX2 __m256i code8(__m256 acc, const PackedMinmax& p, const Rounding& rounding, std::size_t i) {
  __m256i q = _mm256_setzero_si256();
  if (p.step != 0.0f) {
    __m256 r = _mm256_div_ps(_mm256_sub_ps(acc, _mm256_set1_ps(p.lo)), _mm256_set1_ps(p.step));
    r = _mm256_min_ps(_mm256_max_ps(r, _mm256_setzero_ps()),
                      _mm256_set1_ps(static_cast<float>(p.top)));
    q = simd::round8(r, rounding, i);
  }
  return simd::with_special_codes8(q, acc, p.top + 2, p.top + 1, packed_minmax_nan_code(Bits));
}

// packed_minmax_decode for 8 lanes of codes in [0, 2^Bits).
template <int Bits>
SR_AVX2 __m256 decode8(__m256i q, const PackedMinmax& p) {
  const __m256 scaled = _mm256_mul_ps(_mm256_cvtepi32_ps(q), _mm256_set1_ps(p.step));
  __m256 out = _mm256_add_ps(_mm256_set1_ps(p.lo), scaled);
  // top first, then 0: where they meet (top 0) code 0 is lo, as the scalar rule.
  out = replace8(out, q, p.top, float_bits(p.hi));
  out = replace8(out, q, 0, float_bits(p.lo));
  const __m256i special = _mm256_cmpgt_epi32(q, _mm256_set1_epi32(p.top));
  if (__builtin_expect(_mm256_testz_si256(special, special), 1)) return out;
  out = replace8(out, q, p.top + 1, 0xff800000u);  // the NaN code where not marked: below
  out = replace8(out, q, p.top + 2, 0x7f800000u);
  return replace8(out, q, packed_minmax_nan_code(Bits), kQuant8NanBits);
}

template <int Bits, bool R>
SR_AVX2_ENTRY PackedMinmax compress_bucket_avx2(const float* in, float* res, std::size_t len,
                                                std::uint8_t* codes, const Rounding& rounding) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  const __m256i no_lo = _mm256_set1_epi32(kMinmaxNoLo), no_hi = _mm256_set1_epi32(kMinmaxNoHi);
  __m256i lo = no_lo, hi = no_hi, infs = _mm256_setzero_si256();
  for (std::size_t i = 0; i < len; i += 8) {
    const std::size_t t = std::min<std::size_t>(8, len - i);
    const __m256i mask = lanes8(t);
    const __m256i u = _mm256_castps_si256(acc8<R>(in + i, R ? res + i : nullptr, mask, t == 8));
    const __m256i abs = _mm256_and_si256(u, abs_mask);
    // minmax_key; the lanes past t (read as 0) and those not finite take no part.
    const __m256i key = _mm256_xor_si256(u, _mm256_srli_epi32(_mm256_srai_epi32(u, 31), 1));
    const __m256i use = _mm256_and_si256(_mm256_cmpgt_epi32(inf, abs), mask);
    lo = _mm256_min_epi32(lo, _mm256_blendv_epi8(no_lo, key, use));
    hi = _mm256_max_epi32(hi, _mm256_blendv_epi8(no_hi, key, use));
    infs = _mm256_or_si256(infs, _mm256_cmpeq_epi32(abs, inf));
  }
  const PackedMinmax p =
      packed_minmax_params(lane_min(lo), lane_max(hi), !_mm256_testz_si256(infs, infs), Bits);
  for (std::size_t i = 0; i < len; i += 8) {
    const std::size_t t = std::min<std::size_t>(8, len - i);
    const __m256i mask = lanes8(t);
    const __m256 acc = acc8<R>(in + i, R ? res + i : nullptr, mask, t == 8);
    // The lanes past t code 0: the unused high bits of a bucket's last byte.
    const __m256i q = _mm256_and_si256(code8<Bits>(acc, p, rounding, i), mask);
    packed::store_codes8<Bits>(codes + i * Bits / 8, q, t);
    if constexpr (R) {
      const __m256 sent = decode8<Bits>(q, p);
      const __m256 kept = _mm256_and_ps(_mm256_sub_ps(acc, sent), finite_mask8(sent));
      t == 8 ? _mm256_storeu_ps(res + i, kept) : _mm256_maskstore_ps(res + i, mask, kept);
    }
  }
  return p;
}

PackedMinmax compress_bucket_avx2_any(const float* in, float* res, std::size_t len, int bits,
                                      std::uint8_t* codes, const Rounding& rounding) {
  if (bits == 4) {
    return res ? compress_bucket_avx2<4, true>(in, res, len, codes, rounding)
               : compress_bucket_avx2<4, false>(in, nullptr, len, codes, rounding);
  }
  return res ? compress_bucket_avx2<2, true>(in, res, len, codes, rounding)
             : compress_bucket_avx2<2, false>(in, nullptr, len, codes, rounding);
}

template <int Bits, bool Add>
SR_AVX2_ENTRY void decode_bucket_avx2(const std::uint8_t* codes, std::size_t len,
                                      const PackedMinmax& p, float* out) {
  for (std::size_t i = 0; i < len; i += 8) {
    const std::size_t t = std::min<std::size_t>(8, len - i);
    __m256 value = decode8<Bits>(packed::load_fields8<Bits>(codes + i * Bits / 8, t), p);
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

template <bool Add>
void decode_bucket_avx2_any(const std::uint8_t* codes, std::size_t len, int bits,
                            const PackedMinmax& p, float* out) {
  bits == 4 ? decode_bucket_avx2<4, Add>(codes, len, p, out)
            : decode_bucket_avx2<2, Add>(codes, len, p, out);
}

// -------------------------------------------------------------- dispatch ----

void compress_with(CompressBucket fn, const float* in, float* res, std::size_t n,
                   std::size_t bucket, int bits, void* out, const Rounding& rounding) {
  auto* bytes = static_cast<std::uint8_t*>(out);
  for_each_bucket(n, bucket, bits,
                  [&](std::size_t j, std::size_t first, std::size_t len, std::size_t offset) {
                    store_pair(out, j,
                               fn(in + first, res ? res + first : nullptr, len, bits,
                                  bytes + offset, rounding.at(first)));
                  });
}

void decode_with(DecodeBucket fn, const void* block, std::size_t n, std::size_t bucket, int bits,
                 float* out) {
  const auto* bytes = static_cast<const std::uint8_t*>(block);
  for_each_bucket(
      n, bucket, bits, [&](std::size_t j, std::size_t first, std::size_t len, std::size_t offset) {
        const Pair pair = load_pair(block, j);
        fn(bytes + offset, len, bits, packed_minmax_load(pair.a, pair.b, bits), out + first);
      });
}

}  // namespace

std::size_t quant_packed_minmax_bytes(std::size_t n, std::size_t bucket, int bits) {
  // Four more bytes per bucket than the absmax layout, the codes alike.
  return quant_packed_bytes(n, bucket, bits) + 4 * quant_packed_buckets(n, bucket);
}

void quant_packed_minmax_compress(const float* in, float* residual, std::size_t n,
                                  std::size_t bucket, int bits, void* out, Isa isa,
                                  const Rounding& rounding) {
  compress_with(pick_isa<CompressBucket>(isa, &compress_bucket_scalar, &compress_bucket_avx2_any),
                in, residual, n, bucket, bits, out, rounding);
}

void quant_packed_minmax_decompress(const void* block, std::size_t n, std::size_t bucket, int bits,
                                    float* out, Isa isa) {
  decode_with(
      pick_isa<DecodeBucket>(isa, &decode_bucket_scalar<false>, &decode_bucket_avx2_any<false>),
      block, n, bucket, bits, out);
}

void quant_packed_minmax_accumulate(const void* block, std::size_t n, std::size_t bucket, int bits,
                                    float* dense, Isa isa) {
  decode_with(
      pick_isa<DecodeBucket>(isa, &decode_bucket_scalar<true>, &decode_bucket_avx2_any<true>),
      block, n, bucket, bits, dense);
}

bool quant_packed_minmax_valid(const void* block, std::size_t n, std::size_t bucket, int bits) {
  // What compress stores (quant_packed_minmax.h): any other pair would decode
  // codes to values no rank sent (an overflowing range, a swapped pair at 2
  // bits, an inf where a value belongs); the codes themselves are any bits.
  bool valid = true;
  for (std::size_t j = 0, buckets = quant_packed_buckets(n, bucket); j < buckets; ++j) {
    const Pair pair = load_pair(block, j);
    const std::uint32_t b_bits = float_bits(pair.b);
    bool ok = is_finite_bits(float_bits(pair.a));
    // Values all below 2^-100 are sent as +0 (a's alone in (v, +inf)).
    const std::uint32_t a_abs = float_bits(pair.a) & 0x7fffffffu, b_abs = b_bits & 0x7fffffffu;
    if (a_abs < kQuant8TinyMaxBits && (b_abs < kQuant8TinyMaxBits || b_bits == 0x7f800000u))
      ok = ok && float_bits(pair.a) == 0 && (b_bits == 0 || b_bits == 0x7f800000u);
    if (b_bits != 0x7f800000u) {  // (v, +inf): a marked flat bucket
      ok = ok && is_finite_bits(b_bits);
      if (pair.a > pair.b) {  // marked, with a step: at 4 bits only
        ok = ok && bits == 4 && packed_minmax_wide(pair.a - pair.b) &&
             is_finite_bits(float_bits(pair.a - pair.b));
      } else {
        ok = ok && minmax_key(pair.a) <= minmax_key(pair.b) &&
             is_finite_bits(float_bits(pair.b - pair.a));
      }
    }
    valid &= ok;
  }
  return valid;
}

}  // namespace slimreduce::kernels
