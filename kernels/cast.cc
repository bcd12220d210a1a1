// fp32 <-> fp16/bf16 casts: a scalar path built on element_rules.h and
// AVX2+F16C / AVX-512 paths that give the same bits. fp16 uses the hardware
// F16C conversions (whose rounding and NaN rules element_rules.h copies); bf16
// is done with integer ops, because VCVTNEPS2BF16 flushes denormals to zero.
#include "kernels/cast.h"

#include <cpuid.h>
#include <immintrin.h>

#include <cstring>

#include "kernels/element_rules.h"
#include "kernels/simd.h"

namespace slimreduce::kernels {
namespace {

// ---------------------------------------------------------------- scalar ----

template <HalfFormat F>
inline std::uint16_t narrow1(float f) {
  return F == HalfFormat::fp16 ? float_to_fp16_bits(f) : float_to_bf16_bits(f);
}

template <HalfFormat F>
inline float widen1(std::uint16_t h) {
  return F == HalfFormat::fp16 ? fp16_bits_to_float(h) : bf16_bits_to_float(h);
}

template <HalfFormat F>
void compress_scalar(const float* in, float* residual, std::uint16_t* out, std::size_t n) {
  if (!residual) {
    for (std::size_t i = 0; i < n; ++i) out[i] = narrow1<F>(in[i]);
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const float acc = add_nan_first(in[i], residual[i]);
    out[i] = narrow1<F>(acc);
    const float back = widen1<F>(out[i]);
    residual[i] = residual_after(acc, back);
  }
}

template <HalfFormat F>
void decompress_scalar(const std::uint16_t* in, float* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = widen1<F>(in[i]);
}

template <HalfFormat F>
void accumulate_scalar(const std::uint16_t* in, std::uint16_t* inout, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    inout[i] = narrow1<F>(add_nan_first(widen1<F>(in[i]), widen1<F>(inout[i])));
  }
}

// Runs a W-wide block function on the last n % W elements through zero-padded
// stack buffers, so the tail goes through the same SIMD code as the body.
template <std::size_t W, class Block>
inline void compress_tail(const float* in, float* res, std::uint16_t* out, std::size_t t,
                          Block block) {
  float bin[W] = {}, bres[W] = {};
  std::uint16_t bout[W];
  std::memcpy(bin, in, t * sizeof(float));
  if (res) std::memcpy(bres, res, t * sizeof(float));
  block(bin, res ? bres : nullptr, bout);
  std::memcpy(out, bout, t * sizeof(std::uint16_t));
  if (res) std::memcpy(res, bres, t * sizeof(float));
}

template <std::size_t W, class Block>
inline void decompress_tail(const std::uint16_t* in, float* out, std::size_t t, Block block) {
  std::uint16_t bin[W] = {};
  float bout[W];
  std::memcpy(bin, in, t * sizeof(std::uint16_t));
  block(bin, bout);
  std::memcpy(out, bout, t * sizeof(float));
}

template <std::size_t W, class Block>
inline void accumulate_tail(const std::uint16_t* in, std::uint16_t* inout, std::size_t t,
                            Block block) {
  std::uint16_t bin[W] = {}, binout[W] = {};
  std::memcpy(bin, in, t * sizeof(std::uint16_t));
  std::memcpy(binout, inout, t * sizeof(std::uint16_t));
  block(bin, binout);
  std::memcpy(inout, binout, t * sizeof(std::uint16_t));
}

// ------------------------------------------------------------------ AVX2 ----

// RNE of fp32 bits to their top 16 bits, NaN -> (bits >> 16) | 0x40: the
// integer form of float_to_bf16_bits, one 32-bit result per lane.
SR_AVX2 __m256i bf16_round8(__m256 v) {
  const __m256i x = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb), 16);
  const __m256i is_nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  if (__builtin_expect(_mm256_testz_si256(is_nan, is_nan), 1)) return rounded;  // NaNs are rare.
  const __m256i nan = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
  return _mm256_blendv_epi8(rounded, nan, is_nan);
}

template <HalfFormat F>
SR_AVX2 __m128i narrow8(__m256 v) {
  if constexpr (F == HalfFormat::fp16) {
    return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  } else {
    const __m256i r = bf16_round8(v);  // Each lane <= 0xffff: packus cannot saturate.
    return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
  }
}

template <HalfFormat F>
SR_AVX2 __m256 widen8(__m128i h) {
  if constexpr (F == HalfFormat::fp16) {
    return _mm256_cvtph_ps(h);
  } else {  // Integer shift: a float op could quiet a signalling NaN.
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

using simd::add_nan_first8;
using simd::finite_mask8;

// One fused pass: load, add residual, narrow, widen back, store residual.
template <HalfFormat F>
SR_AVX2 void compress8(const float* in, float* res, std::uint16_t* out) {
  const __m256 x = _mm256_loadu_ps(in);
  if (!res) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), narrow8<F>(x));
    return;
  }
  const __m256 acc = add_nan_first8(x, _mm256_loadu_ps(res));
  const __m128i h = narrow8<F>(acc);
  const __m256 back = widen8<F>(h);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), h);
  _mm256_storeu_ps(res, _mm256_and_ps(_mm256_sub_ps(acc, back), finite_mask8(back)));
}

template <HalfFormat F>
SR_AVX2 void decompress8(const std::uint16_t* in, float* out) {
  _mm256_storeu_ps(out, widen8<F>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in))));
}

template <HalfFormat F>
SR_AVX2 void accumulate8(const std::uint16_t* in, std::uint16_t* inout) {
  const __m256 a = widen8<F>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in)));
  const __m256 b = widen8<F>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(inout)));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(inout), narrow8<F>(add_nan_first8(a, b)));
}

// The residual test is hoisted out of the loop so the body has no branch.
template <HalfFormat F>
SR_AVX2_ENTRY void compress_avx2(const float* in, float* res, std::uint16_t* out, std::size_t n) {
  std::size_t i = 0;
  if (res) {
    for (; i + 8 <= n; i += 8) compress8<F>(in + i, res + i, out + i);
  } else {
    for (; i + 8 <= n; i += 8) compress8<F>(in + i, nullptr, out + i);
  }
  if (i == n) return;
  compress_tail<8>(in + i, res ? res + i : nullptr, out + i, n - i,
                   [](const float* a, float* r, std::uint16_t* o)
                       SR_AVX2_ENTRY { compress8<F>(a, r, o); });
}

template <HalfFormat F>
SR_AVX2_ENTRY void decompress_avx2(const std::uint16_t* in, float* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) decompress8<F>(in + i, out + i);
  if (i == n) return;
  decompress_tail<8>(in + i, out + i, n - i,
                     [](const std::uint16_t* a, float* o) SR_AVX2_ENTRY { decompress8<F>(a, o); });
}

template <HalfFormat F>
SR_AVX2_ENTRY void accumulate_avx2(const std::uint16_t* in, std::uint16_t* inout, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) accumulate8<F>(in + i, inout + i);
  if (i == n) return;
  accumulate_tail<8>(in + i, inout + i, n - i,
                     [](const std::uint16_t* a, std::uint16_t* io)
                         SR_AVX2_ENTRY { accumulate8<F>(a, io); });
}

// --------------------------------------------------------------- AVX-512 ----

// GCC 12's spurious -Wuninitialized on AVX-512 intrinsics (kernels/simd.h).
SR_AVX512_WARNINGS_OFF

template <HalfFormat F>
SR_AVX512 __m256i narrow16(__m512 v) {
  if constexpr (F == HalfFormat::fp16) {
    return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  } else {  // Integer RNE as in bf16_round8; VPMOVDW truncates each lane to 16 bits.
    const __m512i x = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb), 16);
    const __mmask16 is_nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    r = _mm512_mask_or_epi32(r, is_nan, _mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(r);
  }
}

template <HalfFormat F>
SR_AVX512 __m512 widen16(__m256i h) {
  if constexpr (F == HalfFormat::fp16) {
    return _mm512_cvtph_ps(h);
  } else {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

using simd::add_nan_first16;

template <HalfFormat F>
SR_AVX512 void compress16(const float* in, float* res, std::uint16_t* out) {
  const __m512 x = _mm512_loadu_ps(in);
  if (!res) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), narrow16<F>(x));
    return;
  }
  const __m512 acc = add_nan_first16(x, _mm512_loadu_ps(res));
  const __m256i h = narrow16<F>(acc);
  const __m512 back = widen16<F>(h);
  const __mmask16 finite = simd::finite_mask16(back);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), h);
  _mm512_storeu_ps(res, _mm512_maskz_sub_ps(finite, acc, back));
}

template <HalfFormat F>
SR_AVX512 void decompress16(const std::uint16_t* in, float* out) {
  _mm512_storeu_ps(out, widen16<F>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in))));
}

template <HalfFormat F>
SR_AVX512 void accumulate16(const std::uint16_t* in, std::uint16_t* inout) {
  const __m512 a = widen16<F>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in)));
  const __m512 b = widen16<F>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(inout)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(inout), narrow16<F>(add_nan_first16(a, b)));
}

template <HalfFormat F>
SR_AVX512_ENTRY void compress_avx512(const float* in, float* res, std::uint16_t* out,
                                     std::size_t n) {
  std::size_t i = 0;
  if (res) {
    for (; i + 16 <= n; i += 16) compress16<F>(in + i, res + i, out + i);
  } else {
    for (; i + 16 <= n; i += 16) compress16<F>(in + i, nullptr, out + i);
  }
  if (i == n) return;
  compress_tail<16>(in + i, res ? res + i : nullptr, out + i, n - i,
                    [](const float* a, float* r, std::uint16_t* o)
                        SR_AVX512_ENTRY { compress16<F>(a, r, o); });
}

template <HalfFormat F>
SR_AVX512_ENTRY void decompress_avx512(const std::uint16_t* in, float* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) decompress16<F>(in + i, out + i);
  if (i == n) return;
  decompress_tail<16>(in + i, out + i, n - i, [](const std::uint16_t* a, float* o) SR_AVX512_ENTRY {
    decompress16<F>(a, o);
  });
}

template <HalfFormat F>
SR_AVX512_ENTRY void accumulate_avx512(const std::uint16_t* in, std::uint16_t* inout,
                                       std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) accumulate16<F>(in + i, inout + i);
  if (i == n) return;
  accumulate_tail<16>(in + i, inout + i, n - i,
                      [](const std::uint16_t* a, std::uint16_t* io)
                          SR_AVX512_ENTRY { accumulate16<F>(a, io); });
}

SR_AVX512_WARNINGS_ON

// -------------------------------------------------------------- dispatch ----

// F16C through CPUID: clang (up to 14 at least) rejects "f16c" in
// __builtin_cpu_supports. The OS-state (XSAVE) checks come with "avx2".
bool has_f16c() {
  unsigned eax, ebx, ecx, edx;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
}

Isa detect_isa() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !has_f16c()) return Isa::scalar;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl")) {
    return Isa::avx512;
  }
  return Isa::avx2;
}

// A request for an ISA this CPU lacks runs the best one it has instead.
Isa usable(Isa requested) {
  const Isa best = best_isa();
  return static_cast<int>(requested) > static_cast<int>(best) ? best : requested;
}

// Picks the kernel for (format, isa) from a table of six instantiations.
template <class Fn>
Fn pick(HalfFormat format, Isa isa, Fn s16, Fn sbf, Fn a16, Fn abf, Fn x16, Fn xbf) {
  const bool fp16 = format == HalfFormat::fp16;
  switch (usable(isa)) {
    case Isa::avx512:
      return fp16 ? x16 : xbf;
    case Isa::avx2:
      return fp16 ? a16 : abf;
    default:
      return fp16 ? s16 : sbf;
  }
}

constexpr HalfFormat kF16 = HalfFormat::fp16;
constexpr HalfFormat kBF = HalfFormat::bf16;

}  // namespace

Isa best_isa() {
  static const Isa isa = detect_isa();
  return isa;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::avx512:
      return "avx512";
    case Isa::avx2:
      return "avx2";
    default:
      return "scalar";
  }
}

void compress(HalfFormat format, const float* in, float* residual, std::uint16_t* out,
              std::size_t n, Isa isa) {
  pick(format, isa, &compress_scalar<kF16>, &compress_scalar<kBF>, &compress_avx2<kF16>,
       &compress_avx2<kBF>, &compress_avx512<kF16>, &compress_avx512<kBF>)(in, residual, out, n);
}

void decompress(HalfFormat format, const std::uint16_t* in, float* out, std::size_t n, Isa isa) {
  pick(format, isa, &decompress_scalar<kF16>, &decompress_scalar<kBF>, &decompress_avx2<kF16>,
       &decompress_avx2<kBF>, &decompress_avx512<kF16>, &decompress_avx512<kBF>)(in, out, n);
}

void accumulate(HalfFormat format, const std::uint16_t* in, std::uint16_t* inout, std::size_t n,
                Isa isa) {
  pick(format, isa, &accumulate_scalar<kF16>, &accumulate_scalar<kBF>, &accumulate_avx2<kF16>,
       &accumulate_avx2<kBF>, &accumulate_avx512<kF16>, &accumulate_avx512<kBF>)(in, inout, n);
}

bool any_beyond_fp16(const float* in, const float* residual, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    if (beyond_fp16(residual ? in[i] + residual[i] : in[i])) return true;
  }
  return false;
}

bool all_finite(HalfFormat format, const std::uint16_t* in, std::size_t n) {
  const std::uint16_t exponent = format == HalfFormat::fp16 ? 0x7c00 : 0x7f80;
  // No early exit: one pass the compiler vectorizes; the sum is rarely not finite.
  std::uint16_t found = 0;
  for (std::size_t i = 0; i < n; ++i) found |= (in[i] & exponent) == exponent;
  return found == 0;
}

}  // namespace slimreduce::kernels
