// SLIMREDUCE_ADAPTIVE's records, one code for both sides: a reduced call's
// norm goes to its shape's schedule (core/runtime/adaptive_levels.h), and a
// window that changes the shape's level is counted, marked on the timeline
// and logged. The MPI side records each call's norm as it returns
// (core/mpi/engine_levels.cc), the NCCL side a fixed number of calls later
// (core/nccl/norms.h); what a side passes here is the same on every rank.
#include <string>

#include "core/runtime/log.h"
#include "core/runtime/runtime.h"

namespace slimreduce {

bool Runtime::record_norm(Side side, const CallShape& shape, int level, double norm, int rank) {
  CallDecision sent;
  sent.levels_adapt = true;
  sent.level = level;
  int next = level;
  {
    Locked state = shared();
    if (!state->reduced(shape, sent, norm)) return false;
    // The shape's level now, as the schedule holds it: on NCCL a window's
    // calls may have been sent before an earlier switch, so not always the
    // opposite of `level`.
    next = state->levels->level(shape);
  }
  Counters delta;
  delta.adaptive_switches = 1;
  board(side).add(delta);
  if (timeline_.on()) {  // a mark: where the shape's level changes
    const double now = Timeline::now_us();
    timeline_.span("LEVEL", now, now,
                   "\"comm\": " + std::to_string(shape.comm_id) +
                       ", \"count\": " + std::to_string(shape.count) + ", \"level\": \"" +
                       LevelSchedule::name(next) + "\"");
  }
  log_line(settings_.log_level, LogLevel::debug, rank,
           "adaptive: communicator %llu, calls of %llu values: %s level from the next call "
           "(window norm %.6g)",
           static_cast<unsigned long long>(shape.comm_id),
           static_cast<unsigned long long>(shape.count), LevelSchedule::name(next), norm);
  return true;
}

}  // namespace slimreduce
