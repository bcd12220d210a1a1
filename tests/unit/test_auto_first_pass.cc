// SLIMREDUCE_COMPRESSOR=auto's first pass (core/runtime/auto_choice.h,
// Schedule::cut_after_first_pass): a round that may take every candidate
// runs one call of each, exchanges those times, and leaves the hopeless out
// of its remaining calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/runtime/auto_choice.h"
#include "tests/unit/auto_schedule.h"

namespace slimreduce {
namespace {

constexpr std::uint64_t kComm = 9;
constexpr std::uint64_t kBytes = 1 << 22;

AutoChooser::Schedule with_pass() {
  AutoChooser::Schedule schedule = small_schedule();  // 3 probes, hopeless 3x
  schedule.cut_after_first_pass = true;
  return schedule;
}

AutoChooser::ClassSummary summary_of(const AutoChooser& chooser) {
  return chooser.summary(kComm, AutoChooser::size_class(kBytes));
}

// One probe round, candidate c's calls taking seconds[c]; each exchange
// agrees this rank's own window. Returns the steps, in call order.
std::vector<AutoStep> round_of(AutoChooser& chooser, const std::vector<double>& seconds,
                               int resets_on_first = 0) {
  std::vector<AutoStep> steps;
  for (int guard = 0; guard < kMaxCalls; ++guard) {
    const AutoStep step = chooser.next(kComm, kBytes);
    EXPECT_TRUE(step.probe) << "call " << steps.size();
    const bool resets = static_cast<int>(steps.size()) < resets_on_first;
    chooser.record(step, kComm, seconds.at(step.candidate), resets ? 1 : 0);
    steps.push_back(step);
    if (!step.agree_after) continue;
    chooser.agreed(step, kComm, chooser.window(step, kComm));
    if (!step.first_pass) return steps;
  }
  ADD_FAILURE() << "no round ended in " << kMaxCalls << " calls";
  return steps;
}

// The calls of a round after its pass was agreed, up to and including the
// round's own exchange; returns their candidates.
std::vector<int> rest_of_round(AutoChooser& chooser, const std::vector<double>& seconds) {
  std::vector<int> rest;
  for (int guard = 0; guard < kMaxCalls; ++guard) {
    const AutoStep step = chooser.next(kComm, kBytes);
    chooser.record(step, kComm, seconds.at(step.candidate));
    rest.push_back(step.candidate);
    if (!step.agree_after) continue;
    chooser.agreed(step, kComm, chooser.window(step, kComm));
    return rest;
  }
  ADD_FAILURE() << "no round ended in " << kMaxCalls << " calls";
  return rest;
}

std::vector<int> candidates_of(const std::vector<AutoStep>& steps) {
  std::vector<int> out;
  for (const AutoStep& step : steps) out.push_back(step.candidate);
  return out;
}

TEST(AutoChooser, AFirstPassCutsTheHopelessFromTheRestOfTheRound) {
  AutoChooser chooser(3, with_pass());
  // Plain fp32 over a slow link: 10 times int8's time; fp16 2 times.
  const std::vector<AutoStep> steps = round_of(chooser, {10e-3, 2e-3, 1e-3});
  EXPECT_EQ(candidates_of(steps), (std::vector<int>{0, 1, 2, 1, 2, 1, 2}));
  ASSERT_EQ(steps.size(), 7u);
  EXPECT_TRUE(steps[2].agree_after && steps[2].first_pass) << "the pass's exchange";
  for (std::size_t i = 0; i < steps.size(); ++i) {
    EXPECT_TRUE(steps[i].timed) << "call " << i;
    if (i != 2) {
      EXPECT_FALSE(steps[i].first_pass) << "call " << i;
    }
  }
  EXPECT_TRUE(steps[6].agree_after);
  const auto summary = summary_of(chooser);
  EXPECT_EQ(summary.chosen, 2);
  EXPECT_EQ(summary.medians, (std::vector<double>{0, 2e-3, 1e-3}))
      << "the cut candidate has one call's time, no median";
  EXPECT_EQ(summary.cut, (std::vector<double>{10e-3, 0, 0})) << "its one call, listed apart";
  EXPECT_EQ(summary.probe_rounds, 1u) << "a pass is no round of its own";
}

TEST(AutoChooser, AFirstPassKeepsEveryCandidateWithinHopeless) {
  AutoChooser chooser(3, with_pass());
  const std::vector<AutoStep> steps = round_of(chooser, {3e-3, 1e-3, 2e-3});  // 3x: not beyond
  EXPECT_EQ(candidates_of(steps), (std::vector<int>{0, 1, 2, 0, 1, 2, 0, 1, 2}));
  const auto summary = summary_of(chooser);
  EXPECT_EQ(summary.chosen, 1);
  EXPECT_EQ(summary.medians, (std::vector<double>{3e-3, 1e-3, 2e-3}));
}

// The cut reads the exchanged times (the ranks' slowest on MPI), not this
// rank's own: every rank cuts alike.
TEST(AutoChooser, AFirstPassCutsByTheAgreedTimes) {
  AutoChooser chooser(3, with_pass());
  AutoStep step;
  for (int i = 0; i < 3; ++i) {
    step = chooser.next(kComm, kBytes);
    chooser.record(step, kComm, 1e-3);  // this rank: all alike
  }
  ASSERT_TRUE(step.first_pass);
  std::vector<double> window = chooser.window(step, kComm);
  ASSERT_EQ(window.size(), 4u) << "three times, then the resets";
  window[1] = 5e-3;  // another rank was slow in fp16's call
  chooser.agreed(step, kComm, window);
  std::vector<int> rest;
  for (int guard = 0; guard < kMaxCalls; ++guard) {
    step = chooser.next(kComm, kBytes);
    chooser.record(step, kComm, 1e-3);
    rest.push_back(step.candidate);
    if (step.agree_after) break;
  }
  EXPECT_EQ(rest, (std::vector<int>{0, 2, 0, 2}));
}

// The round's residual resets are judged over all its calls (the pass's
// count stays for the round's own exchange) as well as over its pass.
TEST(AutoChooser, AFirstPassLeavesTheResetsToTheRoundsEnd) {
  AutoChooser chooser(3, with_pass());
  chooser.set_keeps_residual({false, true, false});
  round_of(chooser, {3e-3, 1e-3, 2e-3}, 5);  // 5 of 9 calls reset, 3 of them in the pass
  const auto summary = summary_of(chooser);
  EXPECT_TRUE(summary.resetting);
  EXPECT_EQ(summary.chosen, 2) << "fp16: the fastest of those that keep no residual";
  EXPECT_EQ(summary.reset_rounds, 1u);
}

// On NCCL a window is agreed a call or two after its last call: the calls
// between take the class's choice (none yet: the first candidate), untimed,
// and the round goes on after the agreement.
TEST(AutoChooser, AFirstPassAgreedLaterHoldsTheRoundMeanwhile) {
  AutoChooser chooser(3, with_pass());
  const std::vector<double> seconds = {10e-3, 2e-3, 1e-3};
  AutoStep pass_end;
  for (int i = 0; i < 3; ++i) {
    pass_end = chooser.next(kComm, kBytes);
    chooser.record(pass_end, kComm, seconds[pass_end.candidate]);
  }
  ASSERT_TRUE(pass_end.first_pass);
  const std::vector<double> window = chooser.window(pass_end, kComm);
  for (int i = 0; i < 2; ++i) {
    const AutoStep meanwhile = chooser.next(kComm, kBytes);
    EXPECT_TRUE(meanwhile.awaiting && !meanwhile.timed && !meanwhile.probe);
    EXPECT_EQ(meanwhile.candidate, 0);
    chooser.record(meanwhile, kComm, 1.0);  // counts in no window
  }
  chooser.agreed(pass_end, kComm, window);
  EXPECT_EQ(rest_of_round(chooser, seconds), (std::vector<int>{1, 2, 1, 2}));
  EXPECT_EQ(summary_of(chooser).chosen, 2);
  EXPECT_EQ(summary_of(chooser).medians[2], 1e-3) << "the untimed calls are in no median";
}

// The calls up to and including the class's next probe round, each taking
// seconds[candidate]; returns the round's steps.
std::vector<AutoStep> next_round_of(AutoChooser& chooser, const std::vector<double>& seconds) {
  std::vector<AutoStep> steps;
  for (int guard = 0; guard < kMaxCalls; ++guard) {
    const AutoStep step = chooser.next(kComm, kBytes);
    chooser.record(step, kComm, seconds.at(step.candidate));
    if (step.probe) steps.push_back(step);
    if (!step.agree_after) continue;
    chooser.agreed(step, kComm, chooser.window(step, kComm));
    if (step.probe && !step.first_pass) return steps;
  }
  ADD_FAILURE() << "no round in " << kMaxCalls << " calls";
  return steps;
}

bool has_pass(const std::vector<AutoStep>& steps) {
  return std::any_of(steps.begin(), steps.end(), [](const AutoStep& s) { return s.first_pass; });
}

// One slow call (a page fault, another process on the core) cuts a
// candidate from one round only: the next round measures it again.
TEST(AutoChooser, ACutCandidateIsMeasuredAgainAtTheNextRound) {
  AutoChooser chooser(3, with_pass());
  AutoStep step;
  for (int i = 0; i < 3; ++i) {  // the pass: candidate 0's one call was slow
    step = chooser.next(kComm, kBytes);
    chooser.record(step, kComm, i == 0 ? 10e-3 : 2e-3);
  }
  ASSERT_TRUE(step.first_pass);
  chooser.agreed(step, kComm, chooser.window(step, kComm));
  const std::vector<double> seconds = {1e-3, 2e-3, 2e-3};  // candidate 0 the fastest after all
  step = AutoStep{};
  for (int guard = 0; guard < kMaxCalls && !step.agree_after; ++guard) {  // the rest of the round
    step = chooser.next(kComm, kBytes);
    chooser.record(step, kComm, seconds.at(step.candidate));
  }
  chooser.agreed(step, kComm, chooser.window(step, kComm));
  ASSERT_EQ(summary_of(chooser).chosen, 1) << "this round without candidate 0";
  EXPECT_EQ(summary_of(chooser).cut.at(0), 10e-3);
  const std::vector<AutoStep> next = next_round_of(chooser, seconds);
  EXPECT_TRUE(has_pass(next)) << "a round that takes a candidate it knows nothing of";
  EXPECT_EQ(candidates_of(next), (std::vector<int>{0, 1, 2, 0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(summary_of(chooser).chosen, 0);
  EXPECT_EQ(summary_of(chooser).medians[0], 1e-3);
  EXPECT_EQ(summary_of(chooser).cut.at(0), 0) << "a median now: no longer listed as cut";
}

// A round between full ones, every candidate measured, has no pass; a full
// one (every full_round_every-th) has.
TEST(AutoChooser, OnlyARoundOfEveryCandidateOpensWithAPass) {
  AutoChooser chooser(3, with_pass());
  const std::vector<double> seconds = {2.5e-3, 2e-3, 1e-3};  // none beyond 3x: no cut
  EXPECT_TRUE(has_pass(round_of(chooser, seconds)));
  for (int round = 2; round <= 5; ++round) {
    const std::vector<AutoStep> steps = next_round_of(chooser, seconds);
    const bool full = round == 5;  // every full_round_every-th (4) round after the first
    EXPECT_EQ(has_pass(steps), full) << "round " << round;
    EXPECT_EQ(candidates_of(steps), (std::vector<int>{0, 1, 2, 0, 1, 2, 0, 1, 2}))
        << "round " << round;
  }
}

// NCCL's exchanges land a call or two after a window's last call: on its
// communicators a class's first round has no pass (the calls before its
// agreement would run the first candidate); another communicator's does.
TEST(AutoChooser, ACommunicatorThatExchangesLaterHasNoPassInAFirstRound) {
  AutoChooser chooser(3, with_pass());
  chooser.exchanges_later(kComm);
  const std::vector<AutoStep> steps = round_of(chooser, {10e-3, 2e-3, 1e-3});
  EXPECT_EQ(candidates_of(steps), (std::vector<int>{0, 1, 2, 0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(
      std::count_if(steps.begin(), steps.end(), [](const AutoStep& s) { return s.agree_after; }),
      1);
  AutoStep step = chooser.next(kComm + 1, kBytes);
  step = chooser.next(kComm + 1, kBytes);
  step = chooser.next(kComm + 1, kBytes);
  EXPECT_TRUE(step.first_pass) << "another communicator";
}

// A later round that takes every candidate (a full one, or one a drift
// started) has its pass there too: the calls before the pass's agreement
// take the class's choice, untimed.
TEST(AutoChooser, ACommunicatorThatExchangesLaterHasAPassInALaterFullRound) {
  AutoChooser::Schedule schedule = with_pass();
  schedule.full_round_every = 1;  // every round takes every candidate
  AutoChooser chooser(3, schedule);
  chooser.exchanges_later(kComm);
  const std::vector<double> seconds = {10e-3, 2e-3, 1e-3};
  round_of(chooser, seconds);
  ASSERT_EQ(summary_of(chooser).chosen, 2);
  std::vector<int> probed;
  AutoStep pass_end;
  for (int guard = 0; guard < kMaxCalls; ++guard) {  // the chosen calls up to the next round's pass
    pass_end = chooser.next(kComm, kBytes);
    chooser.record(pass_end, kComm, seconds[pass_end.candidate]);
    if (pass_end.probe) probed.push_back(pass_end.candidate);
    if (!pass_end.agree_after) continue;
    if (pass_end.first_pass) break;
    chooser.agreed(pass_end, kComm, chooser.window(pass_end, kComm));
  }
  ASSERT_TRUE(pass_end.first_pass) << "no pass in " << kMaxCalls << " calls";
  EXPECT_EQ(probed, (std::vector<int>{0, 1, 2}));
  const std::vector<double> window = chooser.window(pass_end, kComm);
  const AutoStep meanwhile = chooser.next(kComm, kBytes);  // before the agreement lands
  EXPECT_TRUE(meanwhile.awaiting);
  EXPECT_EQ(meanwhile.candidate, 2) << "the class's choice, not plain fp32";
  chooser.agreed(pass_end, kComm, window);
  EXPECT_EQ(rest_of_round(chooser, seconds), (std::vector<int>{1, 2, 1, 2}));
}

TEST(AutoChooser, ARoundOfOneCandidateOrOneProbeHasNoPass) {
  AutoChooser single(1, with_pass());
  const std::vector<AutoStep> alone = round_of(single, {1e-3});
  EXPECT_EQ(alone.size(), 3u);
  EXPECT_FALSE(alone[2].first_pass);

  AutoChooser::Schedule once = with_pass();
  once.probes = 1;
  AutoChooser quick(3, once);
  const std::vector<AutoStep> steps = round_of(quick, {10e-3, 2e-3, 1e-3});
  EXPECT_EQ(candidates_of(steps), (std::vector<int>{0, 1, 2}));
  EXPECT_FALSE(steps[2].first_pass) << "the round is its pass";
}

// A resetting round whose candidates all keep no residual leaves nothing
// out: no reset round is counted (the report's "residuals reset" text).
TEST(AutoChooser, AResettingRoundWithNothingToLeaveOutCountsNoResetRound) {
  AutoChooser chooser(2, with_pass());
  chooser.set_keeps_residual({false, false});
  round_of(chooser, {2e-3, 1e-3}, 6);
  const auto summary = summary_of(chooser);
  EXPECT_TRUE(summary.resetting);
  EXPECT_EQ(summary.chosen, 1);
  EXPECT_EQ(summary.reset_rounds, 0u);
}

// none, int8 (the fastest), fp16 and int8's twin (auto_schedule.h).
constexpr int kNone = kTwinNone, kInt8 = kTwinInt8, kFp16 = kTwinFp16;
const std::vector<double> kTwinSeconds = {10e-3, 1e-3, 2e-3, 1.1e-3};

AutoChooser twin_chooser() { return slimreduce::twin_chooser(with_pass()); }

// A pass of which at least half the calls reset (a fusion buffer whose
// make-up changes): the rest of the round takes the twin, with a call for
// each of the round's probes, and leaves int8 out, which could not win it.
// The round is resetting though its later calls count no reset (the pass
// chose them for a resetting class), and no round of the twins follows.
TEST(AutoChooser, AResettingPassTakesTheTwinIntoItsRound) {
  AutoChooser chooser = twin_chooser();
  const std::vector<AutoStep> steps = round_of(chooser, kTwinSeconds, 2);  // 2 of the pass's 3
  EXPECT_EQ(candidates_of(steps),
            (std::vector<int>{kNone, kInt8, kFp16, kTwin, kFp16, kTwin, kFp16, kTwin}))
      << "none cut as hopeless, int8 as keeping a residual";
  const auto summary = summary_of(chooser);
  EXPECT_EQ(summary.chosen, kTwin);
  EXPECT_TRUE(summary.resetting);
  EXPECT_EQ(summary.reset_rounds, 1u);
  EXPECT_EQ(summary.medians, (std::vector<double>{0, 0, 2e-3, 1.1e-3}));
  EXPECT_EQ(summary.cut, (std::vector<double>{10e-3, 1e-3, 0, 0})) << "their pass calls";
  const AutoStep after = chooser.next(kComm, kBytes);
  EXPECT_FALSE(after.probe) << "the twin was measured: no round of the twins";
  EXPECT_EQ(after.candidate, kTwin);
}

TEST(AutoChooser, APassResettingFewerThanHalfItsCallsKeepsItsRound) {
  AutoChooser chooser = twin_chooser();
  const std::vector<AutoStep> steps = round_of(chooser, kTwinSeconds, 1);  // 1 of 7 calls
  EXPECT_EQ(candidates_of(steps),
            (std::vector<int>{kNone, kInt8, kFp16, kInt8, kFp16, kInt8, kFp16}));
  EXPECT_EQ(summary_of(chooser).chosen, kInt8);
  EXPECT_FALSE(summary_of(chooser).resetting);
}

// The twin is for the class whose own calls reset: another class of the
// communicator resetting does not bring it into this one's pass (a steady
// buffer beside a fusion buffer; job_auto_fusion_buffer_resets_np2).
TEST(AutoChooser, AnotherClassResettingBringsNoTwinIntoAClasssPass) {
  AutoChooser chooser = twin_chooser();
  round_of(chooser, kTwinSeconds, kMaxCalls);  // every call resets
  ASSERT_TRUE(summary_of(chooser).resetting);
  std::vector<int> pass;
  for (int guard = 0; guard < kMaxCalls; ++guard) {
    const AutoStep step = chooser.next(kComm, 4 * kBytes);
    pass.push_back(step.candidate);
    chooser.record(step, kComm, 4 * kTwinSeconds.at(step.candidate));
    if (step.agree_after) break;
  }
  EXPECT_EQ(pass, (std::vector<int>{kNone, kInt8, kFp16}));
}

}  // namespace
}  // namespace slimreduce
