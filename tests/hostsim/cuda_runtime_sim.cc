// A CUDA runtime that runs on the host, for the host simulation of the GPU
// path (tests/hostsim/CMakeLists.txt says what it is for and what it is not).
// It implements the runtime calls SlimReduce and its test programs make, with
// the rules that matter to them:
//  - stream work runs in order, at once; under capture it is recorded and runs
//    at each cudaGraphLaunch (so a captured plan must not depend on the host);
//  - on the capturing thread, calls that would synchronize or allocate
//    (cudaMalloc, cudaFree, cudaDeviceSynchronize, cudaMemcpy, a synchronize
//    of the capturing stream, a stream-ordered allocation on it) fail and
//    invalidate the capture, as SlimReduce promises never to make them there;
//  - device memory is tracked host memory, filled with 0xff bytes (NaN) when
//    allocated, so reads of bytes nothing wrote show in the results;
//  - errors are kept as the thread's last error, as the real runtime does.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "tests/hostsim/sim.h"
#include "tests/hostsim/stream_worker.h"

using Work = std::vector<std::function<void()>>;

struct CUstream_st {
  std::atomic<std::size_t> enqueued{0};
  bool capturing = false;
  bool invalidated = false;
  Work captured;
  // Unless HOSTSIM_ASYNC=0, the thread that runs its work (the
  // default stream always runs work at once).
  std::unique_ptr<slimreduce::hostsim::StreamWorker> worker;
};
struct CUgraph_st {
  Work work;
};
struct CUgraphExec_st {
  Work work;
};

namespace slimreduce::hostsim {
namespace {

enum class Kind { device, pinned };
struct FreeBytes {
  void operator()(std::byte* p) const { std::free(p); }
};
struct Block {
  std::unique_ptr<std::byte, FreeBytes> bytes;
  std::size_t size = 0;
  Kind kind = Kind::device;
  bool pooled = false;   // from cudaMallocAsync: cudaFree of it does not wait for the device
  bool managed = false;  // from cudaMallocManaged: device memory the host may touch too
};

struct Runtime {
  std::mutex mutex;
  std::map<std::uintptr_t, Block> blocks;  // by start address
  // Shared: a device-wide wait keeps the streams it waits for alive.
  std::map<const void*, std::shared_ptr<CUstream_st>> streams;
  std::map<const void*, std::unique_ptr<CUgraph_st>> graphs;
  std::map<const void*, std::unique_ptr<CUgraphExec_st>> execs;
  CUstream_st default_stream;
};

Runtime& runtime() {
  static Runtime* r = std::make_unique<Runtime>().release();  // outlives every static user
  return *r;
}

thread_local cudaError_t last_error = cudaSuccess;
std::atomic<std::size_t> syncs{0};                      // calls that wait for the device on a GPU
thread_local std::vector<CUstream_st*> capturing_here;  // streams this thread captures
thread_local int current_device = 0;

cudaError_t fail(cudaError_t rc) {
  if (rc != cudaSuccess) last_error = rc;
  return rc;
}

// Each stream's work on a thread of its own, as on a GPU, unless
// HOSTSIM_ASYNC=0 (at once, in the caller's thread: the extra, synchronous run).
bool async_streams() {
  static const bool on = [] {
    const char* value = std::getenv("HOSTSIM_ASYNC");
    return !(value && std::strcmp(value, "0") == 0);
  }();
  return on;
}

// Waits for the work of every stream (a device-wide wait).
void drain_all() {
  std::vector<std::shared_ptr<CUstream_st>> streams;
  {
    std::lock_guard lock(runtime().mutex);
    for (const auto& [handle, stream] : runtime().streams) streams.push_back(stream);
  }
  for (const auto& stream : streams) {
    if (stream->worker) stream->worker->drain();
  }
}

CUstream_st* stream_of(cudaStream_t s) {
  const auto raw = reinterpret_cast<std::uintptr_t>(s);
  return raw <= 2 ? &runtime().default_stream : s;  // 0, cudaStreamLegacy, cudaStreamPerThread
}

// A call that synchronizes or allocates, made on a thread that is capturing.
bool unsafe_while_capturing(const char* call) {
  if (capturing_here.empty()) return false;
  std::fprintf(stderr, "hostsim: %s during stream capture: the capture is invalidated\n", call);
  for (CUstream_st* s : capturing_here) s->invalidated = true;
  return true;
}

const Block* block_holding(std::uintptr_t p) {
  auto& blocks = runtime().blocks;
  auto it = blocks.upper_bound(p);
  if (it == blocks.begin()) return nullptr;
  --it;
  return p < it->first + it->second.size ? &it->second : nullptr;
}

cudaError_t allocate(void** ptr, std::size_t bytes, Kind kind, bool pooled = false) {
  if (!ptr) return fail(cudaErrorInvalidValue);
  *ptr = nullptr;
  if (bytes == 0) return cudaSuccess;
  const std::size_t rounded = (bytes + 255) / 256 * 256;
  Block block{std::unique_ptr<std::byte, FreeBytes>(
                  static_cast<std::byte*>(std::aligned_alloc(256, rounded))),
              bytes, kind, pooled};
  if (!block.bytes) return fail(cudaErrorMemoryAllocation);
  std::memset(block.bytes.get(), 0xff, rounded);
  *ptr = block.bytes.get();
  std::lock_guard lock(runtime().mutex);
  runtime().blocks.emplace(reinterpret_cast<std::uintptr_t>(*ptr), std::move(block));
  return cudaSuccess;
}

cudaError_t release(void* ptr, Kind kind) {
  if (!ptr) return cudaSuccess;
  std::lock_guard lock(runtime().mutex);
  auto it = runtime().blocks.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == runtime().blocks.end() || it->second.kind != kind) return fail(cudaErrorInvalidValue);
  runtime().blocks.erase(it);
  return cudaSuccess;
}

bool pooled(const void* ptr) {
  std::lock_guard lock(runtime().mutex);
  auto it = runtime().blocks.find(reinterpret_cast<std::uintptr_t>(ptr));
  return it != runtime().blocks.end() && it->second.pooled;
}

// Device or pinned memory of ours (the rest is pageable host memory).
bool is_registered(const void* ptr) {
  std::lock_guard lock(runtime().mutex);
  return block_holding(reinterpret_cast<std::uintptr_t>(ptr)) != nullptr;
}

}  // namespace

void enqueue(cudaStream_t stream, std::function<void()> work) {
  CUstream_st* s = stream_of(stream);
  ++s->enqueued;
  if (s->capturing) {
    s->captured.push_back(std::move(work));
  } else if (s->worker) {
    s->worker->push(std::move(work));
  } else {
    work();
  }
}

std::size_t work_enqueued(cudaStream_t stream) { return stream_of(stream)->enqueued; }
std::size_t host_syncs() { return syncs; }

bool is_managed(const void* ptr) {
  std::lock_guard lock(runtime().mutex);
  const Block* b = block_holding(reinterpret_cast<std::uintptr_t>(ptr));
  return b && b->managed;
}

bool is_device_range(const void* ptr, std::size_t bytes) {
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  std::lock_guard lock(runtime().mutex);
  const Block* b = block_holding(p);
  if (!b || b->kind != Kind::device) return false;
  const auto start = reinterpret_cast<std::uintptr_t>(b->bytes.get());
  return p + bytes <= start + b->size;
}

std::size_t device_bytes_live() {
  std::lock_guard lock(runtime().mutex);
  std::size_t bytes = 0;
  for (const auto& [start, block] : runtime().blocks)
    bytes += block.kind == Kind::device ? block.size : 0;
  return bytes;
}

std::size_t device_bytes_live_settled() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::size_t live = device_bytes_live();
  while (live != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    live = device_bytes_live();
  }
  return live;
}

void require_device(const char* what, const void* ptr, std::size_t bytes) {
  if (bytes == 0 || is_device_range(ptr, bytes)) return;
  std::fprintf(stderr, "hostsim: %s: [%p, +%zu) is not device memory (a GPU would fault)\n", what,
               ptr, bytes);
  std::abort();
}

}  // namespace slimreduce::hostsim

namespace sim = slimreduce::hostsim;

extern "C" {

cudaError_t cudaGetLastError() { return std::exchange(sim::last_error, cudaSuccess); }
cudaError_t cudaPeekAtLastError() { return sim::last_error; }
const char* cudaGetErrorName(cudaError_t rc) {
  switch (rc) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorStreamCaptureUnsupported:
      return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated:
      return "cudaErrorStreamCaptureInvalidated";
    default:
      return "cudaError (host simulation)";
  }
}
const char* cudaGetErrorString(cudaError_t rc) { return cudaGetErrorName(rc); }

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = sim::current_device;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  if (device != 0) return sim::fail(cudaErrorInvalidDevice);
  sim::current_device = device;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (device != 0) return sim::fail(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrMultiProcessorCount:
      *value = 132;
      break;
    case cudaDevAttrMaxPitch:
      *value = 2147483647;
      break;
    default:
      *value = 1;  // memory pools and the rest: supported
  }
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() {
  ++sim::syncs;
  if (sim::unsafe_while_capturing("cudaDeviceSynchronize"))
    return sim::fail(cudaErrorStreamCaptureUnsupported);
  sim::drain_all();
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  if (sim::unsafe_while_capturing("cudaMalloc"))
    return sim::fail(cudaErrorStreamCaptureUnsupported);
  return sim::allocate(ptr, bytes, sim::Kind::device);
}
// Managed memory: device memory that host code may touch as well (here all
// device memory is host memory; what differs is what the pointer reports).
cudaError_t cudaMallocManaged(void** ptr, size_t bytes, unsigned int) {
  if (sim::unsafe_while_capturing("cudaMallocManaged"))
    return sim::fail(cudaErrorStreamCaptureUnsupported);
  const cudaError_t rc = sim::allocate(ptr, bytes, sim::Kind::device);
  if (rc == cudaSuccess && *ptr) {
    std::lock_guard lock(sim::runtime().mutex);
    sim::runtime().blocks.at(reinterpret_cast<std::uintptr_t>(*ptr)).managed = true;
  }
  return rc;
}
cudaError_t cudaMallocAsync(void** ptr, size_t bytes, cudaStream_t stream) {
  if (sim::stream_of(stream)->capturing) {
    std::fprintf(stderr, "hostsim: cudaMallocAsync on a capturing stream\n");
    sim::stream_of(stream)->invalidated = true;
    return sim::fail(cudaErrorStreamCaptureUnsupported);
  }
  return sim::allocate(ptr, bytes, sim::Kind::device, true);
}
// cudaFree waits for the device, but not for work that uses memory of the
// stream-ordered allocator (cudaMallocAsync): whoever frees that waits first.
cudaError_t cudaFree(void* ptr) {
  ++sim::syncs;
  if (sim::unsafe_while_capturing("cudaFree")) return sim::fail(cudaErrorStreamCaptureUnsupported);
  if (!sim::pooled(ptr)) sim::drain_all();
  return sim::release(ptr, sim::Kind::device);
}
cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
  if (sim::stream_of(stream)->capturing) {
    std::fprintf(stderr, "hostsim: cudaFreeAsync on a capturing stream\n");
    sim::stream_of(stream)->invalidated = true;
    return sim::fail(cudaErrorStreamCaptureUnsupported);
  }
  if (!sim::stream_of(stream)->worker) return sim::release(ptr, sim::Kind::device);
  sim::enqueue(stream, [ptr] {  // stream-ordered: once the work before it has run
    if (sim::release(ptr, sim::Kind::device) != cudaSuccess) {
      std::fprintf(stderr, "hostsim: cudaFreeAsync of %p, which is not device memory\n", ptr);
      std::abort();
    }
  });
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
  ++sim::syncs;
  return sim::allocate(ptr, bytes, sim::Kind::pinned);
}
cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned int) {
  ++sim::syncs;
  return sim::allocate(ptr, bytes, sim::Kind::pinned);
}
cudaError_t cudaFreeHost(void* ptr) {
  ++sim::syncs;
  sim::drain_all();
  return sim::release(ptr, sim::Kind::pinned);
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr) {
  *attributes = {};
  attributes->type = cudaMemoryTypeUnregistered;
  attributes->device = -2;
  std::lock_guard lock(sim::runtime().mutex);
  if (const sim::Block* b = sim::block_holding(reinterpret_cast<std::uintptr_t>(ptr))) {
    const bool device = b->kind == sim::Kind::device;
    attributes->type = b->managed ? cudaMemoryTypeManaged
                       : device   ? cudaMemoryTypeDevice
                                  : cudaMemoryTypeHost;
    attributes->device = 0;
    attributes->devicePointer = const_cast<void*>(ptr);
    attributes->hostPointer = device && !b->managed ? nullptr : const_cast<void*>(ptr);
  }
  return cudaSuccess;
}

// As CUDA does with pageable (not registered) host memory: a copy from it is
// staged at the call, and a copy into it returns once it has completed.
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind,
                            cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;  // an empty vector's data() may be null
  CUstream_st* s = sim::stream_of(stream);
  if (!s->capturing && !sim::is_registered(dst)) {
    if (s->worker) s->worker->drain();
    std::memmove(dst, src, bytes);
    return cudaSuccess;
  }
  if (!s->capturing && !sim::is_registered(src)) {
    auto staged = std::make_shared<std::vector<std::byte>>(
        static_cast<const std::byte*>(src), static_cast<const std::byte*>(src) + bytes);
    sim::enqueue(stream, [=] { std::memmove(dst, staged->data(), bytes); });
    return cudaSuccess;
  }
  sim::enqueue(stream, [=] { std::memmove(dst, src, bytes); });
  return cudaSuccess;
}
// Rows of `width` bytes, `height` of them, at their pitches (each >= width).
cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch,
                              size_t width, size_t height, cudaMemcpyKind, cudaStream_t stream) {
  if (width > dpitch || width > spitch) return sim::fail(cudaErrorInvalidPitchValue);
  sim::enqueue(stream, [=] {
    for (size_t row = 0; row < height; ++row) {
      std::memmove(static_cast<std::byte*>(dst) + row * dpitch,
                   static_cast<const std::byte*>(src) + row * spitch, width);
    }
  });
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  ++sim::syncs;
  if (sim::unsafe_while_capturing("cudaMemcpy"))
    return sim::fail(cudaErrorStreamCaptureUnsupported);
  sim::drain_all();  // more than the legacy stream waits for: enough for these tests
  return cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
}
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  sim::require_device("cudaMemsetAsync", ptr, bytes);
  sim::enqueue(stream, [=] { std::memset(ptr, value, bytes); });
  return cudaSuccess;
}
cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
  ++sim::syncs;
  if (sim::unsafe_while_capturing("cudaMemset"))
    return sim::fail(cudaErrorStreamCaptureUnsupported);
  sim::drain_all();
  return cudaMemsetAsync(ptr, value, bytes, nullptr);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  auto s = std::make_shared<CUstream_st>();
  if (sim::async_streams()) s->worker = std::make_unique<sim::StreamWorker>();
  *stream = s.get();
  std::lock_guard lock(sim::runtime().mutex);
  sim::runtime().streams.emplace(s.get(), std::move(s));
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, 0); }
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  std::shared_ptr<CUstream_st> gone;  // its worker runs what is queued, then stops
  {
    std::lock_guard lock(sim::runtime().mutex);
    auto it = sim::runtime().streams.find(stream);
    if (it == sim::runtime().streams.end()) return sim::fail(cudaErrorInvalidValue);
    gone = std::move(it->second);
    sim::runtime().streams.erase(it);
  }
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  ++sim::syncs;
  if (sim::stream_of(stream)->capturing) {
    std::fprintf(stderr, "hostsim: cudaStreamSynchronize on a capturing stream\n");
    sim::stream_of(stream)->invalidated = true;
    return sim::fail(cudaErrorStreamCaptureUnsupported);
  }
  if (CUstream_st* s = sim::stream_of(stream); s->worker) s->worker->drain();
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  CUstream_st* s = sim::stream_of(stream);
  if (s == &sim::runtime().default_stream || s->capturing) return sim::fail(cudaErrorIllegalState);
  s->invalidated = false;
  s->captured.clear();
  s->capturing = true;
  sim::capturing_here.push_back(s);
  return cudaSuccess;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  const CUstream_st* s = sim::stream_of(stream);
  *status = !s->capturing    ? cudaStreamCaptureStatusNone
            : s->invalidated ? cudaStreamCaptureStatusInvalidated
                             : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  CUstream_st* s = sim::stream_of(stream);
  if (!s->capturing) return sim::fail(cudaErrorIllegalState);
  std::erase(sim::capturing_here, s);
  s->capturing = false;
  *graph = nullptr;
  if (std::exchange(s->invalidated, false)) return sim::fail(cudaErrorStreamCaptureInvalidated);
  auto g = std::make_unique<CUgraph_st>();
  g->work = std::move(s->captured);
  *graph = g.get();
  std::lock_guard lock(sim::runtime().mutex);
  sim::runtime().graphs.emplace(g.get(), std::move(g));
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  std::lock_guard lock(sim::runtime().mutex);
  if (!sim::runtime().graphs.count(graph)) return sim::fail(cudaErrorInvalidValue);
  auto e = std::make_unique<CUgraphExec_st>();
  e->work = graph->work;
  *exec = e.get();
  sim::runtime().execs.emplace(e.get(), std::move(e));
  return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  Work work;
  {
    std::lock_guard lock(sim::runtime().mutex);
    if (!sim::runtime().execs.count(exec)) return sim::fail(cudaErrorInvalidValue);
    work = exec->work;
  }
  for (auto& step : work) sim::enqueue(stream, step);
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  std::lock_guard lock(sim::runtime().mutex);
  return sim::runtime().graphs.erase(graph) ? cudaSuccess : sim::fail(cudaErrorInvalidValue);
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  std::lock_guard lock(sim::runtime().mutex);
  return sim::runtime().execs.erase(exec) ? cudaSuccess : sim::fail(cudaErrorInvalidValue);
}

}  // extern "C"
