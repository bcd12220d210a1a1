// The k largest of a set of distinct 64-bit keys, for the top-k references
// (tests/reference/independent.h, tests/cuda/topk_reference.h): each packs a
// value's order and its index into one key, so the k largest are one set.
//
// A full nth_element over every key was a quarter of a top-k run of the host
// simulation, whose models select every rank's k each call. Most keys are
// far below the k-th, so a threshold from a sample of every 16th key, set a
// little below where the sample puts the k-th, leaves about k + a margin
// keys above it; nth_element then works on those alone. Where fewer than k
// pass (a sample that misjudged), or the sample cannot place the k-th, it
// falls back to the full nth_element: the set is the same either way.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace slimreduce::reference {

// Moves the k largest keys to keys[0, k), in no order; keys[k, n) are left
// in no defined state (the callers read the first k). Keys must be distinct.
inline void move_largest_to_front(std::vector<std::uint64_t>& keys, std::size_t k) {
  const std::size_t n = keys.size();
  if (k == 0 || k >= n) return;
  const auto full = [&] {
    std::nth_element(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(k), keys.end(),
                     std::greater<>());
  };
  constexpr std::size_t kStride = 16;
  std::vector<std::uint64_t> sample;
  sample.reserve(n / kStride + 1);
  for (std::size_t i = 0; i < n; i += kStride) sample.push_back(keys[i]);
  // The sample's j-th largest has about j * kStride keys at or above it; j
  // past k / kStride by a few standard deviations of that count.
  const double expected = static_cast<double>(k) / kStride;
  const auto j = static_cast<std::size_t>(expected + 4.0 * std::sqrt(expected) + 8.0);
  if (j >= sample.size() || j * kStride >= n / 2) return full();
  std::nth_element(sample.begin(), sample.begin() + static_cast<std::ptrdiff_t>(j), sample.end(),
                   std::greater<>());
  const std::uint64_t threshold = sample[j];
  std::vector<std::uint64_t> above;
  above.reserve(j * kStride + kStride);
  for (const std::uint64_t key : keys)
    if (key >= threshold) above.push_back(key);
  if (above.size() < k) return full();
  std::nth_element(above.begin(), above.begin() + static_cast<std::ptrdiff_t>(k), above.end(),
                   std::greater<>());
  std::copy(above.begin(), above.begin() + static_cast<std::ptrdiff_t>(k), keys.begin());
}

}  // namespace slimreduce::reference
