// Test data made fast: the host simulation's models, the device app and the
// device checks make every rank's values in every process (each rank checks the whole sum), where
// std::mt19937 and std::normal_distribution took a fifth to a half of a run.
// splitmix64 and a sum of four uniforms: the same values in every process for
// a seed, on every compiler (the standard's distributions are not specified
// bit for bit).
#pragma once

#include <cstdint>

namespace slimreduce::reference {

// Also a UniformRandomBitGenerator (bench/device_check_util.cuh draws its
// checks' data from it, std distributions included).
class ValueStream {
 public:
  using result_type = std::uint64_t;
  explicit ValueStream(std::uint64_t seed) : state_(seed) {}
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return ~result_type{0}; }
  result_type operator()() { return next(); }
  std::uint64_t next() {
    std::uint64_t z = state_ += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float unit() { return static_cast<float>(next() >> 40) * 0x1p-24f; }  // [0, 1)
  // Mean 0, variance 1, bell-shaped, within +-3.47.
  float bell() { return (unit() + unit() + unit() + unit() - 2.0f) * 1.7320508f; }

  // A gradient-like value: 1% zeros, 1% ties at +-2.5, else bell() * scale.
  float gradient(float scale) {
    const std::uint64_t pick = next() % 100;
    if (pick == 0) return 0.0f;
    if (pick == 1) return next() & 1 ? 2.5f : -2.5f;
    return bell() * scale;
  }

 private:
  std::uint64_t state_;
};

}  // namespace slimreduce::reference
