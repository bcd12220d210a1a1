// The two-stream pipeline's order (scheduler/stream_pipeline.h): each step's
// compress before its collectives and its collectives before its finish, as
// the events order them; step i + 1's compress enqueued before step i's
// finish; every step's collectives in a launch of their own; the side stream
// joined last, also after a failure, and the first failure returned.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "scheduler/stream_pipeline.h"

namespace slimreduce::scheduler {
namespace {

// Writes what happened, in order, into one log: steps and handoff alike.
class LoggedStep final : public Step {
 public:
  LoggedStep(std::vector<std::string>& log, int index, int fail_at = -1)
      : log_(log), index_(index), fail_at_(fail_at) {}
  Status compress() override { return note("C", 0); }
  Status communicate() override { return note("N", 1); }
  Status finish() override { return note("D", 2); }
  double wire_sent() const override { return 0; }

 private:
  Status note(const char* what, int phase) {
    log_.push_back(what + std::to_string(index_));
    return phase == fail_at_ ? Status::internal() : Status{};
  }
  std::vector<std::string>& log_;
  int index_;
  int fail_at_;
};

class LoggedHandoff final : public StreamHandoff {
 public:
  explicit LoggedHandoff(std::vector<std::string>& log) : log_(log) {}
  Status fork() override { return note("fork"); }
  Status compressed() override { return note("c"); }
  Status wait_compressed() override { return note("wait c"); }
  Status communicated() override { return note("n"); }
  Status join() override { return note("join"); }
  Status open_collectives() override { return note("("); }
  Status close_collectives() override { return note(")"); }
  void mark(std::size_t step, Phase phase, bool end) override {
    ++marks;
    if (!end) begun.push_back({step, phase});
  }
  int marks = 0;
  std::vector<std::pair<std::size_t, Phase>> begun;

 private:
  Status note(const char* what) {
    log_.emplace_back(what);
    return {};
  }
  std::vector<std::string>& log_;
};

std::string joined(const std::vector<std::string>& log) {
  std::string all;
  for (const std::string& entry : log) all += (all.empty() ? "" : " ") + entry;
  return all;
}

Plan plan_of(std::vector<std::string>& log, int steps, int failing_step = -1, int fail_at = -1) {
  Plan plan;
  for (int i = 0; i < steps; ++i)
    plan.add(std::make_unique<LoggedStep>(log, i, i == failing_step ? fail_at : -1));
  return plan;
}

TEST(StreamPipeline, OneStepRunsInOrderAndJoins) {
  std::vector<std::string> log;
  LoggedHandoff handoff(log);
  EXPECT_TRUE(run_on_two_streams(plan_of(log, 1), handoff).ok());
  EXPECT_EQ(joined(log), "fork C0 c wait c ( N0 ) n D0 join");
}

TEST(StreamPipeline, NextCompressGoesBeforeThisFinish) {
  std::vector<std::string> log;
  LoggedHandoff handoff(log);
  EXPECT_TRUE(run_on_two_streams(plan_of(log, 3), handoff).ok());
  EXPECT_EQ(joined(log),
            "fork C0 c wait c "
            "C1 c ( N0 ) n D0 wait c "
            "C2 c ( N1 ) n D1 wait c "
            "( N2 ) n D2 join");
  EXPECT_EQ(handoff.marks, 3 * 3 * 2);  // each phase of each step, before and after
  ASSERT_EQ(handoff.begun.size(), 9u);
  EXPECT_EQ(handoff.begun[0], std::make_pair(std::size_t{0}, Phase::compress));
  EXPECT_EQ(handoff.begun[1], std::make_pair(std::size_t{1}, Phase::compress));
  EXPECT_EQ(handoff.begun[2], std::make_pair(std::size_t{0}, Phase::communicate));
  EXPECT_EQ(handoff.begun[3], std::make_pair(std::size_t{0}, Phase::finish));
}

// Whatever the count, each step's collectives wait on a mark made after its
// own compress and nothing after it: the last "c" before each "wait c" is
// the one after that step's compress.
TEST(StreamPipeline, EveryCollectiveWaitsForItsOwnCompress) {
  for (int steps : {1, 2, 5, 17}) {
    std::vector<std::string> log;
    LoggedHandoff handoff(log);
    ASSERT_TRUE(run_on_two_streams(plan_of(log, steps), handoff).ok());
    int next_collective = 0;
    std::string last_compressed;  // the step whose compress the last "c" followed
    std::string waited_for;
    for (std::size_t i = 0; i < log.size(); ++i) {
      if (log[i] == "c") last_compressed = log[i - 1].substr(1);
      if (log[i] == "wait c") waited_for = last_compressed;
      if (log[i][0] == 'N') {
        EXPECT_EQ(waited_for, std::to_string(next_collective)) << steps << " steps";
        ++next_collective;
      }
    }
    EXPECT_EQ(next_collective, steps);
    EXPECT_EQ(log.back(), "join");
  }
}

TEST(StreamPipeline, AFailedCollectiveClosesItsGroupStopsAndJoins) {
  std::vector<std::string> log;
  LoggedHandoff handoff(log);
  const Status status = run_on_two_streams(plan_of(log, 3, 1, 1), handoff);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(joined(log), "fork C0 c wait c C1 c ( N0 ) n D0 wait c C2 c ( N1 ) join");
}

TEST(StreamPipeline, AFailedCompressStopsBeforeItsCollectiveAndJoins) {
  std::vector<std::string> log;
  LoggedHandoff handoff(log);
  EXPECT_FALSE(run_on_two_streams(plan_of(log, 2, 1, 0), handoff).ok());
  EXPECT_EQ(joined(log), "fork C0 c wait c C1 join");
}

TEST(StreamPipeline, AnEmptyPlanDoesNothing) {
  std::vector<std::string> log;
  LoggedHandoff handoff(log);
  EXPECT_TRUE(run_on_two_streams(Plan{}, handoff).ok());
  EXPECT_TRUE(log.empty());
}

}  // namespace
}  // namespace slimreduce::scheduler
