// A plain reference of what the algorithms (algorithms/) must produce, written
// from the documented rules (docs/architecture.md "Dense" and "Sparse",
// kernels/topk.h) without the library's kernels: the 16-bit conversions are
// done by arithmetic in double instead of the library's bit operations, so a
// shared mistake is unlikely. It assumes the default rounding mode (to nearest).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "tests/reference/independent.h"
#include "tests/reference/value_stream.h"

namespace slimreduce::testing::reference {

enum class Half { fp16, bf16 };

// How 16-bit partial sums are ordered: the ring (chunk c starts at rank c) or
// a backend that adds rank after rank (the host simulation's NCCL).
enum class SumOrder { ring, rank_order };

inline std::uint32_t bits_of(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

// |a| rounded to nearest even on a grid of 2^quantum_exp: exact in double,
// since every value here has far fewer than 53 significant bits.
inline double round_to_quantum(double a, int quantum_exp) {
  namespace ref = slimreduce::reference;
  return ref::scaled(std::nearbyint(ref::scaled(a, -quantum_exp)), quantum_exp);
}

// fp16: 11 significant bits, exponents down to -14, subnormal step 2^-24,
// largest finite 65504; from 65520 (the midpoint to 2^16) up it is inf.
inline std::uint16_t to_fp16(float x) {
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(x));
  if (a >= 65520.0) return sign | 0x7c00;
  if (a == 0) return sign;
  int e = 0;
  std::frexp(a, &e);  // a in [2^(e-1), 2^e)
  const double r = round_to_quantum(a, std::max(e - 11, -24));
  if (r < 0x1p-14)
    return sign | static_cast<std::uint16_t>(slimreduce::reference::scaled(r, 24));  // subnormal
  const int exponent = std::ilogb(r);
  const auto mantissa =
      static_cast<std::uint16_t>(slimreduce::reference::scaled(r, 10 - exponent) - 1024);
  return sign | static_cast<std::uint16_t>((exponent + 15) << 10) | mantissa;
}

inline float from_fp16(std::uint16_t h) {
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  double value = exponent == 0x1f ? (mantissa ? NAN : INFINITY)
                 : exponent == 0  ? slimreduce::reference::scaled(mantissa, -24)
                                  : slimreduce::reference::scaled(1024 + mantissa, exponent - 25);
  return static_cast<float>((h & 0x8000) ? -value : value);
}

// bf16: fp32's exponent range with 8 significant bits (subnormal step 2^-133).
inline std::uint16_t to_bf16(float x) {
  const double a = std::fabs(static_cast<double>(x));
  int e = 0;
  std::frexp(a, &e);
  const double r = a == 0 ? 0 : round_to_quantum(a, std::max(e - 8, -133));
  const float rounded = r >= 0x1p128 ? INFINITY : static_cast<float>(r);  // exact below 2^128
  return static_cast<std::uint16_t>((bits_of(std::signbit(x) ? -rounded : rounded)) >> 16);
}

inline float from_bf16(std::uint16_t h) {
  const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline std::uint16_t round16(Half format, float x) {
  return format == Half::fp16 ? to_fp16(x) : to_bf16(x);
}
inline float widen(Half format, std::uint16_t h) {
  return format == Half::fp16 ? from_fp16(h) : from_bf16(h);
}

// What a rank's input becomes on the wire; with a residual, the residual keeps
// what the rounding lost (0 where what was sent is not finite).
inline std::vector<std::uint16_t> cast_compress(Half format, const std::vector<float>& in,
                                                std::vector<float>* residual) {
  std::vector<std::uint16_t> wire(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    const float acc = residual ? in[i] + (*residual)[i] : in[i];
    wire[i] = round16(format, acc);
    if (residual) {
      const float sent = widen(format, wire[i]);
      (*residual)[i] = std::isfinite(sent) ? acc - sent : 0.0f;
    }
  }
  return wire;
}

// The decoded sum of every rank's wire. Ring: chunk c = [n c / p, n (c+1) / p)
// starts at rank c and takes c+1, c+2, ... in turn; rank order: every element
// starts at rank 0. Each add is formed in fp32 and rounded back to 16 bits.
inline std::vector<float> cast_sum(Half format,
                                   const std::vector<std::vector<std::uint16_t>>& wires,
                                   std::size_t n, SumOrder order) {
  const auto p = static_cast<std::uint64_t>(wires.size());
  std::vector<float> out(n);
  for (std::uint64_t chunk = 0; chunk < p; ++chunk) {
    const std::uint64_t first = order == SumOrder::ring ? chunk : 0;
    for (std::size_t i = n * chunk / p; i < n * (chunk + 1) / p; ++i) {
      std::uint16_t partial = wires[first][i];
      for (std::uint64_t step = 1; step < p; ++step) {
        const float sum = widen(format, wires[(first + step) % p][i]) + widen(format, partial);
        partial = round16(format, sum);
      }
      out[i] = widen(format, partial);
    }
  }
  return out;
}

// top-k's k: ceil(ratio n) kept from landing a hair above a whole number, at
// least 1 and at most n; 0 for n == 0 (the rule of kernels/topk.h topk_count).
inline std::size_t topk_count(std::size_t n, double ratio) {
  if (n == 0) return 0;
  const double x = ratio * static_cast<double>(n);
  if (!(x > 1.0)) return 1;
  if (x >= static_cast<double>(n)) return n;
  return std::min(n, static_cast<std::size_t>(std::ceil(x - x * 1e-12)));
}

inline std::size_t topk_payload_bytes(std::size_t n, double ratio, bool fp16_values) {
  return topk_count(n, ratio) * (4 + (fp16_values ? 2 : 4));
}

// One rank's top-k: the selected indices (ascending) and the values sent for them.
struct Sparse {
  std::vector<std::uint32_t> index;
  std::vector<float> value;
};

// Selects the k entries of acc = in + residual with the largest key
// bits & 0x7fffffff (equal keys: the lower index); the residual becomes
// acc - sent for those (sent rounded through fp16 with fp16 values) and acc
// for the rest.
inline Sparse topk_compress(const std::vector<float>& in, std::vector<float>* residual,
                            double ratio, bool fp16_values) {
  const std::size_t n = in.size(), k = topk_count(n, ratio);
  std::vector<float> acc(in);
  if (residual) {
    for (std::size_t i = 0; i < n; ++i) acc[i] += (*residual)[i];
  }
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  const auto before = [&](std::uint32_t a, std::uint32_t b) {
    const std::uint32_t ka = bits_of(acc[a]) & 0x7fffffffu, kb = bits_of(acc[b]) & 0x7fffffffu;
    return ka != kb ? ka > kb : a < b;
  };
  if (k < n) std::nth_element(order.begin(), order.begin() + k, order.end(), before);
  Sparse out;
  out.index.assign(order.begin(), order.begin() + k);
  std::sort(out.index.begin(), out.index.end());
  if (residual) *residual = acc;
  for (std::uint32_t i : out.index) {
    const float sent = fp16_values ? from_fp16(to_fp16(acc[i])) : acc[i];
    out.value.push_back(sent);
    if (residual) (*residual)[i] = std::isfinite(sent) ? acc[i] - sent : 0.0f;
  }
  return out;
}

// Every rank's payload added, in rank order, into zeros.
inline std::vector<float> sparse_sum(const std::vector<Sparse>& payloads, std::size_t n) {
  std::vector<float> out(n, 0.0f);
  for (const Sparse& payload : payloads) {
    for (std::size_t j = 0; j < payload.index.size(); ++j)
      out[payload.index[j]] += payload.value[j];
  }
  return out;
}

// The report's accounting: a ring allreduce sends 2(p-1)/p of the buffer, a
// ring allgather p-1 payloads; one rank sends nothing.
inline double ring_allreduce_bytes(std::size_t bytes, int ranks) {
  return ranks <= 1 ? 0.0 : 2.0 * (ranks - 1) / ranks * static_cast<double>(bytes);
}
inline double ring_allgather_bytes(std::size_t payload_bytes, int ranks) {
  return ranks <= 1 ? 0.0 : static_cast<double>(ranks - 1) * static_cast<double>(payload_bytes);
}

// Rank `rank`'s input of a case; any rank can rebuild any other's. A quarter
// of the values sit on a grid of 1/8, so equal magnitudes (ties) reach top-k's
// boundary; the rest are fine, so the order of 16-bit adds shows in the bits.
inline std::vector<float> input_of(int rank, std::uint64_t seed, std::size_t n) {
  slimreduce::reference::ValueStream values(seed * 7919u + static_cast<std::uint64_t>(rank));
  std::vector<float> data(n);
  for (auto& x : data) {
    x = values.unit() * 2.0f - 1.0f;
    if ((values.next() & 3) == 0) x = std::round(x * 8) / 8;
  }
  return data;
}

// A residual left by earlier calls: small, on a grid of 1/64, so the grid
// values of the input stay tied after it is added.
inline std::vector<float> residual_of(int rank, std::uint64_t seed, std::size_t n) {
  slimreduce::reference::ValueStream values(seed * 104729u + static_cast<std::uint64_t>(rank) + 17);
  std::vector<float> data(n);
  for (auto& x : data) x = static_cast<float>(static_cast<int>(values.next() % 9) - 4) / 64;
  return data;
}

}  // namespace slimreduce::testing::reference
