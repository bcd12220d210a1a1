// The scheduler's deferral of the reductions handed over before a wait, for
// NCCL groups (MPI_Iallreduce batches are queued by the MPI side,
// core/mpi/engine_queue.cc). For ncclAllReduce (invariant 4, docs/architecture.md): inside
// ncclGroupStart/End an eligible call is held, and nothing of it is enqueued
// before the outermost ncclGroupEnd; there its compress kernels, its
// collectives (inside the still-open real group) and, once the real group has
// ended, its finishing kernels are enqueued, in call order. A call outside any
// group runs the same way in a real group of one, opened once it is planned:
// a call planned to run whole (pipelined, each piece's collectives in a group
// of their own) opens none. Pure logic: the NCCL and CUDA
// work is behind PlanActions, so tests drive it with fakes. One instance per
// thread, as NCCL keeps its group depth per thread.
#pragma once

#include <cstdint>
#include <vector>

#include "scheduler/route.h"

namespace slimreduce {

// ncclResult_t values the logic tells apart.
inline constexpr int kNcclSuccess = 0;
inline constexpr int kNcclSystemError = 2;
inline constexpr int kNcclInternalError = 3;
inline constexpr int kNcclInProgress = 7;

// The caller's ncclAllReduce, its arguments as opaque values (no NCCL header
// here), and what classify_nccl said of it.
struct Reduction {
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  std::uint64_t count = 0;
  int datatype = -1;
  int op = -1;
  void* comm = nullptr;
  void* stream = nullptr;
  // ncclAllReduceConfig's config when it asks NCCL for anything (the call
  // then passes through, config and all); null for a plain call.
  const void* coll_config = nullptr;
  ReductionVerdict verdict;
};

// What the logic drives. Each returns an ncclResult_t value.
class PlanActions {
 public:
  virtual ~PlanActions() = default;
  virtual int real_group_start() = 0;
  virtual int real_group_end() = 0;
  // ncclGroupSimulateEnd(sim_info): NCCL ends the group without running it.
  virtual int real_group_simulate_end(void* sim_info) = 0;
  // The caller's call, unchanged (inside the open real group, if any).
  virtual int pass_through(const Reduction& call) = 0;
  // Counts a call that ran unchanged (a simulated group's calls never run:
  // they are not counted).
  virtual void count_pass_through(const Reduction& call) = 0;
  // Plans the held calls (workspace, residuals; any it now passes through, it
  // issues unchanged later, in order). Enqueues nothing.
  virtual int plan(std::vector<Reduction>& held) = 0;
  // After plan() of a call outside any group: whether it runs whole, each of
  // its pieces' collectives in a real group of their own (run_whole()), in
  // place of the phases below.
  virtual bool runs_whole() const { return false; }
  virtual int run_whole(std::vector<Reduction>& held) {
    (void)held;
    return kNcclInternalError;  // never called unless runs_whole()
  }
  // Enqueues the planned calls' compress kernels.
  virtual int begin(std::vector<Reduction>& held) = 0;
  // Issues the collectives of the held calls, in call order.
  virtual int issue(std::vector<Reduction>& held) = 0;
  // The real group ended with ncclInProgress (a non-blocking communicator in
  // it): waits until the held calls' communicators are ready.
  virtual int wait_ready(std::vector<Reduction>& held) = 0;
  // Enqueues the finishing kernels (decompress, accumulate).
  virtual int finish(std::vector<Reduction>& held) = 0;
};

class GroupDeferral {
 public:
  int start(PlanActions& actions);
  int end(PlanActions& actions);
  // ncclGroupSimulateEnd: NCCL lowers its depth as for an end and, at the
  // outermost level, estimates the group's calls and discards them. So that
  // it estimates the real calls, the held ones go to it unchanged first.
  int simulate_end(void* sim_info, PlanActions& actions);
  bool in_group() const { return depth_ > 0; }
  int depth() const { return depth_; }

  // A call classify_nccl passed through: issued now. Inside a group, one on a
  // communicator that may not block (non-blocking or unknown) makes the whole
  // group pass through, held calls too: such a group's end may return before
  // its collectives are enqueued, and nothing may be enqueued after them then.
  int pass_through(const Reduction& call, bool blocking_comm, PlanActions& actions);
  // An eligible call: held until the outermost end, or run now outside a group.
  int eligible(const Reduction& call, PlanActions& actions);

 private:
  // Runs held calls, inside the caller's open real group (`open`: an
  // outermost end) or, for a call outside any group, in one it opens after
  // begin(); and closes it, whatever happens: an exception (bad_alloc in
  // planning) must not leave NCCL's group open, or every later call on the
  // thread would wait for an end.
  int run(std::vector<Reduction>& held, bool whole_group_passes, bool open, PlanActions& actions);
  int run_phases(std::vector<Reduction>& held, bool whole_group_passes, bool& open,
                 PlanActions& actions);
  // Lowers our depth for an outermost end: the held calls, the passed-through
  // calls not counted yet, and whether the whole group passes through, taken.
  bool leave(std::vector<Reduction>& held, std::vector<Reduction>& uncounted,
             bool& whole_group_passes);

  int depth_ = 0;
  bool whole_group_passes_ = false;
  std::vector<Reduction> held_;
  std::vector<Reduction> uncounted_;  // passed through in the group: counted at its real end
};

}  // namespace slimreduce
