// The actions of scheduler/group_deferral.h that only speak to the real NCCL:
// its group start, end and simulated end, a call passed through as the
// caller made it, and the wait a non-blocking communicator needs. The
// planning and running of compressed calls is NcclEngine's PlanRunner,
// which derives from this. CUDA builds only (core/CMakeLists.txt).
#pragma once

#include <vector>

#include "scheduler/group_deferral.h"

namespace slimreduce {

class RealGroupActions : public PlanActions {
 public:
  int real_group_start() override;
  int real_group_end() override;
  int real_group_simulate_end(void* sim_info) override;
  int pass_through(const Reduction& call) override;
  // A host wait, only when a non-blocking communicator we did not see in the
  // group made the real end return early: NCCL requires it before further use.
  int wait_ready(std::vector<Reduction>& held) override;
};

}  // namespace slimreduce
