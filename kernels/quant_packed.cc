// 4- and 2-bit quantization on the CPU: a scalar path built on
// quant_packed_rules.h and an AVX2 path that gives the same bits (an AVX-512
// CPU runs the AVX2 path: the packing, not the arithmetic, is the work here).
// Every path walks the block one bucket at a time; compress reads a bucket
// twice (its largest finite |acc| and whether it holds an inf, then its codes).
#include "kernels/quant_packed.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/element_rules.h"
#include "kernels/packed_fields.h"
#include "kernels/quant_packed_rules.h"
#include "kernels/simd.h"

namespace slimreduce::kernels {
namespace {

// ---------------------------------------------------------------- layout ----

using packed::code_bytes;

float load_scale(const void* block, std::size_t j) {
  float scale;
  std::memcpy(&scale, static_cast<const unsigned char*>(block) + 4 * j, sizeof scale);
  return scale;
}

void store_scale(void* block, std::size_t j, float scale) {
  std::memcpy(static_cast<unsigned char*>(block) + 4 * j, &scale, sizeof scale);
}

// fn(j, first, len, codes offset) for each bucket j: values [first, first + len).
template <class Fn>
void for_each_bucket(std::size_t n, std::size_t bucket, int bits, Fn fn) {
  const std::size_t stride = code_bytes(bucket, bits);
  std::size_t offset = 4 * quant_packed_buckets(n, bucket);
  for (std::size_t j = 0, first = 0; first < n; ++j, first += bucket, offset += stride) {
    fn(j, first, std::min(bucket, n - first), offset);
  }
}

// `rounding`: the bucket's, from its first value.
using CompressBucket = float (*)(const float* in, float* res, std::size_t len, int bits,
                                 std::uint8_t* codes, const Rounding& rounding);
using DecodeBucket = void (*)(const std::uint8_t* codes, std::size_t len, int bits, float stored,
                              float* out);

// ---------------------------------------------------------------- scalar ----

inline float acc_at(const float* in, const float* res, std::size_t i) {
  return res ? add_nan_first(in[i], res[i]) : in[i];
}

float compress_bucket_scalar(const float* in, float* res, std::size_t len, int bits,
                             std::uint8_t* codes, const Rounding& rounding) {
  std::uint32_t max_bits = 0;
  bool marked = false;
  for (std::size_t i = 0; i < len; ++i) {
    const float acc = acc_at(in, res, i);
    max_bits = std::max(max_bits, quant8_finite_abs_bits(acc));
    marked |= quant_packed_marks(acc);
  }
  const int top = quant_packed_top(bits, marked);
  const float max = quant_packed_max(max_bits, top), step = quant_packed_step(max, top);
  std::memset(codes, 0, code_bytes(len, bits));
  for (std::size_t i = 0; i < len; ++i) {
    const float acc = acc_at(in, res, i);
    const int q = quant_packed_code(acc, step, top, bits, rounding, i);
    const std::size_t bit = i * static_cast<std::size_t>(bits);
    codes[bit / 8] |= static_cast<std::uint8_t>(quant_packed_field(q, bits) << (bit % 8));
    if (res) res[i] = residual_after(acc, quant_packed_decode(q, max, step, top, marked, bits));
  }
  return quant_packed_stored(max, marked);
}

inline int code_at(const std::uint8_t* codes, std::size_t i, int bits) {
  const std::size_t bit = i * static_cast<std::size_t>(bits);
  return quant_packed_from_field((codes[bit / 8] >> (bit % 8)) & ((1u << bits) - 1u), bits);
}

template <bool Add>
void decode_bucket_scalar(const std::uint8_t* codes, std::size_t len, int bits, float stored,
                          float* out) {
  const bool marked = quant_packed_marked(stored);
  const int top = quant_packed_top(bits, marked);
  const float max = quant_packed_unsigned(stored), step = quant_packed_step(max, top);
  for (std::size_t i = 0; i < len; ++i) {
    const float value = quant_packed_decode(code_at(codes, i, bits), max, step, top, marked, bits);
    out[i] = Add ? add_nan_first(out[i], value) : value;
  }
}

// ------------------------------------------------------------------ AVX2 ----

using packed::store_codes8;
using simd::acc8;
using simd::add_nan_first8;
using simd::finite_mask8;
using simd::lanes8;
using simd::replace8;

// quant_packed_code for 8 lanes, as 32-bit integers.
template <int Bits>
SR_AVX2 __m256i code8(__m256 acc, __m256 scale, bool zero_scale, int top, const Rounding& rounding,
                      std::size_t i) {
  __m256i q = _mm256_setzero_si256();
  if (!zero_scale) {
    const __m256 limit = _mm256_set1_ps(static_cast<float>(top));
    __m256 r = _mm256_div_ps(acc, scale);
    r = _mm256_min_ps(_mm256_max_ps(r, _mm256_sub_ps(_mm256_setzero_ps(), limit)), limit);
    q = simd::round8(r, rounding, i);
  }
  return simd::with_special_codes8(q, acc, top + 1, -(top + 1), quant_packed_nan_code(Bits));
}

// quant_packed_decode for 8 lanes of 32-bit codes.
template <int Bits>
SR_AVX2 __m256 decode8(__m256i q, float max, __m256 step, int top, bool marked) {
  __m256 out = _mm256_mul_ps(_mm256_cvtepi32_ps(q), step);
  if (top != 0) {  // +-top decode to +-m itself
    const std::uint32_t m = float_bits(max);
    out = replace8(out, q, top, m);
    out = replace8(out, q, -top, m | 0x80000000u);
  }
  // Codes beyond +-top are NaN, or +-inf in a marked bucket.
  const __m256i special = _mm256_or_si256(_mm256_cmpgt_epi32(q, _mm256_set1_epi32(top)),
                                          _mm256_cmpgt_epi32(_mm256_set1_epi32(-top), q));
  if (__builtin_expect(_mm256_testz_si256(special, special), 1)) return out;
  if (marked) {
    out = replace8(out, q, top + 1, 0x7f800000u);
    out = replace8(out, q, -(top + 1), 0xff800000u);
  }
  return replace8(out, q, quant_packed_nan_code(Bits), kQuant8NanBits);
}

// code_bytes(t) bytes of codes as 8 sign-extended 32-bit lanes (0 beyond t).
template <int Bits>
SR_AVX2 __m256i load_codes8(const std::uint8_t* codes, std::size_t t) {
  const __m256i wide = packed::load_fields8<Bits>(codes, t);
  return _mm256_srai_epi32(_mm256_slli_epi32(wide, 32 - Bits), 32 - Bits);
}

template <int Bits, bool R>
SR_AVX2_ENTRY float compress_bucket_avx2(const float* in, float* res, std::size_t len,
                                         std::uint8_t* codes, const Rounding& rounding) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  __m256i max = _mm256_setzero_si256(), infs = _mm256_setzero_si256();
  for (std::size_t i = 0; i < len; i += 8) {
    const std::size_t t = std::min<std::size_t>(8, len - i);
    const __m256 acc = acc8<R>(in + i, R ? res + i : nullptr, lanes8(t), t == 8);
    const __m256i abs = _mm256_and_si256(_mm256_castps_si256(acc), abs_mask);
    max = _mm256_max_epu32(max, _mm256_and_si256(abs, _mm256_cmpgt_epi32(inf, abs)));
    infs = _mm256_or_si256(infs, _mm256_cmpeq_epi32(abs, inf));
  }
  const bool marked = !_mm256_testz_si256(infs, infs);
  const int top = quant_packed_top(Bits, marked);
  const float bucket_max = quant_packed_max(simd::reduce_max8(max), top);
  const float step = quant_packed_step(bucket_max, top);
  const __m256 vstep = _mm256_set1_ps(step);
  for (std::size_t i = 0; i < len; i += 8) {
    const std::size_t t = std::min<std::size_t>(8, len - i);
    const __m256i mask = lanes8(t);
    const __m256 acc = acc8<R>(in + i, R ? res + i : nullptr, mask, t == 8);
    const __m256i q = code8<Bits>(acc, vstep, step == 0.0f, top, rounding, i);
    store_codes8<Bits>(codes + i * Bits / 8, q, t);
    if constexpr (R) {
      const __m256 sent = decode8<Bits>(q, bucket_max, vstep, top, marked);
      const __m256 kept = _mm256_and_ps(_mm256_sub_ps(acc, sent), finite_mask8(sent));
      t == 8 ? _mm256_storeu_ps(res + i, kept) : _mm256_maskstore_ps(res + i, mask, kept);
    }
  }
  return quant_packed_stored(bucket_max, marked);
}

float compress_bucket_avx2_any(const float* in, float* res, std::size_t len, int bits,
                               std::uint8_t* codes, const Rounding& rounding) {
  if (bits == 4) {
    return res ? compress_bucket_avx2<4, true>(in, res, len, codes, rounding)
               : compress_bucket_avx2<4, false>(in, nullptr, len, codes, rounding);
  }
  return res ? compress_bucket_avx2<2, true>(in, res, len, codes, rounding)
             : compress_bucket_avx2<2, false>(in, nullptr, len, codes, rounding);
}

template <int Bits, bool Add>
SR_AVX2_ENTRY void decode_bucket_avx2(const std::uint8_t* codes, std::size_t len, float stored,
                                      float* out) {
  const bool marked = quant_packed_marked(stored);
  const int top = quant_packed_top(Bits, marked);
  const float max = quant_packed_unsigned(stored);
  const __m256 vstep = _mm256_set1_ps(quant_packed_step(max, top));
  for (std::size_t i = 0; i < len; i += 8) {
    const std::size_t t = std::min<std::size_t>(8, len - i);
    const __m256i q = load_codes8<Bits>(codes + i * Bits / 8, t);
    __m256 value = decode8<Bits>(q, max, vstep, top, marked);
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
void decode_bucket_avx2_any(const std::uint8_t* codes, std::size_t len, int bits, float stored,
                            float* out) {
  bits == 4 ? decode_bucket_avx2<4, Add>(codes, len, stored, out)
            : decode_bucket_avx2<2, Add>(codes, len, stored, out);
}

// -------------------------------------------------------------- dispatch ----

void compress_with(CompressBucket fn, const float* in, float* res, std::size_t n,
                   std::size_t bucket, int bits, void* out, const Rounding& rounding) {
  auto* bytes = static_cast<std::uint8_t*>(out);
  for_each_bucket(n, bucket, bits,
                  [&](std::size_t j, std::size_t first, std::size_t len, std::size_t offset) {
                    store_scale(out, j,
                                fn(in + first, res ? res + first : nullptr, len, bits,
                                   bytes + offset, rounding.at(first)));
                  });
}

void decode_with(DecodeBucket fn, const void* block, std::size_t n, std::size_t bucket, int bits,
                 float* out) {
  const auto* bytes = static_cast<const std::uint8_t*>(block);
  for_each_bucket(n, bucket, bits,
                  [&](std::size_t j, std::size_t first, std::size_t len, std::size_t offset) {
                    fn(bytes + offset, len, bits, load_scale(block, j), out + first);
                  });
}

}  // namespace

std::size_t quant_packed_buckets(std::size_t n, std::size_t bucket) {
  return n / bucket + (n % bucket != 0);
}

std::size_t quant_packed_bytes(std::size_t n, std::size_t bucket, int bits) {
  const std::size_t full = n / bucket;
  return 4 * quant_packed_buckets(n, bucket) + full * code_bytes(bucket, bits) +
         code_bytes(n % bucket, bits);
}

void quant_packed_compress(const float* in, float* residual, std::size_t n, std::size_t bucket,
                           int bits, void* out, Isa isa, const Rounding& rounding) {
  compress_with(pick_isa<CompressBucket>(isa, &compress_bucket_scalar, &compress_bucket_avx2_any),
                in, residual, n, bucket, bits, out, rounding);
}

void quant_packed_decompress(const void* block, std::size_t n, std::size_t bucket, int bits,
                             float* out, Isa isa) {
  decode_with(
      pick_isa<DecodeBucket>(isa, &decode_bucket_scalar<false>, &decode_bucket_avx2_any<false>),
      block, n, bucket, bits, out);
}

void quant_packed_accumulate(const void* block, std::size_t n, std::size_t bucket, int bits,
                             float* dense, Isa isa) {
  decode_with(
      pick_isa<DecodeBucket>(isa, &decode_bucket_scalar<true>, &decode_bucket_avx2_any<true>),
      block, n, bucket, bits, dense);
}

bool quant_packed_valid(const void* block, std::size_t n, std::size_t bucket, int bits) {
  // What compress stores: +-0, or +-m for a finite m >= 2^-100 (positive
  // floats order as their bits); a marked 2-bit bucket stores only -0. Any
  // other value (an inf, a NaN, a subnormal) would decode codes to values no
  // rank sent; the codes themselves are any bits.
  bool valid = true;
  for (std::size_t j = 0, buckets = quant_packed_buckets(n, bucket); j < buckets; ++j) {
    const float stored = load_scale(block, j);
    const int top = quant_packed_top(bits, quant_packed_marked(stored));
    const std::uint32_t max = float_bits(quant_packed_unsigned(stored));
    valid &= max == 0 || (top > 0 && max >= kQuant8TinyMaxBits && max <= 0x7f7fffffu);
  }
  return valid;
}

}  // namespace slimreduce::kernels
