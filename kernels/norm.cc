#include "kernels/norm.h"

#include <array>
#include <cmath>

namespace slimreduce::kernels {
namespace {

// One block's squares: independent lanes, so the compiler may vectorize
// without changing a bit (each lane's additions keep their order).
double block_sum(const float* v, std::size_t n) {
  std::array<double, kNormLanes> lanes{};
  std::size_t i = 0;
  for (; i + kNormLanes <= n; i += kNormLanes) {
    for (std::size_t lane = 0; lane < kNormLanes; ++lane) {
      const double x = v[i + lane];
      lanes[lane] += x * x;
    }
  }
  for (std::size_t lane = 0; i < n; ++i, ++lane) {
    const double x = v[i];
    lanes[lane] += x * x;
  }
  double sum = 0.0;
  for (const double lane : lanes) sum += lane;
  return sum;
}

}  // namespace

double fixed_order_norm(const float* v, std::size_t n) {
  double sum = 0.0;
  for (std::size_t begin = 0; begin < n; begin += kNormBlock)
    sum += block_sum(v + begin, n - begin < kNormBlock ? n - begin : kNormBlock);
  return std::sqrt(sum);
}

}  // namespace slimreduce::kernels
