// A plain reference of the documented top-k allreduce (docs/architecture.md,
// "Sparse (top-k)"), written apart from the library's kernels so that a test
// can check their values rather than only their shape: each rank forms
// acc = input + residual, sends the k = ceil(ratio * n) entries of largest
// |acc| (ties to the lower index), as fp32 or rounded to fp16, and keeps
// residual = acc - sent; the result adds every rank's sent values, in rank
// order, into a zeroed fp32 vector. NaN is left out (the tests draw none).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "tests/reference/largest_keys.h"

namespace topk_reference {

inline std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float float_of(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// fp32 to fp16 bits, to nearest, ties to even, by hand (no compiler or CUDA
// half type: those may share code with what is under test).
inline std::uint16_t fp16_round(float f) {
  const std::uint32_t u = bits_of(f);
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7fffffffu;
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // 65520 and up: inf (NaN is not expected)
  if (a < 0x38800000u) {
    // Below fp16's smallest normal, 2^-14: a whole number of 2^-24 steps.
    // The scaling is exact; nearbyint rounds half to even.
    return sign | static_cast<std::uint16_t>(std::nearbyint(std::fabs(f) * 16777216.0f));
  }
  // Round the 23-bit mantissa to 10 (a carry may bump the exponent, as it
  // should), then rebias the exponent from 127 to 15.
  const std::uint32_t rounded = a + 0x0fffu + ((a >> 13) & 1u);
  return sign | static_cast<std::uint16_t>((rounded - (112u << 23)) >> 13);
}

inline float fp16_widen(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t{h & 0x8000u} << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0) {
    const float v = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -v : v;
  }
  if (exponent == 31) return float_of(sign | 0x7f800000u | mantissa << 13);
  return float_of(sign | (exponent + 112) << 23 | mantissa << 13);
}

inline std::size_t count_of(std::size_t n, double ratio) {
  const double k = std::ceil(ratio * static_cast<double>(n));
  return std::min(n, static_cast<std::size_t>(std::max(1.0, k)));
}

// The k indices of largest |acc|, ties to the lower index, ascending. The
// order (key, then index) is total, so the k largest words are the set
// (tests/reference/largest_keys.h finds them). Each value's magnitude bits
// and its index in one 64-bit word (the index complemented, so that the
// larger word is the lower index at equal magnitude): the selection reads
// words in place, not values through indices (a quarter of a top-k run of
// the device app was that selection).
inline std::vector<std::uint32_t> select(const std::vector<float>& acc, std::size_t k) {
  std::vector<std::uint64_t> words(acc.size());
  for (std::size_t i = 0; i < acc.size(); ++i)
    words[i] = std::uint64_t{bits_of(acc[i]) & 0x7fffffffu} << 32 | (0xffffffffu - i);
  slimreduce::reference::move_largest_to_front(words, std::min(k, words.size()));
  words.resize(std::min(k, words.size()));
  std::vector<std::uint32_t> index(words.size());
  for (std::size_t j = 0; j < words.size(); ++j)
    index[j] = 0xffffffffu - static_cast<std::uint32_t>(words[j]);
  std::sort(index.begin(), index.end());
  return index;
}

// One rank's payload: ascending indices and the values sent for them.
struct Sent {
  std::vector<std::uint32_t> index;
  std::vector<float> value;
};

// One rank's compress step. residual: null without error feedback; else
// read as this rank's residual and left as acc - sent.
inline Sent compress(const std::vector<float>& input, std::vector<float>* residual, std::size_t k,
                     bool fp16_values) {
  std::vector<float> acc(input);
  if (residual) {
    for (std::size_t i = 0; i < acc.size(); ++i) acc[i] = input[i] + (*residual)[i];
  }
  Sent sent{select(acc, k), {}};
  for (const std::uint32_t i : sent.index) {
    sent.value.push_back(fp16_values ? fp16_widen(fp16_round(acc[i])) : acc[i]);
  }
  if (residual) {
    *residual = acc;
    for (std::size_t j = 0; j < sent.index.size(); ++j) {
      (*residual)[sent.index[j]] = acc[sent.index[j]] - sent.value[j];
    }
  }
  return sent;
}

// Every rank's payload added in rank order into zeros: the result on every rank.
inline std::vector<float> sum(const std::vector<Sent>& sent, std::size_t n) {
  std::vector<float> out(n, 0.0f);
  for (const Sent& s : sent) {
    for (std::size_t j = 0; j < s.index.size(); ++j) out[s.index[j]] += s.value[j];
  }
  return out;
}

}  // namespace topk_reference
