// The order of a flush (scheduler/order.h): call order or its reverse among
// equal priorities, higher priorities first, stable.
#include <gtest/gtest.h>

#include <vector>

#include "scheduler/order.h"

namespace slimreduce::scheduler {
namespace {

using Indices = std::vector<std::size_t>;

TEST(FlushOrder, FifoKeepsCallOrder) {
  EXPECT_EQ(flush_order({0, 0, 0, 0}, CallOrder::fifo), (Indices{0, 1, 2, 3}));
}

TEST(FlushOrder, ReverseSendsTheLastHandedOverFirst) {
  EXPECT_EQ(flush_order({0, 0, 0, 0}, CallOrder::reverse), (Indices{3, 2, 1, 0}));
}

TEST(FlushOrder, HigherPrioritiesGoFirstAndTiesKeepTheRule) {
  const std::vector<int> priorities = {1, 5, 1, 0, 5};
  EXPECT_EQ(flush_order(priorities, CallOrder::fifo), (Indices{1, 4, 0, 2, 3}));
  EXPECT_EQ(flush_order(priorities, CallOrder::reverse), (Indices{4, 1, 2, 0, 3}));
}

TEST(FlushOrder, NothingToOrder) { EXPECT_TRUE(flush_order({}, CallOrder::reverse).empty()); }

}  // namespace
}  // namespace slimreduce::scheduler
