#include "kernels/norm.h"

#include <array>
#include <cmath>

#include "kernels/element_rules.h"

namespace slimreduce::kernels {
namespace {

// One block's squares, value i of the block being load(i): independent
// lanes, so the compiler may vectorize without changing a bit (each lane's
// additions keep their order).
template <class Load>
double block_sum(Load load, std::size_t n) {
  std::array<double, kNormLanes> lanes{};
  std::size_t i = 0;
  for (; i + kNormLanes <= n; i += kNormLanes) {
    for (std::size_t lane = 0; lane < kNormLanes; ++lane) {
      const double x = load(i + lane);
      lanes[lane] += x * x;
    }
  }
  for (std::size_t lane = 0; i < n; ++i, ++lane) {
    const double x = load(i);
    lanes[lane] += x * x;
  }
  double sum = 0.0;
  for (const double lane : lanes) sum += lane;
  return sum;
}

// The blocks' sums in block order, then the root; load(i) is value i as fp32.
template <class Load>
double norm_of(Load load, std::size_t n) {
  double sum = 0.0;
  for (std::size_t begin = 0; begin < n; begin += kNormBlock) {
    sum += block_sum([&](std::size_t i) { return load(begin + i); },
                     n - begin < kNormBlock ? n - begin : kNormBlock);
  }
  return std::sqrt(sum);
}

}  // namespace

double fixed_order_norm(const float* v, std::size_t n) {
  return norm_of([v](std::size_t i) { return v[i]; }, n);
}

double fixed_order_norm(HalfFormat format, const std::uint16_t* v, std::size_t n) {
  if (format == HalfFormat::fp16)
    return norm_of([v](std::size_t i) { return fp16_bits_to_float(v[i]); }, n);
  return norm_of([v](std::size_t i) { return bf16_bits_to_float(v[i]); }, n);
}

}  // namespace slimreduce::kernels
