// SLIMREDUCE_COMPRESSOR=auto's first guess from the analytic cost model
// (core/runtime/auto_choice.h, AutoChooser::set_model; decision.h,
// auto_model): where a candidate has one agreed time on the communicator (a
// median, or the one call of a first pass that cut it), its prediction at
// another class is that time times the model's ratio of the two sizes; so
// the second class of a job over a slow link leaves out what the first cut
// as hopeless, instead of sending it once more.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/runtime/auto_choice.h"
#include "core/runtime/compressor_choice.h"
#include "core/runtime/cost_model.h"
#include "core/runtime/decision.h"
#include "tests/unit/auto_schedule.h"

namespace slimreduce {
namespace {

constexpr std::uint64_t kComm = 5;
constexpr int kRanks = 4;

// A model whose ratio between sizes differs per candidate and with the
// ranks: a latency term of its own, bytes at its own rate.
double toy_model(int candidate, std::uint64_t bytes, int ranks) {
  return 1e-3 * (candidate + 1) + static_cast<double>(bytes) * ranks / (1e8 * (candidate + 1));
}

// Candidate c's calls at `bytes`: plain fp32 (0) ten times int8's (2), fp16 (1) twice.
double seconds_of(int candidate, std::uint64_t bytes) {
  const double factor[] = {10.0, 2.0, 1.0};
  return factor[candidate] * static_cast<double>(bytes) / 1e9;
}

// One probe round of the class of `bytes` (its pass included), each call
// taking seconds_of; returns the candidates its calls took.
std::vector<int> round_at(AutoChooser& chooser, std::uint64_t bytes, int ranks = kRanks) {
  std::vector<int> probed;
  for (int guard = 0; guard < kMaxCalls; ++guard) {
    const AutoStep step = chooser.next(kComm, bytes, {}, ranks);
    EXPECT_TRUE(step.probe);
    probed.push_back(step.candidate);
    chooser.record(step, kComm, seconds_of(step.candidate, bytes));
    if (!step.agree_after) continue;
    chooser.agreed(step, kComm, chooser.window(step, kComm));
    if (!step.first_pass) return probed;
  }
  ADD_FAILURE() << "no round ended in " << kMaxCalls << " calls";
  return probed;
}

AutoChooser::Schedule with_pass() {
  AutoChooser::Schedule schedule = small_schedule();  // 3 probes, hopeless 3x
  schedule.cut_after_first_pass = true;
  return schedule;
}

bool took(const std::vector<int>& probed, int candidate) {
  return std::find(probed.begin(), probed.end(), candidate) != probed.end();
}

TEST(AutoModel, OneAgreedClassPredictsByTheModelsRatio) {
  AutoChooser chooser(3, small_schedule());  // no pass: a median of each
  chooser.set_model(toy_model);
  const std::uint32_t c16 = 16, c20 = 20, c12 = 12;
  round_at(chooser, 1u << c16);
  for (int c = 0; c < 3; ++c) {
    const double there = seconds_of(c, 1u << c16);
    EXPECT_DOUBLE_EQ(chooser.predicted(kComm, c20, c),
                     there * toy_model(c, 1u << c20, kRanks) / toy_model(c, 1u << c16, kRanks))
        << "candidate " << c;
    EXPECT_DOUBLE_EQ(chooser.predicted(kComm, c12, c),
                     there * toy_model(c, 1u << c12, kRanks) / toy_model(c, 1u << c16, kRanks))
        << "candidate " << c << ", a smaller class";
  }
  EXPECT_EQ(chooser.predicted(kComm, c16, 0), 0) << "a class is not predicted from itself";
  EXPECT_EQ(chooser.predicted(kComm + 1, c20, 0), 0) << "another communicator's classes";
}

TEST(AutoModel, NoModelOrNoRanksNoPrediction) {
  AutoChooser without(3, small_schedule());
  round_at(without, 1u << 16);
  EXPECT_EQ(without.predicted(kComm, 20, 2), 0) << "one class, no model: no line";
  AutoChooser no_ranks(3, small_schedule());
  no_ranks.set_model(toy_model);
  round_at(no_ranks, 1u << 16, /*ranks=*/0);
  EXPECT_EQ(no_ranks.predicted(kComm, 20, 2), 0) << "the communicator's ranks never given";
}

// The nearest other class with an agreed time of the candidate scales it
// (ties: the smaller class), here two one-call times of passes that cut it.
TEST(AutoModel, TheNearestAgreedTimeScales) {
  AutoChooser chooser(3, with_pass());
  round_at(chooser, 1u << 20);  // no model yet: plain in each pass, then cut
  round_at(chooser, 1u << 16);
  chooser.set_model(toy_model);
  const auto scaled = [](std::uint32_t from, std::uint32_t to) {
    return seconds_of(0, 1u << from) * toy_model(0, 1u << to, kRanks) /
           toy_model(0, 1u << from, kRanks);
  };
  EXPECT_DOUBLE_EQ(chooser.predicted(kComm, 17, 0), scaled(16, 17));
  EXPECT_DOUBLE_EQ(chooser.predicted(kComm, 19, 0), scaled(20, 19));
  EXPECT_DOUBLE_EQ(chooser.predicted(kComm, 18, 0), scaled(16, 18)) << "a tie: the smaller";
}

// Two classes with medians still give the line through them.
TEST(AutoModel, TwoMediansStillDrawTheLine) {
  AutoChooser chooser(3, small_schedule());
  chooser.set_model(toy_model);
  round_at(chooser, 1u << 14);
  round_at(chooser, 1u << 18);
  const double x1 = 1u << 18, x2 = 1u << 14;
  const double slope = (seconds_of(2, 1u << 14) - seconds_of(2, 1u << 18)) / (x2 - x1);
  EXPECT_NEAR(chooser.predicted(kComm, 17, 2),
              seconds_of(2, 1u << 18) + slope * (double(1u << 17) - x1), 1e-15);
}

// Plain fp32 ten times int8's: the first class's pass cuts it after one
// call, which leaves it no median, and the second class's first round then
// leaves it out from that one call's time and the model. Without a model it
// would send it once more (the pass), at every new class.
TEST(AutoModel, ASecondClassLeavesOutWhatTheFirstsPassCut) {
  AutoChooser chooser(3, with_pass());
  chooser.set_model(toy_model);
  const std::vector<int> first = round_at(chooser, 1u << 20);
  EXPECT_EQ(std::count(first.begin(), first.end(), 0), 1) << "one call of plain, then cut";
  EXPECT_EQ(chooser.summary(kComm, 20).medians.at(0), 0) << "one call is no median";
  EXPECT_DOUBLE_EQ(
      chooser.predicted(kComm, 21, 0),
      seconds_of(0, 1u << 20) * toy_model(0, 1u << 21, kRanks) / toy_model(0, 1u << 20, kRanks));
  const double plain_at_21 = chooser.predicted(kComm, 21, 0);
  const std::vector<int> second = round_at(chooser, 1u << 21);
  EXPECT_FALSE(took(second, 0)) << "plain predicted hopeless";
  EXPECT_TRUE(took(second, 1) && took(second, 2));
  const AutoChooser::ClassSummary summary = chooser.summary(kComm, 21);
  EXPECT_EQ(summary.chosen, 2);
  EXPECT_EQ(summary.predicted_out, (std::vector<double>{plain_at_21, 0, 0}))
      << "the report lists what a prediction left out";
  EXPECT_EQ(chooser.summary(kComm, 20).predicted_out, (std::vector<double>{0, 0, 0}))
      << "the first class had nothing to predict from";

  AutoChooser without(3, with_pass());
  round_at(without, 1u << 20);
  EXPECT_TRUE(took(round_at(without, 1u << 21), 0)) << "no model: plain in the pass again";
}

// A candidate within `hopeless` of the best is never left out by the model.
TEST(AutoModel, ACandidateWithinHopelessStaysInTheRound) {
  AutoChooser chooser(3, with_pass());
  chooser.set_model(toy_model);
  round_at(chooser, 1u << 20);
  const std::vector<int> second = round_at(chooser, 1u << 22);
  EXPECT_TRUE(took(second, 1)) << "fp16 at twice int8's";
}

// The runtime's model: each flat candidate's analytic prediction, one link a
// rank, no compression time; nothing for a two-level twin or unknown ranks.
TEST(AutoModel, TheRuntimesModelIsTheCostModelOfEachFlatCandidate) {
  Policy policy = auto_policy();
  Settings settings;
  add_two_level_twins(policy,
                      [&](const std::string& name) { return compressor_named(name, settings); });
  const AutoChooser::Model model = auto_model(policy);
  cost::Layout layout;
  layout.ranks = 8;
  layout.per_node = 1;
  for (int c = 0; c < 3; ++c) {
    const double expected = cost::predict(policy.candidates[c].compressor.get(), (1u << 22) / 4,
                                          layout, cost::Link{}, cost::Link{}, cost::Rates{})
                                .total_s();
    EXPECT_GT(expected, 0);
    EXPECT_DOUBLE_EQ(model(c, 1u << 22, 8), expected) << policy.candidates[c].name;
  }
  EXPECT_GT(model(0, 1u << 22, 8), 3 * model(2, 1u << 22, 8)) << "plain fp32 against int8";
  EXPECT_EQ(model(3, 1u << 22, 8), 0) << policy.candidates[3].name;
  EXPECT_EQ(model(0, 1u << 22, 0), 0) << "no ranks";
}

// decide_auto hands the communicator's ranks to the chooser, whose
// predictions then take the runtime's model.
TEST(AutoModel, DecideAutoGivesTheChooserTheRanks) {
  const Policy policy = auto_policy();
  for (const int ranks : {0, kRanks}) {
    CompressionDecision rule(1 << 30, 0);
    AutoChooser chooser(3, small_schedule());
    chooser.set_model(auto_model(policy));
    const CallShape shape{kComm, (1u << 20) / 4, 0};
    for (int guard = 0; guard < kMaxCalls; ++guard) {
      const CallDecision call = decide_auto(policy, rule, chooser, shape, true, {}, ranks);
      ASSERT_TRUE(call.auto_step);
      const AutoStep& step = *call.auto_step;
      chooser.record(step, kComm, seconds_of(step.candidate, 1u << 20));
      if (!step.agree_after) continue;
      chooser.agreed(step, kComm, chooser.window(step, kComm));
      break;
    }
    ASSERT_EQ(chooser.summary(kComm, 20).chosen, 2);
    if (ranks == 0) {
      EXPECT_EQ(chooser.predicted(kComm, 22, 2), 0) << "no ranks: no model";
    } else {
      EXPECT_GT(chooser.predicted(kComm, 22, 2), 3 * seconds_of(2, 1u << 20)) << "4x the bytes";
    }
  }
}

}  // namespace
}  // namespace slimreduce
