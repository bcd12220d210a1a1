// SLIMREDUCE_COMPRESSOR=auto's records, one code for both sides
// (docs/architecture.md, "The measured choice"): each call of the schedule
// is recorded, and an exchanged window goes to the chooser, whose new
// choice is counted, logged and marked on the timeline. The MPI side times a
// call from a common start and exchanges at once (core/mpi/engine_auto.cc);
// the NCCL side reads CUDA events and exchanges a few calls later
// (core/nccl/auto_timing.h). What a side passes to auto_agreed() is the same
// on every rank.
#include <cstdio>
#include <string>

#include "core/runtime/log.h"
#include "core/runtime/runtime.h"

namespace slimreduce {
namespace {

// The window's times in ms, call order (its last element is the resets).
std::string window_text(const std::vector<double>& window) {
  std::string text;
  for (std::size_t i = 0; i + 1 < window.size(); ++i) {
    char one[32];
    std::snprintf(one, sizeof one, " %.3f", window[i] * 1e3);
    text += one;
  }
  return text;
}

}  // namespace

std::optional<std::vector<double>> Runtime::auto_recorded(Side side, std::uint64_t comm_id,
                                                          const AutoStep& step, double seconds,
                                                          std::uint64_t resets) {
  if (step.probe) {
    Counters probed;
    probed.auto_probe_calls = 1;
    board(side).add(probed);
  }
  Locked state = shared();
  if (!state->chooser) return std::nullopt;  // switched meanwhile (every rank alike)
  state->chooser->record(step, comm_id, seconds, resets);
  if (!step.agree_after) return std::nullopt;
  return state->chooser->window(step, comm_id);
}

void Runtime::auto_agreed(Side side, std::uint64_t comm_id, int comm_rank, const AutoStep& step,
                          const std::vector<double>& agreed, double exchange_begin_us) {
  const int rank = report_context().rank;
  if (settings_.log_level >= LogLevel::debug && comm_rank == 0 && !agreed.empty()) {
    log_line(settings_.log_level, LogLevel::debug, rank,
             "auto: communicator %llu, class of %llu bytes, %s times (ms):%s; residual resets %.0f",
             static_cast<unsigned long long>(comm_id), 1ull << step.size_class,
             step.first_pass ? "first pass"
             : step.probe    ? "probe round"
                             : "check",
             window_text(agreed).c_str(), agreed.back());
  }
  AutoChoiceRow row;
  bool changed = false;
  {
    Locked state = shared();
    if (!state->chooser) return;
    changed = state->chooser->agreed(step, comm_id, agreed);
    row = auto_choice_row(state->policy, comm_id, step.size_class,
                          state->chooser->summary(comm_id, step.size_class));
  }
  if (timeline_.on()) {
    // The exchange, and what the class runs with from the next call.
    timeline_.span("AUTO", exchange_begin_us, Timeline::now_us(),
                   "\"window\": \"" +
                       std::string(step.first_pass ? "pass"
                                   : step.probe    ? "probe"
                                                   : "check") +
                       "\", \"min_bytes\": " + std::to_string(1ull << step.size_class) +
                       ", \"chosen\": \"" + row.chosen + "\"");
  }
  if (!changed) return;
  // The choice changed: a switch, unless it is the class's first.
  if (row.probe_rounds > 1) {
    Counters switched;
    switched.auto_switches = 1;
    board(side).add(switched);
  }
  if (comm_rank != 0) return;
  log_line(settings_.log_level, LogLevel::info, rank,
           "auto: communicator %llu, calls of %llu to %llu bytes: %s (agreed medians: %s)",
           static_cast<unsigned long long>(comm_id), 1ull << row.size_class,
           (2ull << row.size_class) - 1, row.chosen.c_str(), auto_medians_text(row).c_str());
}

}  // namespace slimreduce
