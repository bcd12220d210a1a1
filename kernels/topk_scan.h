// Internal to the top-k kernel: the per-chunk scans that have SIMD paths. Each
// ISA gives the same outputs; the driver (topk.cc) does the counting and the
// scalar bookkeeping on what these produce.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cast.h"
#include "kernels/element_rules.h"

namespace slimreduce::kernels::topk_detail {

// Scans work on at most this many elements at a time, so what they produce
// (bins, bit masks) is still in L1 when the caller consumes it.
inline constexpr std::size_t kChunk = 1024;
inline constexpr std::size_t kMaskWords = kChunk / 64;

// First radix level: the top 11 bits of the 31-bit key (8 exponent bits and 3
// mantissa bits): 2048 bins, 8 KiB of uint32 counts, fits L1 four times over.
inline constexpr int kFirstShift = 20;

// The ordering key (element_rules.h: NaN > inf > numbers).
inline std::uint32_t key_of(float x) { return magnitude_key(x); }

// Keys in [lo, hi] are the current threshold bucket; keys above hi are selected.
struct Band {
  std::uint32_t lo;
  std::uint32_t hi;
};

// acc[j] = add_nan_first(in[j], residual[j]) stored back into residual (with
// residual == nullptr, acc = in and nothing is written); bins[j] =
// key_of(acc[j]) >> kFirstShift. count <= kChunk.
void acc_bins(Isa isa, const float* in, float* residual, std::size_t count, std::uint32_t* bins);

// As acc_bins, but instead of bins: bit j % 64 of word j / 64 of hits is set
// when key_of(acc[j]) >= floor. Writes ceil(count / 64) words; count <= kChunk.
void acc_masks(Isa isa, const float* in, float* residual, std::size_t count, std::uint32_t floor,
               std::uint64_t* hits);

// Bit j % 64 of word j / 64: in above[] when key_of(src[j]) > band.hi, in in[]
// when the key lies in the band. Writes ceil(count / 64) words; count <= kChunk.
void band_masks(Isa isa, const float* src, std::size_t count, Band band, std::uint64_t* above,
                std::uint64_t* in);

}  // namespace slimreduce::kernels::topk_detail
