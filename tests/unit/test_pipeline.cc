// Partitions and the pipelined run (scheduler/partition.h,
// scheduler/pipeline.h): the cut is contiguous, near-equal and within the
// limit; a pipelined run keeps each step's phases in order, runs every
// collective on the caller's thread and stops at the first failure; a plan
// whose phases communicate runs unpipelined.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "scheduler/partition.h"
#include "scheduler/pipeline.h"

namespace slimreduce::scheduler {
namespace {

class Partitions
    : public ::testing::TestWithParam<std::tuple<std::size_t, std::size_t, std::uint64_t>> {};

TEST_P(Partitions, CoverTheCountContiguouslyNearEqualWithinTheLimit) {
  const auto [count, element_bytes, limit] = GetParam();
  const std::vector<Partition> pieces = partitions(count, element_bytes, limit);
  if (count == 0) {
    EXPECT_TRUE(pieces.empty());
    return;
  }
  ASSERT_FALSE(pieces.empty());
  std::size_t next = 0, shortest = count, longest = 0;
  for (const Partition& piece : pieces) {
    EXPECT_EQ(piece.begin, next);
    EXPECT_GE(piece.count, 1u);
    // Within the limit, unless the limit is below one element.
    if (limit >= element_bytes) {
      EXPECT_LE(piece.count * element_bytes, limit);
    }
    shortest = std::min(shortest, piece.count);
    longest = std::max(longest, piece.count);
    next += piece.count;
  }
  EXPECT_EQ(next, count);
  EXPECT_LE(longest - shortest, 1u);
  // The fewest pieces: one less would not fit.
  const std::uint64_t per_piece = std::max<std::uint64_t>(1, limit / element_bytes);
  EXPECT_LT((pieces.size() - 1) * per_piece, count);
}

INSTANTIATE_TEST_SUITE_P(
    Counts, Partitions,
    ::testing::Combine(::testing::Values(0, 1, 7, 1000, 1024, 1000003, (4u << 20) + 1),
                       ::testing::Values(2, 4),
                       ::testing::Values(1, 4096, 4u << 20, std::uint64_t{1} << 40)));

TEST(Partitions, AZeroLimitIsRefused) { EXPECT_THROW(partitions(10, 4, 0), std::invalid_argument); }

// A step that logs its phases with the thread that ran them.
class LoggingStep final : public Step {
 public:
  struct Entry {
    std::string what;
    std::thread::id thread;
  };
  struct Log {
    std::mutex mutex;
    std::vector<Entry> entries;
  };
  LoggingStep(std::string name, Log& log, bool local = true, std::string fails_at = "")
      : name_(std::move(name)), log_(log), local_(local), fails_at_(std::move(fails_at)) {}
  Status compress() override { return phase("compress"); }
  Status communicate() override { return phase("communicate"); }
  Status finish() override { return phase("finish"); }
  double wire_sent() const override { return 0; }
  bool local_phases() const override { return local_; }

 private:
  Status phase(const std::string& which) {
    std::lock_guard lock(log_.mutex);
    log_.entries.push_back({name_ + "." + which, std::this_thread::get_id()});
    return which == fails_at_ ? Status::internal() : Status{};
  }
  std::string name_;
  Log& log_;
  bool local_;
  std::string fails_at_;
};

std::size_t position(const LoggingStep::Log& log, const std::string& what) {
  for (std::size_t i = 0; i < log.entries.size(); ++i)
    if (log.entries[i].what == what) return i;
  return SIZE_MAX;
}

Plan plan_of(std::size_t steps, LoggingStep::Log& log, std::size_t failing_step = SIZE_MAX,
             const std::string& fails_at = "") {
  Plan plan;
  for (std::size_t i = 0; i < steps; ++i)
    plan.add(std::make_unique<LoggingStep>(std::to_string(i), log, true,
                                           i == failing_step ? fails_at : ""));
  return plan;
}

class Pipelined : public ::testing::TestWithParam<std::size_t> {};

TEST_P(Pipelined, EachStepsPhasesInOrderCollectivesOnTheCallersThread) {
  const std::size_t steps = GetParam();
  LoggingStep::Log log;
  const Plan plan = plan_of(steps, log);
  Helper helper;
  ASSERT_TRUE(run_pipelined(plan, helper, nullptr).ok());
  ASSERT_EQ(log.entries.size(), 3 * steps);
  for (std::size_t i = 0; i < steps; ++i) {
    const std::string name = std::to_string(i);
    EXPECT_LT(position(log, name + ".compress"), position(log, name + ".communicate"));
    EXPECT_LT(position(log, name + ".communicate"), position(log, name + ".finish"));
    if (i > 0) {  // the wire in plan order
      EXPECT_LT(position(log, std::to_string(i - 1) + ".communicate"),
                position(log, name + ".communicate"));
    }
  }
  std::size_t on_helper = 0;
  for (const auto& entry : log.entries) {
    if (entry.what.ends_with(".communicate")) {
      EXPECT_EQ(entry.thread, std::this_thread::get_id());
    }
    if (entry.thread != std::this_thread::get_id()) ++on_helper;
  }
  // All but the first compress and the last finish ran on the helper.
  if (steps > 1) {
    EXPECT_EQ(on_helper, 2 * steps - 2);
  }
}

INSTANTIATE_TEST_SUITE_P(Steps, Pipelined, ::testing::Values(1, 2, 3, 17));

TEST(Pipelined, AFailedCollectiveStopsThePlanAfterTheHelpersWork) {
  LoggingStep::Log log;
  const Plan plan = plan_of(5, log, 2, "communicate");
  Helper helper;
  EXPECT_FALSE(run_pipelined(plan, helper, nullptr).ok());
  EXPECT_NE(position(log, "2.communicate"), SIZE_MAX);
  EXPECT_EQ(position(log, "3.communicate"), SIZE_MAX);
  EXPECT_EQ(position(log, "2.finish"), SIZE_MAX);
  // The helper may since be used again.
  LoggingStep::Log again;
  EXPECT_TRUE(run_pipelined(plan_of(3, again), helper, nullptr).ok());
  EXPECT_EQ(again.entries.size(), 9u);
}

TEST(Pipelined, AFailureOnTheHelperStopsThePlan) {
  LoggingStep::Log log;
  const Plan plan = plan_of(5, log, 3, "compress");
  Helper helper;
  EXPECT_FALSE(run_pipelined(plan, helper, nullptr).ok());
  EXPECT_EQ(position(log, "3.communicate"), SIZE_MAX);
  EXPECT_EQ(position(log, "4.compress"), SIZE_MAX);
}

TEST(Pipelined, AStepWhosePhasesCommunicateRunsEveryPhaseOnTheCaller) {
  LoggingStep::Log log;
  Plan plan = plan_of(3, log);
  plan.add(std::make_unique<LoggingStep>("hierarchical", log, false));
  EXPECT_FALSE(can_pipeline(plan));
  Helper helper;
  ASSERT_TRUE(run_pipelined(plan, helper, nullptr).ok());
  ASSERT_EQ(log.entries.size(), 12u);
  for (const auto& entry : log.entries) EXPECT_EQ(entry.thread, std::this_thread::get_id());
}

// The observer hears every phase, with its step and lane, from both threads.
TEST(Pipelined, TheObserverHearsEachPhaseWithItsLane) {
  struct Heard final : PhaseObserver {
    std::mutex mutex;
    std::vector<PhaseRun> runs;
    void phase_ran(const PhaseRun& run) override {
      std::lock_guard lock(mutex);
      runs.push_back(run);
    }
  } heard;
  LoggingStep::Log log;
  const Plan plan = plan_of(4, log);
  Helper helper;
  ASSERT_TRUE(run_pipelined(plan, helper, &heard).ok());
  ASSERT_EQ(heard.runs.size(), 12u);
  for (const PhaseRun& run : heard.runs) {
    EXPECT_EQ(run.steps, 4u);
    EXPECT_LE(run.begin_us, run.end_us);
    if (run.phase == Phase::communicate) {
      EXPECT_EQ(run.lane, 0);
    }
    const bool first_compress = run.phase == Phase::compress && run.step == 0;
    const bool last_finish = run.phase == Phase::finish && run.step == 3;
    if (run.phase != Phase::communicate && !first_compress && !last_finish) {
      EXPECT_EQ(run.lane, 1);
    }
  }
}

TEST(HelperPays, WithTwoCpusPerRankOnTheNode) {
  EXPECT_TRUE(helper_pays(2, 1));
  EXPECT_TRUE(helper_pays(16, 8));
  EXPECT_FALSE(helper_pays(2, 2));
  EXPECT_FALSE(helper_pays(15, 8));
  EXPECT_FALSE(helper_pays(1, 0));  // an unknown count is one rank
  EXPECT_TRUE(helper_pays(2, 0));
}

TEST(HelperPool, ReusesAnIdleHelperAndMakesOneMorePerConcurrentLease) {
  HelperPool pool;
  {
    HelperPool::Lease first = pool.lease();
    ASSERT_NE(first.get(), nullptr);
    HelperPool::Lease second = pool.lease();
    EXPECT_NE(first.get(), second.get());
  }
  EXPECT_EQ(pool.made(), 2u);
  { HelperPool::Lease again = pool.lease(); }
  EXPECT_EQ(pool.made(), 2u);
}

}  // namespace
}  // namespace slimreduce::scheduler
