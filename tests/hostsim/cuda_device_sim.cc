// The simulated CUDA runtime's device properties and events: what
// bench/device_check.cu asks of a GPU besides memory and kernels, so that the
// checker itself (its buffers, canaries, comparisons) runs on the host
// simulation in CI. An event records when its stream reached it, on the host
// clock; the simulated "device" is the host, so the times mean nothing.
// A stream's wait for an event (cudaStreamWaitEvent) holds the stream's
// later work until the work before the event's latest record has run (with
// by default each stream on a thread of its own, as on a GPU; HOSTSIM_ASYNC=0: in place).
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

#include "tests/hostsim/sim.h"

// Where the stream got to a record of an event: set by the stream (its
// worker's thread unless HOSTSIM_ASYNC=0) once it ran the work before it;
// `at` is read only after `done` is. The stream's work holds it, not the
// event: as in CUDA, an event may be destroyed while a record of it is
// still queued (its resources go once the stream gets there).
struct Reached {
  std::atomic<bool> done{false};
  std::chrono::steady_clock::time_point at{};
};

struct CUevent_st {
  cudaStream_t stream = nullptr;
  bool recorded = false;
  // The latest record's: a wait copies it, so a later record does not change
  // what an earlier wait waits for.
  std::shared_ptr<Reached> latest;
};

namespace {
std::atomic<std::size_t> stream_waits_made{0};
}  // namespace

namespace slimreduce::hostsim {
std::size_t stream_waits() { return stream_waits_made.load(); }
}  // namespace slimreduce::hostsim

namespace sim = slimreduce::hostsim;

extern "C" {

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (!prop || device != 0) return cudaErrorInvalidValue;
  *prop = cudaDeviceProp{};
  std::strncpy(prop->name, "host simulation", sizeof prop->name - 1);
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 132;  // as an H200: the kernels' grids are sized from it
  prop->totalGlobalMem = std::size_t{1} << 34;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  if (!event) return cudaErrorInvalidValue;
  *event = std::make_unique<CUevent_st>().release();  // owned by the caller until destroy
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  std::unique_ptr<CUevent_st> owned(event);
  return event ? cudaSuccess : cudaErrorInvalidResourceHandle;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!event) return cudaErrorInvalidResourceHandle;
  event->stream = stream;
  event->recorded = true;
  auto reached = std::make_shared<Reached>();
  event->latest = reached;
  sim::enqueue(stream, [reached] {
    reached->at = std::chrono::steady_clock::now();
    reached->done.store(true, std::memory_order_release);
    reached->done.notify_all();
  });
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
  return cudaEventCreate(event);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  if (!event) return cudaErrorInvalidResourceHandle;
  ++stream_waits_made;
  if (!event->recorded) return cudaSuccess;  // as CUDA: nothing to wait for
  std::shared_ptr<Reached> reached = event->latest;
  sim::enqueue(stream, [reached] {
    // Blocks, not spins: a spinning stream thread takes the CPU from the
    // threads (of this rank and the others) that it waits for.
    reached->done.wait(false, std::memory_order_acquire);
  });
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (!event) return cudaErrorInvalidResourceHandle;
  return !event->recorded || event->latest->done.load(std::memory_order_acquire)
             ? cudaSuccess
             : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (!event) return cudaErrorInvalidResourceHandle;
  return event->recorded ? cudaStreamSynchronize(event->stream) : cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms || !start || !end) return cudaErrorInvalidResourceHandle;
  if (!start->recorded || !end->recorded) return cudaErrorInvalidResourceHandle;
  if (!start->latest->done.load(std::memory_order_acquire) ||
      !end->latest->done.load(std::memory_order_acquire))
    return cudaErrorNotReady;
  *ms = std::chrono::duration<float, std::milli>(end->latest->at - start->latest->at).count();
  return cudaSuccess;
}

}  // extern "C"
