// SLIMREDUCE_COMPRESSOR=auto's schedule and choice (core/runtime/auto_choice.h)
// and its decision (core/runtime/decision.h), against hand-made times.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/runtime/auto_choice.h"
#include "core/runtime/compressor_choice.h"
#include "core/runtime/decision.h"
#include "tests/unit/auto_schedule.h"

namespace slimreduce {
namespace {

constexpr std::uint64_t kComm = 5;
constexpr std::uint64_t kBytes = 1 << 20;

// Runs one probe round: candidate c's calls take seconds[c]. Returns the steps.
std::vector<AutoStep> probe_round(AutoChooser& chooser, const std::vector<double>& seconds) {
  std::vector<AutoStep> steps;
  const int calls = chooser.candidates() * small_schedule().probes;
  for (int i = 0; i < calls; ++i) {
    const AutoStep step = chooser.next(kComm, kBytes);
    chooser.record(step, kComm, seconds.at(step.candidate));
    steps.push_back(step);
    if (step.agree_after) chooser.agreed(step, kComm, chooser.window(step, kComm));
  }
  return steps;
}

// The chosen calls up to and including the next exchange, each taking `seconds`.
void chosen_period(AutoChooser& chooser, double seconds) {
  for (int guard = 0; guard < kMaxCalls; ++guard) {
    const AutoStep step = chooser.next(kComm, kBytes);
    EXPECT_FALSE(step.probe);
    chooser.record(step, kComm, seconds);
    if (!step.agree_after) continue;
    chooser.agreed(step, kComm, chooser.window(step, kComm));
    return;
  }
  ADD_FAILURE() << "no exchange in " << kMaxCalls << " calls";
}

TEST(AutoChooser, SizeClassesArePowersOfTwoOfTheBytes) {
  EXPECT_EQ(AutoChooser::size_class(0), 0u);
  EXPECT_EQ(AutoChooser::size_class(1), 0u);
  EXPECT_EQ(AutoChooser::size_class(65536), 16u);
  EXPECT_EQ(AutoChooser::size_class(131071), 16u);
  EXPECT_EQ(AutoChooser::size_class(131072), 17u);
}

TEST(AutoChooser, ProbesInterleavedThenAgreesOnTheLeastMedian) {
  AutoChooser chooser(3, small_schedule());
  const std::vector<AutoStep> steps = probe_round(chooser, {3e-3, 1e-3, 2e-3});
  ASSERT_EQ(steps.size(), 9u);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i].candidate, static_cast<int>(i % 3)) << "call " << i;
    EXPECT_TRUE(steps[i].timed && steps[i].probe);
    EXPECT_EQ(steps[i].agree_after, i == 8) << "one exchange, after the round's last call";
  }
  const auto summary = chooser.summary(kComm, AutoChooser::size_class(kBytes));
  EXPECT_EQ(summary.chosen, 1);
  EXPECT_EQ(summary.medians, (std::vector<double>{3e-3, 1e-3, 2e-3}));
  EXPECT_EQ(summary.probe_rounds, 1u);
  EXPECT_EQ(chooser.next(kComm, kBytes).candidate, 1) << "the choice runs next";
}

TEST(AutoChooser, TheMedianIgnoresOneSlowProbeAndTiesGoToTheEarlier) {
  AutoChooser chooser(2, small_schedule());
  // Candidate 0: 1, 9, 1 ms (median 1); candidate 1: 2, 2, 2 ms.
  const std::vector<double> times = {1e-3, 2e-3, 9e-3, 2e-3, 1e-3, 2e-3};
  AutoStep step;
  for (double t : times) {
    step = chooser.next(kComm, kBytes);
    chooser.record(step, kComm, t);
  }
  ASSERT_TRUE(step.agree_after);
  EXPECT_TRUE(chooser.agreed(step, kComm, chooser.window(step, kComm)));
  EXPECT_EQ(chooser.summary(kComm, 20).chosen, 0);

  AutoChooser tied(2, small_schedule());
  probe_round(tied, {1e-3, 1e-3});
  EXPECT_EQ(tied.summary(kComm, 20).chosen, 0) << "a tie: the earlier in the list";
}

// Residuals that keep resetting (a fusion buffer whose make-up changes):
// candidates none, int8 (keeps a residual, fastest here) and fp16.
AutoChooser resetting_chooser() {
  AutoChooser chooser(3, small_schedule());
  chooser.set_keeps_residual({false, true, false});
  return chooser;
}

// One probe round in which `resets_on` of its 9 calls found their key with
// another shape on this rank, and `others` is the largest count of another rank.
int round_with_resets(AutoChooser& chooser, int resets_on, double others = 0) {
  const std::vector<double> seconds = {3e-3, 1e-3, 2e-3};
  for (int i = 0; i < 9; ++i) {
    const AutoStep step = chooser.next(kComm, kBytes);
    chooser.record(step, kComm, seconds.at(step.candidate), i < resets_on ? 1 : 0);
    if (!step.agree_after) continue;
    std::vector<double> window = chooser.window(step, kComm);
    EXPECT_EQ(window.back(), double(resets_on)) << "this rank's resets end the window";
    window.back() = std::max(window.back(), others);  // the exchange's MAX
    chooser.agreed(step, kComm, window);
  }
  return chooser.summary(kComm, AutoChooser::size_class(kBytes)).chosen;
}

TEST(AutoChooser, AResettingRoundLeavesOutTheCandidatesThatKeepAResidual) {
  AutoChooser chooser = resetting_chooser();
  EXPECT_EQ(round_with_resets(chooser, 5), 2) << "5 of 9 calls reset: fp16, not the faster int8";
  const auto summary = chooser.summary(kComm, AutoChooser::size_class(kBytes));
  EXPECT_TRUE(summary.resetting);
  EXPECT_EQ(summary.reset_rounds, 1u);
  EXPECT_EQ(summary.medians[1], 1e-3) << "int8's median is still reported";
}

TEST(AutoChooser, FewerThanHalfTheCallsResettingIsNotResetting) {
  AutoChooser chooser = resetting_chooser();
  EXPECT_EQ(round_with_resets(chooser, 4), 1) << "4 of 9: the fastest";
  EXPECT_FALSE(chooser.summary(kComm, AutoChooser::size_class(kBytes)).resetting);
}

TEST(AutoChooser, AnotherRanksResetsCountAsMuchAsOwn) {
  AutoChooser chooser = resetting_chooser();
  EXPECT_EQ(round_with_resets(chooser, 0, 9), 2) << "every rank judges the agreed count";
}

TEST(AutoChooser, WithNoCandidateThatKeepsNoResidualTheFastestWins) {
  AutoChooser chooser(3, small_schedule());
  chooser.set_keeps_residual({true, true, true});
  EXPECT_EQ(round_with_resets(chooser, 9), 1);
  EXPECT_EQ(chooser.summary(kComm, AutoChooser::size_class(kBytes)).reset_rounds, 0u);
}

TEST(AutoChooser, AChoiceThatKeepsAResidualIsReprobedWhenItsChecksReset) {
  AutoChooser chooser = resetting_chooser();
  ASSERT_EQ(round_with_resets(chooser, 0), 1);  // int8, no resets yet
  for (int i = 0;; ++i) {                       // a check period whose calls reset
    const AutoStep step = chooser.next(kComm, kBytes);
    ASSERT_FALSE(step.probe) << "call " << i;
    chooser.record(step, kComm, 1e-3, 1);
    if (!step.agree_after) continue;
    chooser.agreed(step, kComm, chooser.window(step, kComm));
    break;
  }
  EXPECT_TRUE(chooser.next(kComm, kBytes).probe) << "a round at once";
}

// Long enough between rounds that only a drift starts one.
AutoChooser::Schedule checked_schedule() {
  AutoChooser::Schedule schedule = small_schedule();
  schedule.first_reprobe = schedule.longest_reprobe = 64;
  return schedule;
}

TEST(AutoChooser, ChecksTheChoiceAndReprobesAtOnceWhenItDrifts) {
  AutoChooser chooser(2, checked_schedule());
  probe_round(chooser, {1e-3, 2e-3});
  // A check period: 8 calls, the last 4 timed, one exchange.
  for (int i = 0; i < 8; ++i) {
    const AutoStep step = chooser.next(kComm, kBytes);
    EXPECT_EQ(step.candidate, 0);
    EXPECT_EQ(step.timed, i >= 4) << i;
    EXPECT_EQ(step.agree_after, i == 7) << i;
    chooser.record(step, kComm, 1.1e-3);
    if (step.agree_after) chooser.agreed(step, kComm, chooser.window(step, kComm));
  }
  // That first check set the choice's own median (1.1 ms): 10% off the probe's, no drift.
  chosen_period(chooser, 1.2e-3);
  EXPECT_FALSE(chooser.next(kComm, kBytes).probe) << "9% off its own median: within the drift";
  AutoChooser drifting(2, checked_schedule());
  probe_round(drifting, {1e-3, 2e-3});
  chosen_period(drifting, 0.6e-3);  // the choice's own median, 40% below its probes': set
  chosen_period(drifting, 0.9e-3);  // the link slowed: 50% off
  const AutoStep after = drifting.next(kComm, kBytes);
  EXPECT_TRUE(after.probe) << "a probe round at the next call";
  EXPECT_EQ(after.candidate, 0);
  AutoChooser faster(2, checked_schedule());
  probe_round(faster, {1e-3, 2e-3});
  chosen_period(faster, 1e-3);
  chosen_period(faster, 0.5e-3);
  EXPECT_TRUE(faster.next(kComm, kBytes).probe) << "a link that sped up is followed too";
}

TEST(AutoChooser, ReprobesLessOftenWhileTheChoiceHolds) {
  AutoChooser chooser(2, small_schedule());
  probe_round(chooser, {1e-3, 2e-3});
  auto chosen_calls_before_probe = [&] {
    int calls = 0;
    for (int guard = 0; guard < kMaxCalls; ++guard) {
      const AutoStep step = chooser.next(kComm, kBytes);
      if (step.probe) {
        // Finish the round as it began: candidate 0 still wins.
        chooser.record(step, kComm, step.candidate == 0 ? 1e-3 : 2e-3);
        for (int i = 1; i < 6; ++i) {
          const AutoStep s = chooser.next(kComm, kBytes);
          chooser.record(s, kComm, s.candidate == 0 ? 1e-3 : 2e-3);
          if (s.agree_after) chooser.agreed(s, kComm, chooser.window(s, kComm));
        }
        return calls;
      }
      ++calls;
      chooser.record(step, kComm, 1e-3);
      if (step.agree_after) chooser.agreed(step, kComm, chooser.window(step, kComm));
    }
    ADD_FAILURE() << "no round in " << kMaxCalls << " calls";
    return -1;
  };
  EXPECT_EQ(chosen_calls_before_probe(), 16) << "first_reprobe after the first choice";
  EXPECT_EQ(chosen_calls_before_probe(), 32) << "doubled after the same winner";
  EXPECT_EQ(chosen_calls_before_probe(), 64);
  EXPECT_EQ(chosen_calls_before_probe(), 64) << "at most longest_reprobe";
  EXPECT_EQ(chooser.summary(kComm, 20).switches, 0u);
  EXPECT_EQ(chooser.summary(kComm, 20).probe_rounds, 5u);
}

TEST(AutoChooser, ASwitchIsCountedAndEachClassAndCommunicatorHasItsOwn) {
  AutoChooser chooser(2, small_schedule());
  probe_round(chooser, {1e-3, 2e-3});
  EXPECT_EQ(chooser.current(kComm, kBytes), 0);
  EXPECT_EQ(chooser.current(kComm, kBytes * 2), 0) << "unmeasured: the first candidate";
  EXPECT_TRUE(chooser.next(kComm, kBytes * 2).probe) << "another class probes on its own";
  EXPECT_TRUE(chooser.next(kComm + 1, kBytes).probe) << "another communicator too";
  chosen_period(chooser, 1e-3);
  chosen_period(chooser, 3e-3);  // drifted: a round follows
  probe_round(chooser, {3e-3, 2e-3});
  EXPECT_EQ(chooser.current(kComm, kBytes), 1);
  EXPECT_EQ(chooser.summary(kComm, 20).switches, 1u);
  chooser.forget_communicator(kComm);
  EXPECT_EQ(chooser.summary(kComm, 20).probe_rounds, 0u);
  // The report still lists what the gone communicator chose.
  bool listed = false;
  for (const auto& [key, summary] : chooser.summaries())
    listed = listed || (key == std::make_pair(kComm, 20u) && summary.probe_rounds == 2);
  EXPECT_TRUE(listed) << "a freed communicator's choices stay in the report";
  EXPECT_TRUE(chooser.next(kComm, kBytes).probe) << "a forgotten communicator measures again";
}

// A side that agrees some calls after the window's last (NCCL): the calls
// between are untimed, take the class's choice and move the schedule on by
// nothing, so the round after the agreement is the one it would have been.
TEST(AutoChooser, CallsAwaitingAnAgreementTakeTheChoiceAndAdvanceNothing) {
  AutoChooser chooser(2, small_schedule());
  AutoStep last;
  for (int i = 0; i < 2 * small_schedule().probes; ++i) {
    last = chooser.next(kComm, kBytes);
    chooser.record(last, kComm, last.candidate == 1 ? 1e-3 : 2e-3);
  }
  ASSERT_TRUE(last.agree_after);
  for (int i = 0; i < 3; ++i) {
    const AutoStep waiting = chooser.next(kComm, kBytes);
    EXPECT_TRUE(waiting.awaiting);
    EXPECT_FALSE(waiting.timed || waiting.probe || waiting.agree_after);
    EXPECT_EQ(waiting.candidate, 0) << "no round agreed yet: the first candidate";
    chooser.record(waiting, kComm, 9.0, 5);  // counts in no window
  }
  const std::vector<double> window = chooser.window(last, kComm);
  EXPECT_EQ(window.size(), 7u) << "the round's six times and its resets";
  EXPECT_EQ(window.back(), 0.0) << "the awaiting calls' resets are in no window";
  EXPECT_TRUE(chooser.agreed(last, kComm, window));
  EXPECT_EQ(chooser.summary(kComm, AutoChooser::size_class(kBytes)).chosen, 1);
  const AutoStep chosen = chooser.next(kComm, kBytes);
  EXPECT_FALSE(chosen.awaiting);
  EXPECT_EQ(chosen.candidate, 1);
  // The first check comes check_every - check_window chosen calls in, as without the wait.
  int untimed = 1;
  while (!chooser.next(kComm, kBytes).timed) ++untimed;
  EXPECT_EQ(untimed,
            static_cast<int>(small_schedule().check_every - small_schedule().check_window));
  // A check's window awaits too, with the choice.
  AutoStep check;
  do check = chooser.next(kComm, kBytes);
  while (!check.agree_after);
  const AutoStep after_check = chooser.next(kComm, kBytes);
  EXPECT_TRUE(after_check.awaiting);
  EXPECT_EQ(after_check.candidate, 1);
}

// Runs the class's next probe round (however many candidates it takes), candidate c's calls
// taking seconds[c]; returns the candidates it probed, in call order.
std::vector<int> next_round(AutoChooser& chooser, const std::vector<double>& seconds) {
  std::vector<int> probed;
  for (int guard = 0; guard < kMaxCalls; ++guard) {
    const AutoStep step = chooser.next(kComm, kBytes);
    if (!step.probe) {
      chooser.record(step, kComm, seconds.at(step.candidate));
      if (step.agree_after) chooser.agreed(step, kComm, chooser.window(step, kComm));
      continue;  // chosen calls up to the round
    }
    probed.push_back(step.candidate);
    chooser.record(step, kComm, seconds.at(step.candidate));
    if (!step.agree_after) continue;
    chooser.agreed(step, kComm, chooser.window(step, kComm));
    return probed;
  }
  ADD_FAILURE() << "no round in " << kMaxCalls << " calls";
  return probed;
}

// A later round leaves out a candidate whose agreed median was more than
// `hopeless` times the choice's (plain fp32 over a slow link), except every
// full_round_every-th round; it keeps its last median in the summary.
TEST(AutoChooser, LaterRoundsLeaveOutHopelessCandidates) {
  AutoChooser::Schedule schedule = small_schedule();
  schedule.full_round_every = 3;
  AutoChooser chooser(3, schedule);
  const std::vector<double> seconds = {8e-3, 2e-3, 1e-3};  // none 8x int8's, fp16 2x
  EXPECT_EQ(next_round(chooser, seconds), (std::vector<int>{0, 1, 2, 0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(next_round(chooser, seconds), (std::vector<int>{1, 2, 1, 2, 1, 2}))
      << "round 2: candidate 0 left out (8x the choice's median)";
  const auto summary = chooser.summary(kComm, AutoChooser::size_class(kBytes));
  EXPECT_EQ(summary.chosen, 2);
  EXPECT_EQ(summary.medians, (std::vector<double>{8e-3, 2e-3, 1e-3})) << "its last median kept";
  EXPECT_EQ(next_round(chooser, seconds), (std::vector<int>{1, 2, 1, 2, 1, 2}));
  EXPECT_EQ(next_round(chooser, seconds).size(), 9u)
      << "round 4 (every third after the first): all";
}

// A drifted check starts a round of every candidate: the link changed, and a
// candidate hopeless before may win now.
TEST(AutoChooser, ARoundADriftStartsProbesEveryCandidate) {
  AutoChooser chooser(3, small_schedule());
  next_round(chooser, {8e-3, 2e-3, 1e-3});
  chosen_period(chooser, 1e-3);  // the choice's own median
  chosen_period(chooser, 5e-3);  // drifted: a round follows
  const std::vector<int> probed = next_round(chooser, {0.5e-3, 2e-3, 5e-3});
  EXPECT_EQ(probed.size(), 9u);
  EXPECT_EQ(chooser.summary(kComm, AutoChooser::size_class(kBytes)).chosen, 0)
      << "the once hopeless candidate wins on the changed link";
}

// A round takes only the candidates the communicator can run, as they stand
// at its first call; one never probed joins the next round (no median yet).
TEST(AutoChooser, ARoundTakesOnlyTheCandidatesTheCommunicatorRuns) {
  AutoChooser chooser(4, small_schedule());
  const std::vector<bool> flat_only = {true, true, false, false};
  std::vector<int> probed;
  for (int call = 0; call < 6; ++call) {
    const AutoStep step = chooser.next(kComm, kBytes, flat_only);
    probed.push_back(step.candidate);
    chooser.record(step, kComm, step.candidate == 0 ? 2e-3 : 1e-3);
    EXPECT_EQ(step.agree_after, call == 5);
    if (step.agree_after) chooser.agreed(step, kComm, chooser.window(step, kComm));
  }
  EXPECT_EQ(probed, (std::vector<int>{0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(chooser.summary(kComm, AutoChooser::size_class(kBytes)).chosen, 1);
  // The next round, once all can run (the communicator's nodes now known).
  chosen_period(chooser, 1e-3);
  chosen_period(chooser, 1e-3);
  probed.clear();
  for (int guard = 0; guard < kMaxCalls; ++guard) {
    const AutoStep step = chooser.next(kComm, kBytes, {true, true, true, true});
    ASSERT_TRUE(step.probe);
    probed.push_back(step.candidate);
    chooser.record(step, kComm, step.candidate == 3 ? 0.5e-3 : 1e-3);
    if (!step.agree_after) continue;
    chooser.agreed(step, kComm, chooser.window(step, kComm));
    break;
  }
  EXPECT_EQ(probed, (std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}));
  EXPECT_EQ(chooser.summary(kComm, AutoChooser::size_class(kBytes)).chosen, 3);
}

// Three candidates on a link where each takes latency + bytes / rate: plain
// fp32, a 2x smaller wire, a 20x smaller one (over a slow link).
double line_seconds(int candidate, std::uint64_t bytes) {
  const double rate[] = {100e6, 200e6, 2000e6};  // bytes a second
  return 100e-6 + static_cast<double>(bytes) / rate[candidate];
}

// The first probe round of the class of `bytes` on kComm, each call taking
// its candidate's line_seconds times `slower`; returns the candidates it probed.
std::vector<int> first_round_at(AutoChooser& chooser, std::uint64_t bytes, double slower = 1.0) {
  std::vector<int> probed;
  for (int guard = 0; guard < kMaxCalls; ++guard) {
    const AutoStep step = chooser.next(kComm, bytes);
    EXPECT_TRUE(step.probe);
    probed.push_back(step.candidate);
    chooser.record(step, kComm, slower * line_seconds(step.candidate, bytes));
    if (!step.agree_after) continue;
    chooser.agreed(step, kComm, chooser.window(step, kComm));
    return probed;
  }
  ADD_FAILURE() << "no round ended in " << kMaxCalls << " calls";
  return probed;
}

// The class's next probe round after its chosen calls, each call taking its
// candidate's line_seconds; returns the candidates the round probed.
std::vector<int> next_round_at(AutoChooser& chooser, std::uint64_t bytes) {
  std::vector<int> probed;
  for (int guard = 0; guard < kMaxCalls; ++guard) {
    const AutoStep step = chooser.next(kComm, bytes);
    chooser.record(step, kComm, line_seconds(step.candidate, bytes));
    if (step.probe) probed.push_back(step.candidate);
    if (step.agree_after) chooser.agreed(step, kComm, chooser.window(step, kComm));
    if (step.agree_after && step.probe) return probed;
  }
  ADD_FAILURE() << "no round in " << kMaxCalls << " calls";
  return probed;
}

// The line through a candidate's agreed medians at the communicator's two
// other classes nearest the one asked about, each class at its least bytes.
TEST(AutoChooser, PredictsACandidateFromTheLineThroughTwoNearestClasses) {
  AutoChooser chooser(3, small_schedule());
  const std::uint32_t c16 = 16, c18 = 18, c22 = 22;
  EXPECT_EQ(chooser.predicted(kComm, c22, 0), 0) << "no class agreed yet";
  first_round_at(chooser, 1u << c16);
  EXPECT_EQ(chooser.predicted(kComm, c22, 0), 0) << "one class: no line";
  first_round_at(chooser, 1u << c18);
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(chooser.predicted(kComm, c22, c), line_seconds(c, 1u << c22),
                1e-9 * line_seconds(c, 1u << c22))
        << "candidate " << c;
  }
  EXPECT_EQ(chooser.predicted(kComm + 1, c22, 0), 0) << "another communicator's classes";
  EXPECT_EQ(chooser.predicted(kComm, c16, 0), 0) << "a class is not predicted from itself";
  // A third class nearer 2^22: the line goes through 2^18 and 2^20, which
  // here took twice the time the first line says (the link slowed down).
  AutoChooser slowed(3, small_schedule());
  first_round_at(slowed, 1u << c16);
  first_round_at(slowed, 1u << c18);
  first_round_at(slowed, 1u << 20, 2.0);
  // (Candidate 2: the 2^20 class's first round left the others out.)
  const double spb =
      (2 * line_seconds(2, 1u << 20) - line_seconds(2, 1u << 18)) / double((1u << 20) - (1u << 18));
  EXPECT_NEAR(slowed.predicted(kComm, c22, 2),
              2 * line_seconds(2, 1u << 20) + spb * double((1u << 22) - (1u << 20)), 1e-12);
}

// Over a slow link a job's many tensor sizes need not each probe plain fp32:
// once two classes are agreed, a new class's first round leaves out what
// their lines put beyond `hopeless` times the best; its next full round
// takes it again, and the choice table lists no median it never measured.
TEST(AutoChooser, AFirstRoundLeavesOutWhatTheOtherClassesPredictHopeless) {
  AutoChooser::Schedule schedule = small_schedule();
  schedule.full_round_every = 1;  // every round after the first takes all
  AutoChooser chooser(3, schedule);
  EXPECT_EQ(first_round_at(chooser, 1u << 10).size(), 9u) << "nothing to predict from";
  EXPECT_EQ(first_round_at(chooser, 1u << 12).size(), 9u) << "one class: nothing yet";
  // At 4 MiB: plain 42 ms, the 2x wire 21 ms, the 20x wire 2.2 ms.
  const std::uint64_t big = 4u << 20;
  EXPECT_EQ(first_round_at(chooser, big), (std::vector<int>{2, 2, 2}));
  const auto summary = chooser.summary(kComm, AutoChooser::size_class(big));
  EXPECT_EQ(summary.chosen, 2);
  EXPECT_EQ(summary.medians[0], 0) << "never probed";
  EXPECT_EQ(summary.medians[1], 0);
  // At 8 KiB the three are within 3x of each other: all probed.
  EXPECT_EQ(first_round_at(chooser, 8u << 10).size(), 9u);
  // The big class's next round is a full one: all again.
  const std::vector<int> probed = next_round_at(chooser, big);
  EXPECT_EQ(probed.size(), 9u);
  // Turned off: every first round takes every candidate.
  schedule.predict_first_round = false;
  AutoChooser all(3, schedule);
  first_round_at(all, 1u << 10);
  first_round_at(all, 1u << 12);
  EXPECT_EQ(first_round_at(all, big).size(), 9u);
}

// Between full rounds, a candidate a first round left out is judged by its
// prediction against the choice's median, as one probed is by its own.
TEST(AutoChooser, ALaterRoundJudgesANeverProbedCandidateByItsPrediction) {
  AutoChooser::Schedule schedule = small_schedule();
  schedule.full_round_every = 3;
  AutoChooser chooser(3, schedule);
  first_round_at(chooser, 1u << 10);
  first_round_at(chooser, 1u << 12);
  const std::uint64_t big = 4u << 20;
  first_round_at(chooser, big);
  const std::vector<int> probed = next_round_at(chooser, big);
  EXPECT_EQ(probed, (std::vector<int>{2, 2, 2})) << "round 2 of 3: still hopeless";
}

// The report's choice table leaves out a median never measured, and lists a
// candidate cut after one call apart, with that call's time.
TEST(DecideAuto, TheChoiceTableListsOnlyMeasuredMedians) {
  Policy policy;
  Settings settings;
  for (const char* name : {"none", "fp16", "int8"})
    policy.candidates.push_back({name, compressor_named(name, settings), false});
  AutoChooser::ClassSummary summary;
  summary.chosen = 2;
  summary.medians = {0, 2e-3, 1e-3};
  summary.cut = {9e-3, 0, 0};
  summary.predicted_out = {0, 0, 3e-3};
  const AutoChoiceRow row = auto_choice_row(policy, kComm, 20, summary);
  ASSERT_EQ(row.medians.size(), 2u);
  EXPECT_EQ(row.medians[0].first, "fp16");
  EXPECT_EQ(row.medians[1].first, "int8");
  EXPECT_EQ(row.chosen, "int8");
  ASSERT_EQ(row.cut.size(), 1u);
  EXPECT_EQ(row.cut[0], (std::pair<std::string, double>{"none", 9e-3}));
  ASSERT_EQ(row.predicted_out.size(), 1u);
  EXPECT_EQ(row.predicted_out[0], (std::pair<std::string, double>{"int8", 3e-3}));
}

TEST(AutoChooser, RefusesASchedulethatNeverAgrees) {
  AutoChooser::Schedule bad = small_schedule();
  bad.check_window = bad.check_every + 1;
  EXPECT_THROW(AutoChooser(2, bad), std::invalid_argument);
  EXPECT_THROW(AutoChooser(0, small_schedule()), std::invalid_argument);
  bad = small_schedule();
  bad.hopeless = 0.5;  // would leave out the choice itself
  EXPECT_THROW(AutoChooser(2, bad), std::invalid_argument);
}

TEST(DecideAuto, EachCallGetsItsCandidatesRouteCompressorAndFeedback) {
  const Policy policy = auto_policy();
  CompressionDecision rule(1 << 30, 0);
  AutoChooser chooser(3, small_schedule());
  const CallShape shape{kComm, kBytes / 4, 0};
  const std::vector<ReductionPath> routes = {ReductionPath::pass_through, ReductionPath::cast,
                                             ReductionPath::sharded};
  for (int i = 0; i < 6; ++i) {
    const CallDecision call = decide_auto(policy, rule, chooser, shape, true);
    ASSERT_TRUE(call.auto_step);
    EXPECT_EQ(call.candidate, i % 3);
    EXPECT_EQ(call.route, routes[i % 3]);
    EXPECT_EQ(call.compressor, policy.candidates[i % 3].compressor);
    EXPECT_EQ(call.error_feedback, i % 3 == 2) << "int8's own default";
    EXPECT_EQ(call.passes_because, nullptr) << "none chosen is no warm-up, no cap";
  }
  const CallDecision queued = decide_auto(policy, rule, chooser, shape, false);
  EXPECT_FALSE(queued.auto_step) << "a queued call follows the choice, untimed";
  EXPECT_EQ(queued.candidate, 0);
}

TEST(DecideAuto, WarmupAndTheCapComeFirstAndAdvanceNoSchedule) {
  const Policy policy = auto_policy();
  CompressionDecision rule(1000, 1);
  AutoChooser chooser(3);
  const CallDecision capped = decide_auto(policy, rule, chooser, {kComm, 251, 0}, true);
  EXPECT_EQ(capped.passes_because, &Counters::ef_cap_fallback) << "int8 keeps a residual";
  EXPECT_FALSE(capped.auto_step);
  const CallDecision warming = decide_auto(policy, rule, chooser, {kComm, 200, 0}, true);
  EXPECT_EQ(warming.passes_because, &Counters::warmup);
  const CallDecision first = decide_auto(policy, rule, chooser, {kComm, 200, 0}, true);
  ASSERT_TRUE(first.auto_step);
  EXPECT_EQ(first.candidate, 0) << "the schedule's first call, after warm-up";
}

// SLIMREDUCE_HIERARCHICAL=auto: twins of the compressing candidates, probed
// only where the communicator runs them two-level; a flat candidate's calls
// are flat, a twin's not.
TEST(DecideAuto, TwoLevelTwinsRunOnlyWhereTheCommunicatorSpansNodes) {
  Settings settings;
  settings.compressor = "auto";
  Policy policy = auto_policy();
  int made = 0;
  add_two_level_twins(policy, [&](const std::string& name) {
    ++made;
    return compressor_named(name, settings);
  });
  ASSERT_EQ(policy.candidates.size(), 5u);
  EXPECT_TRUE(policy.chooses_hierarchy);
  EXPECT_EQ(made, 2) << "none has no twin";
  EXPECT_EQ(policy.candidates[3].name, "fp16/two-level");
  EXPECT_EQ(policy.candidates[4].name, "int8/two-level");
  EXPECT_TRUE(policy.candidates[4].two_level && policy.candidates[4].error_feedback);
  EXPECT_NE(policy.candidates[4].compressor, policy.candidates[2].compressor) << "its own";
  CompressionDecision rule(1 << 30, 0);
  AutoChooser one_node(5, small_schedule()), nodes(5, small_schedule());
  const CallShape shape{kComm, kBytes / 4, 0};
  const auto never = [](const Policy::Candidate&) { return false; };
  const auto always = [](const Policy::Candidate&) { return true; };
  for (int i = 0; i < 6; ++i) {
    const CallDecision call = decide_auto(policy, rule, one_node, shape, true, never);
    EXPECT_EQ(call.candidate, i % 3) << "one node: the flat candidates only";
    EXPECT_TRUE(call.flat);
  }
  for (int i = 0; i < 10; ++i) {
    const CallDecision call = decide_auto(policy, rule, nodes, shape, true, always);
    EXPECT_EQ(call.candidate, i % 5);
    EXPECT_EQ(call.flat, i % 5 < 3) << "call " << i;
    EXPECT_EQ(call.compressor, policy.candidates[i % 5].compressor);
  }
}

}  // namespace
}  // namespace slimreduce
