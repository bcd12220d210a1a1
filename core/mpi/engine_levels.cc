// SLIMREDUCE_ADAPTIVE on the MPI side: each reduced call's norm, read from
// the result every rank holds alike (on the host, or on the GPU for device
// buffers: the same bits), goes to its shape's schedule
// (core/runtime/adaptive_levels.h), which the next call's decision reads.
#include "backends/mpi_transport.h"
#include "core/mpi/engine.h"
#include "core/runtime/log.h"
#include "kernels/norm.h"

namespace slimreduce {

int Engine::note_reduced(const CallShape& shape, const CallDecision& decision,
                         const float* output) {
  if (!decision.levels_adapt) return MPI_SUCCESS;
  // Outside the lock: a pass over the result, where it is (the same bits
  // either way, so ranks with host and device buffers decide alike).
  double norm = 0.0;
  if (device_staging::is_device_pointer(output)) {
    const Status status = device_staging::reduced_norm(output, shape.count, *staging_, &norm);
    if (!status.ok()) return backends::mpi_code(status);
  } else {
    norm = kernels::fixed_order_norm(output, shape.count);
  }
  const bool switched = runtime_.shared()->reduced(shape, decision, norm);
  if (!switched) return MPI_SUCCESS;
  Counters delta;
  delta.adaptive_switches = 1;
  runtime_.board(Side::mpi).add(delta);
  const int next =
      decision.level == LevelSchedule::kGentle ? LevelSchedule::kHard : LevelSchedule::kGentle;
  Timeline& timeline = runtime_.timeline();
  if (timeline.on()) {  // a mark: where the shape's level changes
    const double now = Timeline::now_us();
    timeline.span("LEVEL", now, now,
                  "\"comm\": " + std::to_string(shape.comm_id) +
                      ", \"count\": " + std::to_string(shape.count) + ", \"level\": \"" +
                      LevelSchedule::name(next) + "\"");
  }
  log_line(runtime_.settings().log_level, LogLevel::debug, world_rank_,
           "adaptive: communicator %llu, calls of %llu values: %s level from the next call "
           "(window norm %.6g)",
           static_cast<unsigned long long>(shape.comm_id),
           static_cast<unsigned long long>(shape.count), LevelSchedule::name(next), norm);
  return MPI_SUCCESS;
}

}  // namespace slimreduce

namespace slimreduce {

std::string level_span_args(const CallDecision& decision) {
  if (!decision.levels_adapt) return {};
  return std::string(", \"level\": \"") + LevelSchedule::name(decision.level) + "\"";
}

}  // namespace slimreduce
