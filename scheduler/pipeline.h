// Pipelining (docs/architecture.md, "Partitions and pipelining"): while step
// i is on the wire, a helper thread compresses step i + 1 and decodes step
// i - 1. Only the caller's thread ever calls MPI or NCCL (communicate()); the
// helper runs the steps' host phases alone (Step::local_phases()), so a
// pipelined run is safe under every thread level a job may ask for,
// MPI_THREAD_SINGLE included. Each step has its own buffers and the phases
// of one step keep their order, so the results are the bits of an
// unpipelined run.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "scheduler/plan.h"

namespace slimreduce::scheduler {

// One helper thread: one piece of work at a time, handed over and waited for.
class Helper {
 public:
  Helper();
  ~Helper();
  Helper(const Helper&) = delete;
  Helper& operator=(const Helper&) = delete;

  // Starts `work` on the helper; the previous work must have been waited for.
  void start(std::function<Status()> work);
  // Waits for the work started last; returns its status.
  Status wait();
  // The process that made it (a forked child has no such thread).
  pid_t owner() const { return owner_; }

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::function<Status()> work_;  // empty: idle
  Status done_;
  bool busy_ = false;
  bool stopping_ = false;
  pid_t owner_;
  std::thread thread_;  // last: starts once the rest is made
};

// Helpers for the threads that run plans at once (under MPI_THREAD_MULTIPLE,
// each on its own communicator): each run leases one, made on first need and
// kept for the next runs.
class HelperPool {
 public:
  class Lease {
   public:
    Lease(HelperPool& pool, std::unique_ptr<Helper> helper)
        : pool_(pool), helper_(std::move(helper)) {}
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { pool_.give_back(std::move(helper_)); }
    // nullptr: no thread could be made; run unpipelined.
    Helper* get() { return helper_.get(); }

   private:
    HelperPool& pool_;
    std::unique_ptr<Helper> helper_;
  };

  // An idle helper, or a new one; one with none where no thread can be made.
  Lease lease();
  // Helpers made so far (for tests).
  std::size_t made() const;

 private:
  void give_back(std::unique_ptr<Helper> helper);

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Helper>> idle_;
  // A forked child's copies of its parent's helpers have no thread: they are
  // set aside, never joined or used.
  std::vector<std::unique_ptr<Helper>> orphaned_;
  std::size_t made_ = 0;
};

// Whether a helper thread pays: pipelining overlaps host work with the wire,
// but an MPI rank spins on its core while it waits, so a helper that shares
// the core takes time from the wire (measured 0.84x over shared memory with 2
// ranks on 2 cores, docs/performance.md). It pays where the CPUs a rank may
// use number at least twice the ranks of its node.
bool helper_pays(unsigned cpus, unsigned ranks_on_node);

// Whether every step of the plan may be pipelined (Step::local_phases()),
// and there is more than one.
bool can_pipeline(const Plan& plan);

// Runs the plan as run_blocking() does, with each step's compress() and
// finish() on `helper` while the caller's thread runs the collectives. A plan
// that cannot be pipelined runs as run_blocking() runs it. The first failure
// stops it: work already on the helper is waited for, later steps do not run.
Status run_pipelined(const Plan& plan, Helper& helper, PhaseObserver* observer);

}  // namespace slimreduce::scheduler
