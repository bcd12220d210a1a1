// The runtime's device allocator in a CPU-only build (core/CMakeLists.txt
// compiles this file instead of cuda_support.cc): none, so nothing is ever
// placed in device memory.
#include "core/gpu/device_memory.h"

namespace slimreduce {

std::unique_ptr<DeviceAllocator> make_device_allocator() { return nullptr; }

}  // namespace slimreduce
