// A communicator's state is shared between the engine's table and the plans
// using it: a destroy or abort on another thread (PyTorch's watchdog) drops
// the table's reference only, and its device memory goes with the last one,
// after a wait for the device. Over a fake allocator: no GPU is touched.
#include <gtest/gtest.h>

#ifdef SLIMREDUCE_HAVE_CUDA
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/nccl/plan.h"

namespace slimreduce {
namespace {

class FakeAllocator : public DeviceAllocator {
 public:
  void* allocate(std::size_t bytes, void*, bool) override {
    ++live;
    return std::malloc(bytes);
  }
  void release(void* ptr, void*) override {
    --live;
    std::free(ptr);
    events.push_back("free");
  }
  bool wait_device(int device) override {
    events.push_back("wait:" + std::to_string(device));
    return true;
  }
  int live = 0;
  std::vector<std::string> events;
};

std::shared_ptr<NcclCommState> state_with_memory(FakeAllocator& allocator) {
  auto state = std::make_shared<NcclCommState>();
  state->allocator = &allocator;
  state->device = 2;
  state->size = 4;
  state->workspaces[nullptr].ensure(100, nullptr, allocator);
  state->orphaned_residuals.emplace_back(&allocator, allocator.allocate(400, nullptr, true), 400);
  return state;
}

TEST(NcclCommState, ItsMemoryGoesWithTheLastHolderAfterAWait) {
  FakeAllocator allocator;
  auto table = state_with_memory(allocator);
  CallPlan plan;
  plan.comm = table;  // a plan of another thread, between planning and launching
  table.reset();      // comm_gone
  EXPECT_TRUE(allocator.events.empty());
  EXPECT_EQ(allocator.live, 2);
  plan.comm.reset();  // the plan's kernels are enqueued
  EXPECT_EQ(allocator.events, (std::vector<std::string>{"wait:2", "free", "free"}));
  EXPECT_EQ(allocator.live, 0);
}

TEST(NcclCommState, AStateWithoutMemoryDoesNotWait) {
  FakeAllocator allocator;
  auto state = std::make_shared<NcclCommState>();
  state->allocator = &allocator;
  state.reset();
  EXPECT_TRUE(allocator.events.empty());
}

}  // namespace
}  // namespace slimreduce
#else
// A CPU-only build has no NCCL state to test: reported as skipped, never as passed.
TEST(NcclCommState, NeedsTheCudaBuild) { GTEST_SKIP() << "CPU-only build: no NCCL path"; }
#endif
