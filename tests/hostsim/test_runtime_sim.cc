// The simulated CUDA runtime's stream rules (cuda_runtime_sim.cc), which the
// host simulation's tests of SlimReduce lean on: the legacy default stream's
// implicit synchronization with blocking streams and not with non-blocking
// ones, the legacy calls' return points (cudaMemcpy, cudaMemset), and device
// memory that host code cannot touch. The
// stream work here waits on gates the test opens, so an order is checked,
// not a timing: "has not run" is read after a pause in which a missing wait
// would let it run (longer than the legacy stream's lag, 50 ms for these
// tests: long enough that a stream that does not wait reads before it lands).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "tests/hostsim/sim.h"
#include "tests/hostsim/stream_worker.h"

namespace sim = slimreduce::hostsim;

namespace {

constexpr auto kPause = std::chrono::milliseconds(300);  // past the lag (50 ms here)
constexpr auto kDeadlock = std::chrono::seconds(10);
const cudaStream_t kLegacy = cudaStreamLegacy;

// What the streams ran, in the order they ran it.
class Log {
 public:
  void add(const std::string& what) {
    std::lock_guard lock(mutex_);
    entries_.push_back(what);
  }
  std::vector<std::string> entries() {
    std::lock_guard lock(mutex_);
    return entries_;
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> entries_;
};

using Entries = std::vector<std::string>;

cudaStream_t make_stream(unsigned flags) {
  cudaStream_t stream = nullptr;
  EXPECT_EQ(cudaStreamCreateWithFlags(&stream, flags), cudaSuccess);
  return stream;
}

// Work on `stream` that runs once `gate` opens, then logs `what`.
void gated(cudaStream_t stream, const std::shared_ptr<sim::Signal>& gate, Log& log,
           const std::string& what) {
  sim::enqueue(stream, [gate, &log, what] {
    gate->wait();
    log.add(what);
  });
}

void logged(cudaStream_t stream, Log& log, const std::string& what) {
  sim::enqueue(stream, [&log, what] { log.add(what); });
}

// Runs `call` on a thread of its own; false if it has not returned in
// kDeadlock. The thread is left to finish (the test opens its gates later),
// so a call that waits where it should not fails the test, not hangs it.
template <class Call>
bool returns(Call call) {
  auto returned = std::make_shared<std::promise<void>>();
  std::future<void> done = returned->get_future();
  std::thread([call, returned] {
    call();
    returned->set_value();
  }).detach();
  return done.wait_for(kDeadlock) == std::future_status::ready;
}

TEST(LegacyStream, StartsAfterTheBlockingStreamsWorkSoFar) {
  cudaStream_t blocking = make_stream(cudaStreamDefault);
  auto gate = std::make_shared<sim::Signal>();
  Log log;
  gated(blocking, gate, log, "blocking");
  logged(kLegacy, log, "legacy");
  std::this_thread::sleep_for(kPause);
  EXPECT_EQ(log.entries(), Entries{}) << "the legacy stream ran before the blocking stream's work";
  gate->set();
  ASSERT_EQ(cudaStreamSynchronize(kLegacy), cudaSuccess);
  EXPECT_EQ(log.entries(), (Entries{"blocking", "legacy"}));
  ASSERT_EQ(cudaStreamDestroy(blocking), cudaSuccess);
}

TEST(LegacyStream, HoldsTheBlockingStreamsLaterWork) {
  cudaStream_t blocking = make_stream(cudaStreamDefault);
  auto gate = std::make_shared<sim::Signal>();
  Log log;
  gated(kLegacy, gate, log, "legacy");
  logged(blocking, log, "blocking");
  // A blocking stream made now waits for it too.
  cudaStream_t later = make_stream(cudaStreamDefault);
  logged(later, log, "made later");
  std::this_thread::sleep_for(kPause);
  EXPECT_EQ(log.entries(), Entries{}) << "a blocking stream ran ahead of the legacy stream";
  gate->set();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const Entries got = log.entries();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], "legacy");
  ASSERT_EQ(cudaStreamDestroy(blocking), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(later), cudaSuccess);
}

TEST(LegacyStream, NeitherWaitsForNorHoldsANonBlockingStream) {
  cudaStream_t free_running = make_stream(cudaStreamNonBlocking);
  unsigned flags = 0;
  ASSERT_EQ(cudaStreamGetFlags(free_running, &flags), cudaSuccess);
  EXPECT_EQ(flags, unsigned{cudaStreamNonBlocking});
  auto before = std::make_shared<sim::Signal>();
  Log log;
  gated(free_running, before, log, "non-blocking, queued before");
  logged(kLegacy, log, "legacy");
  // Held, the legacy stream would wait for the gate this thread never opens.
  EXPECT_TRUE(returns([] { return cudaStreamSynchronize(kLegacy); }))
      << "the legacy stream waited for a non-blocking stream";
  auto after = std::make_shared<sim::Signal>();
  gated(kLegacy, after, log, "legacy, gated");
  logged(free_running, log, "non-blocking, queued after");
  before->set();
  EXPECT_TRUE(returns([free_running] { return cudaStreamSynchronize(free_running); }))
      << "a non-blocking stream waited for the legacy stream";
  EXPECT_EQ(log.entries(),
            (Entries{"legacy", "non-blocking, queued before", "non-blocking, queued after"}))
      << "a non-blocking stream waited for the legacy stream";
  after->set();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(free_running), cudaSuccess);
}

TEST(StreamFlags, UnknownFlagsAreRefused) {
  cudaStream_t stream = nullptr;
  EXPECT_EQ(cudaStreamCreateWithFlags(&stream, 0x40), cudaErrorInvalidValue);
  cudaGetLastError();
  stream = make_stream(cudaStreamDefault);
  unsigned flags = 99;
  ASSERT_EQ(cudaStreamGetFlags(stream, &flags), cudaSuccess);
  EXPECT_EQ(flags, unsigned{cudaStreamDefault});
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

// A pageable copy to the device returns once its source is staged: it lands
// later, on the legacy stream, with what the source held at the call.
TEST(LegacyCalls, APageableCopyToTheDeviceMayReturnBeforeItLands) {
  constexpr std::size_t kCount = 256;
  float* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, kCount * 4), cudaSuccess);
  std::vector<float> source(kCount, 3.0f);
  float* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, kCount * 4), cudaSuccess);
  cudaStream_t free_running = make_stream(cudaStreamNonBlocking);
  ASSERT_EQ(cudaMemcpy(device, source.data(), kCount * 4, cudaMemcpyHostToDevice), cudaSuccess);
  source.assign(kCount, 5.0f);
  // A stream that does not wait for the legacy one reads what was there before.
  ASSERT_EQ(cudaMemcpyAsync(pinned, device, kCount * 4, cudaMemcpyDeviceToHost, free_running),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(free_running), cudaSuccess);
  std::uint32_t bits = 0;
  std::memcpy(&bits, pinned, 4);
  EXPECT_EQ(bits, 0xffffffffu) << "the copy had landed when cudaMemcpy returned";
  std::vector<float> back(kCount);
  ASSERT_EQ(cudaMemcpy(back.data(), device, kCount * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, std::vector<float>(kCount, 3.0f)) << "a copy into host memory waits for it";
  ASSERT_EQ(cudaStreamDestroy(free_running), cudaSuccess);
  ASSERT_EQ(cudaFreeHost(pinned), cudaSuccess);
  ASSERT_EQ(cudaFree(device), cudaSuccess);
}

TEST(LegacyCalls, ACopyIntoHostMemoryWaitsForTheBlockingStreams) {
  float* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 4), cudaSuccess);
  cudaStream_t blocking = make_stream(cudaStreamDefault);
  auto gate = std::make_shared<sim::Signal>();
  sim::enqueue(blocking, [gate, device] {
    gate->wait();
    *sim::device_view(device) = 7.0f;  // as a kernel writes it
  });
  float got = 0;
  auto copy = std::async(std::launch::async,
                         [&] { return cudaMemcpy(&got, device, 4, cudaMemcpyDeviceToHost); });
  EXPECT_EQ(copy.wait_for(kPause), std::future_status::timeout)
      << "cudaMemcpy returned before the blocking stream's work ran";
  gate->set();
  ASSERT_EQ(copy.get(), cudaSuccess);
  EXPECT_EQ(got, 7.0f);
  ASSERT_EQ(cudaStreamDestroy(blocking), cudaSuccess);
  ASSERT_EQ(cudaFree(device), cudaSuccess);
}

TEST(LegacyCalls, DeviceToDeviceCopiesAndMemsetsReturnAtOnce) {
  float *a = nullptr, *b = nullptr;
  ASSERT_EQ(cudaMalloc(&a, 64), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, 64), cudaSuccess);
  auto gate = std::make_shared<sim::Signal>();
  Log log;
  gated(kLegacy, gate, log, "legacy");
  EXPECT_TRUE(returns([=] { return cudaMemcpy(b, a, 64, cudaMemcpyDeviceToDevice); }));
  EXPECT_TRUE(returns([=] { return cudaMemset(a, 0, 64); }));
  gate->set();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::uint32_t bits = 1;
  ASSERT_EQ(cudaMemcpy(&bits, a, 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(bits, 0u);
  ASSERT_EQ(cudaFree(a), cudaSuccess);
  ASSERT_EQ(cudaFree(b), cudaSuccess);
}

// CUDA refuses to join a capturing blocking stream to the legacy stream
// (cudaErrorStreamCaptureImplicit); a non-blocking stream's capture goes on.
TEST(LegacyCalls, LegacyWorkInvalidatesABlockingStreamsCapture) {
  for (const unsigned flags : {unsigned{cudaStreamDefault}, unsigned{cudaStreamNonBlocking}}) {
    cudaStream_t stream = make_stream(flags);
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    // From another thread: a thread-local capture does not forbid its calls.
    std::thread([] { sim::enqueue(cudaStreamLegacy, [] {}); }).join();
    cudaGraph_t graph = nullptr;
    const cudaError_t rc = cudaStreamEndCapture(stream, &graph);
    cudaGetLastError();
    if (flags == cudaStreamDefault) {
      EXPECT_EQ(rc, cudaErrorStreamCaptureInvalidated);
    } else {
      EXPECT_EQ(rc, cudaSuccess);
      ASSERT_EQ(cudaGraphDestroy(graph), cudaSuccess);
    }
    ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// Device memory as on a GPU: host code that touches it faults, the simulated
// device reaches it through its view (sim::device_view), a kernel that runs
// past the end of its buffer's 256-byte rounding faults, and managed and
// pinned memory are the host's to touch. (Death tests: each runs in a fresh
// process, so the stream threads of the tests before it do not matter.)
TEST(DeviceMemory, HostCodeThatReadsOrWritesItFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  float* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 64), cudaSuccess);
  const volatile float* read_from = device;
  volatile float* write_to = device + 3;
  EXPECT_EXIT({ std::printf("%f\n", *read_from); }, testing::KilledBySignal(SIGSEGV), "");
  EXPECT_EXIT({ *write_to = 1.0f; }, testing::KilledBySignal(SIGSEGV), "");
  ASSERT_EQ(cudaFree(device), cudaSuccess);
}

TEST(DeviceMemory, TheDeviceReachesItThroughItsView) {
  constexpr std::size_t kCount = 100;
  float* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, kCount * 4), cudaSuccess);
  std::vector<float> values(kCount);
  std::iota(values.begin(), values.end(), 1.0f);
  ASSERT_EQ(cudaMemcpy(device, values.data(), kCount * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const float* view = sim::device_view(device);
  EXPECT_NE(static_cast<const void*>(view), static_cast<const void*>(device));
  EXPECT_EQ(sim::device_view(device + 10), view + 10);
  EXPECT_EQ(std::vector<float>(view, view + kCount), values);
  sim::enqueue(nullptr, [device] { sim::device_view(device)[7] = -1.0f; });  // a "kernel"
  std::vector<float> back(kCount);
  ASSERT_EQ(cudaMemcpy(back.data(), device, kCount * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  values[7] = -1.0f;
  EXPECT_EQ(back, values);
  ASSERT_EQ(cudaFree(device), cudaSuccess);
}

TEST(DeviceMemory, AKernelThatRunsPastItsBufferFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  char* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 100), cudaSuccess);
  volatile char* view = sim::device_view(device);
  view[255] = 1;  // inside the allocation's 256-byte rounding, as on a GPU
  EXPECT_EXIT({ view[256] = 1; }, testing::KilledBySignal(SIGSEGV), "");
  ASSERT_EQ(cudaFree(device), cudaSuccess);
}

TEST(DeviceMemory, ManagedAndPinnedMemoryAreTheHostsToTouch) {
  float* managed = nullptr;
  float* pinned = nullptr;
  ASSERT_EQ(cudaMallocManaged(&managed, 16, cudaMemAttachGlobal), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(&pinned, 16), cudaSuccess);
  EXPECT_EQ(sim::device_view(managed), managed);
  EXPECT_EQ(sim::device_view(pinned), pinned);
  managed[1] = 2.0f;
  ASSERT_EQ(cudaMemcpy(pinned, managed, 16, cudaMemcpyDefault), cudaSuccess);
  EXPECT_EQ(pinned[1], 2.0f);
  EXPECT_TRUE(sim::is_device_range(managed, 16));
  EXPECT_FALSE(sim::is_device_range(pinned, 16));
  ASSERT_EQ(cudaFree(managed), cudaSuccess);
  ASSERT_EQ(cudaFreeHost(pinned), cudaSuccess);
}

}  // namespace
