// A short schedule of SLIMREDUCE_COMPRESSOR=auto's chooser for the unit
// tests (core/runtime/auto_choice.h): 3 probes a candidate, a check window
// of 4 in every 8 chosen calls, a round again after 16 to 64 of them, no
// first pass; and the default candidates' policy.
#pragma once

#include <memory>

#include "core/runtime/auto_choice.h"
#include "core/runtime/compressor_choice.h"
#include "core/runtime/decision.h"

namespace slimreduce {

// The most calls a test steps a schedule through while it waits for a step
// (an exchange, a round): its schedules reach one in well under a hundred, so
// one that never comes fails the test rather than hanging it.
inline constexpr int kMaxCalls = 1000;

inline AutoChooser::Schedule small_schedule() {
  AutoChooser::Schedule schedule;
  schedule.probes = 3;
  schedule.check_every = 8;
  schedule.check_window = 4;
  schedule.first_reprobe = 16;
  schedule.longest_reprobe = 64;
  schedule.drift = 0.25;
  // Rounds of `probes` calls a candidate, one exchange each; the first
  // pass's cut has tests of its own (AutoChooser.AFirstPass*).
  schedule.cut_after_first_pass = false;
  return schedule;
}

// Candidates none, int8 (keeps a residual), fp16, and int8's unbiased twin
// (keeps none; probed by resetting classes only), in that order.
inline constexpr int kTwinNone = 0, kTwinInt8 = 1, kTwinFp16 = 2, kTwin = 3;
inline AutoChooser twin_chooser(const AutoChooser::Schedule& schedule) {
  AutoChooser chooser(4, schedule);
  chooser.set_keeps_residual({false, true, false, false});
  chooser.set_for_resetting({false, false, false, true});
  return chooser;
}

// none, fp16 and int8 with their default settings, as the runtime makes them.
inline Policy auto_policy() {
  Settings settings;
  settings.compressor = "auto";
  Policy policy;
  for (const char* name : {"none", "fp16", "int8"}) {
    std::shared_ptr<compressors::Compressor> made = compressor_named(name, settings);
    const bool feedback = error_feedback_on(made.get(), settings);
    policy.candidates.push_back({name, std::move(made), feedback});
  }
  return policy;
}

}  // namespace slimreduce
