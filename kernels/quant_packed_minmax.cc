// 4- and 2-bit min-max codes on the CPU: a scalar path built on
// quant_packed_minmax_rules.h, and AVX2 and AVX-512 paths that give the same
// bits (decoding through a table of each bucket's values, as quant_packed.cc).
// Every path walks the block one bucket at a time; compress reads a bucket
// twice (its smallest and largest finite acc and whether it holds an inf,
// then its codes).
#include "kernels/quant_packed_minmax.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/element_rules.h"
#include "kernels/minmax_scan.h"
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

// ------------------------------------------------------------------ SIMD ----

using packed::DecodeTable;

// A bucket's decoded values by field, from the scalar rule (packed_fields.h).
DecodeTable table_of(const PackedMinmax& p, int bits) {
  return packed::decode_table(bits, [&](int f) { return packed_minmax_decode(f, p, bits); });
}

// ------------------------------------------------------------------ AVX2 ----

using simd::acc8;
using simd::finite_mask8;
using simd::lanes8;

// packed_minmax_code for 8 lanes, as 32-bit integers; `divisor` is the
// step, or +inf in a flat bucket (every finite value then codes 0: (x - lo) /
// inf is +-0, which the clamp makes +0), so the loop takes no branch.
// Special: whether the bucket holds an inf or a NaN (else no lane needs the
// special codes).
template <int Bits, bool Stochastic, bool Special>
SR_AVX2 __m256i code8(__m256 acc, const PackedMinmax& p, __m256 divisor, const Rounding& rounding,
                      std::size_t i) {
  __m256 r = _mm256_div_ps(_mm256_sub_ps(acc, _mm256_set1_ps(p.lo)), divisor);
  r = _mm256_min_ps(_mm256_max_ps(r, _mm256_setzero_ps()),
                    _mm256_set1_ps(static_cast<float>(p.top)));
  const __m256i q = simd::round8(r, Stochastic ? rounding : Rounding{}, i);
  if constexpr (!Special) return q;
  return simd::with_special_codes8(q, acc, p.top + 2, p.top + 1, packed_minmax_nan_code(Bits));
}

// The codes (and residual) of values [i, i + t), t <= 8.
template <int Bits, bool R, bool Stochastic, bool Special>
SR_AVX2 void code_step8(const float* in, float* res, std::size_t i, std::size_t t,
                        std::uint8_t* codes, const PackedMinmax& p, __m256 divisor,
                        const packed::Table8& table, const Rounding& rounding) {
  const __m256i mask = lanes8(t);
  const __m256 acc = acc8<R>(in + i, R ? res + i : nullptr, mask, t == 8);
  const __m256i q = code8<Bits, Stochastic, Special>(acc, p, divisor, rounding, i);  // fields
  packed::store_fields8<Bits>(codes + i * Bits / 8, q, t);
  if constexpr (R) {
    const __m256 sent = packed::lookup8<Bits>(q, table);
    const __m256 kept = _mm256_and_ps(_mm256_sub_ps(acc, sent), finite_mask8(sent));
    t == 8 ? _mm256_storeu_ps(res + i, kept) : _mm256_maskstore_ps(res + i, mask, kept);
  }
}

// A bucket's codes: 32 values at a time (their fields packed and stored
// together), then 8 at a time.
template <int Bits, bool R, bool Stochastic, bool Special>
SR_AVX2_ENTRY void code_bucket8(const float* in, float* res, std::size_t len, std::uint8_t* codes,
                                const PackedMinmax& p, const Rounding& rounding) {
  const __m256 divisor = _mm256_set1_ps(p.step != 0.0f ? p.step : bits_float(0x7f800000u));
  packed::Table8 table{};
  if constexpr (R) table = packed::table8(table_of(p, Bits));
  std::size_t i = 0;
  for (; i + 32 <= len; i += 32) {
    __m256 acc[4];
    __m256i q[4];
    for (int k = 0; k < 4; ++k) {
      const std::size_t at = i + 8 * static_cast<std::size_t>(k);
      acc[k] = acc8<R>(in + at, R ? res + at : nullptr, lanes8(8), true);
      q[k] = code8<Bits, Stochastic, Special>(acc[k], p, divisor, rounding, at);
    }
    packed::store_fields32<Bits>(codes + i * Bits / 8, q[0], q[1], q[2], q[3]);
    if constexpr (R) {
      for (int k = 0; k < 4; ++k) {
        const __m256 sent = packed::lookup8<Bits>(q[k], table);
        _mm256_storeu_ps(res + i + 8 * k,
                         _mm256_and_ps(_mm256_sub_ps(acc[k], sent), finite_mask8(sent)));
      }
    }
  }
  for (; i < len; i += 8) {
    code_step8<Bits, R, Stochastic, Special>(in, res, i, std::min<std::size_t>(8, len - i), codes,
                                             p, divisor, table, rounding);
  }
}

template <int Bits, bool R>
SR_AVX2_ENTRY PackedMinmax compress_bucket_avx2(const float* in, float* res, std::size_t len,
                                                std::uint8_t* codes, const Rounding& rounding) {
  const minmax_scan::Scan scan = minmax_scan::scan8<R>(in, res, len);
  const PackedMinmax p = packed_minmax_params(scan.lo, scan.hi, scan.marked, Bits);
  const bool special = scan.special;
  // A copy of the key the loop can keep in registers (codes, being bytes,
  // may alias the caller's), its flag taken out of the loop.
  const Rounding key = rounding;
  if (key.stochastic) {
    special ? code_bucket8<Bits, R, true, true>(in, res, len, codes, p, key)
            : code_bucket8<Bits, R, true, false>(in, res, len, codes, p, key);
  } else {
    special ? code_bucket8<Bits, R, false, true>(in, res, len, codes, p, key)
            : code_bucket8<Bits, R, false, false>(in, res, len, codes, p, key);
  }
  return p;
}

// --------------------------------------------------------------- AVX-512 ----

SR_AVX512_WARNINGS_OFF

using simd::acc16;
using simd::finite_mask16;
using simd::lanes16;

// code8 for 16 lanes.
template <int Bits, bool Stochastic, bool Special>
SR_AVX512 __m512i code16(__m512 acc, const PackedMinmax& p, __m512 divisor,
                         const Rounding& rounding, std::size_t i) {
  __m512 r = _mm512_div_ps(_mm512_sub_ps(acc, _mm512_set1_ps(p.lo)), divisor);
  r = _mm512_min_ps(_mm512_max_ps(r, _mm512_setzero_ps()),
                    _mm512_set1_ps(static_cast<float>(p.top)));
  const __m512i q = simd::round16(r, Stochastic ? rounding : Rounding{}, i);
  if constexpr (!Special) return q;
  return simd::with_special_codes16(q, acc, p.top + 2, p.top + 1, packed_minmax_nan_code(Bits));
}

// code_step8 for t <= 16 values.
template <int Bits, bool R, bool Stochastic, bool Special>
SR_AVX512 void code_step16(const float* in, float* res, std::size_t i, std::size_t t,
                           std::uint8_t* codes, const PackedMinmax& p, __m512 divisor, __m512 table,
                           const Rounding& rounding) {
  const __mmask16 mask = lanes16(t);
  const __m512 acc = acc16<R>(in + i, R ? res + i : nullptr, mask);
  const __m512i q = code16<Bits, Stochastic, Special>(acc, p, divisor, rounding, i);  // fields
  packed::store_fields16<Bits>(codes + i * Bits / 8, q, t);
  if constexpr (R) {
    const __m512 sent = _mm512_permutexvar_ps(q, table);
    _mm512_mask_storeu_ps(res + i, mask, _mm512_maskz_sub_ps(finite_mask16(sent), acc, sent));
  }
}

// code_bucket8 for 16 lanes at a time: whole groups of 16, then the rest.
template <int Bits, bool R, bool Stochastic, bool Special>
SR_AVX512_ENTRY void code_bucket16(const float* in, float* res, std::size_t len,
                                   std::uint8_t* codes, const PackedMinmax& p,
                                   const Rounding& rounding) {
  const __m512 divisor = _mm512_set1_ps(p.step != 0.0f ? p.step : bits_float(0x7f800000u));
  __m512 table = _mm512_setzero_ps();
  if constexpr (R) table = _mm512_load_ps(table_of(p, Bits).value);
  std::size_t i = 0;
  for (; i + 16 <= len; i += 16) {
    code_step16<Bits, R, Stochastic, Special>(in, res, i, 16, codes, p, divisor, table, rounding);
  }
  if (i < len) {
    code_step16<Bits, R, Stochastic, Special>(in, res, i, len - i, codes, p, divisor, table,
                                              rounding);
  }
}

template <int Bits, bool R>
SR_AVX512_ENTRY PackedMinmax compress_bucket_avx512(const float* in, float* res, std::size_t len,
                                                    std::uint8_t* codes, const Rounding& rounding) {
  const minmax_scan::Scan scan = minmax_scan::scan16<R>(in, res, len);
  const PackedMinmax p = packed_minmax_params(scan.lo, scan.hi, scan.marked, Bits);
  const bool not_finite = scan.special;
  const Rounding key = rounding;  // as compress_bucket_avx2
  if (key.stochastic) {
    not_finite ? code_bucket16<Bits, R, true, true>(in, res, len, codes, p, key)
               : code_bucket16<Bits, R, true, false>(in, res, len, codes, p, key);
  } else {
    not_finite ? code_bucket16<Bits, R, false, true>(in, res, len, codes, p, key)
               : code_bucket16<Bits, R, false, false>(in, res, len, codes, p, key);
  }
  return p;
}

SR_AVX512_WARNINGS_ON

// -------------------------------------------------------------- dispatch ----

template <int Bits, bool R>
struct Avx2Path {
  static PackedMinmax run(const float* in, float* res, std::size_t len, std::uint8_t* codes,
                          const Rounding& rounding) {
    return compress_bucket_avx2<Bits, R>(in, res, len, codes, rounding);
  }
};
template <int Bits, bool R>
struct Avx512Path {
  static PackedMinmax run(const float* in, float* res, std::size_t len, std::uint8_t* codes,
                          const Rounding& rounding) {
    return compress_bucket_avx512<Bits, R>(in, res, len, codes, rounding);
  }
};

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
                    const Pair pair = load_pair(block, j);
                    const PackedMinmax p = packed_minmax_load(pair.a, pair.b, bits);
                    if (simd_path) {
                      simd_path(bytes + offset, len, table_of(p, bits), out + first);
                    } else {
                      decode_bucket_scalar<Add>(bytes + offset, len, bits, p, out + first);
                    }
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
  compress_with(pick_isa<CompressBucket>(isa, &compress_bucket_scalar,
                                         &packed::compress_bucket_any<PackedMinmax, Avx2Path>,
                                         &packed::compress_bucket_any<PackedMinmax, Avx512Path>),
                in, residual, n, bucket, bits, out, rounding);
}

void quant_packed_minmax_decompress(const void* block, std::size_t n, std::size_t bucket, int bits,
                                    float* out, Isa isa) {
  decode_any<false>(block, n, bucket, bits, out, isa);
}

void quant_packed_minmax_accumulate(const void* block, std::size_t n, std::size_t bucket, int bits,
                                    float* dense, Isa isa) {
  decode_any<true>(block, n, bucket, bits, dense, isa);
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
    // Values all below 2^-100 are sent as (+0, +0). A marked flat bucket's v
    // (in (v, +inf)) may still be below it, a midpoint or a lo beside a hi
    // above it, but is never -0 or subnormal (lo, hi and their difference
    // are multiples of 2^-123 or more there).
    const std::uint32_t a_abs = float_bits(pair.a) & 0x7fffffffu, b_abs = b_bits & 0x7fffffffu;
    if (b_bits == 0x7f800000u) {
      ok = ok && (float_bits(pair.a) == 0 || (a_abs & 0x7f800000u) != 0);
    } else if (a_abs < kQuant8TinyMaxBits && b_abs < kQuant8TinyMaxBits) {
      ok = ok && float_bits(pair.a) == 0 && b_bits == 0;
    }
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
