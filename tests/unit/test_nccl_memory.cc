// Workspace and residuals of the NCCL path over a fake allocator: growth
// without shrinking, the residual key rules of design invariant 5, the cap,
// and blocks a captured graph may use never freed early. No GPU needed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <set>

#include "core/nccl_memory.h"

namespace slimreduce {
namespace {

class FakeAllocator : public DeviceAllocator {
 public:
  void* allocate(std::size_t bytes, void*, bool zeroed) override {
    if (fail) return nullptr;
    void* ptr = std::malloc(bytes);
    if (zeroed) std::memset(ptr, 0, bytes);
    live.insert(ptr);
    ++allocations;
    return ptr;
  }
  void release(void* ptr, void*) override {
    EXPECT_EQ(live.erase(ptr), 1u);
    std::free(ptr);
  }
  ~FakeAllocator() override { EXPECT_TRUE(live.empty()); }

  std::set<void*> live;
  int allocations = 0;
  bool fail = false;
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

using Status = NcclResidualStore::Status;

TEST(NcclResiduals, AResidualIsZeroedAndKeptForTheSameKey) {
  FakeAllocator allocator;
  NcclResidualStore store(1 << 20);
  NcclResidualSlot* slot = nullptr;
  const NcclResidualKey key{1, &allocator};
  ASSERT_EQ(store.find_or_create(key, 100, 7, true, true, nullptr, allocator, &slot), Status::ok);
  ASSERT_NE(slot->residual.get(), nullptr);
  EXPECT_EQ(static_cast<float*>(slot->residual.get())[99], 0.0f);
  EXPECT_EQ(store.bytes_held(), 400u);
  slot->calls = 3;
  NcclResidualSlot* again = nullptr;
  store.find_or_create(key, 100, 7, true, true, nullptr, allocator, &again);
  EXPECT_EQ(again, slot);
  EXPECT_EQ(again->calls, 3u);
  EXPECT_EQ(allocator.allocations, 1);
}

TEST(NcclResiduals, ANewShapeResetsTheKey) {
  FakeAllocator allocator;
  NcclResidualStore store(1 << 20);
  NcclResidualSlot* slot = nullptr;
  const NcclResidualKey key{1, &allocator};
  store.find_or_create(key, 100, 7, true, true, nullptr, allocator, &slot);
  slot->calls = 5;
  store.find_or_create(key, 200, 7, true, true, nullptr, allocator, &slot);
  EXPECT_EQ(slot->calls, 0u);
  EXPECT_EQ(store.bytes_held(), 800u);
  store.find_or_create(key, 200, 9, true, true, nullptr, allocator, &slot);  // datatype too
  EXPECT_EQ(slot->datatype, 9);
  EXPECT_EQ(allocator.live.size(), 1u);
}

TEST(NcclResiduals, ThePassingKeyGetsNothingAtTheCap) {
  FakeAllocator allocator;
  NcclResidualStore store(1000);
  NcclResidualSlot* slot = nullptr;
  int a = 0, b = 0;
  EXPECT_EQ(store.find_or_create({1, &a}, 200, 7, true, true, nullptr, allocator, &slot),
            Status::ok);
  EXPECT_EQ(store.find_or_create({1, &b}, 100, 7, true, true, nullptr, allocator, &slot),
            Status::over_cap);
  EXPECT_EQ(slot, nullptr);
  EXPECT_EQ(store.bytes_held(), 800u);
  // Without error feedback a key costs nothing and is always tracked.
  EXPECT_EQ(store.find_or_create({1, &b}, 100, 7, false, true, nullptr, allocator, &slot),
            Status::ok);
  EXPECT_EQ(slot->residual.get(), nullptr);
}

TEST(NcclResiduals, NoAllocationDuringCaptureButAnExistingResidualServes) {
  FakeAllocator allocator;
  NcclResidualStore store(1 << 20);
  NcclResidualSlot* slot = nullptr;
  int a = 0;
  EXPECT_EQ(store.find_or_create({1, &a}, 100, 7, true, false, nullptr, allocator, &slot),
            Status::not_now);
  EXPECT_EQ(allocator.allocations, 0);
  store.find_or_create({1, &a}, 100, 7, true, true, nullptr, allocator, &slot);
  EXPECT_EQ(store.find_or_create({1, &a}, 100, 7, true, false, nullptr, allocator, &slot),
            Status::ok);
}

TEST(NcclResiduals, CapturedResidualsLiveUntilTheirCommunicatorGoes) {
  FakeAllocator allocator;
  NcclResidualStore store(1 << 20);
  NcclResidualSlot* slot = nullptr;
  int a = 0, b = 0;
  store.find_or_create({1, &a}, 100, 7, true, true, nullptr, allocator, &slot);
  slot->captured = true;
  store.find_or_create({1, &a}, 50, 7, true, true, nullptr, allocator, &slot);
  EXPECT_EQ(allocator.live.size(), 2u);  // the captured one is retired, still held
  EXPECT_EQ(store.bytes_held(), 600u);
  store.find_or_create({2, &b}, 10, 7, true, true, nullptr, allocator, &slot);
  store.forget_communicator(1);
  EXPECT_EQ(allocator.live.size(), 1u);
  EXPECT_EQ(store.bytes_held(), 40u);
  store.clear();
  EXPECT_TRUE(allocator.live.empty());
}

TEST(NcclResiduals, AllocationFailureIsReported) {
  FakeAllocator allocator;
  allocator.fail = true;
  NcclResidualStore store(1 << 20);
  NcclResidualSlot* slot = nullptr;
  int a = 0;
  EXPECT_EQ(store.find_or_create({1, &a}, 100, 7, true, true, nullptr, allocator, &slot),
            Status::no_memory);
  EXPECT_EQ(store.bytes_held(), 0u);
}

}  // namespace
}  // namespace slimreduce
