// fusion/layout.h, the one planner of fused batches: batches by key in
// first-appearance order, tensors at aligned, non-overlapping offsets in call
// order; the rule as data: by key anywhere (an NCCL group) or only adjacent
// tensors up to a size (an MPI flush); a tensor alone never joins or is joined.
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

// Each tensor's batch, as the rule places them.
std::vector<int> batches_of(const BatchRule& rule, const std::vector<int>& keys,
                            const std::vector<std::size_t>& sizes,
                            const std::vector<bool>& alone = {}) {
  Layout<int> layout(rule);
  std::vector<int> placed;
  for (std::size_t i = 0; i < keys.size(); ++i)
    placed.push_back(layout.add(keys[i], sizes[i], !alone.empty() && alone[i]).batch);
  return placed;
}

TEST(FusionRule, AnNcclGroupFusesAKeyWhereverItComes) {
  EXPECT_EQ(batches_of({}, {1, 2, 1, 2}, {8, 8, 8, 8}), (std::vector<int>{0, 1, 0, 1}));
}

TEST(FusionRule, AFlushFusesOnlyNeighbours) {
  const BatchRule flush{.adjacent = true, .placed = as_given};
  EXPECT_EQ(batches_of(flush, {1, 1, 2, 1, 1}, {4, 4, 4, 4, 4}), (std::vector<int>{0, 0, 1, 2, 2}));
}

TEST(FusionRule, ABatchStopsAtItsSizeAndALargerTensorGoesAlone) {
  const BatchRule flush{.adjacent = true, .max_size = 10, .placed = as_given};
  EXPECT_EQ(batches_of(flush, {1, 1, 1, 1, 1, 1}, {4, 6, 1, 12, 3, 3}),
            (std::vector<int>{0, 0, 1, 2, 3, 3}));
  const BatchRule group{.max_size = 10, .placed = as_given};
  EXPECT_EQ(batches_of(group, {1, 2, 1, 1}, {6, 6, 4, 1}), (std::vector<int>{0, 1, 0, 2}))
      << "by key: the first batch of the key with room";
}

TEST(FusionRule, ASizeOfZeroFusesNothingButEmptyTensors) {
  const BatchRule none{.adjacent = true, .max_size = 0, .placed = as_given};
  EXPECT_EQ(batches_of(none, {1, 1, 1, 1}, {4, 4, 0, 0}), (std::vector<int>{0, 1, 2, 2}));
}

TEST(FusionRule, ATensorAloneNeitherJoinsNorIsJoined) {
  for (const bool adjacent : {false, true}) {
    const BatchRule rule{.adjacent = adjacent, .placed = as_given};
    EXPECT_EQ(batches_of(rule, {1, 1, 1, 1}, {4, 4, 4, 4}, {false, true, false, false}),
              (std::vector<int>{0, 1, adjacent ? 2 : 0, adjacent ? 2 : 0}))
        << (adjacent ? "adjacent" : "by key");
  }
}

TEST(FusionRule, SizesAsGivenAreNotPadded) {
  Layout<int> layout(BatchRule{.placed = as_given});
  layout.add(0, 48);
  EXPECT_EQ(layout.add(0, 16).offset, 48u);
  EXPECT_EQ(layout.elements(0), 64u);
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
