// 4- and 2-bit quantization on the CPU: a scalar path built on
// quant_packed_rules.h, and AVX2 and AVX-512 paths that give the same bits
// (their decoders and residuals look fields up in a table of the bucket's
// values, made by the scalar rule: packed_fields.h). Every path walks the
// block one bucket at a time; compress reads a bucket twice (its largest
// finite |acc| and whether it holds an inf, then its codes).
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

// ------------------------------------------------------------------ SIMD ----

using packed::DecodeTable;

// A bucket's decoded values by field, from the scalar rule (packed_fields.h).
DecodeTable table_of(float max, float step, int top, bool marked, int bits) {
  return packed::decode_table(bits, [&](int f) {
    return quant_packed_decode(quant_packed_from_field(static_cast<std::uint32_t>(f), bits), max,
                               step, top, marked, bits);
  });
}
DecodeTable table_of(float stored, int bits) {
  const bool marked = quant_packed_marked(stored);
  const int top = quant_packed_top(bits, marked);
  const float max = quant_packed_unsigned(stored);
  return table_of(max, quant_packed_step(max, top), top, marked, bits);
}

// A bucket's parameters, from its largest finite |acc| bits and whether it holds an inf.
struct Bucket {
  bool marked;
  int top;
  float max, step;
};
Bucket bucket_of(std::uint32_t max_bits, bool marked, int bits) {
  const int top = quant_packed_top(bits, marked);
  const float max = quant_packed_max(max_bits, top);
  return {marked, top, max, quant_packed_step(max, top)};
}

// ------------------------------------------------------------------ AVX2 ----

using simd::acc8;
using simd::finite_mask8;
using simd::lanes8;

// quant_packed_code for 8 lanes, as 32-bit integers; `divisor` is the step,
// or +inf where it is 0 (every finite value then codes 0: x / inf is +-0),
// so the loop takes no branch. Special: whether the bucket holds an inf or
// a NaN (else no lane needs the special codes).
template <int Bits, bool Stochastic, bool Special>
SR_AVX2 __m256i code8(__m256 acc, __m256 divisor, int top, const Rounding& rounding,
                      std::size_t i) {
  const __m256 limit = _mm256_set1_ps(static_cast<float>(top));
  __m256 r = _mm256_div_ps(acc, divisor);
  r = _mm256_min_ps(_mm256_max_ps(r, _mm256_sub_ps(_mm256_setzero_ps(), limit)), limit);
  const __m256i q = simd::round8(r, Stochastic ? rounding : Rounding{}, i);
  if constexpr (!Special) return q;
  return simd::with_special_codes8(q, acc, top + 1, -(top + 1), quant_packed_nan_code(Bits));
}

// A bucket's largest finite |acc| bits, whether it holds an inf, and whether
// it holds a value that is not finite.
struct Scan {
  std::uint32_t max_bits;
  bool marked, special;
};

// First every |acc| (the lanes past len read as 0); only where one is not
// finite (rare) a second pass that leaves infs and NaNs out.
template <bool R>
SR_AVX2 Scan scan8(const float* in, const float* res, std::size_t len) {
  const std::uint32_t largest = simd::largest_abs8<R>(in, res, len, false);
  if (largest < 0x7f800000u) return {largest, false, false};
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  __m256i max = _mm256_setzero_si256(), infs = _mm256_setzero_si256();
  for (std::size_t i = 0; i < len; i += 8) {
    const std::size_t t = std::min<std::size_t>(8, len - i);
    const __m256 acc = acc8<R>(in + i, R ? res + i : nullptr, lanes8(t), t == 8);
    const __m256i abs = _mm256_and_si256(_mm256_castps_si256(acc), abs_mask);
    max = _mm256_max_epu32(max, _mm256_and_si256(abs, _mm256_cmpgt_epi32(inf, abs)));
    infs = _mm256_or_si256(infs, _mm256_cmpeq_epi32(abs, inf));
  }
  return {simd::reduce_max8(max), !_mm256_testz_si256(infs, infs), true};
}

// What the code loop needs of a bucket.
struct Coder8 {
  __m256 divisor;
  int top;
  packed::Table8 table;  // R only
};

// The codes (and residual) of values [i, i + t), t <= 8.
template <int Bits, bool R, bool Stochastic, bool Special>
SR_AVX2 void code_step8(const float* in, float* res, std::size_t i, std::size_t t,
                        std::uint8_t* codes, const Coder8& c, const Rounding& rounding) {
  const __m256i mask = lanes8(t);
  const __m256 acc = acc8<R>(in + i, R ? res + i : nullptr, mask, t == 8);
  const __m256i q = code8<Bits, Stochastic, Special>(acc, c.divisor, c.top, rounding, i);
  packed::store_fields8<Bits>(codes + i * Bits / 8, q, t);
  if constexpr (R) {
    const __m256i fields = _mm256_and_si256(q, _mm256_set1_epi32((1 << Bits) - 1));
    const __m256 sent = packed::lookup8<Bits>(fields, c.table);
    const __m256 kept = _mm256_and_ps(_mm256_sub_ps(acc, sent), finite_mask8(sent));
    t == 8 ? _mm256_storeu_ps(res + i, kept) : _mm256_maskstore_ps(res + i, mask, kept);
  }
}

// A bucket's codes: 32 values at a time (their fields packed and stored
// together), then 8 at a time.
template <int Bits, bool R, bool Stochastic, bool Special>
SR_AVX2_ENTRY void code_bucket8(const float* in, float* res, std::size_t len, std::uint8_t* codes,
                                const Coder8& c, const Rounding& rounding) {
  std::size_t i = 0;
  for (; i + 32 <= len; i += 32) {
    __m256 acc[4];
    __m256i q[4];
    for (int k = 0; k < 4; ++k) {
      const std::size_t at = i + 8 * static_cast<std::size_t>(k);
      acc[k] = acc8<R>(in + at, R ? res + at : nullptr, lanes8(8), true);
      q[k] = code8<Bits, Stochastic, Special>(acc[k], c.divisor, c.top, rounding, at);
    }
    packed::store_fields32<Bits>(codes + i * Bits / 8, q[0], q[1], q[2], q[3]);
    if constexpr (R) {
      for (int k = 0; k < 4; ++k) {
        const __m256i fields = _mm256_and_si256(q[k], _mm256_set1_epi32((1 << Bits) - 1));
        const __m256 sent = packed::lookup8<Bits>(fields, c.table);
        _mm256_storeu_ps(res + i + 8 * k,
                         _mm256_and_ps(_mm256_sub_ps(acc[k], sent), finite_mask8(sent)));
      }
    }
  }
  for (; i < len; i += 8) {
    code_step8<Bits, R, Stochastic, Special>(in, res, i, std::min<std::size_t>(8, len - i), codes,
                                             c, rounding);
  }
}

template <int Bits, bool R>
SR_AVX2_ENTRY float compress_bucket_avx2(const float* in, float* res, std::size_t len,
                                         std::uint8_t* codes, const Rounding& rounding) {
  const Scan scan = scan8<R>(in, res, len);
  const Bucket b = bucket_of(scan.max_bits, scan.marked, Bits);
  Coder8 c{_mm256_set1_ps(b.step != 0.0f ? b.step : bits_float(0x7f800000u)), b.top, {}};
  if constexpr (R) c.table = packed::table8(table_of(b.max, b.step, b.top, b.marked, Bits));
  // A copy of the key the loop can keep in registers (codes, being bytes,
  // may alias the caller's), its flag taken out of the loop.
  const Rounding key = rounding;
  if (key.stochastic) {
    scan.special ? code_bucket8<Bits, R, true, true>(in, res, len, codes, c, key)
                 : code_bucket8<Bits, R, true, false>(in, res, len, codes, c, key);
  } else {
    scan.special ? code_bucket8<Bits, R, false, true>(in, res, len, codes, c, key)
                 : code_bucket8<Bits, R, false, false>(in, res, len, codes, c, key);
  }
  return quant_packed_stored(b.max, b.marked);
}

// --------------------------------------------------------------- AVX-512 ----

SR_AVX512_WARNINGS_OFF

using simd::acc16;
using simd::finite_mask16;
using simd::lanes16;

// code8 for 16 lanes.
template <int Bits, bool Stochastic, bool Special>
SR_AVX512 __m512i code16(__m512 acc, __m512 divisor, int top, const Rounding& rounding,
                         std::size_t i) {
  const __m512 limit = _mm512_set1_ps(static_cast<float>(top));
  __m512 r = _mm512_div_ps(acc, divisor);
  r = _mm512_min_ps(_mm512_max_ps(r, _mm512_sub_ps(_mm512_setzero_ps(), limit)), limit);
  const __m512i q = simd::round16(r, Stochastic ? rounding : Rounding{}, i);
  if constexpr (!Special) return q;
  return simd::with_special_codes16(q, acc, top + 1, -(top + 1), quant_packed_nan_code(Bits));
}

// scan8 for 16 lanes at a time.
template <bool R>
SR_AVX512 Scan scan16(const float* in, const float* res, std::size_t len) {
  const std::uint32_t largest = simd::largest_abs16<R>(in, res, len, false);
  if (largest < 0x7f800000u) return {largest, false, false};
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  __m512i max = _mm512_setzero_si512();
  __mmask16 infs = 0;
  for (std::size_t i = 0; i < len; i += 16) {
    const __m512 acc = acc16<R>(in + i, R ? res + i : nullptr, lanes16(len - i));
    max = _mm512_max_epu32(max, simd::finite_abs16(acc));
    infs |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(_mm512_castps_si512(acc), abs_mask), inf);
  }
  return {static_cast<std::uint32_t>(_mm512_reduce_max_epu32(max)), infs != 0, true};
}

// code_step8 for t <= 16 values.
template <int Bits, bool R, bool Stochastic, bool Special>
SR_AVX512 void code_step16(const float* in, float* res, std::size_t i, std::size_t t,
                           std::uint8_t* codes, __m512 divisor, int top, __m512 table,
                           const Rounding& rounding) {
  const __mmask16 mask = lanes16(t);
  const __m512 acc = acc16<R>(in + i, R ? res + i : nullptr, mask);
  const __m512i q = code16<Bits, Stochastic, Special>(acc, divisor, top, rounding, i);
  packed::store_fields16<Bits>(codes + i * Bits / 8, q, t);
  if constexpr (R) {
    const __m512i fields = _mm512_and_si512(q, _mm512_set1_epi32((1 << Bits) - 1));
    const __m512 sent = _mm512_permutexvar_ps(fields, table);
    _mm512_mask_storeu_ps(res + i, mask, _mm512_maskz_sub_ps(finite_mask16(sent), acc, sent));
  }
}

// code_bucket8 for 16 lanes at a time: whole groups of 16, then the rest.
template <int Bits, bool R, bool Stochastic, bool Special>
SR_AVX512_ENTRY void code_bucket16(const float* in, float* res, std::size_t len,
                                   std::uint8_t* codes, const Bucket& b, const Rounding& rounding) {
  const __m512 divisor = _mm512_set1_ps(b.step != 0.0f ? b.step : bits_float(0x7f800000u));
  __m512 table = _mm512_setzero_ps();
  if constexpr (R) table = _mm512_load_ps(table_of(b.max, b.step, b.top, b.marked, Bits).value);
  std::size_t i = 0;
  for (; i + 16 <= len; i += 16) {
    code_step16<Bits, R, Stochastic, Special>(in, res, i, 16, codes, divisor, b.top, table,
                                              rounding);
  }
  if (i < len) {
    code_step16<Bits, R, Stochastic, Special>(in, res, i, len - i, codes, divisor, b.top, table,
                                              rounding);
  }
}

template <int Bits, bool R>
SR_AVX512_ENTRY float compress_bucket_avx512(const float* in, float* res, std::size_t len,
                                             std::uint8_t* codes, const Rounding& rounding) {
  const Scan scan = scan16<R>(in, res, len);
  const Bucket b = bucket_of(scan.max_bits, scan.marked, Bits);
  const Rounding key = rounding;  // as compress_bucket_avx2
  if (key.stochastic) {
    scan.special ? code_bucket16<Bits, R, true, true>(in, res, len, codes, b, key)
                 : code_bucket16<Bits, R, true, false>(in, res, len, codes, b, key);
  } else {
    scan.special ? code_bucket16<Bits, R, false, true>(in, res, len, codes, b, key)
                 : code_bucket16<Bits, R, false, false>(in, res, len, codes, b, key);
  }
  return quant_packed_stored(b.max, b.marked);
}

SR_AVX512_WARNINGS_ON

// -------------------------------------------------------------- dispatch ----

template <int Bits, bool R>
struct Avx2Path {
  static float run(const float* in, float* res, std::size_t len, std::uint8_t* codes,
                   const Rounding& rounding) {
    return compress_bucket_avx2<Bits, R>(in, res, len, codes, rounding);
  }
};
template <int Bits, bool R>
struct Avx512Path {
  static float run(const float* in, float* res, std::size_t len, std::uint8_t* codes,
                   const Rounding& rounding) {
    return compress_bucket_avx512<Bits, R>(in, res, len, codes, rounding);
  }
};

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

// The scalar path decodes value by value (the rules); the SIMD paths through
// each bucket's table.
template <bool Add>
void decode_any(const void* block, std::size_t n, std::size_t bucket, int bits, float* out,
                Isa isa) {
  using DecodeFields = void (*)(const std::uint8_t*, std::size_t, const DecodeTable&, float*);
  const bool four = bits == 4;
  const DecodeFields simd_path = pick_isa<DecodeFields>(
      isa, nullptr,
      four ? &packed::decode_bucket_avx2<4, Add> : &packed::decode_bucket_avx2<2, Add>,
      four ? &packed::decode_bucket_avx512<4, Add> : &packed::decode_bucket_avx512<2, Add>);
  const auto* bytes = static_cast<const std::uint8_t*>(block);
  for_each_bucket(n, bucket, bits,
                  [&](std::size_t j, std::size_t first, std::size_t len, std::size_t offset) {
                    const float stored = load_scale(block, j);
                    if (simd_path) {
                      simd_path(bytes + offset, len, table_of(stored, bits), out + first);
                    } else {
                      decode_bucket_scalar<Add>(bytes + offset, len, bits, stored, out + first);
                    }
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
  compress_with(pick_isa<CompressBucket>(isa, &compress_bucket_scalar,
                                         &packed::compress_bucket_any<float, Avx2Path>,
                                         &packed::compress_bucket_any<float, Avx512Path>),
                in, residual, n, bucket, bits, out, rounding);
}

void quant_packed_decompress(const void* block, std::size_t n, std::size_t bucket, int bits,
                             float* out, Isa isa) {
  decode_any<false>(block, n, bucket, bits, out, isa);
}

void quant_packed_accumulate(const void* block, std::size_t n, std::size_t bucket, int bits,
                             float* dense, Isa isa) {
  decode_any<true>(block, n, bucket, bits, dense, isa);
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
