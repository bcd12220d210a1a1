// SLIMREDUCE_COMPRESSOR=auto's unbiased twins (core/runtime/decision.h,
// add_unbiased_twins; core/runtime/auto_choice.h, set_for_resetting): a
// quantizer that keeps a residual gets a twin that rounds stochastically and
// keeps none, probed only for size classes whose residuals keep resetting
// (a fusion buffer whose make-up changes: Horovod's time-driven fusion).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "compressors/compressor.h"
#include "core/runtime/auto_choice.h"
#include "core/runtime/compressor_choice.h"
#include "core/runtime/decision.h"
#include "tests/unit/auto_schedule.h"

namespace slimreduce {
namespace {

constexpr std::uint64_t kComm = 7;
constexpr std::uint64_t kBytes = 1 << 20;

// none, int8 (keeps a residual, fastest), fp16, int8/unbiased (nearly as fast).
constexpr int kInt8 = kTwinInt8, kFp16 = kTwinFp16;
const std::vector<double> kSeconds = {3e-3, 1e-3, 2e-3, 1.1e-3};

AutoChooser twin_chooser() { return slimreduce::twin_chooser(small_schedule()); }

// Runs calls up to and including the class's next probe round; where
// `resets`, every call finds its key with another shape (as a fusion
// buffer's do, whatever the candidate). Returns the candidates the round
// probed, in call order, and counts the chosen calls before it.
std::vector<int> next_round(AutoChooser& chooser, bool resets, int* chosen_before = nullptr) {
  std::vector<int> probed;
  int chosen = 0;
  for (int guard = 0; guard < kMaxCalls; ++guard) {
    const AutoStep step = chooser.next(kComm, kBytes);
    chooser.record(step, kComm, kSeconds.at(step.candidate), resets ? 1 : 0);
    if (step.probe)
      probed.push_back(step.candidate);
    else
      ++chosen;
    if (!step.agree_after) continue;
    chooser.agreed(step, kComm, chooser.window(step, kComm));
    if (!step.probe) continue;
    if (chosen_before) *chosen_before = chosen;
    return probed;
  }
  ADD_FAILURE() << "no round in " << kMaxCalls << " calls";
  return probed;
}

bool probed(const std::vector<int>& round, int candidate) {
  return std::find(round.begin(), round.end(), candidate) != round.end();
}

AutoChooser::ClassSummary summary_of(const AutoChooser& chooser) {
  return chooser.summary(kComm, AutoChooser::size_class(kBytes));
}

TEST(AutoUnbiased, ATwinIsNeverProbedWhileTheClassDoesNotReset) {
  AutoChooser chooser = twin_chooser();
  for (int round = 0; round < 6; ++round) {
    const std::vector<int> candidates = next_round(chooser, false);
    EXPECT_FALSE(probed(candidates, kTwin)) << "round " << round;
    EXPECT_EQ(summary_of(chooser).chosen, kInt8) << "round " << round;
  }
}

TEST(AutoUnbiased, AResettingRoundIsFollowedAtOnceByOneThatTakesTheTwin) {
  AutoChooser chooser = twin_chooser();
  const std::vector<int> first = next_round(chooser, true);
  EXPECT_FALSE(probed(first, kTwin)) << "nothing said the class resets before its first round";
  EXPECT_EQ(summary_of(chooser).chosen, kFp16) << "the fastest of those that keep no residual";
  int chosen_before = -1;
  const std::vector<int> second = next_round(chooser, true, &chosen_before);
  EXPECT_EQ(chosen_before, 0) << "the next round starts at the next call";
  EXPECT_TRUE(probed(second, kTwin));
  EXPECT_TRUE(probed(second, kFp16)) << "against the choice";
  EXPECT_EQ(second.size(), 6u) << "the choice and the twin alone, 3 probes each";
  const AutoChooser::ClassSummary summary = summary_of(chooser);
  EXPECT_EQ(summary.chosen, kTwin) << "int8's speed without a residual";
  EXPECT_TRUE(summary.resetting);
  EXPECT_NEAR(summary.medians[kTwin], kSeconds[kTwin], 1e-12);
}

// A twin as fast as its quantizer, or faster (no residual to add): once the
// buffers settle, the round is won by the quantizer with its residual all the
// same, whatever the twin's time.
TEST(AutoUnbiased, ASettledClassGoesBackToTheQuantizerEvenWhereTheTwinIsFaster) {
  AutoChooser chooser = twin_chooser();
  const std::vector<double> seconds = {3e-3, 1e-3, 2e-3, 0.9e-3};  // the twin the fastest
  const auto round = [&](bool resets) {
    for (int guard = 0; guard < kMaxCalls; ++guard) {
      const AutoStep step = chooser.next(kComm, kBytes);
      chooser.record(step, kComm, seconds.at(step.candidate), resets ? 1 : 0);
      if (!step.agree_after) continue;
      chooser.agreed(step, kComm, chooser.window(step, kComm));
      if (step.probe) return;
    }
    ADD_FAILURE() << "no round in " << kMaxCalls << " calls";
  };
  round(true);
  round(true);
  ASSERT_EQ(summary_of(chooser).chosen, kTwin);
  round(false);  // settled: the round takes the twin, as the choice
  EXPECT_EQ(summary_of(chooser).chosen, kInt8);
  EXPECT_EQ(summary_of(chooser).medians[kTwin], 0.9e-3) << "measured, and left to resetting";
}

TEST(AutoUnbiased, AChosenTwinStaysWhileResetsGoOnAndLeavesWhenTheyStop) {
  AutoChooser chooser = twin_chooser();
  next_round(chooser, true);
  next_round(chooser, true);
  ASSERT_EQ(summary_of(chooser).chosen, kTwin);
  int chosen_before = 0;
  const std::vector<int> later = next_round(chooser, true, &chosen_before);
  EXPECT_GT(chosen_before, 0) << "no round at once: the twin keeps no residual to lose";
  EXPECT_TRUE(probed(later, kTwin));
  EXPECT_EQ(summary_of(chooser).chosen, kTwin);
  // The buffers settle: the round after takes the twin (the choice), but
  // int8 is the fastest now that its residuals hold; the round after that
  // leaves the twin out.
  EXPECT_TRUE(probed(next_round(chooser, false), kTwin));
  EXPECT_EQ(summary_of(chooser).chosen, kInt8);
  EXPECT_FALSE(summary_of(chooser).resetting);
  EXPECT_FALSE(probed(next_round(chooser, false), kTwin));
}

Policy policy_of(const std::vector<const char*>& names, const Settings& settings) {
  Policy policy;
  for (const char* name : names) {
    std::shared_ptr<compressors::Compressor> made = compressor_named(name, settings);
    const bool feedback = error_feedback_on(made.get(), settings);
    policy.candidates.push_back({name, std::move(made), feedback});
  }
  return policy;
}

std::shared_ptr<compressors::Compressor> made_unbiased(const std::string& name, Settings settings,
                                                       int* made) {
  ++*made;
  settings.quant_rounding = compressors::QuantRounding::stochastic;
  return compressor_named(name, settings);
}

TEST(AutoUnbiased, EachQuantizerThatKeepsAResidualGetsATwinThatKeepsNone) {
  Settings settings;
  settings.compressor = "auto";
  Policy policy = policy_of({"none", "fp16", "int8", "int4", "fp8", "topk"}, settings);
  int made = 0;
  add_unbiased_twins(policy,
                     [&](const std::string& name) { return made_unbiased(name, settings, &made); });
  ASSERT_EQ(policy.candidates.size(), 8u) << "int8's and int4's; not fp8 (nearest only), top-k";
  EXPECT_EQ(made, 2);
  for (std::size_t c : {6u, 7u}) {
    const Policy::Candidate& twin = policy.candidates[c];
    EXPECT_TRUE(twin.unbiased);
    EXPECT_FALSE(twin.error_feedback) << "unbiased codes need no residual";
    EXPECT_FALSE(twin.two_level);
    ASSERT_TRUE(twin.compressor);
  }
  EXPECT_EQ(policy.candidates[6].name, "int8/unbiased");
  EXPECT_EQ(policy.candidates[7].name, "int4/unbiased");
  EXPECT_NE(policy.candidates[6].compressor, policy.candidates[2].compressor) << "its own";
  EXPECT_EQ(policy.candidates[6].compressor->name(), policy.candidates[2].compressor->name());
  for (std::size_t c = 0; c < 6; ++c) EXPECT_FALSE(policy.candidates[c].unbiased);
}

TEST(AutoUnbiased, NoTwinWhereNoResidualIsKeptOrForATwoLevelTwin) {
  Settings settings;
  settings.compressor = "auto";
  settings.error_feedback = false;  // SLIMREDUCE_ERROR_FEEDBACK=0: int8 keeps none itself
  Policy without = policy_of({"none", "int8"}, settings);
  int made = 0;
  const auto make = [&](const std::string& name) { return made_unbiased(name, settings, &made); };
  add_unbiased_twins(without, make);
  EXPECT_EQ(without.candidates.size(), 2u);
  Settings feedback;
  feedback.compressor = "auto";
  Policy two_level = policy_of({"int8"}, feedback);
  add_two_level_twins(two_level,
                      [&](const std::string& name) { return compressor_named(name, feedback); });
  add_unbiased_twins(two_level, make);
  ASSERT_EQ(two_level.candidates.size(), 3u) << "int8, int8/two-level, int8/unbiased";
  EXPECT_EQ(two_level.candidates[2].name, "int8/unbiased");
  EXPECT_EQ(made, 1);
}

}  // namespace
}  // namespace slimreduce
