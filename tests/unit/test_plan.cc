// The scheduler's plan (scheduler/plan.h): a blocking run takes each step's
// phases in order, step after step, and stops at the first failure; a
// stream-ordered run takes one phase over every step at a time; a host
// step runs an algorithm's host entry points around its collectives.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "scheduler/host_step.h"
#include "scheduler/plan.h"

namespace slimreduce::scheduler {
namespace {

class RecordingStep final : public Step {
 public:
  RecordingStep(std::string name, std::vector<std::string>& log, double sent,
                std::string fails_at = "")
      : name_(std::move(name)), log_(log), sent_(sent), fails_at_(std::move(fails_at)) {}
  Status compress() override { return phase("compress"); }
  Status communicate() override { return phase("communicate"); }
  Status finish() override { return phase("finish"); }
  double wire_sent() const override { return sent_; }

 private:
  Status phase(const std::string& which) {
    log_.push_back(name_ + "." + which);
    return which == fails_at_ ? Status::internal() : Status{};
  }
  std::string name_;
  std::vector<std::string>& log_;
  double sent_;
  std::string fails_at_;
};

TEST(Plan, ABlockingRunTakesEachStepsPhasesInPlanOrder) {
  std::vector<std::string> log;
  Plan plan;
  plan.add(std::make_unique<RecordingStep>("a", log, 1.5));
  plan.add(std::make_unique<RecordingStep>("b", log, 2.25));
  ASSERT_EQ(plan.size(), 2u);
  ASSERT_TRUE(run_blocking(plan).ok());
  EXPECT_EQ(log, (std::vector<std::string>{"a.compress", "a.communicate", "a.finish", "b.compress",
                                           "b.communicate", "b.finish"}));
  EXPECT_DOUBLE_EQ(plan.wire_sent(), 3.75);
}

TEST(Plan, TheFirstFailureStopsThePlan) {
  std::vector<std::string> log;
  Plan plan;
  plan.add(std::make_unique<RecordingStep>("a", log, 0, "communicate"));
  plan.add(std::make_unique<RecordingStep>("b", log, 0));
  const Status status = run_blocking(plan);
  EXPECT_EQ(status.domain(), ErrorDomain::internal);
  EXPECT_EQ(log, (std::vector<std::string>{"a.compress", "a.communicate"}))
      << "neither a's finish nor b ran";
}

TEST(Plan, APhaseRunsOverEveryStepInPlanOrder) {
  std::vector<std::string> log;
  Plan plan;
  plan.add(std::make_unique<RecordingStep>("a", log, 0));
  plan.add(std::make_unique<RecordingStep>("b", log, 0));
  for (Phase phase : {Phase::compress, Phase::communicate, Phase::finish})
    ASSERT_TRUE(run_phase(plan, phase).ok());
  EXPECT_EQ(log, (std::vector<std::string>{"a.compress", "b.compress", "a.communicate",
                                           "b.communicate", "a.finish", "b.finish"}));
}

TEST(Plan, APhaseStopsAtItsFirstFailure) {
  std::vector<std::string> log;
  Plan plan;
  plan.add(std::make_unique<RecordingStep>("a", log, 0, "compress"));
  plan.add(std::make_unique<RecordingStep>("b", log, 0));
  EXPECT_EQ(run_phase(plan, Phase::compress), Status::internal());
  EXPECT_EQ(log, (std::vector<std::string>{"a.compress"})) << "b's compress did not run";
}

TEST(Plan, AnEmptyPlanDoesNothing) {
  Plan plan;
  EXPECT_TRUE(run_blocking(plan).ok());
  EXPECT_TRUE(run_phase(plan, Phase::communicate).ok());
  EXPECT_EQ(plan.wire_sent(), 0.0);
}

// Stands in for an algorithm: the phases of algorithms/phases.h on its buffers.
struct DoublingAlgorithm {
  explicit DoublingAlgorithm(int bias) : bias(bias) {}
  void compress(const float* input, float* residual) {
    wire = input[0] + (residual ? residual[0] : 0.0f);
    if (residual) residual[0] = 0.5f;
  }
  Status communicate() {
    wire *= 2;
    return {};
  }
  void finish(float* output) const { output[0] = wire + static_cast<float>(bias); }
  double wire_sent() const { return 4.0; }
  int bias;
  float wire = 0;
};

TEST(HostStep, RunsTheAlgorithmsHostEntryPointsAroundItsCollectives) {
  const float input = 3.0f;
  float residual = 1.0f;
  float output = 0.0f;
  Plan plan;
  plan.add(std::make_unique<HostStep<DoublingAlgorithm>>(&input, &residual, &output, 10));
  ASSERT_TRUE(run_blocking(plan).ok());
  EXPECT_EQ(output, (3.0f + 1.0f) * 2 + 10);
  EXPECT_EQ(residual, 0.5f) << "the residual the algorithm left";
  EXPECT_EQ(plan.wire_sent(), 4.0);
}

}  // namespace
}  // namespace slimreduce::scheduler
