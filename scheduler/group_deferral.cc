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
  const int rc =
      held.empty() ? actions.real_group_end() : run(held, whole_group_passes, true, actions);
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
  // A group of one: planned, then its kernels and collectives in a real group
  // of their own (none for a call that runs whole), then its finishing kernels.
  std::vector<Reduction> held{call};
  return run(held, false, false, actions);
}

int GroupDeferral::run(std::vector<Reduction>& held, bool whole_group_passes, bool open,
                       PlanActions& actions) {
  int rc = kNcclSuccess;
  try {
    return run_phases(held, whole_group_passes, open, actions);
  } catch (const std::bad_alloc&) {
    rc = kNcclSystemError;
  } catch (...) {
    rc = kNcclInternalError;
  }
  if (open) actions.real_group_end();
  return rc;
}

// Enqueue, close the real group, then finish. `open` says whether a real
// group is open (ours to close) at every point, for run() to close on an exception.
int GroupDeferral::run_phases(std::vector<Reduction>& held, bool whole_group_passes, bool& open,
                              PlanActions& actions) {
  int rc = kNcclSuccess;
  if (whole_group_passes) {  // only at an outermost end: the caller's group is open
    for (const Reduction& call : held) {
      if (rc != kNcclSuccess) break;
      actions.count_pass_through(call);
      rc = actions.pass_through(call);
    }
    open = false;
    const int end_rc = actions.real_group_end();
    return rc != kNcclSuccess ? rc : end_rc;
  }
  rc = actions.plan(held);
  if (!open) {  // a call outside any group: planned before its real group opens
    if (rc != kNcclSuccess) return rc;
    if (actions.runs_whole()) return actions.run_whole(held);
    rc = actions.real_group_start();
    if (rc != kNcclSuccess) return rc;
    open = true;
  }
  if (rc == kNcclSuccess) rc = actions.begin(held);
  if (rc == kNcclSuccess) rc = actions.issue(held);
  // The real group is closed whatever happened: the caller opened it with us.
  open = false;
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
