#include "core/nccl_group.h"

#include <utility>

namespace slimreduce {

int NcclGroup::start(GroupActions& actions) {
  const int rc = actions.real_group_start();
  if (rc == kNcclSuccess) {
    if (depth_ == 0) {
      held_.clear();
      tainted_ = false;
    }
    ++depth_;
  }
  return rc;
}

int NcclGroup::end(GroupActions& actions) {
  // Unbalanced, or an inner end: the real library answers and keeps its depth.
  if (depth_ == 0) return actions.real_group_end();
  if (--depth_ > 0) return actions.real_group_end();
  std::vector<NcclCall> held = std::move(held_);
  held_.clear();
  const bool tainted = std::exchange(tainted_, false);
  if (held.empty()) return actions.real_group_end();
  return run(held, tainted, actions);
}

int NcclGroup::pass_through(const NcclCall& call, bool blocking_comm, GroupActions& actions) {
  if (depth_ > 0 && !blocking_comm) tainted_ = true;
  return actions.pass_through(call);
}

int NcclGroup::eligible(const NcclCall& call, GroupActions& actions) {
  if (depth_ > 0) {
    held_.push_back(call);
    return kNcclSuccess;
  }
  // A group of one: the collective and the kernels around it in one place.
  const int rc = actions.real_group_start();
  if (rc != kNcclSuccess) return rc;
  std::vector<NcclCall> held{call};
  return run(held, false, actions);
}

// Inside the open real group (depth 1): enqueue, close, then finish.
int NcclGroup::run(std::vector<NcclCall>& held, bool tainted, GroupActions& actions) {
  int rc = kNcclSuccess;
  if (tainted) {
    for (const NcclCall& call : held) {
      if (rc == kNcclSuccess) rc = actions.pass_through(call);
    }
    const int end_rc = actions.real_group_end();
    return rc != kNcclSuccess ? rc : end_rc;
  }
  rc = actions.begin(held);
  if (rc == kNcclSuccess) rc = actions.issue(held);
  // The real group is closed whatever happened: the caller opened it with us.
  int end_rc = actions.real_group_end();
  if (rc != kNcclSuccess) return rc;
  if (end_rc == kNcclInProgress) end_rc = actions.wait_ready(held);
  if (end_rc != kNcclSuccess) return end_rc;
  return actions.finish(held);
}

}  // namespace slimreduce
