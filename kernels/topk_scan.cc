// SIMD scans for the top-k kernel. The work per element is a handful of
// integer ops, so these are memory bound; SIMD keeps them that way instead of
// letting the compare-and-branch of a scalar loop set the pace.
#include "kernels/topk_scan.h"

#include <immintrin.h>

namespace slimreduce::kernels::topk_detail {
namespace {

// ---------------------------------------------------------------- scalar ----

void acc_bins_scalar(const float* in, float* res, std::size_t count, std::uint32_t* bins) {
  if (!res) {
    for (std::size_t j = 0; j < count; ++j) bins[j] = key_of(in[j]) >> kFirstShift;
    return;
  }
  for (std::size_t j = 0; j < count; ++j) {
    const float acc = add_nan_first(in[j], res[j]);
    res[j] = acc;
    bins[j] = key_of(acc) >> kFirstShift;
  }
}

void acc_masks_scalar(const float* in, float* res, std::size_t count, std::uint32_t floor,
                      std::uint64_t* hits) {
  for (std::size_t w = 0; w * 64 < count; ++w) {
    const std::size_t len = count - w * 64 < 64 ? count - w * 64 : 64;
    std::uint64_t h = 0;
    for (std::size_t j = w * 64; j < w * 64 + len; ++j) {
      float acc = in[j];
      if (res) res[j] = acc = add_nan_first(acc, res[j]);
      h |= static_cast<std::uint64_t>(key_of(acc) >= floor) << (j % 64);
    }
    hits[w] = h;
  }
}

void band_masks_scalar(const float* src, std::size_t count, Band band, std::uint64_t* above,
                       std::uint64_t* in) {
  for (std::size_t w = 0; w * 64 < count; ++w) {
    const std::size_t len = count - w * 64 < 64 ? count - w * 64 : 64;
    std::uint64_t a = 0, b = 0;
    for (std::size_t j = 0; j < len; ++j) {
      const std::uint32_t key = key_of(src[w * 64 + j]);
      a |= static_cast<std::uint64_t>(key > band.hi) << j;
      b |= static_cast<std::uint64_t>(key >= band.lo && key <= band.hi) << j;
    }
    above[w] = a;
    in[w] = b;
  }
}

// ------------------------------------------------------------------ AVX2 ----

#define SR_TOPK_AVX2 __attribute__((target("avx2")))

// add_nan_first for 8 lanes: a NaN operand (a's first) replaces the hardware's pick.
SR_TOPK_AVX2 inline __m256 add_nan_first8(__m256 a, __m256 b) {
  const __m256 quiet = _mm256_castsi256_ps(_mm256_set1_epi32(0x400000));
  __m256 sum = _mm256_add_ps(a, b);
  sum = _mm256_blendv_ps(sum, _mm256_or_ps(b, quiet), _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
  return _mm256_blendv_ps(sum, _mm256_or_ps(a, quiet), _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
}

SR_TOPK_AVX2 void acc_bins_avx2(const float* in, float* res, std::size_t count,
                                std::uint32_t* bins) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  std::size_t j = 0;
  for (; j + 8 <= count; j += 8) {
    __m256 acc = _mm256_loadu_ps(in + j);
    if (res) {
      acc = add_nan_first8(acc, _mm256_loadu_ps(res + j));
      _mm256_storeu_ps(res + j, acc);
    }
    const __m256i key = _mm256_and_si256(_mm256_castps_si256(acc), abs_mask);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(bins + j), _mm256_srli_epi32(key, kFirstShift));
  }
  acc_bins_scalar(in + j, res ? res + j : nullptr, count - j, bins + j);
}

// Keys are below 2^31, so signed compares are exact; floor - 1 may be -1.
SR_TOPK_AVX2 void acc_masks_avx2(const float* in, float* res, std::size_t count,
                                 std::uint32_t floor, std::uint64_t* hits) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i floor_minus_1 = _mm256_set1_epi32(static_cast<int>(floor) - 1);
  std::size_t w = 0;
  for (; (w + 1) * 64 <= count; ++w) {
    std::uint64_t h = 0;
    for (int g = 0; g < 8; ++g) {
      const std::size_t j = w * 64 + g * 8;
      __m256 acc = _mm256_loadu_ps(in + j);
      if (res) {
        acc = add_nan_first8(acc, _mm256_loadu_ps(res + j));
        _mm256_storeu_ps(res + j, acc);
      }
      const __m256i key = _mm256_and_si256(_mm256_castps_si256(acc), abs_mask);
      const __m256i ge = _mm256_cmpgt_epi32(key, floor_minus_1);
      h |= static_cast<std::uint64_t>(_mm256_movemask_ps(_mm256_castsi256_ps(ge))) << (8 * g);
    }
    hits[w] = h;
  }
  if (w * 64 < count) {
    acc_masks_scalar(in + w * 64, res ? res + w * 64 : nullptr, count - w * 64, floor, hits + w);
  }
}

SR_TOPK_AVX2 void band_masks_avx2(const float* src, std::size_t count, Band band,
                                  std::uint64_t* above, std::uint64_t* in) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i hi = _mm256_set1_epi32(static_cast<int>(band.hi));
  const __m256i lo_minus_1 = _mm256_set1_epi32(static_cast<int>(band.lo) - 1);
  std::size_t w = 0;
  for (; (w + 1) * 64 <= count; ++w) {
    std::uint64_t a = 0, b = 0;
    for (int g = 0; g < 8; ++g) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + w * 64 + g * 8));
      const __m256i key = _mm256_and_si256(v, abs_mask);
      const __m256i gt = _mm256_cmpgt_epi32(key, hi);
      const __m256i ge = _mm256_andnot_si256(gt, _mm256_cmpgt_epi32(key, lo_minus_1));
      a |= static_cast<std::uint64_t>(_mm256_movemask_ps(_mm256_castsi256_ps(gt))) << (8 * g);
      b |= static_cast<std::uint64_t>(_mm256_movemask_ps(_mm256_castsi256_ps(ge))) << (8 * g);
    }
    above[w] = a;
    in[w] = b;
  }
  if (w * 64 < count) band_masks_scalar(src + w * 64, count - w * 64, band, above + w, in + w);
}

// --------------------------------------------------------------- AVX-512 ----

// GCC 12's AVX-512 intrinsics seed results with _mm512_undefined_*(), which
// -Wuninitialized flags once inlined (GCC bug 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define SR_TOPK_AVX512 __attribute__((target("avx512f")))

SR_TOPK_AVX512 inline __m512 add_nan_first16(__m512 a, __m512 b) {
  const __m512i quiet = _mm512_set1_epi32(0x400000);
  __m512i sum = _mm512_castps_si512(_mm512_add_ps(a, b));
  sum = _mm512_mask_or_epi32(sum, _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q), _mm512_castps_si512(b),
                             quiet);
  sum = _mm512_mask_or_epi32(sum, _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), _mm512_castps_si512(a),
                             quiet);
  return _mm512_castsi512_ps(sum);
}

SR_TOPK_AVX512 void acc_bins_avx512(const float* in, float* res, std::size_t count,
                                    std::uint32_t* bins) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  std::size_t j = 0;
  for (; j + 16 <= count; j += 16) {
    __m512 acc = _mm512_loadu_ps(in + j);
    if (res) {
      acc = add_nan_first16(acc, _mm512_loadu_ps(res + j));
      _mm512_storeu_ps(res + j, acc);
    }
    const __m512i key = _mm512_and_si512(_mm512_castps_si512(acc), abs_mask);
    _mm512_storeu_si512(bins + j, _mm512_srli_epi32(key, kFirstShift));
  }
  acc_bins_scalar(in + j, res ? res + j : nullptr, count - j, bins + j);
}

SR_TOPK_AVX512 void acc_masks_avx512(const float* in, float* res, std::size_t count,
                                     std::uint32_t floor, std::uint64_t* hits) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i floor_v = _mm512_set1_epi32(static_cast<int>(floor));
  std::size_t w = 0;
  for (; (w + 1) * 64 <= count; ++w) {
    std::uint64_t h = 0;
    for (int g = 0; g < 4; ++g) {
      const std::size_t j = w * 64 + g * 16;
      __m512 acc = _mm512_loadu_ps(in + j);
      if (res) {
        acc = add_nan_first16(acc, _mm512_loadu_ps(res + j));
        _mm512_storeu_ps(res + j, acc);
      }
      const __m512i key = _mm512_and_si512(_mm512_castps_si512(acc), abs_mask);
      h |= static_cast<std::uint64_t>(_mm512_cmpge_epu32_mask(key, floor_v)) << (16 * g);
    }
    hits[w] = h;
  }
  if (w * 64 < count) {
    acc_masks_scalar(in + w * 64, res ? res + w * 64 : nullptr, count - w * 64, floor, hits + w);
  }
}

SR_TOPK_AVX512 void band_masks_avx512(const float* src, std::size_t count, Band band,
                                      std::uint64_t* above, std::uint64_t* in) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i hi = _mm512_set1_epi32(static_cast<int>(band.hi));
  const __m512i lo = _mm512_set1_epi32(static_cast<int>(band.lo));
  std::size_t w = 0;
  for (; (w + 1) * 64 <= count; ++w) {
    std::uint64_t a = 0, b = 0;
    for (int g = 0; g < 4; ++g) {
      const __m512i key = _mm512_and_si512(_mm512_loadu_si512(src + w * 64 + g * 16), abs_mask);
      const __mmask16 gt = _mm512_cmpgt_epu32_mask(key, hi);
      const __mmask16 ge = _mm512_cmpge_epu32_mask(key, lo);
      a |= static_cast<std::uint64_t>(gt) << (16 * g);
      b |= static_cast<std::uint64_t>(ge & static_cast<__mmask16>(~gt)) << (16 * g);
    }
    above[w] = a;
    in[w] = b;
  }
  if (w * 64 < count) band_masks_scalar(src + w * 64, count - w * 64, band, above + w, in + w);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// A request for an ISA this CPU lacks runs the best one it has instead.
Isa usable(Isa requested) {
  const Isa best = best_isa();
  return static_cast<int>(requested) > static_cast<int>(best) ? best : requested;
}

}  // namespace

void acc_bins(Isa isa, const float* in, float* residual, std::size_t count, std::uint32_t* bins) {
  switch (usable(isa)) {
    case Isa::avx512:
      return acc_bins_avx512(in, residual, count, bins);
    case Isa::avx2:
      return acc_bins_avx2(in, residual, count, bins);
    default:
      return acc_bins_scalar(in, residual, count, bins);
  }
}

void acc_masks(Isa isa, const float* in, float* residual, std::size_t count, std::uint32_t floor,
               std::uint64_t* hits) {
  switch (usable(isa)) {
    case Isa::avx512:
      return acc_masks_avx512(in, residual, count, floor, hits);
    case Isa::avx2:
      return acc_masks_avx2(in, residual, count, floor, hits);
    default:
      return acc_masks_scalar(in, residual, count, floor, hits);
  }
}

void band_masks(Isa isa, const float* src, std::size_t count, Band band, std::uint64_t* above,
                std::uint64_t* in) {
  switch (usable(isa)) {
    case Isa::avx512:
      return band_masks_avx512(src, count, band, above, in);
    case Isa::avx2:
      return band_masks_avx2(src, count, band, above, in);
    default:
      return band_masks_scalar(src, count, band, above, in);
  }
}

}  // namespace slimreduce::kernels::topk_detail
