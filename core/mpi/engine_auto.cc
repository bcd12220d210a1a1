// SLIMREDUCE_COMPRESSOR=auto on the MPI side (core/runtime/auto_choice.h): a
// call of the schedule is timed here, and where the schedule says, the
// ranks exchange their times and take the agreed choice.
#include <cstdio>
#include <string>
#include <vector>

#include "core/mpi/engine.h"
#include "core/runtime/log.h"

namespace slimreduce {

std::string auto_span_args(const CallDecision& decision) {
  if (!decision.auto_step) return {};
  const AutoStep& step = *decision.auto_step;
  return std::string(", \"auto\": \"") +
         (step.probe   ? "probe"
          : step.timed ? "check"
                       : "chosen") +
         "\"";
}

// SLIMREDUCE_COMPRESSOR=auto, after a call of the schedule: its time (from a
// common start, compress_call's barrier), and where the schedule says, the
// exchange of the window's times (each call's slowest rank, MPI_MAX on the
// private duplicate: when the collective was done everywhere; a point every
// rank reaches in the same call) and the agreed choice.
int Engine::after_auto_step(CommState& state, MPI_Comm wire_comm, const AutoStep& step,
                            double seconds, std::uint64_t shape_changes) {
  if (step.probe) {
    Counters probed;
    probed.auto_probe_calls = 1;
    runtime_.board(Side::mpi).add(probed);
  }
  std::vector<double> mine;
  {
    Runtime::Locked shared = runtime_.shared();
    if (!shared->chooser) return MPI_SUCCESS;  // switched meanwhile (every rank alike)
    shared->chooser->record(step, state.id(), seconds, shape_changes);
    if (!step.agree_after) return MPI_SUCCESS;
    mine = shared->chooser->window(step, state.id());
  }
  const double exchange_begin_us = runtime_.timeline().on() ? Timeline::now_us() : 0.0;
  std::vector<double> agreed(mine.size());
  if (const int rc = PMPI_Allreduce(mine.data(), agreed.data(), static_cast<int>(mine.size()),
                                    MPI_DOUBLE, MPI_MAX, wire_comm))
    return rc;
  log_window(state, step, agreed);
  AutoChoiceRow row;
  bool changed = false;
  {
    Runtime::Locked shared = runtime_.shared();
    if (!shared->chooser) return MPI_SUCCESS;
    changed = shared->chooser->agreed(step, state.id(), agreed);
    row = auto_choice_row(shared->policy, state.id(), step.size_class,
                          shared->chooser->summary(state.id(), step.size_class));
  }
  if (runtime_.timeline().on()) {
    // The exchange, and what the class runs with from the next call.
    runtime_.timeline().span("AUTO", exchange_begin_us, Timeline::now_us(),
                             "\"window\": \"" + std::string(step.probe ? "probe" : "check") +
                                 "\", \"min_bytes\": " + std::to_string(1ull << step.size_class) +
                                 ", \"chosen\": \"" + row.chosen + "\"");
  }
  if (!changed) return MPI_SUCCESS;
  // The choice changed: a switch, unless it is the class's first.
  if (row.probe_rounds > 1) {
    Counters switched;
    switched.auto_switches = 1;
    runtime_.board(Side::mpi).add(switched);
  }
  log_choice(state, row);
  return MPI_SUCCESS;
}

// Rank 0 of the communicator logs each new choice at INFO, with the medians it was made from.
void Engine::log_choice(const CommState& state, const AutoChoiceRow& row) const {
  if (state.rank() != 0) return;
  log_line(runtime_.settings().log_level, LogLevel::info, runtime_.report_context().rank,
           "auto: communicator %llu, calls of %llu to %llu bytes: %s (agreed medians: %s)",
           static_cast<unsigned long long>(state.id()), 1ull << row.size_class,
           (2ull << row.size_class) - 1, row.chosen.c_str(), auto_medians_text(row).c_str());
}

// At debug level, rank 0 of the communicator logs each agreed window (ms), in
// call order, and its residual resets (AutoChooser::window's last element).
void Engine::log_window(const CommState& state, const AutoStep& step,
                        const std::vector<double>& window) const {
  if (runtime_.settings().log_level < LogLevel::debug || state.rank() != 0 || window.empty())
    return;
  std::string text;
  for (std::size_t i = 0; i + 1 < window.size(); ++i) {
    const double seconds = window[i];
    char one[32];
    std::snprintf(one, sizeof one, " %.3f", seconds * 1e3);
    text += one;
  }
  log_line(runtime_.settings().log_level, LogLevel::debug, runtime_.report_context().rank,
           "auto: communicator %llu, class of %llu bytes, %s times (ms):%s; residual resets %.0f",
           static_cast<unsigned long long>(state.id()), 1ull << step.size_class,
           step.probe ? "probe round" : "check", text.c_str(), window.back());
}

}  // namespace slimreduce
