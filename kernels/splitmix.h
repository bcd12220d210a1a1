// splitmix64's finalizer (Steele, Lea and Flood): a 64-bit mix whose output
// bits each depend on every input bit. PowerSGD's first Q (kernels/low_rank.cc)
// and stochastic rounding's per-call key (kernels/rounding.h) are drawn with it.
#pragma once

#include <cstdint>

namespace slimreduce::kernels {

constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace slimreduce::kernels
