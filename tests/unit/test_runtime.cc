// The one owner (core/runtime/runtime.h): one policy, one decision and one residual
// store for both sides, a compressor switch that reaches every side and
// drops what the old compressor left, counters summed over sides, and a
// report identity and claim that hold once. No MPI or NCCL call: the sides
// are stand-ins that record what the runtime asks of them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/runtime/runtime.h"

namespace slimreduce {
namespace {

// Host memory standing in for the device; records waits and frees in order.
class RecordingAllocator : public DeviceAllocator {
 public:
  explicit RecordingAllocator(std::vector<std::string>& events) : events_(events) {}
  void* allocate(std::size_t bytes, void*, bool) override { return std::calloc(1, bytes); }
  void release(void* ptr, void*) override {
    events_.push_back("free");
    std::free(ptr);
  }
  bool wait_device(int device) override {
    events_.push_back("wait:" + std::to_string(device));
    return true;
  }

 private:
  std::vector<std::string>& events_;
};

class StandInSide : public RuntimeSide {
 public:
  explicit StandInSide(std::vector<int> devices) : devices_(std::move(devices)) {}
  void policy_changed(std::vector<int>& devices) override {
    ++switches;
    devices.insert(devices.end(), devices_.begin(), devices_.end());
  }
  Counters own_counters() const override { return own; }
  int switches = 0;
  Counters own;

 private:
  std::vector<int> devices_;
};

Settings settings_with(const std::string& compressor, std::uint64_t warmup = 0) {
  Settings settings;
  settings.compressor = compressor;
  settings.warmup_steps = warmup;
  settings.log_level = LogLevel::error;
  return settings;
}

struct RuntimeFixture : ::testing::Test {
  std::vector<std::string> events;
  Runtime runtime{settings_with("fp16", 1), std::make_unique<RecordingAllocator>(events), 1};

  StandInSide& attach(Side which, std::vector<int> devices) {
    return static_cast<StandInSide&>(
        runtime.attach(which, [&] { return std::make_unique<StandInSide>(std::move(devices)); }));
  }
};

TEST_F(RuntimeFixture, ThePolicyComesFromTheSettings) {
  const Policy policy = runtime.policy();
  ASSERT_NE(policy.compressor, nullptr);
  EXPECT_EQ(policy.compressor->name(), "fp16");
  EXPECT_FALSE(policy.error_feedback) << "fp16's own default";
  Settings asked = settings_with("fp16");
  asked.error_feedback = true;
  EXPECT_TRUE(Runtime(asked, nullptr, 1).policy().error_feedback) << "as the settings ask";
  EXPECT_TRUE(Runtime(settings_with("topk"), nullptr, 1).policy().error_feedback)
      << "top-k's own default";
  Runtime none(settings_with("none"), nullptr, 1);
  EXPECT_EQ(none.policy().compressor, nullptr);
  EXPECT_FALSE(none.policy().error_feedback) << "never without a compressor";
}

// SLIMREDUCE_HIERARCHICAL=auto with a fixed compressor: that compressor and
// its two-level twin are the choice; one set through the API ends it (the
// hierarchy then SLIMREDUCE_HIERARCHICAL=1's).
TEST(RuntimePolicy, AFixedCompressorChoosesFlatOrTwoLevelUntilTheApiSetsOne) {
  Settings asked = settings_with("int8");
  asked.hierarchical = asked.chooses_hierarchy = true;
  Runtime runtime(asked, nullptr, 1);
  const Policy policy = runtime.policy();
  ASSERT_TRUE(policy.chooses());
  EXPECT_TRUE(policy.chooses_hierarchy);
  std::vector<std::string> names;
  for (const Policy::Candidate& candidate : policy.candidates) names.push_back(candidate.name);
  EXPECT_EQ(names, (std::vector<std::string>{"int8", "int8/two-level"}));
  EXPECT_TRUE(policy.candidates[1].two_level);
  EXPECT_EQ(policy.candidates[0].error_feedback, policy.candidates[1].error_feedback);
  EXPECT_TRUE(runtime.settings().chooses());
  ASSERT_TRUE(runtime.use_compressor("fp16"));
  EXPECT_FALSE(runtime.policy().chooses());
  EXPECT_EQ(runtime.policy().compressor->name(), "fp16");
  EXPECT_FALSE(runtime.settings().chooses());
  EXPECT_TRUE(runtime.settings().hierarchical);
}

TEST_F(RuntimeFixture, ASideIsAttachedOnce) {
  StandInSide& first = attach(Side::nccl, {});
  StandInSide& again = attach(Side::nccl, {7});
  EXPECT_EQ(&first, &again);
  EXPECT_EQ(runtime.side(Side::nccl), &first);
  EXPECT_EQ(runtime.side(Side::mpi), nullptr);
}

// Both sides number their communicators from one counter, so one decision
// and one residual store can hold both without a key of one meeting the other's.
TEST_F(RuntimeFixture, BothSidesShareOneDecisionAndOneStore) {
  const std::uint64_t mpi_comm = runtime.shared()->next_comm_id++;
  const std::uint64_t nccl_comm = runtime.shared()->next_comm_id++;
  EXPECT_NE(mpi_comm, nccl_comm);
  int buffer = 0;
  {
    auto shared = runtime.shared();
    EXPECT_EQ(shared->decision.decide(true, mpi_comm, 100, 7), Decision::warming_up);
    EXPECT_EQ(shared->decision.decide(true, nccl_comm, 100, 7), Decision::warming_up)
        << "warm-up counts per communicator, whichever side";
    EXPECT_EQ(shared->decision.decide(true, mpi_comm, 100, 7), Decision::compress);
    ASSERT_NE(shared->residuals.find_or_create({mpi_comm, &buffer}, 100, 7, true), nullptr);
    ResidualSlot* slot = nullptr;
    ASSERT_EQ(shared->residuals.find_on_device({nccl_comm, &buffer}, 50, 7, true, true, nullptr,
                                               *runtime.device_memory(), &slot),
              ResidualStore::Found::ok);
    EXPECT_EQ(shared->residuals.bytes_held(), 600u) << "one cap over both";
  }
  std::vector<DeviceBlock> blocks;
  runtime.forget_communicator(nccl_comm, blocks);
  EXPECT_EQ(blocks.size(), 1u) << "the NCCL key's device residual, to free after a wait";
  blocks.clear();
  auto shared = runtime.shared();
  EXPECT_EQ(shared->residuals.bytes_held(), 400u);
  EXPECT_EQ(shared->decision.decide(true, nccl_comm, 100, 7), Decision::warming_up)
      << "a forgotten communicator warms up again";
}

TEST_F(RuntimeFixture, ASwitchReachesEverySideAndDropsWhatTheOldCompressorLeft) {
  StandInSide& mpi = attach(Side::mpi, {});
  StandInSide& nccl = attach(Side::nccl, {3, 1, 3});
  int buffer = 0;
  {
    auto shared = runtime.shared();
    shared->decision.decide(true, 1, 100, 7);
    ResidualSlot* slot = nullptr;
    shared->residuals.find_on_device({1, &buffer}, 100, 7, true, true, nullptr,
                                     *runtime.device_memory(), &slot);
  }
  ASSERT_TRUE(runtime.use_compressor("bf16"));
  EXPECT_EQ(mpi.switches, 1);
  EXPECT_EQ(nccl.switches, 1);
  EXPECT_EQ(runtime.policy().compressor->name(), "bf16");
  EXPECT_EQ(runtime.settings().compressor, "bf16");
  EXPECT_EQ(events, (std::vector<std::string>{"wait:1", "wait:3", "free"}))
      << "each device the sides named waited for once, then the residual freed";
  auto shared = runtime.shared();
  EXPECT_EQ(shared->residuals.bytes_held(), 0u);
  EXPECT_EQ(shared->decision.decide(true, 1, 100, 7), Decision::warming_up)
      << "warm-up starts over";
}

TEST_F(RuntimeFixture, AnUnknownCompressorOrRatioChangesNothing) {
  StandInSide& mpi = attach(Side::mpi, {});
  EXPECT_FALSE(runtime.use_compressor("zip"));
  EXPECT_FALSE(runtime.set_topk_ratio(0.0));
  EXPECT_FALSE(runtime.set_topk_ratio(1.5));
  EXPECT_EQ(mpi.switches, 0);
  EXPECT_EQ(runtime.policy().compressor->name(), "fp16");
  EXPECT_TRUE(runtime.use_compressor("none"));
  EXPECT_EQ(runtime.policy().compressor, nullptr);
  EXPECT_TRUE(runtime.use_compressor("topk"));
  EXPECT_TRUE(runtime.set_topk_ratio(0.25));
  EXPECT_DOUBLE_EQ(runtime.settings().topk_ratio, 0.25);
  EXPECT_EQ(runtime.policy().compressor->name(), "topk") << "the ratio keeps the compressor";
  EXPECT_EQ(mpi.switches, 3);
  EXPECT_FALSE(runtime.set_powersgd_rank(0));
  EXPECT_FALSE(runtime.set_powersgd_rank(65));
  EXPECT_EQ(mpi.switches, 3);
  EXPECT_TRUE(runtime.use_compressor("powersgd"));
  EXPECT_TRUE(runtime.set_powersgd_rank(8));
  EXPECT_EQ(runtime.settings().powersgd_rank, 8);
  // 1 MiB of floats: a 512 x 512 view, 8 x (512 + 512) floats of factors.
  EXPECT_EQ(runtime.policy().compressor->compressed_bytes(1 << 18), 8u * 1024 * sizeof(float));
  EXPECT_EQ(mpi.switches, 5);
}

TEST_F(RuntimeFixture, CountersAreEachSidesAndTheirSum) {
  StandInSide& mpi = attach(Side::mpi, {});
  Counters compressed;
  compressed.count_compressed(4000, 2, 1000);
  runtime.board(Side::nccl).add(compressed);
  mpi.own.count_pass_through(800, 2);
  EXPECT_EQ(runtime.counters(Side::nccl).compressed, 1u);
  EXPECT_EQ(runtime.counters(Side::nccl).passed_through, 0u);
  EXPECT_EQ(runtime.counters(Side::mpi).passed_through, 1u) << "the side's own tallies";
  const Counters total = runtime.counters();
  EXPECT_EQ(total.intercepted, 2u);
  EXPECT_EQ(total.input_bytes, 4800u);
  EXPECT_DOUBLE_EQ(total.wire_sent, 1000.0 + 800.0);
}

TEST_F(RuntimeFixture, MpiSaysTheRankOnceAndTheReportIsClaimedOnce) {
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  ::unsetenv("OMPI_COMM_WORLD_RANK");
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  ::unsetenv("PMIX_RANK");
  ::unsetenv("PMI_RANK");
  ::unsetenv("PMI_SIZE");
  runtime.know_rank(2, 4, false);  // the first NCCL communicator's
  EXPECT_EQ(runtime.report_context().rank, 2);
  runtime.know_rank(3, 8, false);  // a later one's: the first stands
  EXPECT_EQ(runtime.report_context().world_size, 4);
  runtime.know_rank(5, 6, true);  // MPI's world wins
  runtime.know_rank(1, 2, false);
  EXPECT_EQ(runtime.report_context().rank, 5);
  EXPECT_EQ(runtime.report_context().world_size, 6);
  EXPECT_EQ(runtime.report_context().compressor, "fp16");
  EXPECT_TRUE(runtime.claim_report());
  EXPECT_FALSE(runtime.claim_report()) << "MPI_Finalize and exit write one report";
}

}  // namespace
}  // namespace slimreduce
