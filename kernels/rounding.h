// How the quantizers round a value's scaled position r to a code
// (SLIMREDUCE_QUANT_ROUNDING), host and device: to nearest (ties to even,
// each quantizer's own rint), or stochastically: floor(r) + 1 with
// probability frac(r), so that a code is unbiased (its mean over the draws
// is r, to 2^-23) and a job can run without error feedback where no residual
// can be kept.
//
// The draw of element e comes from a counter-based generator: a hash of e
// and of the call's key, never of an address or a clock, so that every ISA
// and the GPU give the same bits, a rerun with the same seed draws the same,
// and ranks (and the owner's second quantization) draw independently. The key
// is (SLIMREDUCE_QUANT_SEED, rank, the call's number among calls of its shape,
// phase) mixed by splitmix64 once per call (rounding_key); per element,
// draw = mix32(lo32(e) ^ k0 ^ (hi32(e) ^ k1) * 0x9e3779b9), mix32 being a
// 32-bit integer finalizer (Wellons' lowbias32), so that 8 or 16 lanes
// compute it with two 32-bit multiplies (hi32(e) is the same across a
// vector's lanes but where lo32(e) wraps, so the product is one of two
// broadcasts). The key is 64 bits (k0, k1): two calls or ranks share their
// draws only if their keys collide in all 64.
//
// stochastic_round(r, draw), |r| < 2^31: f = floor(r), frac = r - f (exact),
// u = draw >> 9 (23 bits); f + 1 when (2u + 1) * 2^-24 < frac, else f; but
// a position within 2^-16 of a code takes that code (f when frac < 2^-16,
// f + 1 when frac > 1 - 2^-16): fp32's error in working the position out
// (a quotient by a rounded step: up to about 2^-17 at 126) must not move a
// value that sits on a code, so a bucket's extremes and a constant bucket
// stay exact; the bias this leaves is below 2^-16 of a step. Every step is
// exact in fp32, and a subnormal frac never rounds up, whether or not the
// CPU or GPU flushes it (DAZ/FTZ change no code).
#pragma once

#include <math.h>

#include <cstdint>

#include "kernels/element_rules.h"
#include "kernels/splitmix.h"

namespace slimreduce::kernels {

// A block's rounding: nearest, or stochastic with the call's key, `first`
// being the element number of the block's value 0 in the call's tensor.
struct Rounding {
  bool stochastic = false;
  std::uint32_t k0 = 0, k1 = 0;
  std::uint64_t first = 0;

  // The same rounding for the values from `offset` on.
  Rounding at(std::uint64_t offset) const {
    Rounding moved = *this;
    moved.first += offset;
    return moved;
  }
};

// Wellons' lowbias32: a bijection of 32-bit words whose output bits each
// depend on every input bit.
SR_HD inline std::uint32_t mix32(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// The high word's weight in a draw: 2^32 / phi, odd.
inline constexpr std::uint32_t kRoundingHighWeight = 0x9e3779b9u;

// The draw of value i of a block rounded with `rounding` (element first + i).
SR_HD inline std::uint32_t rounding_draw(const Rounding& rounding, std::uint64_t i) {
  const std::uint64_t e = rounding.first + i;
  const auto lo = static_cast<std::uint32_t>(e), hi = static_cast<std::uint32_t>(e >> 32);
  return mix32(lo ^ rounding.k0 ^ (hi ^ rounding.k1) * kRoundingHighWeight);
}

// 2^24 as a float, the scale of the draw's threshold; the snap to a code.
inline constexpr float kRoundingScale = 16777216.0f;
inline constexpr float kRoundingSnap = 1.52587890625e-05f;  // 2^-16

// floor(r) + 1 with probability frac(r), from `draw` (above).
SR_HD inline int stochastic_round(float r, std::uint32_t draw) {
  const float f = floorf(r);
  const float frac = r - f;
  const float threshold = static_cast<float>(((draw >> 9) << 1) | 1u);
  const bool up =
      frac > 1.0f - kRoundingSnap || (frac >= kRoundingSnap && threshold < frac * kRoundingScale);
  return static_cast<int>(f) + (up ? 1 : 0);
}

// The stochastic rounding of one call's quantization: `seed`
// (SLIMREDUCE_QUANT_SEED), the rank that quantizes, the call's number among
// calls of its shape, and the phase (0: a rank's own values, 1: an owner's
// sum quantized again), from element `first` on.
constexpr Rounding rounding_key(std::uint64_t seed, int rank, std::uint64_t call, int phase,
                                std::uint64_t first = 0) {
  std::uint64_t k = splitmix64(seed);
  k = splitmix64(k ^ call);
  k = splitmix64(k ^ (static_cast<std::uint64_t>(static_cast<std::uint32_t>(rank)) << 1 |
                      static_cast<std::uint64_t>(phase & 1)));
  return {true, static_cast<std::uint32_t>(k), static_cast<std::uint32_t>(k >> 32), first};
}

}  // namespace slimreduce::kernels
