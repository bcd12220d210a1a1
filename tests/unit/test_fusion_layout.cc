// fusion/layout.h: batches by key in first-appearance order, tensors at
// aligned, non-overlapping offsets in call order.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "fusion/layout.h"

namespace slimreduce::fusion {
namespace {

TEST(FusionLayout, BatchesFollowTheOrderKeysFirstAppear) {
  Layout<int> layout;
  EXPECT_EQ(layout.add(7, 10).batch, 0);
  EXPECT_EQ(layout.add(3, 10).batch, 1);
  EXPECT_EQ(layout.add(7, 10).batch, 0);
  EXPECT_EQ(layout.add(5, 10).batch, 2);
  ASSERT_EQ(layout.batches(), 3);
  EXPECT_EQ(layout.key(0), 7);
  EXPECT_EQ(layout.key(1), 3);
  EXPECT_EQ(layout.key(2), 5);
  EXPECT_EQ(layout.members(0), (std::vector<int>{0, 2}));
  EXPECT_EQ(layout.members(1), (std::vector<int>{1}));
  EXPECT_EQ(layout.members(2), (std::vector<int>{3}));
}

TEST(FusionLayout, APairKeyTellsAverageFromSum) {
  Layout<std::pair<int, bool>> layout;
  layout.add({1, false}, 8);
  EXPECT_EQ(layout.add({1, true}, 8).batch, 1) << "another op: another collective";
}

class FusionLayoutSizes : public ::testing::TestWithParam<std::vector<std::size_t>> {};

TEST_P(FusionLayoutSizes, OffsetsAreAlignedAndDisjointInCallOrder) {
  Layout<int> layout;
  std::vector<Placement> placed;
  for (std::size_t count : GetParam()) placed.push_back(layout.add(0, count));
  std::size_t end = 0;
  for (std::size_t i = 0; i < placed.size(); ++i) {
    EXPECT_EQ(placed[i].batch, 0);
    EXPECT_EQ(placed[i].offset % 8, 0u) << "16 bytes for every element type";
    EXPECT_GE(placed[i].offset, end) << "tensor " << i << " overlaps the one before";
    EXPECT_LE(placed[i].offset - end, 7u) << "no more padding than the alignment needs";
    end = placed[i].offset + GetParam()[i];
  }
  EXPECT_GE(layout.elements(0), end);
  EXPECT_EQ(layout.elements(0), kernels::fusion_align(end));
}

INSTANTIATE_TEST_SUITE_P(Counts, FusionLayoutSizes,
                         ::testing::Values(std::vector<std::size_t>{1},
                                           std::vector<std::size_t>{0, 0, 5},
                                           std::vector<std::size_t>{8, 16, 24},
                                           std::vector<std::size_t>{7, 9, 1, 100003, 3},
                                           std::vector<std::size_t>{65536, 1, 65535}));

}  // namespace
}  // namespace slimreduce::fusion
