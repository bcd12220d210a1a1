#include "scheduler/pipeline.h"

#include <unistd.h>

#include <algorithm>
#include <exception>
#include <new>

namespace slimreduce::scheduler {

namespace {

// The helper's work, with what it throws turned into a Status: an exception
// must not end the helper's thread (nor the process) while the caller waits.
Status run_caught(const std::function<Status()>& work) {
  try {
    return work();
  } catch (const std::bad_alloc&) {
    return Status::no_memory();
  } catch (...) {
    return Status::internal();
  }
}

}  // namespace

Helper::Helper() : owner_(getpid()), thread_([this] { loop(); }) {}

Helper::~Helper() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void Helper::start(std::function<Status()> work) {
  {
    std::lock_guard lock(mutex_);
    work_ = std::move(work);
    busy_ = true;
  }
  changed_.notify_all();
}

Status Helper::wait() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return !busy_; });
  return done_;
}

void Helper::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return stopping_ || work_; });
    if (stopping_) return;
    std::function<Status()> work = std::move(work_);
    work_ = nullptr;
    lock.unlock();
    const Status status = run_caught(work);
    lock.lock();
    done_ = status;
    busy_ = false;
    changed_.notify_all();
  }
}

HelperPool::Lease HelperPool::lease() {
  {
    std::lock_guard lock(mutex_);
    while (!idle_.empty()) {
      std::unique_ptr<Helper> helper = std::move(idle_.back());
      idle_.pop_back();
      if (helper->owner() == getpid()) return Lease(*this, std::move(helper));
      orphaned_.push_back(std::move(helper));
    }
  }
  try {
    auto helper = std::make_unique<Helper>();
    std::lock_guard lock(mutex_);
    ++made_;
    return Lease(*this, std::move(helper));
  } catch (const std::exception&) {
    // No thread to be had (a process limit, no memory): this run goes
    // unpipelined, with the same bits, rather than failing on this rank alone.
    return Lease(*this, nullptr);
  }
}

std::size_t HelperPool::made() const {
  std::lock_guard lock(mutex_);
  return made_;
}

void HelperPool::give_back(std::unique_ptr<Helper> helper) {
  if (!helper) return;
  std::lock_guard lock(mutex_);
  idle_.push_back(std::move(helper));
}

bool helper_pays(unsigned cpus, unsigned ranks_on_node) {
  return cpus >= 2 * std::max(1u, ranks_on_node);
}

bool can_pipeline(const Plan& plan) {
  if (plan.size() < 2) return false;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    if (!plan.step(i).local_phases()) return false;
  }
  return true;
}

Status run_pipelined(const Plan& plan, Helper& helper, PhaseObserver* observer) {
  if (!can_pipeline(plan)) return run_blocking(plan, observer);
  constexpr int kCaller = 0;
  constexpr int kHelper = 1;
  const std::size_t steps = plan.size();
  SLIMREDUCE_TRY(run_one(plan, 0, Phase::compress, observer, kCaller));
  for (std::size_t i = 0; i < steps; ++i) {
    // The helper: the next step's compress first (the wire waits for it),
    // then the previous step's finish.
    helper.start([&plan, observer, i, steps]() -> Status {
      if (i + 1 < steps) SLIMREDUCE_TRY(run_one(plan, i + 1, Phase::compress, observer, kHelper));
      if (i > 0) SLIMREDUCE_TRY(run_one(plan, i - 1, Phase::finish, observer, kHelper));
      return {};
    });
    const Status on_wire = run_one(plan, i, Phase::communicate, observer, kCaller);
    const Status on_helper = helper.wait();
    SLIMREDUCE_TRY(on_wire);
    SLIMREDUCE_TRY(on_helper);
  }
  return run_one(plan, steps - 1, Phase::finish, observer, kCaller);
}

}  // namespace slimreduce::scheduler
