#include "scheduler/group_deferral.h"

#include <new>
#include <utility>

namespace slimreduce {

int GroupDeferral::start(PlanActions& actions) {
  const int rc = actions.real_group_start();
  if (rc == kNcclSuccess) {
    if (depth_ == 0) {
      held_.clear();
      uncounted_.clear();
      whole_group_passes_ = false;
    }
    ++depth_;
  }
  return rc;
}

bool GroupDeferral::leave(std::vector<Reduction>& held, std::vector<Reduction>& uncounted,
                          bool& whole_group_passes) {
  if (depth_ == 0 || --depth_ > 0) return false;
  held = std::exchange(held_, {});
  uncounted = std::exchange(uncounted_, {});
  whole_group_passes = std::exchange(whole_group_passes_, false);
  return true;
}

int GroupDeferral::end(PlanActions& actions) {
  std::vector<Reduction> held, uncounted;
  bool whole_group_passes = false;
  // Unbalanced, or an inner end: the real library answers and keeps its depth.
  if (!leave(held, uncounted, whole_group_passes)) return actions.real_group_end();
  const int rc = held.empty() ? actions.real_group_end() : run(held, whole_group_passes, actions);
  // After the real end: a communicator made in the group can say its size now.
  for (const Reduction& call : uncounted) actions.count_pass_through(call);
  return rc;
}

int GroupDeferral::simulate_end(void* sim_info, PlanActions& actions) {
  std::vector<Reduction> held, uncounted;
  bool whole_group_passes = false;
  if (!leave(held, uncounted, whole_group_passes)) return actions.real_group_simulate_end(sim_info);
  // Nothing of a simulated group runs: the held calls go to NCCL as the caller
  // made them, for it to estimate and discard with the rest; none is counted.
  int rc = kNcclSuccess;
  for (const Reduction& call : held) {
    if (rc == kNcclSuccess) rc = actions.pass_through(call);
  }
  const int end_rc = actions.real_group_simulate_end(sim_info);
  return rc != kNcclSuccess ? rc : end_rc;
}

int GroupDeferral::pass_through(const Reduction& call, bool blocking_comm, PlanActions& actions) {
  if (depth_ > 0) {
    if (!blocking_comm) whole_group_passes_ = true;
    uncounted_.push_back(call);  // a simulated end would discard it
  } else {
    actions.count_pass_through(call);
  }
  return actions.pass_through(call);
}

int GroupDeferral::eligible(const Reduction& call, PlanActions& actions) {
  if (depth_ > 0) {
    held_.push_back(call);
    return kNcclSuccess;
  }
  // A group of one: the collective and the kernels around it in one place.
  const int rc = actions.real_group_start();
  if (rc != kNcclSuccess) return rc;
  std::vector<Reduction> held{call};
  return run(held, false, actions);
}

int GroupDeferral::run(std::vector<Reduction>& held, bool whole_group_passes,
                       PlanActions& actions) {
  bool closed = false;
  int rc = kNcclSuccess;
  try {
    return run_open(held, whole_group_passes, actions, closed);
  } catch (const std::bad_alloc&) {
    rc = kNcclSystemError;
  } catch (...) {
    rc = kNcclInternalError;
  }
  if (!closed) actions.real_group_end();
  return rc;
}

// Inside the open real group (depth 1): enqueue, close, then finish.
int GroupDeferral::run_open(std::vector<Reduction>& held, bool whole_group_passes,
                            PlanActions& actions, bool& closed) {
  int rc = kNcclSuccess;
  if (whole_group_passes) {
    for (const Reduction& call : held) {
      if (rc != kNcclSuccess) break;
      actions.count_pass_through(call);
      rc = actions.pass_through(call);
    }
    closed = true;
    const int end_rc = actions.real_group_end();
    return rc != kNcclSuccess ? rc : end_rc;
  }
  rc = actions.begin(held);
  if (rc == kNcclSuccess) rc = actions.issue(held);
  // The real group is closed whatever happened: the caller opened it with us.
  closed = true;
  const int end_rc = actions.real_group_end();
  if (rc != kNcclSuccess) return rc;
  // An end in progress (a non-blocking communicator's call of the caller's in
  // the group): our finishing kernels wait for our collectives to be enqueued,
  // and the caller still gets ncclInProgress, to poll its communicators as
  // NCCL asks.
  const bool in_progress = end_rc == kNcclInProgress;
  rc = in_progress ? actions.wait_ready(held) : end_rc;
  if (rc == kNcclSuccess) rc = actions.finish(held);
  return rc == kNcclSuccess && in_progress ? kNcclInProgress : rc;
}

}  // namespace slimreduce
