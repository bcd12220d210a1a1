// The node split both sides share (core/runtime/node_split.h): the verdict
// from each rank's node, where the ring's hop crosses, and the report's bytes.
#include <gtest/gtest.h>

#include <vector>

#include "algorithms/hierarchical.h"
#include "core/runtime/node_split.h"

namespace slimreduce {
namespace {

struct SplitCase {
  std::vector<int> node_of;
  int rank;
  const char* flat_because;  // "" when hierarchical
  bool hop_crosses;
  int node_ranks;
};

class SplitByNode : public ::testing::TestWithParam<SplitCase> {};

TEST_P(SplitByNode, VerdictHopAndNodeSize) {
  const SplitCase& c = GetParam();
  const NodeSplit split = split_by_node(c.node_of, c.rank);
  EXPECT_EQ(split.flat_because, c.flat_because);
  EXPECT_EQ(split.flat(), std::string(c.flat_because) != "");
  EXPECT_EQ(split.ring_hop_crosses, c.hop_crosses);
  EXPECT_EQ(split.node, c.node_of[c.rank]);
  EXPECT_EQ(split.node_ranks, c.node_ranks);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, SplitByNode,
    ::testing::Values(SplitCase{{0, 0, 2, 2}, 0, "", false, 2},  // 2 nodes of 2
                      SplitCase{{0, 0, 2, 2}, 1, "", true, 2},   // its successor is on node 2
                      SplitCase{{0, 0, 2, 2}, 3, "", true, 2},   // the ring wraps to rank 0
                      SplitCase{{0, 0, 0, 3, 3, 3}, 2, "", true, 3},
                      SplitCase{{0, 1, 0, 1}, 0, "", true, 2},  // interleaved: every hop crosses
                      SplitCase{{0, 0, 0}, 1, "one node", false, 3},
                      SplitCase{{0, 0, 2}, 2, "nodes of unequal size", true, 1},
                      SplitCase{{0, 1, 2}, 1, "one rank per node", true, 1}));

TEST(CountByNode, AFlatCallGoesWhereItsRingHopGoes) {
  Counters call;
  call.count_compressed(4000, 4, 1500);
  const double baseline = call.wire_baseline;
  count_by_node(call, split_by_node({0, 0, 2, 2}, 1), false, 1000);
  EXPECT_EQ(call.inter_node_baseline, baseline);
  EXPECT_EQ(call.inter_node_sent, 1500);
  EXPECT_EQ(call.intra_node_baseline + call.intra_node_sent, 0);
  Counters inside;
  inside.count_compressed(4000, 4, 1500);
  count_by_node(inside, split_by_node({0, 0, 2, 2}, 0), false, 1000);
  EXPECT_EQ(inside.intra_node_sent, 1500);
  EXPECT_EQ(inside.inter_node_sent, 0);
}

TEST(CountByNode, AHierarchicalCallSplitsItsNodeStepsOff) {
  Counters call;
  call.count_compressed(4000, 4, 1500);
  const double intra = algorithms::Hierarchical::intra_node_bytes(1000, 2);
  ASSERT_GT(intra, 0);
  count_by_node(call, split_by_node({0, 0, 2, 2}, 1), true, 1000);
  EXPECT_EQ(call.intra_node_sent, intra);
  EXPECT_EQ(call.inter_node_sent, 1500 - intra);
  EXPECT_EQ(call.inter_node_baseline, call.wire_baseline) << "the flat ring's hop crosses";
}

}  // namespace
}  // namespace slimreduce
