// SLIMREDUCE_ADAPTIVE on the MPI side: each reduced call's norm, read from
// the result every rank holds alike (on the host, or on the GPU for device
// buffers: the same bits), goes to its shape's schedule
// (core/runtime/adaptive_levels.h, through Runtime::record_norm), which the
// next call's decision reads.
#include "backends/mpi_transport.h"
#include "core/mpi/engine.h"
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
  runtime_.record_norm(Side::mpi, shape, decision.level, norm, world_rank_);
  return MPI_SUCCESS;
}

}  // namespace slimreduce

namespace slimreduce {

std::string level_span_args(const CallDecision& decision) {
  if (!decision.levels_adapt) return {};
  return std::string(", \"level\": \"") + LevelSchedule::name(decision.level) + "\"";
}

}  // namespace slimreduce
