// Workspace and residuals of the NCCL path over a fake allocator: growth
// without shrinking, the residual key rules of invariant 5 of docs/architecture.md, the cap,
// blocks a captured graph may use never freed early nor shared with eager
// calls, nothing allocated or freed during capture, and memory freed at
// teardown only after a wait for the device. No GPU needed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "core/nccl/memory.h"
#include "core/runtime/residuals.h"

namespace slimreduce {
namespace {

class FakeAllocator : public DeviceAllocator {
 public:
  void* allocate(std::size_t bytes, void*, bool zeroed) override {
    EXPECT_FALSE(capturing) << "an allocation during graph capture";
    if (fail) return nullptr;
    void* ptr = std::malloc(bytes);
    if (zeroed) std::memset(ptr, 0, bytes);
    live.insert(ptr);
    ++allocations;
    return ptr;
  }
  void release(void* ptr, void*) override {
    EXPECT_FALSE(capturing) << "a free during graph capture";
    EXPECT_EQ(live.erase(ptr), 1u);
    std::free(ptr);
    events.push_back("free");
  }
  bool wait_device(int device) override {
    events.push_back("wait:" + std::to_string(device));
    return !wait_fails;
  }
  ~FakeAllocator() override {
    for (void* ptr : leaked) live.erase(ptr);
    EXPECT_TRUE(live.empty());
    for (void* ptr : leaked) std::free(ptr);
  }

  std::set<void*> live;
  std::vector<std::string> events;
  std::vector<void*> leaked;  // abandoned on purpose by a test
  int allocations = 0;
  bool fail = false;
  bool capturing = false;  // a stream is being captured: nothing may be allocated or freed
  bool wait_fails = false;
};

TEST(Workspace, GrowsInStepsAndNeverShrinks) {
  FakeAllocator allocator;
  Workspace ws;
  EXPECT_FALSE(ws.large_enough(1));
  void* a = ws.ensure(1000, nullptr, allocator);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(ws.large_enough(1 << 20));
  EXPECT_EQ(ws.ensure(1 << 20, nullptr, allocator), a);  // no new allocation
  EXPECT_EQ(allocator.allocations, 1);
  ws.ensure((1 << 20) + 1, nullptr, allocator);
  EXPECT_EQ(allocator.allocations, 2);
  EXPECT_EQ(allocator.live.size(), 1u);  // the old block was freed
  EXPECT_GE(ws.bytes_held(), std::size_t{2} << 20);
}

TEST(Workspace, ACapturedBlockIsRetiredNotFreed) {
  FakeAllocator allocator;
  Workspace ws;
  ws.ensure(100, nullptr, allocator);
  ws.mark_captured();
  ws.ensure(8 << 20, nullptr, allocator);
  EXPECT_EQ(allocator.live.size(), 2u);
}

TEST(Workspace, OutOfMemoryKeepsWhatItHad) {
  FakeAllocator allocator;
  Workspace ws;
  void* a = ws.ensure(100, nullptr, allocator);
  allocator.fail = true;
  EXPECT_EQ(ws.ensure(8 << 20, nullptr, allocator), nullptr);
  EXPECT_EQ(ws.get(), a);
}

using Status = ResidualStore::Found;

TEST(NcclResiduals, AResidualIsZeroedAndKeptForTheSameKey) {
  FakeAllocator allocator;
  ResidualStore store(1 << 20);
  ResidualSlot* slot = nullptr;
  const ResidualKey key{1, &allocator};
  ASSERT_EQ(store.find_on_device(key, 100, 7, true, true, nullptr, allocator, &slot), Status::ok);
  ASSERT_NE(slot->device.get(), nullptr);
  EXPECT_EQ(static_cast<float*>(slot->device.get())[99], 0.0f);
  EXPECT_EQ(store.bytes_held(), 400u);
  static_cast<float*>(slot->device.get())[5] = 3.0f;
  ResidualSlot* again = nullptr;
  store.find_on_device(key, 100, 7, true, true, nullptr, allocator, &again);
  EXPECT_EQ(again, slot);
  EXPECT_EQ(static_cast<float*>(again->device.get())[5], 3.0f);
  EXPECT_EQ(allocator.allocations, 1);
}

TEST(NcclResiduals, ANewShapeResetsTheKey) {
  FakeAllocator allocator;
  ResidualStore store(1 << 20);
  ResidualSlot* slot = nullptr;
  const ResidualKey key{1, &allocator};
  store.find_on_device(key, 100, 7, true, true, nullptr, allocator, &slot);
  static_cast<float*>(slot->device.get())[5] = 5.0f;
  store.find_on_device(key, 200, 7, true, true, nullptr, allocator, &slot);
  EXPECT_EQ(slot->count, 200u);
  EXPECT_EQ(static_cast<float*>(slot->device.get())[5], 0.0f);
  EXPECT_EQ(store.bytes_held(), 800u);
  store.find_on_device(key, 200, 9, true, true, nullptr, allocator, &slot);  // datatype too
  EXPECT_EQ(slot->datatype_tag, 9u);
  EXPECT_EQ(allocator.live.size(), 1u);
}

TEST(NcclResiduals, ThePassingKeyGetsNothingAtTheCap) {
  FakeAllocator allocator;
  ResidualStore store(1000);
  ResidualSlot* slot = nullptr;
  int a = 0, b = 0;
  EXPECT_EQ(store.find_on_device({1, &a}, 200, 7, true, true, nullptr, allocator, &slot),
            Status::ok);
  EXPECT_EQ(store.find_on_device({1, &b}, 100, 7, true, true, nullptr, allocator, &slot),
            Status::over_cap);
  EXPECT_EQ(slot, nullptr);
  EXPECT_EQ(store.bytes_held(), 800u);
  // Without error feedback a key costs nothing and is always tracked.
  EXPECT_EQ(store.find_on_device({1, &b}, 100, 7, false, true, nullptr, allocator, &slot),
            Status::ok);
  EXPECT_EQ(slot->device.get(), nullptr);
}

TEST(NcclResiduals, NoAllocationDuringCaptureButAnExistingResidualServes) {
  FakeAllocator allocator;
  ResidualStore store(1 << 20);
  ResidualSlot* slot = nullptr;
  int a = 0;
  EXPECT_EQ(store.find_on_device({1, &a}, 100, 7, true, false, nullptr, allocator, &slot),
            Status::not_now);
  EXPECT_EQ(allocator.allocations, 0);
  store.find_on_device({1, &a}, 100, 7, true, true, nullptr, allocator, &slot);
  EXPECT_EQ(store.find_on_device({1, &a}, 100, 7, true, false, nullptr, allocator, &slot),
            Status::ok);
}

TEST(NcclResiduals, CapturedResidualsLiveUntilTheirCommunicatorGoes) {
  FakeAllocator allocator;
  ResidualStore store(1 << 20);
  ResidualSlot* slot = nullptr;
  int a = 0, b = 0;
  store.find_on_device({1, &a}, 100, 7, true, true, nullptr, allocator, &slot);
  slot->captured = true;
  store.find_on_device({1, &a}, 50, 7, true, true, nullptr, allocator, &slot);
  EXPECT_EQ(allocator.live.size(), 2u);  // the captured one is retired, still held
  EXPECT_EQ(store.bytes_held(), 600u);
  store.find_on_device({2, &b}, 10, 7, true, true, nullptr, allocator, &slot);
  std::vector<DeviceBlock> taken;
  store.take_communicator(1, taken);
  EXPECT_EQ(allocator.live.size(), 3u);  // taken, not freed: a plan may still use them
  taken.clear();
  EXPECT_EQ(allocator.live.size(), 1u);
  EXPECT_EQ(store.bytes_held(), 40u);
  store.take_all(taken);
  taken.clear();
  EXPECT_TRUE(allocator.live.empty());
}

TEST(NcclResiduals, AllocationFailureIsReported) {
  FakeAllocator allocator;
  allocator.fail = true;
  ResidualStore store(1 << 20);
  ResidualSlot* slot = nullptr;
  int a = 0;
  EXPECT_EQ(store.find_on_device({1, &a}, 100, 7, true, true, nullptr, allocator, &slot),
            Status::no_memory);
  EXPECT_EQ(store.bytes_held(), 0u);
}

TEST(Workspace, EagerCallsDoNotShareACapturedBlock) {
  // A replay may run on any stream while eager calls on the capture stream go
  // on: once a graph used a block, the next eager call gets a fresh one.
  FakeAllocator allocator;
  Workspace ws;
  void* captured = ws.ensure(100, nullptr, allocator);
  ws.mark_captured();
  void* eager = ws.ensure(100, nullptr, allocator);
  EXPECT_NE(eager, captured);
  EXPECT_EQ(allocator.live.count(captured), 1u);         // retired: the graph still uses it
  EXPECT_EQ(ws.ensure(100, nullptr, allocator), eager);  // then no further allocation
  EXPECT_EQ(allocator.allocations, 2);
  EXPECT_EQ(ws.bytes_held(), std::size_t{2} << 20);
}

TEST(Workspace, TakeBlocksMovesTheCurrentAndRetiredBlocksWithoutFreeing) {
  FakeAllocator allocator;
  Workspace ws;
  ws.ensure(100, nullptr, allocator);
  ws.mark_captured();
  ws.ensure(100, nullptr, allocator);
  std::vector<DeviceBlock> blocks;
  ws.take_blocks(blocks);
  EXPECT_EQ(blocks.size(), 2u);
  EXPECT_EQ(ws.bytes_held(), 0u);
  EXPECT_EQ(allocator.live.size(), 2u);
  release_after_device_wait(blocks, {0}, allocator);
}

TEST(NcclTeardown, BlocksAreFreedOnlyAfterTheDeviceWasWaitedFor) {
  // cudaFree of cudaMallocAsync memory does not wait for kernels still queued
  // (our unpack after an aborted communicator's collective): wait first.
  FakeAllocator allocator;
  ResidualStore store(1 << 20);
  ResidualSlot* slot = nullptr;
  int a = 0, b = 0;
  store.find_on_device({1, &a}, 100, 7, true, true, nullptr, allocator, &slot);
  store.find_on_device({1, &b}, 100, 7, true, true, nullptr, allocator, &slot);
  Workspace ws;
  ws.ensure(100, nullptr, allocator);
  std::vector<DeviceBlock> blocks;
  store.take_communicator(1, blocks);
  ws.take_blocks(blocks);
  EXPECT_TRUE(allocator.events.empty());
  release_after_device_wait(blocks, {3}, allocator);
  EXPECT_TRUE(blocks.empty());
  EXPECT_EQ(allocator.events, (std::vector<std::string>{"wait:3", "free", "free", "free"}));
}

TEST(NcclTeardown, NoBlocksNoWait) {
  FakeAllocator allocator;
  std::vector<DeviceBlock> blocks;
  release_after_device_wait(blocks, {0, 1}, allocator);
  EXPECT_TRUE(allocator.events.empty());
}

TEST(NcclTeardown, BlocksLeakWhenTheDeviceCannotBeWaitedFor) {
  FakeAllocator allocator;
  Workspace ws;
  allocator.leaked.push_back(ws.ensure(100, nullptr, allocator));
  std::vector<DeviceBlock> blocks;
  ws.take_blocks(blocks);
  allocator.wait_fails = true;
  release_after_device_wait(blocks, {0}, allocator);
  EXPECT_EQ(allocator.events, (std::vector<std::string>{"wait:0"}));  // nothing freed
}

TEST(NcclResiduals, TakeAllKeepsCapturedResidualsForTheirCommunicator) {
  FakeAllocator allocator;
  ResidualStore store(1 << 20);
  ResidualSlot* slot = nullptr;
  int a = 0, b = 0;
  store.find_on_device({1, &a}, 100, 7, true, true, nullptr, allocator, &slot);
  slot->captured = true;
  store.find_on_device({1, &b}, 50, 7, true, true, nullptr, allocator, &slot);
  std::vector<DeviceBlock> dropped;
  store.take_all(dropped);
  EXPECT_EQ(dropped.size(), 1u);        // the eager one, to free after a wait
  EXPECT_EQ(store.bytes_held(), 400u);  // the captured one, retired
  const int made_before = allocator.allocations;
  store.find_on_device({1, &a}, 100, 7, true, true, nullptr, allocator, &slot);
  EXPECT_EQ(allocator.allocations, made_before + 1);  // a fresh key all the same
  dropped.clear();
  store.take_communicator(1, dropped);
  EXPECT_EQ(dropped.size(), 2u);
  EXPECT_EQ(store.bytes_held(), 0u);
}

TEST(NcclResiduals, ANewShapeDuringCaptureFreesNothingAndPassesThrough) {
  // A free on the capturing stream would invalidate the user's capture.
  FakeAllocator allocator;
  ResidualStore store(1 << 20);
  ResidualSlot* slot = nullptr;
  int a = 0;
  store.find_on_device({1, &a}, 100, 7, true, true, nullptr, allocator, &slot);
  static_cast<float*>(slot->device.get())[5] = 4.0f;
  allocator.capturing = true;
  EXPECT_EQ(store.find_on_device({1, &a}, 200, 7, true, false, nullptr, allocator, &slot),
            Status::not_now);
  EXPECT_EQ(slot, nullptr);
  EXPECT_EQ(allocator.live.size(), 1u);
  EXPECT_EQ(store.bytes_held(), 400u);
  allocator.capturing = false;
  // The old shape still finds its slot; outside capture the new one resets it.
  store.find_on_device({1, &a}, 100, 7, true, false, nullptr, allocator, &slot);
  EXPECT_EQ(static_cast<float*>(slot->device.get())[5], 4.0f);
  store.find_on_device({1, &a}, 200, 7, true, true, nullptr, allocator, &slot);
  EXPECT_EQ(slot->count, 200u);
  EXPECT_EQ(static_cast<float*>(slot->device.get())[5], 0.0f);
  EXPECT_EQ(store.bytes_held(), 800u);
  EXPECT_EQ(allocator.live.size(), 1u);
}

TEST(NcclResiduals, WithoutErrorFeedbackANewShapeDuringCaptureResetsTheKey) {
  FakeAllocator allocator;
  ResidualStore store(1 << 20);
  ResidualSlot* slot = nullptr;
  int a = 0;
  store.find_on_device({1, &a}, 100, 7, false, true, nullptr, allocator, &slot);
  allocator.capturing = true;  // no block: nothing to free or allocate
  EXPECT_EQ(store.find_on_device({1, &a}, 200, 7, false, false, nullptr, allocator, &slot),
            Status::ok);
  EXPECT_EQ(slot->count, 200u);
  EXPECT_EQ(allocator.allocations, 0);
}

}  // namespace
}  // namespace slimreduce
