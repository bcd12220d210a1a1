#include "core/nccl/auto_timing.h"

#include <algorithm>
#include <limits>

#include "backends/nccl_backend.h"
#include "core/runtime/timeline.h"

namespace slimreduce {
namespace {

namespace real = backends::nccl;

// cudaErrorNotReady from a query is no error of the caller's: cleared.
bool reached(cudaEvent_t event) {
  const cudaError_t rc = cudaEventQuery(event);
  if (rc == cudaErrorNotReady) cudaGetLastError();
  return rc != cudaErrorNotReady;
}

// Moves the entries of communicator `comm_id` out of `keyed` to the back of `out`.
template <typename Keyed, typename Out>
void move_communicator(Keyed& keyed, std::uint64_t comm_id, Out& out) {
  for (auto it = keyed.begin(); it != keyed.end();) {
    if (it->first.first != comm_id) {
      ++it;
      continue;
    }
    out.push_back(std::move(it->second));
    it = keyed.erase(it);
  }
}

// Waits for `event` where the device has not reached it yet, counting the wait.
Status wait_for(cudaEvent_t event, std::uint64_t* waits) {
  if (reached(event)) return {};
  ++*waits;
  return Status::cuda(cudaEventSynchronize(event));
}

}  // namespace

NcclAutoTiming::Event::~Event() {
  if (event) cudaEventDestroy(event);
}

NcclAutoTiming::Pinned::~Pinned() {
  if (values) cudaFreeHost(values);
}

NcclAutoTiming::~NcclAutoTiming() {
  // Exchanges may still be copying into their pinned memory.
  for (auto& [key, window] : windows_) {
    if (window.done) cudaEventSynchronize(window.done->event);
  }
  for (Window& window : retired_) {
    if (window.done) cudaEventSynchronize(window.done->event);
  }
}

std::size_t NcclAutoTiming::exchange_bytes(const Key& key) const {
  std::lock_guard lock(mutex_);
  const auto found = windows_.find(key);
  return ((found == windows_.end() ? 0 : found->second.calls.size()) + 1) * sizeof(double);
}

// A timing event recorded on `stream` now.
Status NcclAutoTiming::recorded(cudaStream_t stream, std::unique_ptr<Event>* event) {
  *event = std::make_unique<Event>();
  SLIMREDUCE_TRY(Status::cuda(cudaEventCreate(&(*event)->event)));
  return Status::cuda(cudaEventRecord((*event)->event, stream));
}

Status NcclAutoTiming::start(const Key& key, cudaStream_t stream) {
  std::unique_ptr<Event> event;
  SLIMREDUCE_TRY(recorded(stream, &event));
  std::lock_guard lock(mutex_);
  windows_[key].calls.push_back({std::move(event), nullptr});
  return {};
}

Status NcclAutoTiming::stop(const Key& key, cudaStream_t stream) {
  std::unique_ptr<Event> event;
  SLIMREDUCE_TRY(recorded(stream, &event));
  std::lock_guard lock(mutex_);
  std::vector<Timed>& calls = windows_[key].calls;
  if (!calls.empty() && !calls.back().stop) calls.back().stop = std::move(event);
  return {};
}

void NcclAutoTiming::close(const Key& key, const AutoStep& step, double resets) {
  std::lock_guard lock(mutex_);
  Window& window = windows_[key];
  window.closed = true;
  window.step = step;
  window.resets = resets;
}

NcclAutoTiming::Due NcclAutoTiming::due(const Key& key) const {
  std::lock_guard lock(mutex_);
  const auto found = windows_.find(key);
  if (found == windows_.end() || !found->second.closed) return Due::nothing;
  return found->second.done ? Due::agreement : Due::exchange;
}

Status NcclAutoTiming::exchange(const Key& key, ncclComm_t comm, cudaStream_t stream,
                                void* device_buffer, std::uint64_t* waits) {
  std::vector<Timed> calls;
  double resets = 0;
  {
    std::lock_guard lock(mutex_);
    Window& window = windows_[key];
    calls = std::move(window.calls);
    window.calls.clear();
    resets = window.resets;
  }
  // Outside the lock: a wait here is for this thread's own earlier calls. A
  // call whose events are missing (it failed) counts as never done: the
  // ranks' least leaves it out unless every rank lost it.
  std::vector<double> values;
  for (const Timed& call : calls) {
    float ms = std::numeric_limits<float>::infinity();
    if (call.start && call.stop) {
      SLIMREDUCE_TRY(wait_for(call.stop->event, waits));
      SLIMREDUCE_TRY(Status::cuda(cudaEventElapsedTime(&ms, call.start->event, call.stop->event)));
    }
    values.push_back(static_cast<double>(ms) * 1e-3);
  }
  values.push_back(-resets);  // MIN of the negated counts: the ranks' largest
  Pinned* pinned = pinned_for(key, values.size());
  if (!pinned) return Status::cuda(cudaErrorMemoryAllocation);
  auto done = std::make_unique<Event>();
  SLIMREDUCE_TRY(Status::cuda(cudaEventCreateWithFlags(&done->event, cudaEventDisableTiming)));
  std::copy(values.begin(), values.end(), pinned->values);
  const std::size_t bytes = values.size() * sizeof(double);
  const double begin_us = Timeline::now_us();
  SLIMREDUCE_TRY(Status::cuda(
      cudaMemcpyAsync(device_buffer, pinned->values, bytes, cudaMemcpyHostToDevice, stream)));
  SLIMREDUCE_TRY(Status::nccl(real::call(real::api().all_reduce, device_buffer, device_buffer,
                                         values.size(), ncclFloat64, ncclMin, comm, stream)));
  SLIMREDUCE_TRY(Status::cuda(
      cudaMemcpyAsync(pinned->values, device_buffer, bytes, cudaMemcpyDeviceToHost, stream)));
  SLIMREDUCE_TRY(Status::cuda(cudaEventRecord(done->event, stream)));
  std::lock_guard lock(mutex_);
  Window& window = windows_[key];
  window.done = std::move(done);
  window.values = values.size();
  window.exchange_begin_us = begin_us;
  return {};
}

NcclAutoTiming::Pinned* NcclAutoTiming::pinned_for(const Key& key, std::size_t values) {
  std::unique_ptr<Pinned>* kept = nullptr;
  {
    std::lock_guard lock(mutex_);
    kept = &pinned_[key];  // std::map: stays valid while the key does (this thread's class)
    if (*kept && (*kept)->capacity >= values) return kept->get();
  }
  // A probe round's window is the class's largest: one allocation in practice.
  auto made = std::make_unique<Pinned>();
  const std::size_t capacity = std::max<std::size_t>(values, 64);
  if (cudaMallocHost(reinterpret_cast<void**>(&made->values), capacity * sizeof(double)) !=
      cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  made->capacity = capacity;
  std::lock_guard lock(mutex_);
  if (*kept) retired_pinned_.push_back(std::move(*kept));  // no copy of its is in flight
  *kept = std::move(made);
  return kept->get();
}

Status NcclAutoTiming::agreement(const Key& key, Agreed* agreed, std::uint64_t* waits) {
  Window window;
  const Pinned* pinned = nullptr;
  {
    std::lock_guard lock(mutex_);
    const auto found = windows_.find(key);
    if (found == windows_.end() || !found->second.done) return {};
    window = std::move(found->second);
    windows_.erase(found);  // the class's next window starts empty
    pinned = pinned_[key].get();
  }
  SLIMREDUCE_TRY(wait_for(window.done->event, waits));
  agreed->step = window.step;
  agreed->exchange_begin_us = window.exchange_begin_us;
  agreed->window.assign(pinned->values, pinned->values + window.values);
  agreed->window.back() = -agreed->window.back();
  return {};
}

void NcclAutoTiming::forget_communicator(std::uint64_t comm_id) {
  std::lock_guard lock(mutex_);
  move_communicator(windows_, comm_id, retired_);
  move_communicator(pinned_, comm_id, retired_pinned_);
  // Windows whose copies are done go now (their pinned memory stays: freeing
  // it would wait for the whole device).
  std::erase_if(retired_, [](const Window& w) { return !w.done || reached(w.done->event); });
}

}  // namespace slimreduce
