#include "scheduler/order.h"

#include <algorithm>
#include <numeric>

namespace slimreduce::scheduler {

std::vector<std::size_t> flush_order(const std::vector<int>& priorities, CallOrder order) {
  std::vector<std::size_t> indices(priorities.size());
  std::iota(indices.begin(), indices.end(), std::size_t{0});
  if (order == CallOrder::reverse) std::reverse(indices.begin(), indices.end());
  std::stable_sort(indices.begin(), indices.end(), [&priorities](std::size_t a, std::size_t b) {
    return priorities[a] > priorities[b];
  });
  return indices;
}

}  // namespace slimreduce::scheduler
