// A CUDA runtime that runs on the host, for the host simulation of the GPU
// path (tests/hostsim/CMakeLists.txt says what it is for and what it is not).
// It implements the runtime calls SlimReduce and its test programs make, with
// the rules that matter to them:
//  - stream work runs in order, each stream on a thread of its own (at once
//    with HOSTSIM_ASYNC=0); under capture it is recorded and runs at each
//    cudaGraphLaunch (so a captured plan must not depend on the host);
//  - the legacy default stream (0, cudaStreamLegacy) is a stream too, and
//    synchronizes implicitly as on a GPU: its work starts after the work
//    already queued on every blocking stream (made without
//    cudaStreamNonBlocking), and their later work starts after it;
//    non-blocking streams are not held. Each of its pieces of work starts
//    HOSTSIM_LEGACY_LAG_US (default 2000) late, so that a stream that should
//    have waited for it and did not reads what was there before;
//  - cudaMemcpy and cudaMemset are calls on the legacy stream, and wait for
//    it only where CUDA's synchronization rules say: a copy from pageable
//    memory to the device may return before it lands, one device to device
//    and a memset of device memory return at once;
//  - on the capturing thread, calls that would synchronize or allocate
//    (cudaMalloc, cudaFree, cudaDeviceSynchronize, cudaMemcpy, a synchronize
//    of the capturing stream, a stream-ordered allocation on it) fail and
//    invalidate the capture, as SlimReduce promises never to make them there;
//  - device memory is filled with 0xff bytes (NaN) when allocated, so reads
//    of bytes nothing wrote show in the results; the host cannot touch it (its
//    address faults, as on a GPU): the simulated device reaches its bytes
//    through a second mapping (device_view, sim.h);
//  - errors are kept as the thread's last error, as the real runtime does.
#include <cuda_runtime_api.h>
#include <sys/mman.h>
#include <unistd.h>

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
  bool blocking = true;  // made without cudaStreamNonBlocking: joins the legacy stream's work
  bool capturing = false;
  bool invalidated = false;
  Work captured;
  // Unless HOSTSIM_ASYNC=0, the thread that runs its work.
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

// One mmap'd range, unmapped when it goes.
struct Region {
  std::byte* at = nullptr;
  std::size_t length = 0;
  Region() = default;
  Region(std::byte* start, std::size_t bytes) : at(start), length(bytes) {}
  Region(Region&& other) noexcept
      : at(std::exchange(other.at, nullptr)), length(std::exchange(other.length, 0)) {}
  Region& operator=(Region&&) = delete;
  ~Region() {
    if (at) munmap(at, length);
  }
};

Region map_region(std::size_t length, int protection) {
  void* at = mmap(nullptr, length, protection, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return at == MAP_FAILED ? Region{} : Region{static_cast<std::byte*>(at), length};
}

// A block's bytes. Device memory (not managed) is two ranges: the address the
// program holds is a reservation with no access, so host code that touches
// device memory faults as it would on a GPU; the bytes live in a second
// mapping that only the simulated device (kernels, copies, collectives)
// reaches, through device_view. Each range ends one page past the block, the
// block's 256-byte rounded end against it, so a kernel that runs past its
// buffer faults too. Pinned and managed memory is one range anyone may touch.
struct Block {
  Region program;          // the program's addresses
  Region device;           // device memory only: where its bytes are
  std::size_t offset = 0;  // of the block in each range
  std::size_t size = 0;
  Kind kind = Kind::device;
  bool pooled = false;   // from cudaMallocAsync: cudaFree of it does not wait for the device
  bool managed = false;  // from cudaMallocManaged: device memory the host may touch too
  std::byte* start() const { return program.at + offset; }
  std::byte* bytes() const { return (device.at ? device.at : program.at) + offset; }
};

struct Runtime {
  std::mutex mutex;
  std::map<std::uintptr_t, Block> blocks;  // by start address
  // Shared: a device-wide wait keeps the streams it waits for alive.
  std::map<const void*, std::shared_ptr<CUstream_st>> streams;
  std::map<const void*, std::unique_ptr<CUgraph_st>> graphs;
  std::map<const void*, std::unique_ptr<CUgraphExec_st>> execs;
  CUstream_st default_stream;  // the legacy default stream
  // Held while work is put on the legacy stream or a blocking one, so that
  // each blocking stream sees the legacy stream's joins in one order.
  std::mutex legacy_mutex;
  // Set once the legacy stream's latest work has run: a blocking stream made
  // later starts after it.
  std::shared_ptr<Signal> legacy_done;
};

// Each stream's work on a thread of its own, as on a GPU, unless
// HOSTSIM_ASYNC=0 (at once, in the caller's thread: the extra, synchronous run).
bool async_streams() {
  static const bool on = [] {
    const char* value = std::getenv("HOSTSIM_ASYNC");
    return !(value && std::strcmp(value, "0") == 0);
  }();
  return on;
}

Runtime& runtime() {
  static Runtime* r = [] {  // outlives every static user
    auto made = std::make_unique<Runtime>();
    if (async_streams()) made->default_stream.worker = std::make_unique<StreamWorker>();
    return made.release();
  }();
  return *r;
}

// How late each piece of the legacy stream's work starts.
std::chrono::microseconds legacy_lag() {
  static const std::chrono::microseconds lag{[] {
    const char* value = std::getenv("HOSTSIM_LEGACY_LAG_US");
    return value ? std::strtol(value, nullptr, 10) : 2000L;
  }()};
  return lag;
}

thread_local cudaError_t last_error = cudaSuccess;
std::atomic<std::size_t> syncs{0};                      // calls that wait for the device on a GPU
thread_local std::vector<CUstream_st*> capturing_here;  // streams this thread captures
thread_local int current_device = 0;

cudaError_t fail(cudaError_t rc) {
  if (rc != cudaSuccess) last_error = rc;
  return rc;
}

// Waits for the work of every stream (a device-wide wait).
void drain_all() {
  std::vector<std::shared_ptr<CUstream_st>> streams;
  {
    std::lock_guard lock(runtime().mutex);
    for (const auto& [handle, stream] : runtime().streams) streams.push_back(stream);
  }
  if (runtime().default_stream.worker) runtime().default_stream.worker->drain();
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

std::size_t page_bytes() {
  static const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// `length` bytes (whole pages) with `protection`, then a page with no access.
Region map_with_guard(std::size_t length, int protection) {
  Region region = map_region(length + page_bytes(), PROT_NONE);
  if (region.at && protection != PROT_NONE && mprotect(region.at, length, protection) != 0)
    return {};
  return region;
}

cudaError_t allocate(void** ptr, std::size_t bytes, Kind kind, bool pooled = false,
                     bool managed = false) {
  if (!ptr) return fail(cudaErrorInvalidValue);
  *ptr = nullptr;
  if (bytes == 0) return cudaSuccess;
  const std::size_t rounded = (bytes + 255) / 256 * 256;
  const std::size_t page = page_bytes();
  const std::size_t length = (rounded + page - 1) / page * page;
  const bool split = kind == Kind::device && !managed;
  Block block{map_with_guard(length, split ? PROT_NONE : PROT_READ | PROT_WRITE),
              split ? map_with_guard(length, PROT_READ | PROT_WRITE) : Region{},
              length - rounded,
              bytes,
              kind,
              pooled,
              managed};
  if (!block.program.at || (split && !block.device.at)) return fail(cudaErrorMemoryAllocation);
  std::memset(block.bytes(), 0xff, rounded);
  *ptr = block.start();
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

// The blocking streams that run work now (not capturing). A blocking stream
// under capture would be joined to the legacy stream: CUDA refuses that
// (cudaErrorStreamCaptureImplicit) and invalidates the capture, as here.
std::vector<std::shared_ptr<CUstream_st>> blocking_streams_joined() {
  std::vector<std::shared_ptr<CUstream_st>> joined;
  std::lock_guard lock(runtime().mutex);
  for (const auto& [handle, stream] : runtime().streams) {
    if (!stream->blocking) continue;
    if (stream->capturing) {
      std::fprintf(stderr,
                   "hostsim: legacy stream work beside a capturing blocking stream: the capture "
                   "is invalidated\n");
      stream->invalidated = true;
    } else if (stream->worker) {
      joined.push_back(stream);
    }
  }
  return joined;
}

// Work on the legacy stream (caller holds legacy_mutex): after every blocking
// stream's work so far, and before their work from now on.
void enqueue_legacy(std::function<void()> work) {
  std::vector<std::shared_ptr<CUstream_st>> joined = blocking_streams_joined();
  std::vector<std::shared_ptr<Signal>> reached;
  for (const auto& stream : joined) {
    auto signal = std::make_shared<Signal>();
    stream->worker->push([signal] { signal->set(); });
    reached.push_back(std::move(signal));
  }
  auto done = std::make_shared<Signal>();
  runtime().default_stream.worker->push([reached, work = std::move(work), done] {
    std::this_thread::sleep_for(legacy_lag());
    for (const auto& signal : reached) signal->wait();
    work();
    done->set();
  });
  for (const auto& stream : joined) stream->worker->push([done] { done->wait(); });
  runtime().legacy_done = done;
}

// Waits until the legacy stream's work so far has run (and with it the work
// queued before it on the blocking streams).
void drain_legacy() {
  CUstream_st& legacy = runtime().default_stream;
  if (!legacy.worker) return;
  {
    std::lock_guard lock(runtime().legacy_mutex);
    enqueue_legacy([] {});
  }
  legacy.worker->drain();
}

}  // namespace

void enqueue(cudaStream_t stream, std::function<void()> work) {
  CUstream_st* s = stream_of(stream);
  ++s->enqueued;
  if (s->capturing) {
    s->captured.push_back(std::move(work));
  } else if (!s->worker) {
    work();
  } else if (s == &runtime().default_stream) {
    std::lock_guard lock(runtime().legacy_mutex);
    enqueue_legacy(std::move(work));
  } else if (s->blocking) {
    std::lock_guard lock(runtime().legacy_mutex);
    s->worker->push(std::move(work));
  } else {
    s->worker->push(std::move(work));
  }
}

namespace {

std::chrono::microseconds kernel_compute() {
  static const auto compute = std::chrono::microseconds(std::atoll([] {
    const char* value = std::getenv("HOSTSIM_KERNEL_US");
    return value ? value : "0";
  }()));
  return compute;
}

}  // namespace

void launch_kernel(cudaStream_t stream, std::function<void()> work) {
  const auto compute = kernel_compute();
  if (compute.count() <= 0) return enqueue(stream, std::move(work));
  enqueue(stream, [compute, work = std::move(work)] {
    std::this_thread::sleep_for(compute);
    work();
  });
}

void enqueue_joined(const std::vector<cudaStream_t>& streams, std::function<void()> work) {
  bool each_on_a_thread = streams.size() > 1;
  for (cudaStream_t stream : streams) {
    const CUstream_st* s = stream_of(stream);
    // The legacy stream's own joins would wait on these (a cycle): a group
    // on it runs there alone, the blocking streams joined to it anyway.
    each_on_a_thread =
        each_on_a_thread && s->worker && !s->capturing && s != &runtime().default_stream;
  }
  if (!each_on_a_thread) return enqueue(streams.front(), std::move(work));
  auto done = std::make_shared<Signal>();
  std::vector<std::shared_ptr<Signal>> reached;
  // All pushed under the legacy lock: legacy work put on from another thread
  // comes before the whole join on every stream or after it, never between
  // (where its wait on one stream and the join's on another would meet).
  std::lock_guard lock(runtime().legacy_mutex);
  auto push = [](cudaStream_t stream, std::function<void()> piece) {
    CUstream_st* s = stream_of(stream);
    ++s->enqueued;
    s->worker->push(std::move(piece));
  };
  for (std::size_t i = 1; i < streams.size(); ++i) {
    auto signal = reached.emplace_back(std::make_shared<Signal>());
    push(streams[i], [signal, done] {
      signal->set();
      done->wait();
    });
  }
  push(streams.front(), [reached, work = std::move(work), done] {
    for (const auto& signal : reached) signal->wait();
    work();
    done->set();
  });
}

std::size_t work_enqueued(cudaStream_t stream) { return stream_of(stream)->enqueued; }
std::size_t host_syncs() { return syncs; }

bool is_managed(const void* ptr) {
  std::lock_guard lock(runtime().mutex);
  const Block* b = block_holding(reinterpret_cast<std::uintptr_t>(ptr));
  return b && b->managed;
}

namespace {

// Whether [p, p + bytes) lies in device memory block b (nullptr: none).
bool in_device_block(const Block* b, std::uintptr_t p, std::size_t bytes) {
  return b && b->kind == Kind::device &&
         p + bytes <= reinterpret_cast<std::uintptr_t>(b->start()) + b->size;
}

// Where the device reaches p, an address in block b (nullptr: none: p itself).
void* view_in(const Block* b, std::uintptr_t p) {
  if (!b) return reinterpret_cast<void*>(p);
  return b->bytes() + (p - reinterpret_cast<std::uintptr_t>(b->start()));
}

[[noreturn]] void not_device(const char* what, const void* ptr, std::size_t bytes) {
  std::fprintf(stderr, "hostsim: %s: [%p, +%zu) is not device memory (a GPU would fault)\n", what,
               ptr, bytes);
  std::abort();
}

}  // namespace

bool is_device_range(const void* ptr, std::size_t bytes) {
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  std::lock_guard lock(runtime().mutex);
  return in_device_block(block_holding(p), p, bytes);
}

void* device_view(const void* ptr) {
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  std::lock_guard lock(runtime().mutex);
  return view_in(block_holding(p), p);
}

// require_device and device_view in one lookup: every kernel's every buffer.
void* on_device(const char* what, const void* ptr, std::size_t bytes) {
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  {
    std::lock_guard lock(runtime().mutex);
    const Block* b = block_holding(p);
    if (bytes == 0 || in_device_block(b, p, bytes)) return view_in(b, p);
  }
  not_device(what, ptr, bytes);
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
  if (bytes != 0 && !is_device_range(ptr, bytes)) not_device(what, ptr, bytes);
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
// Managed memory: device memory that host code may touch as well.
cudaError_t cudaMallocManaged(void** ptr, size_t bytes, unsigned int) {
  if (sim::unsafe_while_capturing("cudaMallocManaged"))
    return sim::fail(cudaErrorStreamCaptureUnsupported);
  return sim::allocate(ptr, bytes, sim::Kind::device, false, true);
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
    sim::enqueue(stream,
                 [=] { std::memmove(sim::device_view(dst), sim::device_view(src), bytes); });
    if (s->worker) s->worker->drain();
    return cudaSuccess;
  }
  if (!s->capturing && !sim::is_registered(src)) {
    auto staged = std::make_shared<std::vector<std::byte>>(
        static_cast<const std::byte*>(src), static_cast<const std::byte*>(src) + bytes);
    sim::enqueue(stream, [=] { std::memmove(sim::device_view(dst), staged->data(), bytes); });
    return cudaSuccess;
  }
  sim::enqueue(stream, [=] { std::memmove(sim::device_view(dst), sim::device_view(src), bytes); });
  return cudaSuccess;
}
// Rows of `width` bytes, `height` of them, at their pitches (each >= width).
cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch,
                              size_t width, size_t height, cudaMemcpyKind, cudaStream_t stream) {
  if (width > dpitch || width > spitch) return sim::fail(cudaErrorInvalidPitchValue);
  sim::enqueue(stream, [=] {
    for (size_t row = 0; row < height; ++row) {
      std::memmove(sim::device_view(static_cast<std::byte*>(dst) + row * dpitch),
                   sim::device_view(static_cast<const std::byte*>(src) + row * spitch), width);
    }
  });
  return cudaSuccess;
}
// A copy on the legacy stream, which returns as CUDA's "API synchronization
// behavior" says: into host memory once it has landed; from pageable memory
// to the device once the source is staged (after a wait for the legacy
// stream), maybe before it lands; from pinned memory once it has landed;
// device to device at once.
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  ++sim::syncs;
  if (sim::unsafe_while_capturing("cudaMemcpy"))
    return sim::fail(cudaErrorStreamCaptureUnsupported);
  if (bytes == 0) return cudaSuccess;
  const bool to_device = sim::is_device_range(dst, bytes);
  const bool from_device = sim::is_device_range(src, bytes);
  const bool from_pageable = !sim::is_registered(src);
  if (to_device && from_pageable) sim::drain_legacy();
  const cudaError_t rc = cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
  if (!to_device || (!from_device && !from_pageable)) sim::drain_legacy();
  return rc;
}
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  sim::require_device("cudaMemsetAsync", ptr, bytes);
  sim::enqueue(stream, [=] { std::memset(sim::device_view(ptr), value, bytes); });
  return cudaSuccess;
}
// On the legacy stream; it returns at once (device memory is all it sets here).
cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
  ++sim::syncs;
  if (sim::unsafe_while_capturing("cudaMemset"))
    return sim::fail(cudaErrorStreamCaptureUnsupported);
  return cudaMemsetAsync(ptr, value, bytes, nullptr);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  if (!stream || (flags & ~cudaStreamNonBlocking) != 0) return sim::fail(cudaErrorInvalidValue);
  auto s = std::make_shared<CUstream_st>();
  s->blocking = (flags & cudaStreamNonBlocking) == 0;
  if (sim::async_streams()) s->worker = std::make_unique<sim::StreamWorker>();
  *stream = s.get();
  std::lock_guard legacy_lock(sim::runtime().legacy_mutex);
  // A blocking stream starts after the legacy stream's work so far.
  if (s->blocking && s->worker && sim::runtime().legacy_done) {
    s->worker->push([done = sim::runtime().legacy_done] { done->wait(); });
  }
  std::lock_guard lock(sim::runtime().mutex);
  sim::runtime().streams.emplace(s.get(), std::move(s));
  return cudaSuccess;
}
cudaError_t cudaStreamGetFlags(cudaStream_t stream, unsigned int* flags) {
  if (!flags) return sim::fail(cudaErrorInvalidValue);
  *flags = sim::stream_of(stream)->blocking ? cudaStreamDefault : cudaStreamNonBlocking;
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
  CUstream_st* s = sim::stream_of(stream);
  if (s == &sim::runtime().default_stream) {
    sim::drain_legacy();  // and with it the blocking streams' work before it
  } else if (s->worker) {
    s->worker->drain();
  }
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
