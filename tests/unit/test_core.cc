// Engine pieces that need no MPI run: eligibility, residual memory, byte
// accounting and the report's text.
#include <gtest/gtest.h>

#include <list>
#include <thread>
#include <vector>

#include "core/mpi/eligibility.h"
#include "core/mpi/thread_tally.h"
#include "core/runtime/compressor_choice.h"
#include "core/runtime/counters.h"
#include "core/runtime/decision.h"
#include "core/runtime/residuals.h"

namespace slimreduce {
namespace {

Settings with_compressor(const char* name, std::uint64_t min_bytes = 65536) {
  Settings settings;
  settings.compressor = name;
  settings.min_bytes = min_bytes;
  return settings;
}

// Through the front the MPI engine uses (MpiCall, mpi_compresses).
bool compresses(const MpiCall& call, const Settings& settings) {
  return mpi_compresses(
      call,
      eligibility_rule(settings, compressor_named(settings.compressor, settings).get(), kMpiRules));
}

TEST(Eligibility, OnlyLargeFloatSumsOnIntracommunicators) {
  const Settings fp16 = with_compressor("fp16");
  const MpiCall eligible{true, true, true, 2, 16384, true};
  EXPECT_TRUE(compresses(eligible, fp16));
  MpiCall not_float = eligible, not_sum = eligible, inter = eligible, small = eligible,
          bad_buffers = eligible, one_rank = eligible;
  not_float.float32 = false;
  not_sum.op_sum = false;
  inter.intracomm = false;
  small.count = 16383;
  bad_buffers.usable_buffers = false;
  one_rank.comm_size = 1;
  for (const MpiCall& call : {not_float, not_sum, inter, small, bad_buffers, one_rank}) {
    EXPECT_FALSE(compresses(call, fp16));
  }
  EXPECT_FALSE(compresses(eligible, with_compressor("none")));
  EXPECT_FALSE(compresses(MpiCall{true, true, true, 2, 0, true}, with_compressor("fp16", 0)));
  EXPECT_TRUE(compresses(MpiCall{true, true, true, 2, 1, true}, with_compressor("topk", 4)));
}

// What the real library reports as MPI_ERR_BUFFER (or crashes on) is left to it.
TEST(Eligibility, OnlyBuffersThatCanBeReadAndWritten) {
  float buffers[3] = {};
  float *send = &buffers[0], *recv = &buffers[1];
  void* in_place = &buffers[2];  // stands for MPI_IN_PLACE: neither buffer
  EXPECT_TRUE(usable_buffers(send, recv, in_place));
  EXPECT_TRUE(usable_buffers(in_place, recv, in_place));
  EXPECT_FALSE(usable_buffers(recv, recv, in_place)) << "aliased without MPI_IN_PLACE";
  EXPECT_FALSE(usable_buffers(send, in_place, in_place)) << "MPI_IN_PLACE as the receive buffer";
  EXPECT_FALSE(usable_buffers(in_place, in_place, in_place));
  EXPECT_FALSE(usable_buffers(nullptr, recv, in_place));
  EXPECT_FALSE(usable_buffers(send, nullptr, in_place));
}

TEST(Residuals, SameKeySameSlotNewShapeResets) {
  ResidualStore store(1 << 20);
  int buffer = 0;
  const ResidualKey key{1, &buffer};
  ResidualSlot* slot = store.find_or_create(key, 100, 7, true);
  ASSERT_NE(slot, nullptr);
  ASSERT_NE(slot->host_residual(), nullptr);
  EXPECT_EQ(slot->residual.size(), 100u);
  slot->host_residual()[3] = 1.5f;
  EXPECT_EQ(store.find_or_create(key, 100, 7, true), slot);
  EXPECT_EQ(slot->host_residual()[3], 1.5f);
  EXPECT_EQ(store.bytes_held(), 400u);

  ResidualSlot* reshaped = store.find_or_create(key, 50, 7, true);
  ASSERT_NE(reshaped, nullptr);
  EXPECT_EQ(reshaped->host_residual()[3], 0.0f);
  EXPECT_EQ(reshaped->residual.size(), 50u);
  EXPECT_EQ(store.bytes_held(), 200u);
  EXPECT_EQ(store.find_or_create(key, 50, 8, true)->host_residual()[3], 0.0f)
      << "new datatype resets";
  EXPECT_EQ(store.resets(), 2u);
}

// A key whose residual lives on the GPU (device buffers) holds its bytes
// against the cap but never makes the host copy.
// SLIMREDUCE_HIERARCHICAL=auto: a sharded call's owner-side residual made
// flat is zeroed by a two-level call of its key (other values, even at the
// same size), and back; the same layout again keeps it.
TEST(Residuals, StateOfTheOtherLevelsStartsFromZero) {
  ResidualSlot slot;
  slot.keep_state_for(false);
  slot.compressor_state = {1.0f, 2.0f};
  slot.keep_state_for(false);
  EXPECT_EQ(slot.compressor_state, (std::vector<float>{1.0f, 2.0f}));
  slot.keep_state_for(true);
  EXPECT_EQ(slot.compressor_state, (std::vector<float>{0.0f, 0.0f})) << "its size kept";
  slot.compressor_state = {3.0f, 4.0f};
  slot.keep_state_for(true);
  EXPECT_EQ(slot.compressor_state, (std::vector<float>{3.0f, 4.0f}));
  slot.keep_state_for(false);
  EXPECT_EQ(slot.compressor_state, (std::vector<float>{0.0f, 0.0f}));
}

TEST(Residuals, HostMemoryIsMadeOnlyWhenAsked) {
  ResidualStore store(1000);
  int a = 0, b = 0;
  ResidualSlot* device_key = store.find_or_create({1, &a}, 200, 0, true);
  ASSERT_NE(device_key, nullptr);
  EXPECT_TRUE(device_key->feeds_back);
  EXPECT_TRUE(device_key->residual.empty());
  EXPECT_EQ(store.bytes_held(), 800u) << "held all the same, on the device";
  EXPECT_EQ(store.find_or_create({2, &b}, 100, 0, true), nullptr) << "the cap counts it";
  ResidualSlot* off = store.find_or_create({2, &b}, 100, 0, false);
  ASSERT_NE(off, nullptr);
  EXPECT_EQ(off->host_residual(), nullptr) << "no error feedback, no residual";
}

// What a call makes for its key besides the residual (a sharded call's
// owner-side residual) counts against the cap once the call is over, while
// the key feeds back error, and is given back with the key.
TEST(Residuals, AKeysStateCountsAgainstTheCap) {
  ResidualStore store(1000);
  int a = 0, b = 0, c = 0;
  ResidualSlot* key = store.find_or_create({1, &a}, 150, 0, true);
  ASSERT_NE(key, nullptr);
  EXPECT_EQ(store.bytes_held(), 600u);
  key->compressor_state.assign(75, 0.0f);  // as owner_residuals() makes it
  EXPECT_TRUE(key->state_uncounted());
  EXPECT_NE(store.find_or_create({2, &b}, 100, 0, true), nullptr) << "not counted yet: room";
  store.count_state({1, &a});
  EXPECT_FALSE(key->state_uncounted());
  EXPECT_EQ(store.bytes_held(), 600u + 300u + 400u);
  EXPECT_EQ(store.find_or_create({3, &c}, 10, 0, true), nullptr) << "the state took the room";
  key->compressor_state.assign(25, 0.0f);  // another layout: a smaller share
  store.count_state({1, &a});
  EXPECT_EQ(store.bytes_held(), 600u + 100u + 400u);
  store.forget_communicator(1);
  EXPECT_EQ(store.bytes_held(), 400u) << "given back with the key";
  ResidualSlot* without = store.find_or_create({4, &c}, 10, 0, false);
  ASSERT_NE(without, nullptr);
  without->compressor_state.assign(1000, 0.0f);  // PowerSGD's Q without error feedback
  EXPECT_FALSE(without->state_uncounted());
  store.count_state({4, &c});
  EXPECT_EQ(store.bytes_held(), 400u) << "without error feedback, nothing is counted";
}

// Host memory standing in for the device: counts what is made and freed.
class CountingAllocator : public DeviceAllocator {
 public:
  void* allocate(std::size_t bytes, void*, bool zeroed) override {
    if (fail) return nullptr;
    blocks.emplace_back(bytes / sizeof(float), zeroed ? 0.0f : 1.0f);
    ++made;
    return blocks.back().data();
  }
  void release(void*, void*) override { ++freed; }
  bool wait_device(int) override { return true; }
  std::list<std::vector<float>> blocks;  // stable addresses; kept, so an abandoned one stays valid
  int made = 0;
  int freed = 0;
  bool fail = false;
};

// One store for host and device residuals: the MPI device path's residual is
// the key's slot's device memory, made zeroed once, freed when the key resets
// or its communicator goes, and never freed at exit.
TEST(Residuals, TheDeviceResidualLivesAndDiesWithItsSlot) {
  CountingAllocator device;
  ResidualStore store(1 << 20);
  int a = 0;
  ResidualSlot* slot = store.find_or_create({1, &a}, 100, 0, true);
  ASSERT_NE(slot, nullptr);
  float* residual = slot->device_residual(device, nullptr);
  ASSERT_NE(residual, nullptr);
  EXPECT_EQ(residual[99], 0.0f) << "made zeroed";
  EXPECT_EQ(slot->device_residual(device, nullptr), residual) << "made once";
  EXPECT_EQ(slot->host_residual() != nullptr, true) << "the host side is separate";
  EXPECT_EQ(store.bytes_held(), 400u) << "counted once against the cap";
  store.find_or_create({1, &a}, 200, 0, true);  // the key reset: another tensor
  EXPECT_EQ(device.freed, 1);
  ResidualSlot* again = store.find_or_create({1, &a}, 200, 0, true);
  again->device_residual(device, nullptr);
  EXPECT_EQ(device.made, 2) << "a fresh zeroed residual for the new shape";
  store.forget_communicator(1);
  EXPECT_EQ(device.freed, 2);
  ResidualSlot* kept = store.find_or_create({2, &a}, 10, 0, true);
  kept->device_residual(device, nullptr);
  store.abandon_device_memory();
  store.forget_communicator(2);
  EXPECT_EQ(device.freed, 2) << "abandoned at exit: never freed";
}

TEST(Residuals, NoDeviceResidualWithoutFeedbackOrMemory) {
  CountingAllocator device;
  ResidualStore store(1 << 20);
  int a = 0, b = 0;
  EXPECT_EQ(store.find_or_create({1, &a}, 100, 0, false)->device_residual(device, nullptr),
            nullptr);
  EXPECT_EQ(device.made, 0);
  device.fail = true;
  EXPECT_EQ(store.find_or_create({1, &b}, 100, 0, true)->device_residual(device, nullptr), nullptr)
      << "out of device memory: the caller fails the call";
}

// The one decision of every path: the cap reads the count alone (what a
// rank's store holds never changes it) and comes before warm-up, which a
// capped call does not use up.
TEST(Decision, TheCapReadsTheCountAloneAndComesFirst) {
  CompressionDecision decision(1000, 1);
  EXPECT_EQ(decision.decide(true, 1, 251, 0), Decision::over_residual_cap);
  EXPECT_EQ(decision.decide(true, 1, 251, 0), Decision::over_residual_cap);
  EXPECT_EQ(decision.decide(false, 1, 251, 0), Decision::warming_up) << "no cap without feedback";
  EXPECT_EQ(decision.decide(false, 1, 251, 0), Decision::compress);
  EXPECT_EQ(decision.decide(true, 1, 250, 0), Decision::warming_up) << "another shape";
  EXPECT_EQ(decision.decide(true, 1, 250, 0), Decision::compress);
  EXPECT_EQ(decision.decide(true, 2, 250, 0), Decision::warming_up) << "another communicator";
}

TEST(Decision, AFreedCommunicatorWarmsUpAgain) {
  CompressionDecision decision(1000, 1);
  EXPECT_EQ(decision.decide(false, 1, 10, 0), Decision::warming_up);
  EXPECT_EQ(decision.decide(false, 1, 10, 0), Decision::compress);
  decision.forget_communicator(1);
  EXPECT_EQ(decision.decide(false, 1, 10, 0), Decision::warming_up);
}

TEST(Decision, EachPassThroughHasItsCounter) {
  EXPECT_EQ(counted_as(Decision::compress), nullptr);
  EXPECT_EQ(counted_as(Decision::over_residual_cap), &Counters::ef_cap_fallback);
  EXPECT_EQ(counted_as(Decision::warming_up), &Counters::warmup);
}

// The one value a call runs with: the policy's compressor at its one level
// on the classifier's route, until warm-up or the cap pass it through.
TEST(CallDecision, CarriesThePolicysCompressorOnTheClassifiersRoute) {
  Policy policy;
  policy.compressor = compressor_named("topk", with_compressor("topk"));
  policy.error_feedback = true;
  CompressionDecision rule(1000, 1);
  const CallShape shape{7, 100, 3};
  CallDecision first = choose_for(policy, ReductionPath::topk);
  EXPECT_TRUE(first.compressed()) << "chosen, not yet settled";
  EXPECT_EQ(first.compressor, policy.compressor);
  EXPECT_TRUE(first.error_feedback);
  EXPECT_EQ(first.level, 0);
  settle(rule, first, shape);
  EXPECT_FALSE(first.compressed()) << "the shape's first call warms up";
  EXPECT_EQ(first.route, ReductionPath::pass_through);
  EXPECT_EQ(first.passes_because, &Counters::warmup);
  CallDecision second = choose_for(policy, ReductionPath::topk);
  settle(rule, second, shape);
  EXPECT_TRUE(second.compressed());
  EXPECT_EQ(second.route, ReductionPath::topk);
  EXPECT_EQ(second.passes_because, nullptr);
  CallDecision capped = choose_for(policy, ReductionPath::topk);
  settle(rule, capped, {7, 251, 3});
  EXPECT_EQ(capped.passes_because, &Counters::ef_cap_fallback);
  EXPECT_EQ(capped.route, ReductionPath::pass_through);
}

TEST(CallDecision, ChoosingCountsNothingAndNoCompressorPassesUncounted) {
  Policy policy;
  policy.compressor = compressor_named("fp16", with_compressor("fp16"));
  CompressionDecision rule(1000, 1);
  const CallShape shape{1, 10, 0};
  for (int i = 0; i < 3; ++i) (void)choose_for(policy, ReductionPath::cast);
  CallDecision settled = choose_for(policy, ReductionPath::cast);
  settle(rule, settled, shape);
  EXPECT_EQ(settled.passes_because, &Counters::warmup) << "only a settled call counts";
  CallDecision none = choose_for(Policy{}, ReductionPath::cast);
  EXPECT_FALSE(none.compressed());
  settle(rule, none, shape);
  EXPECT_EQ(none.passes_because, nullptr) << "\"none\" is not a warm-up call";
  CallDecision after = choose_for(policy, ReductionPath::cast);
  settle(rule, after, shape);
  EXPECT_TRUE(after.compressed()) << "the pass-through above used up no warm-up step";
}

// Warm-up counts calls per shape, never per buffer: every rank ends it at the same call.
TEST(Warmup, CountsCallsPerShape) {
  WarmupCounter warmup(2);
  EXPECT_TRUE(warmup.warming_up(1, 100, 7));
  EXPECT_TRUE(warmup.warming_up(1, 100, 7));
  EXPECT_FALSE(warmup.warming_up(1, 100, 7));
  EXPECT_FALSE(warmup.warming_up(1, 100, 7));
  EXPECT_TRUE(warmup.warming_up(1, 101, 7)) << "another count is another shape";
  EXPECT_TRUE(warmup.warming_up(1, 100, 8)) << "another datatype is another shape";
  EXPECT_TRUE(warmup.warming_up(2, 100, 7)) << "another communicator";
  warmup.forget_communicator(1);
  EXPECT_TRUE(warmup.warming_up(1, 100, 7)) << "a freed communicator's counts go with it";
  EXPECT_FALSE(WarmupCounter(0).warming_up(1, 100, 7)) << "no warm-up by default";
  // Numbered calls (stochastic rounding's), with or without a warm-up.
  WarmupCounter numbered(0, true);
  for (std::uint64_t call = 0; call < 3; ++call) {
    std::uint64_t number = 99;
    EXPECT_FALSE(numbered.warming_up(1, 100, 7, &number));
    EXPECT_EQ(number, call);
  }
  std::uint64_t untouched = 99;
  WarmupCounter(0).warming_up(1, 100, 7, &untouched);
  EXPECT_EQ(untouched, 99u) << "calls are not numbered unless asked";
}

TEST(Residuals, CapRefusesNewResidualsAndFreeingMakesRoom) {
  ResidualStore store(1000);
  int a = 0, b = 0;
  ASSERT_NE(store.find_or_create({1, &a}, 200, 0, true), nullptr);  // 800 bytes
  EXPECT_EQ(store.find_or_create({2, &b}, 100, 0, true), nullptr);  // 1200 > 1000
  EXPECT_NE(store.find_or_create({2, &b}, 100, 0, false), nullptr) << "no residual, no bytes";
  store.forget_communicator(1);
  EXPECT_EQ(store.bytes_held(), 0u);
  EXPECT_NE(store.find_or_create({3, &b}, 250, 0, true), nullptr);
  EXPECT_EQ(store.bytes_held(), 1000u);
}

TEST(Residuals, ForgettingOneCommunicatorKeepsTheOthers) {
  ResidualStore store(1 << 20);
  int a = 0, b = 0;
  store.find_or_create({1, &a}, 10, 0, true)->host_residual()[0] = 2.0f;
  store.find_or_create({2, &b}, 10, 0, true)->host_residual()[0] = 3.0f;
  store.forget_communicator(1);
  EXPECT_EQ(store.find_or_create({2, &b}, 10, 0, true)->host_residual()[0], 3.0f);
  EXPECT_EQ(store.find_or_create({1, &a}, 10, 0, true)->host_residual()[0], 0.0f);
}

class RingBytes : public ::testing::TestWithParam<int> {};

TEST_P(RingBytes, AccountingFollowsTheRingAndAllgatherFormulas) {
  const int ranks = GetParam();
  EXPECT_DOUBLE_EQ(ring_allreduce_wire_bytes(1000, ranks), 2.0 * (ranks - 1) * 1000 / ranks);
  EXPECT_DOUBLE_EQ(ring_allgather_wire_bytes(80, ranks), (ranks - 1) * 80.0);
  Counters counters;
  counters.count_pass_through(400, ranks);
  counters.count_compressed(4000, ranks, ring_allreduce_wire_bytes(2000, ranks));
  EXPECT_EQ(counters.intercepted, 2u);
  EXPECT_EQ(counters.compressed, 1u);
  EXPECT_EQ(counters.passed_through, 1u);
  EXPECT_EQ(counters.input_bytes, 4400u);
  EXPECT_DOUBLE_EQ(counters.wire_baseline, ring_allreduce_wire_bytes(4400, ranks));
  EXPECT_DOUBLE_EQ(counters.wire_sent, ring_allreduce_wire_bytes(2400, ranks));
  EXPECT_NEAR(counters.savings(), 1.0 - 2400.0 / 4400.0, 1e-12);
}

INSTANTIATE_TEST_SUITE_P(Ranks, RingBytes, ::testing::Values(2, 3, 4, 7, 64));

TEST(Counters, OneRankSendsNothingAndSavesNothing) {
  Counters counters;
  counters.count_compressed(4000, 1, 0);
  EXPECT_EQ(counters.wire_baseline, 0.0);
  EXPECT_EQ(counters.savings(), 0.0);
}

ReportContext context_of(int rank, int world_size, std::string compressor,
                         bool summed_over_ranks = false) {
  ReportContext context;
  context.rank = rank;
  context.world_size = world_size;
  context.compressor = std::move(compressor);
  context.summed_over_ranks = summed_over_ranks;
  return context;
}

TEST(Report, JsonCarriesTheContractKeys) {
  Counters counters;
  counters.count_pass_through(100, 4);
  counters.count_compressed(400, 4, 300);
  counters.warmup = 2;
  counters.ef_resets = 5;
  const std::string json = report_json(counters, context_of(3, 4, "fp16"));
  for (const char* expected :
       {"\"rank\": 3", "\"world_size\": 4", "\"compressor\": \"fp16\"", "\"intercepted\": 2",
        "\"compressed\": 1", "\"passed_through\": 1", "\"warmup\": 2", "\"ef_resets\": 5",
        "\"input\": 500", "\"wire_baseline\": 750", "\"wire_sent\": 450",
        "\"savings\": 0.400000"}) {
    EXPECT_NE(json.find(expected), std::string::npos) << expected << " in " << json;
  }
  const std::string table = report_table(counters, context_of(0, 4, "fp16"));
  EXPECT_NE(table.find("savings    40.0%"), std::string::npos) << table;
}

// The node split appears with SLIMREDUCE_HIERARCHICAL=1 only, after the contract's keys.
TEST(Report, TheNodeSplitIsReportedWhenHierarchicalIsOn) {
  Counters counters;
  counters.count_compressed(400, 4, 300);
  counters.count_by_node(counters.wire_baseline, 0, true);
  counters.inter_node_sent = 100;
  counters.intra_node_sent = 200;
  counters.count_by_node(50, 50, false);
  EXPECT_EQ(report_json(counters, context_of(0, 4, "fp16")).find("inter_node"), std::string::npos);
  ReportContext hierarchical = context_of(0, 4, "fp16");
  hierarchical.node_bytes = true;
  const std::string json = report_json(counters, hierarchical);
  for (const char* expected :
       {"\"wire_sent\": 300, \"inter_node_baseline\": 600, \"inter_node_sent\": 100",
        "\"intra_node_baseline\": 50, \"intra_node_sent\": 250"}) {
    EXPECT_NE(json.find(expected), std::string::npos) << expected << " in " << json;
  }
  EXPECT_NE(report_table(counters, hierarchical).find("  nodes      across: baseline"),
            std::string::npos);
}

// Counters with every field set, each to a value of its own.
Counters counters_with_every_field() {
  Counters counters;
  counters.count_pass_through(100, 4);
  counters.count_compressed(400, 4, 300);
  counters.warmup = 2;
  counters.ef_cap_fallback = 9;
  counters.ef_resets = 5;
  counters.overflow_rescued = 3;
  counters.iallreduce = 7;
  counters.fused_batches = 4;
  counters.fused_tensors = 6;
  counters.count_by_node(600, 100, true);
  counters.count_by_node(150, 350, false);
  counters.count_topk(false, 120);
  counters.count_topk(true, 30);
  counters.count_topk(true, 40);
  counters.auto_probe_calls = 11;
  counters.auto_switches = 2;
  counters.auto_waits = 5;
  return counters;
}

// The MPI side sums the counters over ranks as a list of numbers: every
// field must survive the trip, each in its own place.
TEST(Counters, EveryFieldGoesToValuesAndBack) {
  const Counters counters = counters_with_every_field();
  double values[Counters::kValues];
  counters.to_values(values);
  const Counters back = Counters::from_values(values);
  ReportContext context = context_of(0, 4, "fp16");
  context.node_bytes = true;
  context.chooses = true;
  EXPECT_EQ(report_json(back, context), report_json(counters, context));
  EXPECT_EQ(back.intercepted, 2u);
}

// Every key the JSON report writes is readable by name (slimreduce_get_counter),
// with the value the report gives it; a key the report lacks is refused.
TEST(Report, EveryJsonKeyIsReadableByName) {
  const Counters counters = counters_with_every_field();
  ReportContext context = context_of(0, 4, "auto");
  context.node_bytes = true;
  context.chooses = true;
  const std::string json = report_json(counters, context);
  const std::pair<const char*, double> keys[] = {{"calls.intercepted", 2},
                                                 {"calls.compressed", 1},
                                                 {"calls.passed_through", 1},
                                                 {"calls.warmup", 2},
                                                 {"calls.ef_cap_fallback", 9},
                                                 {"calls.ef_resets", 5},
                                                 {"calls.overflow_rescued", 3},
                                                 {"calls.iallreduce", 7},
                                                 {"calls.fused_batches", 4},
                                                 {"calls.fused_tensors", 6},
                                                 {"bytes.input", 500},
                                                 {"bytes.wire_baseline", 750},
                                                 {"bytes.wire_sent", 450},
                                                 {"bytes.inter_node_baseline", 600},
                                                 {"bytes.inter_node_sent", 100},
                                                 {"bytes.intra_node_baseline", 150},
                                                 {"bytes.intra_node_sent", 350},
                                                 {"calls.topk_gathered", 1},
                                                 {"calls.topk_sharded", 2},
                                                 {"bytes.topk_gathered_sent", 120},
                                                 {"bytes.topk_sharded_sent", 70},
                                                 {"auto.probe_calls", 11},
                                                 {"auto.switches", 2},
                                                 {"auto.waits", 5},
                                                 {"savings", 0.4}};
  for (const auto& [key, value] : keys) {
    const std::optional<double> read = report_value(counters, key);
    ASSERT_TRUE(read.has_value()) << key;
    EXPECT_DOUBLE_EQ(*read, value) << key;
    const std::string leaf = std::string(key).substr(std::string(key).find('.') + 1);
    EXPECT_NE(json.find("\"" + leaf + "\""), std::string::npos) << leaf << " not in " << json;
  }
  EXPECT_FALSE(report_value(counters, "calls.nothing").has_value());
  EXPECT_FALSE(report_value(counters, "intercepted").has_value()) << "keys are whole paths";
}

// SLIMREDUCE_COMPRESSOR=auto: its totals and one entry per size class, in
// the JSON and the table; nothing of it otherwise.
TEST(Report, AutoCarriesItsChoiceTable) {
  Counters counters;
  counters.count_compressed(400, 4, 300);
  counters.auto_probe_calls = 9;
  counters.auto_switches = 1;
  counters.auto_waits = 3;
  EXPECT_EQ(report_json(counters, context_of(0, 4, "fp16")).find("auto"), std::string::npos);
  ReportContext context = context_of(0, 4, "auto");
  context.chooses = true;
  context.auto_choices.push_back({1,
                                  18,
                                  "int8",
                                  {{"none", 0.002}, {"fp16", 0.0015}, {"int8", 0.001}},
                                  2,
                                  1,
                                  600,
                                  false,
                                  0,
                                  {},
                                  {}});
  context.auto_choices.push_back({1, 20, "", {}, 0, 0, 4, false, 0, {}, {}});
  context.auto_choices.push_back(
      {1, 19, "fp16", {{"int8", 0.001}}, 1, 0, 45, true, 1, {{"none", 0.004}}, {{"topk", 0.009}}});
  const std::string json = report_json(counters, context);
  for (const char* expected :
       {"\"auto\": {\"probe_calls\": 9, \"switches\": 1, \"waits\": 3, \"classes\": [",
        "{\"comm\": 1, \"min_bytes\": 262144, \"chosen\": \"int8\", \"probe_rounds\": 2, "
        "\"switches\": 1, \"calls\": 600, \"resetting\": false, \"reset_rounds\": 0, "
        "\"median_seconds\": {\"none\": 0.002000000, \"fp16\": 0.001500000, \"int8\": "
        "0.001000000}, \"cut_after_one_call_seconds\": {}, \"left_out_predicted_seconds\": {}},",
        "{\"comm\": 1, \"min_bytes\": 1048576, \"chosen\": \"\", \"probe_rounds\": 0, "
        "\"switches\": 0, \"calls\": 4, \"resetting\": false, \"reset_rounds\": 0, "
        "\"median_seconds\": {}, \"cut_after_one_call_seconds\": {}, "
        "\"left_out_predicted_seconds\": {}},",
        "{\"comm\": 1, \"min_bytes\": 524288, \"chosen\": \"fp16\", \"probe_rounds\": 1, "
        "\"switches\": 0, \"calls\": 45, \"resetting\": true, \"reset_rounds\": 1, "
        "\"median_seconds\": {\"int8\": 0.001000000}, \"cut_after_one_call_seconds\": "
        "{\"none\": 0.004000000}, \"left_out_predicted_seconds\": {\"topk\": 0.009000000}}]}}\n"}) {
    EXPECT_NE(json.find(expected), std::string::npos) << expected << " in " << json;
  }
  const std::string table = report_table(counters, context);
  for (const char* expected :
       {"  auto       9 probe calls, 1 switches, 3 waits; choices (agreed):\n",
        "comm 1, calls of 262144 B and up: int8   (none 2.000 ms, fp16 1.500 ms, int8 1.000 ms; "
        "2 rounds, 1 switches, 600 calls)",
        "comm 1, calls of 1048576 B and up: -      (; 0 rounds",
        "comm 1, calls of 524288 B and up: fp16   (int8 1.000 ms, none cut after one call at "
        "4.000 ms, topk left out, predicted at 9.000 ms; 1 rounds, 0 switches, 45 calls; "
        "residuals reset: chosen among those that keep none)"}) {
    EXPECT_NE(table.find(expected), std::string::npos) << expected << " in " << table;
  }
}

// SLIMREDUCE_ADAPTIVE: calls at each level, summed through the counters'
// values (as over ranks), the share sent hard, and each class's row.
TEST(Report, AdaptiveCarriesItsLevels) {
  Counters counters;
  counters.count_compressed(400, 4, 300);
  counters.count_level(0);
  for (int i = 0; i < 3; ++i) counters.count_level(1);
  counters.adaptive_switches = 1;
  double values[Counters::kValues];
  counters.to_values(values);
  const Counters summed = Counters::from_values(values);
  EXPECT_EQ(summed.adaptive_gentle, 1u);
  EXPECT_EQ(summed.adaptive_hard, 3u);
  EXPECT_EQ(report_value(summed, "adaptive.calls_hard"), 3.0);
  EXPECT_EQ(report_json(summed, context_of(0, 4, "topk")).find("adaptive"), std::string::npos);
  ReportContext context = context_of(0, 4, "topk");
  context.levels = "topk ratio 0.01,0.001";
  context.level_rows.push_back({1, 18, 20, 280, 30, 1, 1});
  const std::string json = report_json(summed, context);
  for (const char* expected :
       {"\"adaptive\": {\"levels\": \"topk ratio 0.01,0.001\", \"calls_gentle\": 1, "
        "\"calls_hard\": 3, \"hard_share\": 0.750000, \"switches\": 1, \"classes\": [",
        "{\"comm\": 1, \"min_bytes\": 262144, \"calls_gentle\": 20, \"calls_hard\": 280, "
        "\"windows\": 30, \"critical\": 1, \"switches\": 1}]}}\n"}) {
    EXPECT_NE(json.find(expected), std::string::npos) << expected << " in " << json;
  }
  const std::string table = report_table(summed, context);
  for (const char* expected :
       {"  adaptive   levels topk ratio 0.01,0.001: 1 calls gentle, 3 hard (75.0% hard), 1 "
        "switches; per class (alike on every rank):\n",
        "comm 1, calls of 262144 B and up: 20 gentle, 280 hard; 1 of 30 windows critical, 1 "
        "switches\n"}) {
    EXPECT_NE(table.find(expected), std::string::npos) << expected << " in " << table;
  }
}

// Top-k calls by algorithm: counted, summed, and on a table line of their own.
TEST(Report, TopkCallsBySharedOrGatheredAlgorithm) {
  Counters counters;
  counters.count_compressed(400, 4, 300);
  EXPECT_EQ(report_table(counters, context_of(0, 4, "topk")).find("top-k"), std::string::npos);
  counters.count_topk(true, 300);
  Counters other;
  other.count_topk(false, 1048576);
  counters += other;
  EXPECT_EQ(counters.topk_sharded, 1u);
  EXPECT_EQ(counters.topk_gathered, 1u);
  const std::string json = report_json(counters, context_of(0, 4, "topk"));
  EXPECT_NE(json.find("\"topk_gathered\": 1, \"topk_sharded\": 1"), std::string::npos) << json;
  EXPECT_NE(json.find("\"topk_gathered_sent\": 1048576, \"topk_sharded_sent\": 300"),
            std::string::npos)
      << json;
  EXPECT_NE(report_table(counters, context_of(0, 4, "topk"))
                .find("  top-k      gathered 1 calls, sent          1.0 MiB   sharded 1 calls"),
            std::string::npos)
      << report_table(counters, context_of(0, 4, "topk"));
}

// A table says whose counters it shows: a rank's own must not claim to be the job's.
TEST(Report, TableSaysWhetherItSumsOverRanks) {
  Counters counters;
  counters.count_compressed(400, 4, 300);
  const std::string alone = report_table(counters, context_of(2, 4, "topk"));
  EXPECT_NE(alone.find("compressor topk, rank 2 of 4 (this rank alone)"), std::string::npos)
      << alone;
  EXPECT_EQ(alone.find("sums over ranks"), std::string::npos) << alone;
  EXPECT_NE(alone.find("passed through        0 (warm-up 0)  residual cap reached 0"),
            std::string::npos)
      << alone;  // the cap's calls are not all passed through: they stand apart
  const std::string summed = report_table(counters, context_of(0, 4, "topk", true));
  EXPECT_NE(summed.find("compressor topk, 4 ranks (sums over ranks)"), std::string::npos) << summed;
}

TEST(CompressorChoice, NamesMakeCompressorsWithTheSettingsOptions) {
  Settings settings;
  EXPECT_EQ(compressor_named("none", settings), nullptr);
  EXPECT_EQ(compressor_named("zstd", settings), nullptr);
  settings.topk_ratio = 0.5;
  const auto half = compressor_named("topk", settings);
  settings.topk_ratio = 0.01;
  const auto hundredth = compressor_named("topk", settings);
  ASSERT_NE(half, nullptr);
  ASSERT_NE(hundredth, nullptr);
  EXPECT_GT(half->compressed_bytes(10000), 10 * hundredth->compressed_bytes(10000));
  EXPECT_EQ(compressor_named("fp16", settings)->compressed_bytes(10), 20u);
  settings.powersgd_rank = 2;
  settings.powersgd_min_compression = 16;
  const auto powersgd = compressor_named("powersgd", settings);
  ASSERT_NE(powersgd, nullptr);
  EXPECT_EQ(powersgd->aggregation(), compressors::Aggregation::low_rank);
  EXPECT_TRUE(powersgd->default_error_feedback());
  EXPECT_EQ(powersgd->compressed_bytes(10000), 2u * 200 * sizeof(float));  // 100 x 100, r = 2
  // 4096 = 64 x 64: 2 x 128 floats are 16 times smaller, not 16.01.
  EXPECT_EQ(powersgd->compressed_bytes(4096), 256u * sizeof(float));
  settings.powersgd_min_compression = 16.01;
  EXPECT_EQ(compressor_named("powersgd", settings)->compressed_bytes(4096), 4096u * sizeof(float))
      << "sent whole";
}

TEST(CompressorChoice, ErrorFeedbackAsAskedElseTheCompressorsDefault) {
  Settings settings;
  const auto topk = compressor_named("topk", settings);
  const auto fp16 = compressor_named("fp16", settings);
  EXPECT_FALSE(error_feedback_on(nullptr, settings));
  EXPECT_TRUE(error_feedback_on(topk.get(), settings));
  EXPECT_FALSE(error_feedback_on(fp16.get(), settings));
  settings.error_feedback = true;
  EXPECT_TRUE(error_feedback_on(fp16.get(), settings));
  EXPECT_FALSE(error_feedback_on(nullptr, settings)) << "nothing to feed back without a compressor";
  settings.error_feedback = false;
  EXPECT_FALSE(error_feedback_on(topk.get(), settings));
}

// Handles for the tally tests: any distinct non-null values will do.
// (A C cast, because MPI_Comm is a pointer in Open MPI and an int in MPICH.)
MPI_Comm fake_comm(std::uintptr_t n) { return (MPI_Comm)(n * 64); }

TEST(ThreadTally, BytesBecomeWireBytesAtTheirCommunicatorsRingFactor) {
  TallyBoard board;
  ThreadTally& tally = board.mine();
  EXPECT_EQ(&tally, board.known());
  tally.move_to(fake_comm(1), nullptr, ThreadTally::kNever, {1.5});  // 4 ranks: 2 x 3/4
  tally.count(1000);
  tally.count(24);
  tally.move_to(fake_comm(2), nullptr, ThreadTally::kNever, {1.0});  // 2 ranks
  tally.count(100);
  const Counters total = board.total();
  EXPECT_EQ(total.intercepted, 3u);
  EXPECT_EQ(total.passed_through, 3u);
  EXPECT_EQ(total.compressed, 0u);
  EXPECT_EQ(total.input_bytes, 1124u);
  EXPECT_DOUBLE_EQ(total.wire_baseline, 1.5 * 1024 + 100);
  EXPECT_DOUBLE_EQ(total.wire_sent, total.wire_baseline);
}

// Where the communicator's nodes are known, its ring bytes also count across
// nodes (this rank's hop crosses a boundary) or inside one; unknown: neither.
TEST(ThreadTally, WireBytesSplitByNodeWhereTheNodesAreKnown) {
  TallyBoard board;
  ThreadTally& tally = board.mine();
  tally.move_to(fake_comm(1), nullptr, ThreadTally::kNever, {1.5, 1.5, 0});  // hop crosses
  tally.count(1000);
  tally.move_to(fake_comm(2), nullptr, ThreadTally::kNever, {1.0, 0, 1.0});  // inside a node
  tally.count(100);
  tally.move_to(fake_comm(3), nullptr, ThreadTally::kNever, {1.0});  // nodes unknown
  tally.count(10);
  const Counters total = board.total();
  EXPECT_DOUBLE_EQ(total.wire_sent, 1500.0 + 100 + 10);
  EXPECT_DOUBLE_EQ(total.inter_node_baseline, 1500.0);
  EXPECT_DOUBLE_EQ(total.inter_node_sent, 1500.0);
  EXPECT_DOUBLE_EQ(total.intra_node_baseline, 100.0);
  EXPECT_DOUBLE_EQ(total.intra_node_sent, 100.0);
}

TEST(ThreadTally, EachThreadHasItsOwnAndTheBoardSumsThem) {
  TallyBoard board;
  auto calls = [&board](int n) {
    ThreadTally& tally = board.mine();
    tally.move_to(fake_comm(1), nullptr, ThreadTally::kNever, {1.0});
    for (int i = 0; i < n; ++i) tally.count(8);
  };
  std::thread first(calls, 1000), second(calls, 2000);
  first.join();
  second.join();
  EXPECT_EQ(board.known(), nullptr) << "this thread made no call";
  EXPECT_EQ(board.total().passed_through, 3000u);
  EXPECT_DOUBLE_EQ(board.total().wire_sent, 3000.0 * 8);
}

TEST(ThreadTally, ANewBoardDoesNotInheritAThreadsEarlierTally) {
  auto first = std::make_unique<TallyBoard>();
  first->mine().count(4);
  first.reset();
  TallyBoard second;
  EXPECT_EQ(second.known(), nullptr);
  EXPECT_EQ(second.mine().calls.load(), 0u);
}

TEST(ThreadTally, ForgettingCommunicatorsClearsEveryThreadsLastOne) {
  TallyBoard board;
  ThreadTally& tally = board.mine();
  tally.move_to(fake_comm(3), nullptr, 4, {1.0});
  EXPECT_EQ(tally.comm.load(), fake_comm(3));
  board.forget_communicators();
  EXPECT_NE(tally.comm.load(), fake_comm(3));
  EXPECT_EQ(tally.compress_from, 4u) << "the owner's fields are the owner's to change";
}

}  // namespace
}  // namespace slimreduce
