// A short schedule of SLIMREDUCE_COMPRESSOR=auto's chooser for the unit
// tests (core/runtime/auto_choice.h): 3 probes a candidate, a check window
// of 4 in every 8 chosen calls, a round again after 16 to 64 of them, no
// first pass.
#pragma once

#include "core/runtime/auto_choice.h"

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

}  // namespace slimreduce
