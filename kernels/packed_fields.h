// What the packed 4- and 2-bit codes share on the CPU (quant_packed.cc's
// absmax codes, quant_packed_minmax.cc's min-max codes): the bytes a bucket's
// codes take, and the AVX2 paths' moves between 8 codes in 32-bit lanes and
// their `Bits`-bit fields, low bits first. Internal to kernels/: include it
// only from a kernel's .cc, after kernels/simd.h.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/simd.h"

namespace slimreduce::kernels::packed {

// Bytes of the codes of a bucket of len values: each bucket starts on a byte.
inline std::size_t code_bytes(std::size_t len, int bits) {
  return (len * static_cast<std::size_t>(bits) + 7) / 8;
}

// The 8 low `Bits`-bit fields of 8 bytes (one code each, in the low bits),
// gathered into the low Bits bytes: pairs, then quads, by shifts and masks.
template <int Bits>
inline std::uint64_t pack8(std::uint64_t x) {
  if constexpr (Bits == 4) {
    x &= 0x0f0f0f0f0f0f0f0full;
    x = (x | x >> 4) & 0x00ff00ff00ff00ffull;
    x = (x | x >> 8) & 0x0000ffff0000ffffull;
    return (x | x >> 16) & 0xffffffffull;
  } else {
    x &= 0x0303030303030303ull;
    x = (x | x >> 6) & 0x000f000f000f000full;
    x = (x | x >> 12) & 0x000000ff000000ffull;
    return (x | x >> 24) & 0xffffull;
  }
}

// pack8's inverse: 8 fields, one per byte (unsigned).
template <int Bits>
inline std::uint64_t unpack8(std::uint64_t x) {
  if constexpr (Bits == 4) {
    x = (x | x << 16) & 0x0000ffff0000ffffull;
    x = (x | x << 8) & 0x00ff00ff00ff00ffull;
    return (x | x << 4) & 0x0f0f0f0f0f0f0f0full;
  } else {
    x = (x | x << 24) & 0x000000ff000000ffull;
    x = (x | x << 12) & 0x000f000f000f000full;
    return (x | x << 6) & 0x0303030303030303ull;
  }
}

// t <= 8 codes (32-bit lanes in [-128, 127], zero beyond t) packed into
// code_bytes(t) bytes: each lane's low Bits bits.
template <int Bits>
SR_AVX2 void store_codes8(std::uint8_t* codes, __m256i q, std::size_t t) {
  const __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
  const auto bytes = static_cast<std::uint64_t>(_mm_cvtsi128_si64(_mm_packs_epi16(words, words)));
  const std::uint64_t packed = pack8<Bits>(bytes);
  std::memcpy(codes, &packed, code_bytes(t, Bits));  // little-endian: the low bytes
}

// code_bytes(t) bytes of codes as 8 unsigned 32-bit lanes (0 beyond t).
template <int Bits>
SR_AVX2 __m256i load_fields8(const std::uint8_t* codes, std::size_t t) {
  std::uint64_t packed = 0;
  std::memcpy(&packed, codes, code_bytes(t, Bits));
  const std::uint64_t fields = unpack8<Bits>(packed);
  return _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(fields)));
}

}  // namespace slimreduce::kernels::packed
