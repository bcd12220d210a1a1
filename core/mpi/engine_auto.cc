// SLIMREDUCE_COMPRESSOR=auto on the MPI side (core/runtime/auto_choice.h): a
// call of the schedule is timed here, and where the schedule says, the
// ranks exchange their times and take the agreed choice.
#include <vector>

#include "core/mpi/engine.h"

namespace slimreduce {

// SLIMREDUCE_COMPRESSOR=auto, after a call of the schedule: its time (from a
// common start, compress_call's barrier), and where the schedule says, the
// exchange of the window's times (each call's slowest rank, MPI_MAX on the
// private duplicate: when the collective was done everywhere; a point every
// rank reaches in the same call), taken at once (core/runtime/runtime_auto.cc).
int Engine::after_auto_step(CommState& state, MPI_Comm wire_comm, const AutoStep& step,
                            double seconds, std::uint64_t shape_changes) {
  const std::optional<std::vector<double>> mine =
      runtime_.auto_recorded(Side::mpi, state.id(), step, seconds, shape_changes);
  if (!mine) return MPI_SUCCESS;
  const double exchange_begin_us = runtime_.timeline().on() ? Timeline::now_us() : 0.0;
  std::vector<double> agreed(mine->size());
  if (const int rc = PMPI_Allreduce(mine->data(), agreed.data(), static_cast<int>(mine->size()),
                                    MPI_DOUBLE, MPI_MAX, wire_comm))
    return rc;
  runtime_.auto_agreed(Side::mpi, state.id(), state.rank(), step, agreed, exchange_begin_us);
  return MPI_SUCCESS;
}

}  // namespace slimreduce
