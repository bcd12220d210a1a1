// A simulated stream's device: unless HOSTSIM_ASYNC=0 each stream
// runs its work in order on a thread of its own, so the host runs ahead of
// the "device" as on a GPU, and a missing wait (a buffer read, freed or
// reused before the work that uses it has run) shows up in the results, or
// as an abort where a kernel finds its memory gone.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace slimreduce::hostsim {

// A one-way flag that threads can wait for without spinning: the legacy
// default stream's joins with the blocking streams (cuda_runtime_sim.cc).
class Signal {
 public:
  void set() {
    {
      std::lock_guard lock(mutex_);
      set_ = true;
    }
    changed_.notify_all();
  }
  void wait() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return set_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool set_ = false;
};

class StreamWorker {
 public:
  StreamWorker() : thread_([this] { loop(); }) {}
  // Runs what is queued, then stops.
  ~StreamWorker() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  StreamWorker(const StreamWorker&) = delete;
  StreamWorker& operator=(const StreamWorker&) = delete;

  void push(std::function<void()> work) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(work));
    }
    wake_.notify_all();
  }

  // Waits until everything pushed so far has run.
  void drain() {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [&] { return queue_.empty() && !busy_; });
  }

 private:
  void loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopped, and nothing left
      std::function<void()> work = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      lock.unlock();
      work();
      lock.lock();
      busy_ = false;
      idle_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<std::function<void()>> queue_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread thread_;  // last: it starts once the rest is made
};

}  // namespace slimreduce::hostsim
