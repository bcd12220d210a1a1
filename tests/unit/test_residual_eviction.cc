// SLIMREDUCE_EF_EVICT_CALLS (core/runtime/residuals.h): a key unused for that
// many calls on its communicator is freed with its state, counted; a key in
// use, a key of another communicator and a key a graph captured stay.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <utility>
#include <vector>

#include "core/runtime/residuals.h"

namespace slimreduce {
namespace {

class Eviction : public ::testing::TestWithParam<std::uint64_t> {};

// Makes `calls` calls on communicator `comm`, each on the key of `busy`.
void calls_on(ResidualStore& store, std::uint64_t comm, const void* busy, std::uint64_t calls) {
  for (std::uint64_t i = 0; i < calls; ++i)
    ASSERT_NE(store.find_or_create({comm, busy}, 10, 0, true), nullptr);
}

TEST_P(Eviction, AnUnusedKeyGoesWithinAQuarterPastTheLimit) {
  const std::uint64_t limit = GetParam();
  ResidualStore store(1 << 20, limit);
  int idle = 0, busy = 0;
  ResidualSlot* slot = store.find_or_create({1, &idle}, 100, 0, true);
  slot->host_residual()[7] = 2.5f;
  slot->compressor_state.assign(4, 1.0f);
  calls_on(store, 1, &busy, limit);
  EXPECT_EQ(store.evicted(), 0u) << "unused for no more calls than the limit";
  calls_on(store, 1, &busy, limit / 4 + 1);
  EXPECT_EQ(store.evicted(), 1u);
  EXPECT_EQ(store.bytes_held(), 40u) << "only the busy key's residual is held";
  ResidualSlot* again = store.find_or_create({1, &idle}, 100, 0, true);
  EXPECT_EQ(again->host_residual()[7], 0.0f) << "a fresh residual";
  EXPECT_TRUE(again->compressor_state.empty()) << "its state went with it";
}

TEST_P(Eviction, AKeyInUseStays) {
  const std::uint64_t limit = GetParam();
  ResidualStore store(1 << 20, limit);
  int a = 0, b = 0;
  for (std::uint64_t i = 0; i < 5 * limit + 3; ++i) {
    store.find_or_create({1, &a}, 10, 0, true)->host_residual()[0] += 1.0f;
    store.find_or_create({1, &b}, 10, 0, true);
  }
  EXPECT_EQ(store.evicted(), 0u);
  EXPECT_EQ(store.find_or_create({1, &a}, 10, 0, true)->host_residual()[0], float(5 * limit + 3));
}

TEST_P(Eviction, OnlyItsOwnCommunicatorsCallsCount) {
  const std::uint64_t limit = GetParam();
  ResidualStore store(1 << 20, limit);
  int idle = 0, busy = 0;
  store.find_or_create({1, &idle}, 10, 0, true);
  calls_on(store, 2, &busy, 3 * limit);
  EXPECT_EQ(store.evicted(), 0u) << "communicator 2's calls say nothing of 1's keys";
  calls_on(store, 1, &busy, 2 * limit);
  EXPECT_EQ(store.evicted(), 1u);
}

TEST_P(Eviction, ACapturedKeyStays) {
  const std::uint64_t limit = GetParam();
  ResidualStore store(1 << 20, limit);
  int captured = 0, busy = 0;
  store.find_or_create({1, &captured}, 10, 0, true)->captured = true;
  calls_on(store, 1, &busy, 3 * limit);
  EXPECT_EQ(store.evicted(), 0u) << "a graph may replay it";
}

INSTANTIATE_TEST_SUITE_P(Limits, Eviction, ::testing::Values(2, 4, 8, 100, 1000));

// Host memory standing in for the device; records each free with its stream.
class StreamRecordingAllocator : public DeviceAllocator {
 public:
  void* allocate(std::size_t bytes, void*, bool) override { return std::calloc(1, bytes); }
  void release(void* ptr, void* stream) override {
    freed.emplace_back(ptr, stream);
    std::free(ptr);
  }
  bool wait_device(int) override { return true; }
  std::vector<std::pair<void*, void*>> freed;
};

// The NCCL path's keys (find_on_device) count and go as the MPI path's, their
// device residual and state freed in the order of the stream of the key's
// last call (kernels of ours may still be queued there); a capture neither
// counts a call nor frees anything.
TEST_P(Eviction, ADeviceKeyIsFreedOnItsLastStream) {
  const std::uint64_t limit = GetParam();
  StreamRecordingAllocator allocator;
  ResidualStore store(1 << 20, limit);
  int idle = 0, busy = 0, first_stream = 0, last_stream = 0, busy_stream = 0;
  ResidualSlot* slot = nullptr;
  ASSERT_EQ(store.find_on_device({1, &idle}, 100, 0, true, true, &first_stream, allocator, &slot),
            ResidualStore::Found::ok);
  ASSERT_EQ(store.find_on_device({1, &idle}, 100, 0, true, true, &last_stream, allocator, &slot),
            ResidualStore::Found::ok);
  void* residual = slot->device.get();
  slot->device_state = DeviceBlock(&allocator, allocator.allocate(16, nullptr, false), 16);
  void* state = slot->device_state.get();
  auto device_calls = [&](std::uint64_t calls, bool may_allocate) {
    for (std::uint64_t i = 0; i < calls; ++i) {
      ResidualSlot* busy_slot = nullptr;
      store.find_on_device({1, &busy}, 10, 0, true, may_allocate, &busy_stream, allocator,
                           &busy_slot);
    }
  };
  device_calls(3 * limit, false);
  EXPECT_EQ(store.evicted(), 0u) << "captures are not calls";
  device_calls(limit, true);
  EXPECT_EQ(store.evicted(), 0u) << "unused for no more calls than the limit";
  device_calls(limit / 4 + 1, true);
  ASSERT_EQ(store.evicted(), 1u);
  const std::vector<std::pair<void*, void*>> expected = {{residual, &last_stream},
                                                         {state, &last_stream}};
  EXPECT_EQ(allocator.freed, expected);
  EXPECT_EQ(store.bytes_held(), 40u) << "only the busy key's residual is held";
}

TEST(EvictionOff, ZeroKeepsEveryKey) {
  ResidualStore store(1 << 20, 0);
  int idle = 0, busy = 0;
  store.find_or_create({1, &idle}, 10, 0, true);
  calls_on(store, 1, &busy, 50000);
  EXPECT_EQ(store.evicted(), 0u);
  EXPECT_EQ(store.bytes_held(), 80u);
}

TEST(EvictionOff, ACommunicatorsCountGoesWithIt) {
  ResidualStore store(1 << 20, 8);
  int idle = 0, busy = 0;
  calls_on(store, 1, &busy, 7);
  store.forget_communicator(1);
  store.find_or_create({1, &idle}, 10, 0, true);
  calls_on(store, 1, &busy, 7);
  EXPECT_EQ(store.evicted(), 0u) << "the count started again with the communicator";
}

}  // namespace
}  // namespace slimreduce
