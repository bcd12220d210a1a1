// The cost model (core/runtime/cost_model.h): its byte counts against the
// algorithms' own (the report's), its link rules against hand arithmetic,
// and its ordering of the candidates where the answer is plain.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "algorithms/sharded.h"
#include "algorithms/wire_bytes.h"
#include "core/runtime/compressor_choice.h"
#include "core/runtime/cost_model.h"

namespace slimreduce::cost {
namespace {

std::unique_ptr<compressors::Compressor> made(const std::string& name, double ratio = 0.01) {
  Settings settings;
  settings.topk_ratio = ratio;
  return compressor_named(name, settings);
}

double flat_bytes(const compressors::Compressor* compressor, std::size_t n, int ranks,
                  std::string* algorithm) {
  double bytes = 0;
  for (const Phase& phase : flat_phases(compressor, n, ranks, algorithm)) bytes += phase.bytes;
  return bytes;
}

struct Sizes {
  std::size_t n;
  int ranks;
};

class FlatBytes : public ::testing::TestWithParam<Sizes> {};

// Each algorithm's bytes, as the report counts them for the same call.
TEST_P(FlatBytes, AreTheAlgorithmsOwn) {
  const auto [n, ranks] = GetParam();
  std::string algorithm;
  EXPECT_DOUBLE_EQ(flat_bytes(nullptr, n, ranks, &algorithm),
                   algorithms::ring_allreduce_wire_bytes(4 * n, ranks));
  EXPECT_EQ(algorithm, "ring");
  const auto fp16 = made("fp16");
  EXPECT_DOUBLE_EQ(flat_bytes(fp16.get(), n, ranks, &algorithm),
                   algorithms::ring_allreduce_wire_bytes(2 * n, ranks));
  const auto int8 = made("int8");
  EXPECT_NEAR(flat_bytes(int8.get(), n, ranks, &algorithm),
              algorithms::ShardedAllreduce::fixed_wire_sent(*int8->sharded_codec(), n, ranks, 0),
              1e-6 * n);
  EXPECT_EQ(algorithm, "sharded");
  const auto topk = made("topk", 0.3);  // dense enough to stay gathered
  const double gathered = flat_bytes(topk.get(), n, ranks, &algorithm);
  if (algorithm == "gather") {
    EXPECT_DOUBLE_EQ(gathered,
                     algorithms::ring_allgather_wire_bytes(topk->compressed_bytes(n), ranks));
  } else {
    ADD_FAILURE() << "top-k at 0.3 should gather: " << algorithm;
  }
}

INSTANTIATE_TEST_SUITE_P(CostModel, FlatBytes,
                         ::testing::Values(Sizes{1 << 16, 2}, Sizes{1 << 20, 4},
                                           Sizes{(1 << 20) + 7, 8}, Sizes{1 << 22, 64}));

// One shared link carries every rank's bytes; a node's link one ring
// edge's; an all-to-all phase the node's ranks' traffic bound elsewhere.
TEST(CostModel, TheBusiestLinkByLayout) {
  const Link inter{1e9, 1e-5}, intra{1e11, 1e-6};
  const Phase ring{1e6, Pattern::ring, 6};
  const Phase all{1e6, Pattern::all_to_all, 63};
  Layout shared{4, 4, true};
  EXPECT_DOUBLE_EQ(phase_seconds(ring, shared, inter, intra), 6e-5 + 4e6 / 1e9);
  Layout one_node{8, 8, false};
  EXPECT_DOUBLE_EQ(phase_seconds(ring, one_node, inter, intra), 6e-6 + 1e6 / 1e11);
  Layout nodes{64, 8, false};
  EXPECT_DOUBLE_EQ(phase_seconds(ring, nodes, inter, intra), 6e-5 + 1e6 / 1e9);
  EXPECT_DOUBLE_EQ(phase_seconds(all, nodes, inter, intra), 63e-5 + 8.0 * 1e6 * 56 / 63 / 1e9);
  Phase across = ring;
  across.across_nodes_only = true;
  EXPECT_DOUBLE_EQ(phase_seconds(across, nodes, inter, intra), 6e-5 + 8e6 / 1e9);
}

// On a slow link fewer bytes win; on a fast one compression's own time can
// lose to sending plain; a tiny call is latency alone.
TEST(CostModel, OrdersTheCandidatesWhereThePlainAnswerIsKnown) {
  const auto fp16 = made("fp16"), int8 = made("int8");
  const Rates fp16_rates{10e9, 5e9}, int8_rates{7e9, 20e9};
  const Layout layout{4, 4, true};
  const Link intra{25e9, 1e-6};
  const std::size_t n = 4 << 20;  // 16 MiB
  const Link slow{125e6, 2e-5};
  const double none_slow = predict(nullptr, n, layout, slow, intra, {}).total_s();
  const double fp16_slow = predict(fp16.get(), n, layout, slow, intra, fp16_rates).total_s();
  const double int8_slow = predict(int8.get(), n, layout, slow, intra, int8_rates).total_s();
  EXPECT_LT(int8_slow, fp16_slow);
  EXPECT_LT(fp16_slow, none_slow);
  EXPECT_NEAR(none_slow / int8_slow, 4.0, 0.2) << "int8 sends about a quarter";
  const Link fast{1e12, 2e-6};
  EXPECT_LT(predict(nullptr, n, layout, fast, intra, {}).total_s(),
            predict(int8.get(), n, layout, fast, intra, int8_rates).total_s());
  const Prediction tiny = predict(nullptr, 16, layout, slow, intra, {});
  EXPECT_NEAR(tiny.wire_s, 6 * 2e-5, 1e-5);
}

// Ranks beyond the node's cores wait for one: compression takes longer by
// their share, the wire not at all.
TEST(CostModel, RanksSharingCoresCompressMoreSlowly) {
  const auto int8 = made("int8");
  Layout layout{4, 4, true};
  const Link link{1.25e9, 2e-5}, intra{25e9, 1e-6};
  const Rates rates{5e9, 20e9};
  const Prediction own = predict(int8.get(), 1 << 22, layout, link, intra, rates);
  layout.cores_per_node = 2;
  const Prediction shared = predict(int8.get(), 1 << 22, layout, link, intra, rates);
  EXPECT_DOUBLE_EQ(shared.compute_s, 2 * own.compute_s);
  EXPECT_DOUBLE_EQ(shared.wire_s, own.wire_s);
  layout.cores_per_node = 8;
  EXPECT_DOUBLE_EQ(predict(int8.get(), 1 << 22, layout, link, intra, rates).compute_s,
                   own.compute_s);
}

// Two-level: fp32 inside the node, the compressed shard across; with one
// node it is the flat call.
TEST(CostModel, TwoLevelSendsOnlyTheShardAcross) {
  const auto fp16 = made("fp16");
  const Layout layout{64, 8, false};
  const Link inter{1.25e9, 2e-5}, intra{25e9, 2e-6};
  const std::size_t n = 16 << 20;
  const Prediction flat = predict(fp16.get(), n, layout, inter, intra, {}, false);
  const Prediction two = predict(fp16.get(), n, layout, inter, intra, {}, true);
  EXPECT_EQ(two.algorithm, "two-level (ring across)");
  // Across: every local rank's shard (n / 8 values, fp16) over a ring of 8 nodes.
  EXPECT_NEAR(two.wire_bytes, algorithms::ring_allreduce_wire_bytes(2 * n / 8, 8), 1.0);
  EXPECT_LT(two.wire_s, flat.wire_s);
  const Layout one_node{8, 8, false};
  EXPECT_EQ(predict(fp16.get(), n, one_node, inter, intra, {}, true).algorithm, "ring");
}

}  // namespace
}  // namespace slimreduce::cost
