// How one call is counted for the report, written once for both sides
// (core/runtime/comm_shape.h): against the ring baseline of its ranks, split
// by node where the nodes are known.
#include <gtest/gtest.h>

#include "algorithms/hierarchical.h"
#include "core/runtime/comm_shape.h"

namespace slimreduce {
namespace {

class CountedCall : public ::testing::TestWithParam<int> {};  // the communicator's ranks

TEST_P(CountedCall, PassedThroughSendsTheRingBaseline) {
  const int ranks = GetParam();
  CallOutcome call;
  call.bytes = 1 << 20;
  call.count = 1 << 18;
  call.passed_because = &Counters::warmup;
  const Counters counted = counted_call(ranks, nullptr, call);
  EXPECT_EQ(counted.intercepted, 1u);
  EXPECT_EQ(counted.passed_through, 1u);
  EXPECT_EQ(counted.compressed, 0u);
  EXPECT_EQ(counted.warmup, 1u);
  EXPECT_EQ(counted.input_bytes, 1u << 20);
  EXPECT_DOUBLE_EQ(counted.wire_baseline, 2.0 * (ranks - 1) / ranks * (1 << 20));
  EXPECT_DOUBLE_EQ(counted.wire_sent, counted.wire_baseline);
  EXPECT_DOUBLE_EQ((CommShape{1, 0, ranks}.ring_factor()), 2.0 * (ranks - 1) / ranks);
}

TEST_P(CountedCall, CompressedSendsWhatItSent) {
  const int ranks = GetParam();
  CallOutcome call;
  call.bytes = 1 << 20;
  call.count = 1 << 18;
  call.compressed = true;
  call.wire_sent = 1000;
  const Counters counted = counted_call(ranks, nullptr, call);
  EXPECT_EQ(counted.compressed, 1u);
  EXPECT_EQ(counted.passed_through, 0u);
  EXPECT_DOUBLE_EQ(counted.wire_sent, 1000);
  EXPECT_DOUBLE_EQ(counted.wire_baseline, 2.0 * (ranks - 1) / ranks * (1 << 20));
  EXPECT_DOUBLE_EQ(counted.inter_node_baseline + counted.intra_node_baseline, 0);
}

INSTANTIATE_TEST_SUITE_P(Ranks, CountedCall, ::testing::Values(1, 2, 3, 8));

TEST(CountedCallSize, AnUnknownSizeCountsAsOneRank) {
  CallOutcome call;
  call.bytes = 4096;
  for (int unknown : {0, -1}) {
    const Counters counted = counted_call(unknown, nullptr, call);
    EXPECT_EQ(counted.passed_through, 1u);
    EXPECT_DOUBLE_EQ(counted.wire_baseline, 0);
  }
}

TEST(CountedCallNodes, FlatCallsGoWhereTheRingHopGoes) {
  CallOutcome call;
  call.bytes = 4096;
  call.count = 1024;
  NodeSplit split;
  split.node_ranks = 2;
  for (bool crosses : {false, true}) {
    split.ring_hop_crosses = crosses;
    const Counters counted = counted_call(4, &split, call);
    EXPECT_DOUBLE_EQ(crosses ? counted.inter_node_sent : counted.intra_node_sent,
                     counted.wire_sent);
    EXPECT_DOUBLE_EQ(crosses ? counted.intra_node_sent : counted.inter_node_sent, 0);
  }
}

TEST(CountedCallNodes, HierarchicalCallsSplitByTheirSteps) {
  CallOutcome call;
  call.bytes = 4096;
  call.count = 1024;
  call.compressed = true;
  call.wire_sent = 5000;
  call.ran_hierarchically = true;
  NodeSplit split;
  split.node_ranks = 2;
  const Counters counted = counted_call(4, &split, call);
  const double intra = algorithms::Hierarchical::intra_node_bytes(1024, 2);
  EXPECT_GT(intra, 0);
  EXPECT_DOUBLE_EQ(counted.intra_node_sent, intra);
  EXPECT_DOUBLE_EQ(counted.inter_node_sent, 5000 - intra);
  // Only a compressed call runs the node steps: passed through, it counts flat.
  call.compressed = false;
  const Counters passed = counted_call(4, &split, call);
  EXPECT_DOUBLE_EQ(passed.intra_node_sent, passed.wire_sent);
}

}  // namespace
}  // namespace slimreduce
