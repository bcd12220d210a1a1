// Whether an eligible call is compressed: one rule for every path (MPI host,
// MPI device, NCCL), read from the call and the calls before it, so every rank
// takes the same decision (invariant 3 of docs/architecture.md):
//  1. with error feedback, a tensor whose residual could never fit under
//     SLIMREDUCE_EF_MAX_BYTES passes through (a cap every rank compares alike);
//  2. the first SLIMREDUCE_WARMUP_STEPS calls of each shape (communicator,
//     count, datatype) pass through;
//  3. else it is compressed. The residual itself is looked up afterwards: its
//     keys are local buffer addresses, so finding no room for one only turns
//     error feedback off for the call, never the path.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/runtime/counters.h"
#include "core/runtime/residuals.h"

namespace slimreduce {

enum class Decision { compress, over_residual_cap, warming_up };

class CompressionDecision {
 public:
  CompressionDecision(std::uint64_t ef_max_bytes, std::uint64_t warmup_steps)
      : ef_max_bytes_(ef_max_bytes), warmup_(warmup_steps) {}

  // Counts the call towards its shape's warm-up unless the cap decides first.
  Decision decide(bool error_feedback, std::uint64_t comm_id, std::size_t count,
                  std::uint64_t datatype_tag) {
    if (error_feedback && std::uint64_t{count} * sizeof(float) > ef_max_bytes_)
      return Decision::over_residual_cap;
    if (warmup_.warming_up(comm_id, count, datatype_tag)) return Decision::warming_up;
    return Decision::compress;
  }
  void forget_communicator(std::uint64_t comm_id) { warmup_.forget_communicator(comm_id); }

 private:
  std::uint64_t ef_max_bytes_;
  WarmupCounter warmup_;
};

// The report's counter for a call passed through by `decision` (nullptr: compressed).
inline std::uint64_t Counters::*counted_as(Decision decision) {
  switch (decision) {
    case Decision::over_residual_cap:
      return &Counters::ef_cap_fallback;
    case Decision::warming_up:
      return &Counters::warmup;
    case Decision::compress:
      break;
  }
  return nullptr;
}

}  // namespace slimreduce
