// The independent reference (tests/reference/independent.h) of the 4- and
// 2-bit min-max codes, restated from kernels/quant_packed_minmax.h with the C
// library's comparisons (signbit, isfinite, fmin/fmax, ldexp) and
// round_half_even in double, not the kernels' order keys and integer
// rounding; nothing here includes or calls kernels/.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/reference/independent.h"

namespace slimreduce::reference {

// Restated: lo and hi are a bucket's smallest and largest finite values (-0
// below +0; +0 when none, or when both are below 2^-100 in magnitude);
// should hi - lo overflow, both are clipped to
// [-2^126, 2^126]. top is 2^bits - 2, or 2^bits - 4 in a bucket that holds an
// inf ("marked"), whose codes top + 1 and top + 2 are -inf and +inf;
// 2^bits - 1 is NaN. The step is (hi - lo) / top, or 0 (flat) when
// hi - lo < 2^-100 or top is 0; a marked flat bucket's one finite value is
// lo + (hi - lo) * 0.5 (lo below 2^-100). A finite x codes
// rint(clamp((x - lo) / step, 0, top)), ties to even; 0 decodes to lo, top
// to hi, c to lo + c * step. Stored: (lo, hi), (hi, lo) when marked with a
// step, (v, +inf) when marked and flat.
struct PackedMinmaxBucket {
  bool marked = false;
  int top = 0;
  float lo = 0.0f, hi = 0.0f, step = 0.0f;
};

inline float packed_minmax_step(float lo, float hi, int top) {
  const float range = hi - lo;
  if (top == 0 || !(range >= std::ldexp(1.0f, -100))) return 0.0f;
  return range / static_cast<float>(top);
}

inline PackedMinmaxBucket packed_minmax_bucket(const float* x, std::size_t len, int bits) {
  PackedMinmaxBucket b;
  bool any = false;
  for (std::size_t i = 0; i < len; ++i) {
    b.marked = b.marked || std::isinf(x[i]);
    if (!std::isfinite(x[i])) continue;
    if (!any) {
      b.lo = b.hi = x[i], any = true;
      continue;
    }
    if (x[i] < b.lo || (x[i] == b.lo && std::signbit(x[i]))) b.lo = x[i];
    if (x[i] > b.hi || (x[i] == b.hi && !std::signbit(x[i]))) b.hi = x[i];
  }
  if (std::fmax(std::fabs(b.lo), std::fabs(b.hi)) < std::ldexp(1.0f, -100)) b.lo = b.hi = 0.0f;
  if (std::isinf(b.hi - b.lo)) {
    b.lo = std::fmax(b.lo, -std::ldexp(1.0f, 126));
    b.hi = std::fmin(b.hi, std::ldexp(1.0f, 126));
  }
  b.top = (1 << bits) - (b.marked ? 4 : 2);
  b.step = packed_minmax_step(b.lo, b.hi, b.top);
  if (b.marked && b.step == 0.0f) {
    const float range = b.hi - b.lo;
    if (range >= std::ldexp(1.0f, -100)) b.lo = b.lo + range * 0.5f;
    b.hi = b.lo;
  }
  return b;
}

inline int packed_minmax_code(float x, const PackedMinmaxBucket& b, int bits) {
  if (std::isnan(x)) return (1 << bits) - 1;
  if (std::isinf(x)) return x < 0 ? b.top + 1 : b.top + 2;
  if (b.step == 0.0f) return 0;
  const float r = (x - b.lo) / b.step;
  return static_cast<int>(round_half_even(std::fmin(std::fmax(r, 0.0f), float(b.top))));
}

inline float packed_minmax_decode(int c, const PackedMinmaxBucket& b, int bits) {
  if (c == (1 << bits) - 1) return float_of(0x7fc00000u);
  if (b.marked && c == b.top + 1) return -INFINITY;
  if (b.marked && c == b.top + 2) return INFINITY;
  if (c == 0) return b.lo;
  if (c == b.top) return b.hi;
  const float scaled = static_cast<float>(c) * b.step;
  return b.lo + scaled;
}

inline std::size_t quant_packed_minmax_bytes(std::size_t n, std::size_t bucket, int bits) {
  std::size_t bytes = 0;
  for (std::size_t first = 0; first < n; first += bucket)
    bytes += 8 + packed_code_bytes(std::min(bucket, n - first), bits);
  return bytes;
}

inline std::vector<std::uint8_t> quant_packed_minmax_compress(const float* in, float* residual,
                                                              std::size_t n, std::size_t bucket,
                                                              int bits) {
  const std::size_t buckets = (n + bucket - 1) / bucket;
  std::vector<std::uint8_t> block(quant_packed_minmax_bytes(n, bucket, bits), 0);
  std::size_t codes_at = 8 * buckets;
  std::vector<float> acc;  // each bucket's in + residual, one allocation for all
  for (std::size_t j = 0; j < buckets; ++j) {
    const std::size_t first = j * bucket, len = std::min(bucket, n - first);
    acc.assign(in + first, in + first + len);
    for (std::size_t i = 0; residual && i < len; ++i)
      acc[i] = add_nan_first(acc[i], residual[first + i]);
    const PackedMinmaxBucket b = packed_minmax_bucket(acc.data(), len, bits);
    float pair[2] = {b.lo, b.hi};
    if (b.marked && b.step != 0.0f) pair[0] = b.hi, pair[1] = b.lo;
    if (b.marked && b.step == 0.0f) pair[1] = INFINITY;
    std::memcpy(block.data() + 8 * j, pair, 8);
    for (std::size_t i = 0; i < len; ++i) {
      const int c = packed_minmax_code(acc[i], b, bits);
      block[codes_at + i * bits / 8] |= static_cast<std::uint8_t>(c << (i * bits % 8));
      if (residual) residual[first + i] = residual_after(acc[i], packed_minmax_decode(c, b, bits));
    }
    codes_at += packed_code_bytes(len, bits);
  }
  return block;
}

inline std::vector<float> quant_packed_minmax_decompress(const std::uint8_t* block, std::size_t n,
                                                         std::size_t bucket, int bits) {
  const std::size_t buckets = (n + bucket - 1) / bucket;
  std::vector<float> out(n);
  std::size_t codes_at = 8 * buckets;
  for (std::size_t j = 0; j < buckets; ++j) {
    const std::size_t first = j * bucket, len = std::min(bucket, n - first);
    float pair[2];
    std::memcpy(pair, block + 8 * j, 8);
    PackedMinmaxBucket b;
    if (pair[1] == INFINITY) {
      b.marked = true, b.lo = b.hi = pair[0];
      b.top = (1 << bits) - 4;
    } else {
      b.marked = pair[0] > pair[1];
      b.lo = b.marked ? pair[1] : pair[0], b.hi = b.marked ? pair[0] : pair[1];
      b.top = (1 << bits) - (b.marked ? 4 : 2);
      b.step = packed_minmax_step(b.lo, b.hi, b.top);
    }
    for (std::size_t i = 0; i < len; ++i) {
      const int c = (block[codes_at + i * bits / 8] >> (i * bits % 8)) & ((1 << bits) - 1);
      out[first + i] = packed_minmax_decode(c, b, bits);
    }
    codes_at += packed_code_bytes(len, bits);
  }
  return out;
}

inline void quant_packed_minmax_accumulate(const std::uint8_t* block, std::size_t n,
                                           std::size_t bucket, int bits, float* dense) {
  const std::vector<float> values = quant_packed_minmax_decompress(block, n, bucket, bits);
  for (std::size_t i = 0; i < n; ++i) dense[i] = add_nan_first(dense[i], values[i]);
}

}  // namespace slimreduce::reference
