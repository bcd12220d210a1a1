// Whether errors over K draws (seeds, or calls of their own numbers) are
// unbiased, value by value, for the stochastic rounding tests: with mean_i
// and s_i^2 a value's mean error and sample variance, d_i = mean_i^2 -
// s_i^2 / K has expectation 0 when the value is unbiased, so
// z = sum d_i / sqrt(sum d_i^2) is about standard normal then, however
// skewed each value's two-point error is (a value just past a code rounds up
// rarely); a bias b common to the values makes z grow as sqrt(n), and
// rounding to nearest (no spread, a bias each) as about 0.75 sqrt(n).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace slimreduce::reference {

struct BiasStatistic {
  double z = 0;     // above
  int varying = 0;  // the values whose error moved with the draws
};

// sum[i], sum_sq[i]: value i's errors and squared errors summed over `draws` draws.
inline BiasStatistic bias_statistic(const std::vector<double>& sum,
                                    const std::vector<double>& sum_sq, int draws) {
  double total = 0, squares = 0;
  BiasStatistic stat;
  for (std::size_t i = 0; i < sum.size(); ++i) {
    const double mean = sum[i] / draws;
    const double variance = std::max(0.0, (sum_sq[i] - draws * mean * mean) / (draws - 1));
    const double d = mean * mean - variance / draws;
    total += d, squares += d * d;
    stat.varying += variance > 0;
  }
  stat.z = squares > 0 ? total / std::sqrt(squares) : 0;
  return stat;
}

}  // namespace slimreduce::reference
