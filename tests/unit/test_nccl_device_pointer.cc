// The MPI path asks core/device_staging whether a buffer is device memory.
// In a process that never loaded the CUDA driver (every CPU job, and this
// test) the answer is "host" without any CUDA call: the driver stays
// unloaded and the answer is cheap. Holds for CUDA and CPU-only builds.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "core/mpi/device_staging.h"

namespace slimreduce {
namespace {

bool driver_loaded() {
  void* handle = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (handle) dlclose(handle);
  return handle != nullptr;
}

TEST(DevicePointer, HostMemoryIsHostAndTheDriverStaysUnloaded) {
  ASSERT_FALSE(driver_loaded()) << "this test needs a process without the CUDA driver";
  std::vector<float> heap(1024);
  float stack[16] = {};
  EXPECT_FALSE(device_staging::is_device_pointer(heap.data()));
  EXPECT_FALSE(device_staging::is_device_pointer(stack));
  EXPECT_FALSE(device_staging::is_device_pointer(nullptr));
  EXPECT_FALSE(driver_loaded());
}

TEST(DevicePointer, TheAnswerIsCheapWhenNoDriverIsLoaded) {
  std::vector<float> heap(1024);
  constexpr int kCalls = 100000;
  const auto start = std::chrono::steady_clock::now();
  int device = 0;
  for (int i = 0; i < kCalls; ++i)
    device += device_staging::is_device_pointer(heap.data() + i % 1024);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(device, 0);
  // Cached: no library lookup per call (generous bound for a shared 2-core machine).
  EXPECT_LT(seconds / kCalls, 2e-6);
}

}  // namespace
}  // namespace slimreduce
