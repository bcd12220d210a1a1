// What the packed 4- and 2-bit codes share on the CPU (quant_packed.cc's
// absmax codes, quant_packed_minmax.cc's min-max codes): the bytes a bucket's
// codes take; the SIMD paths' moves between codes in 32-bit lanes and their
// `Bits`-bit fields, low bits first; and their decoders, which look each
// field up in a table of the bucket's 2^Bits values. Internal to kernels/:
// include it only from a kernel's .cc, after kernels/simd.h.
//
// Why a table: a bucket has at most 16 distinct decoded values, so a decoder
// that computes each one (convert, scale, place the exact and special codes)
// does per value what a table does once per bucket. The table's entries come
// from the scalar rule itself, so every vector path decodes to its bits by
// construction; a lookup is one permute (AVX-512) or two and a blend (AVX2).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/element_rules.h"
#include "kernels/simd.h"

namespace slimreduce::kernels::packed {

// Bytes of the codes of a bucket of len values: each bucket starts on a byte.
inline std::size_t code_bytes(std::size_t len, int bits) {
  return (len * static_cast<std::size_t>(bits) + 7) / 8;
}

// A bucket's decoded value of each field (entries past 2^bits unused).
struct DecodeTable {
  alignas(64) float value[16];
};

// The table of a bucket whose field f decodes to decode(f) (the scalar rule).
template <class Decode>
DecodeTable decode_table(int bits, Decode decode) {
  DecodeTable table{};
  for (int f = 0; f < (1 << bits); ++f) table.value[f] = decode(f);
  return table;
}

// One bucket's compression for a width and whether there is a residual:
// Path<Bits, R>::run (a codec's compress_bucket of one ISA, returning what
// the bucket stores).
template <class Stored, template <int, bool> class Path>
Stored compress_bucket_any(const float* in, float* res, std::size_t len, int bits,
                           std::uint8_t* codes, const Rounding& rounding) {
  if (bits == 4) {
    return res ? Path<4, true>::run(in, res, len, codes, rounding)
               : Path<4, false>::run(in, nullptr, len, codes, rounding);
  }
  return res ? Path<2, true>::run(in, res, len, codes, rounding)
             : Path<2, false>::run(in, nullptr, len, codes, rounding);
}

// ------------------------------------------------------------------ AVX2 ----

// The fields of 8 codes at `codes` (code_bytes(t) bytes read), one per
// 32-bit lane: a broadcast word shifted per lane.
template <int Bits>
SR_AVX2 __m256i load_fields8(const std::uint8_t* codes, std::size_t t) {
  std::uint32_t word = 0;
  if (t == 8) {
    std::memcpy(&word, codes, Bits);  // a constant size: one load
  } else {
    std::memcpy(&word, codes, code_bytes(t, Bits));
  }
  const __m256i shifts =
      _mm256_setr_epi32(0, Bits, 2 * Bits, 3 * Bits, 4 * Bits, 5 * Bits, 6 * Bits, 7 * Bits);
  return _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(word)), shifts),
                          _mm256_set1_epi32((1 << Bits) - 1));
}

// Up to 16 fields, one per byte (their low Bits bits, higher bits 0), packed
// into the low bytes: pairs (4 bits) or quads (2 bits) summed with weights
// 1, 16 or 1, 4, 16, 64.
template <int Bits>
SR_AVX2 __m128i pack_fields(__m128i bytes) {
  const __m128i zero = _mm_setzero_si128();
  if constexpr (Bits == 4) {
    return _mm_packus_epi16(_mm_maddubs_epi16(bytes, _mm_set1_epi16(0x1001)), zero);
  } else {
    const __m128i quads =
        _mm_madd_epi16(_mm_maddubs_epi16(bytes, _mm_set1_epi16(0x0401)), _mm_set1_epi32(0x100001));
    return _mm_packus_epi16(_mm_packus_epi32(quads, zero), zero);
  }
}

// t <= 8 codes (32-bit lanes in [-128, 127]) stored as code_bytes(t) bytes of
// their low Bits bits; the fields past t are 0 (a bucket's last byte's unused
// bits).
template <int Bits>
SR_AVX2 void store_fields8(std::uint8_t* codes, __m256i q, std::size_t t) {
  if (t < 8) q = _mm256_and_si256(q, simd::lanes8(t));
  const __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
  const __m128i bytes =
      _mm_and_si128(_mm_packs_epi16(words, words), _mm_set1_epi8((1 << Bits) - 1));
  const auto word = static_cast<std::uint32_t>(_mm_cvtsi128_si32(pack_fields<Bits>(bytes)));
  // Little-endian: the low bytes.
  if (t == 8) {
    std::memcpy(codes, &word, Bits);
  } else {
    std::memcpy(codes, &word, code_bytes(t, Bits));
  }
}

// store_fields8 for 32 codes in four vectors: packed together, then one
// permute puts the bytes in order (the packs work within 128-bit halves).
template <int Bits>
SR_AVX2 void store_fields32(std::uint8_t* codes, __m256i q0, __m256i q1, __m256i q2, __m256i q3) {
  const __m256i interleaved =
      _mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
  const __m256i bytes = _mm256_and_si256(
      _mm256_permutevar8x32_epi32(interleaved, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)),
      _mm256_set1_epi8((1 << Bits) - 1));
  const __m256i zero = _mm256_setzero_si256();
  if constexpr (Bits == 4) {
    // Pairs into bytes: 8 per half, in the low 8 bytes of each half.
    const __m256i packed =
        _mm256_packus_epi16(_mm256_maddubs_epi16(bytes, _mm256_set1_epi16(0x1001)), zero);
    const __m256i joined = _mm256_permute4x64_epi64(packed, 0x08);  // quadwords 0 and 2
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes), _mm256_castsi256_si128(joined));
  } else {
    // Quads into bytes: 4 per half, in the low 4 bytes of each half.
    const __m256i quads = _mm256_madd_epi16(_mm256_maddubs_epi16(bytes, _mm256_set1_epi16(0x0401)),
                                            _mm256_set1_epi32(0x100001));
    const __m256i packed = _mm256_packus_epi16(_mm256_packus_epi32(quads, zero), zero);
    const __m128i joined =
        _mm_unpacklo_epi32(_mm256_castsi256_si128(packed), _mm256_extracti128_si256(packed, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(codes), joined);
  }
}

// The table's two halves, for lookup8.
struct Table8 {
  __m256 lo, hi;
};
SR_AVX2 Table8 table8(const DecodeTable& table) {
  return {_mm256_load_ps(table.value), _mm256_load_ps(table.value + 8)};
}

// The values of 8 fields.
template <int Bits>
SR_AVX2 __m256 lookup8(__m256i fields, const Table8& table) {
  const __m256 low = _mm256_permutevar8x32_ps(table.lo, fields);
  if constexpr (Bits == 2) return low;
  // Field bit 3, moved to the sign, picks the high half.
  return _mm256_blendv_ps(low, _mm256_permutevar8x32_ps(table.hi, fields),
                          _mm256_castsi256_ps(_mm256_slli_epi32(fields, 28)));
}

// The decoded values of t <= 8 codes into out (Add: add_nan_first into it).
template <int Bits, bool Add>
SR_AVX2 void decode_step8(const std::uint8_t* codes, std::size_t t, const Table8& table,
                          float* out) {
  __m256 value = lookup8<Bits>(load_fields8<Bits>(codes, t), table);
  if (t == 8) {
    if constexpr (Add) value = simd::add_nan_first8(_mm256_loadu_ps(out), value);
    _mm256_storeu_ps(out, value);
  } else {
    const __m256i mask = simd::lanes8(t);
    if constexpr (Add) value = simd::add_nan_first8(_mm256_maskload_ps(out, mask), value);
    _mm256_maskstore_ps(out, mask, value);
  }
}

// A bucket of len values decoded through its table.
template <int Bits, bool Add>
SR_AVX2_ENTRY void decode_bucket_avx2(const std::uint8_t* codes, std::size_t len,
                                      const DecodeTable& decoded, float* out) {
  const Table8 table = table8(decoded);
  std::size_t i = 0;
  for (; i + 8 <= len; i += 8) decode_step8<Bits, Add>(codes + i * Bits / 8, 8, table, out + i);
  if (i < len) decode_step8<Bits, Add>(codes + i * Bits / 8, len - i, table, out + i);
}

// --------------------------------------------------------------- AVX-512 ----

SR_AVX512_WARNINGS_OFF

// load_fields8 for 16 codes (4 bits: lanes 0-7 from the first word, 8-15 the second).
template <int Bits>
SR_AVX512 __m512i load_fields16(const std::uint8_t* codes, std::size_t t) {
  std::uint64_t word = 0;
  if (t == 16) {
    std::memcpy(&word, codes, 2 * Bits);
  } else {
    std::memcpy(&word, codes, code_bytes(t, Bits));
  }
  __m512i words, shifts;
  if constexpr (Bits == 4) {
    words = _mm512_permutexvar_epi32(
        _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
        _mm512_castsi128_si512(_mm_cvtsi64_si128(static_cast<long long>(word))));
    shifts = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
  } else {
    words = _mm512_set1_epi32(static_cast<int>(word));
    shifts = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  }
  return _mm512_and_si512(_mm512_srlv_epi32(words, shifts), _mm512_set1_epi32((1 << Bits) - 1));
}

// store_fields8 for t <= 16 codes.
template <int Bits>
SR_AVX512 void store_fields16(std::uint8_t* codes, __m512i q, std::size_t t) {
  __m128i bytes = _mm_and_si128(_mm512_cvtepi32_epi8(q), _mm_set1_epi8((1 << Bits) - 1));
  if (t < 16) bytes = _mm_maskz_mov_epi8(simd::lanes16(t), bytes);
  const auto word = static_cast<std::uint64_t>(_mm_cvtsi128_si64(pack_fields<Bits>(bytes)));
  if (t == 16) {
    std::memcpy(codes, &word, 2 * Bits);
  } else {
    std::memcpy(codes, &word, code_bytes(t, Bits));
  }
}

// decode_step8 for t <= 16 codes: one permute looks 16 fields up.
template <int Bits, bool Add>
SR_AVX512 void decode_step16(const std::uint8_t* codes, std::size_t t, __m512 table, float* out) {
  const __mmask16 mask = simd::lanes16(t);
  __m512 value = _mm512_permutexvar_ps(load_fields16<Bits>(codes, t), table);
  if constexpr (Add) value = simd::add_nan_first16(_mm512_maskz_loadu_ps(mask, out), value);
  _mm512_mask_storeu_ps(out, mask, value);
}

template <int Bits, bool Add>
SR_AVX512_ENTRY void decode_bucket_avx512(const std::uint8_t* codes, std::size_t len,
                                          const DecodeTable& decoded, float* out) {
  const __m512 table = _mm512_load_ps(decoded.value);
  std::size_t i = 0;
  for (; i + 16 <= len; i += 16) decode_step16<Bits, Add>(codes + i * Bits / 8, 16, table, out + i);
  if (i < len) decode_step16<Bits, Add>(codes + i * Bits / 8, len - i, table, out + i);
}

SR_AVX512_WARNINGS_ON

}  // namespace slimreduce::kernels::packed
