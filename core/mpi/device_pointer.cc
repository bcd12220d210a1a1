// device_staging::is_device_pointer: whether a pointer is device memory,
// asked of the CUDA driver only if the process already loaded it, so a CPU
// job pays nothing (checked by tests/unit/test_nccl_device_pointer.cc).
#include <cuda.h>  // driver types only: the driver is looked up, never linked
#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstddef>

#include "core/mpi/device_staging.h"

namespace slimreduce::device_staging {
namespace {

using PointerGetAttribute = CUresult (*)(void*, CUpointer_attribute, CUdeviceptr);

// How many objects the process has loaded so far (glibc's dlpi_adds).
int count_loads(struct dl_phdr_info* info, size_t size, void* data) {
  if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds) {
    *static_cast<unsigned long long*>(data) = info->dlpi_adds;
  }
  return 1;  // the first object carries the count: stop there
}

// cuPointerGetAttribute of the driver the job loaded, or nullptr while it
// loaded none. "None" is re-checked only after the process loads something.
PointerGetAttribute driver_query() {
  static std::atomic<PointerGetAttribute> found{nullptr};
  static std::atomic<unsigned long long> checked_at{~0ull};
  if (PointerGetAttribute fn = found.load(std::memory_order_acquire)) return fn;
  unsigned long long loads = 0;
  dl_iterate_phdr(count_loads, &loads);
  if (loads == checked_at.load(std::memory_order_relaxed)) return nullptr;
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  auto fn = driver ? reinterpret_cast<PointerGetAttribute>(dlsym(driver, "cuPointerGetAttribute"))
                   : nullptr;
  if (fn) {
    found.store(fn, std::memory_order_release);  // the handle stays open with the process
  } else {
    if (driver) dlclose(driver);
    checked_at.store(loads, std::memory_order_relaxed);
  }
  return fn;
}

}  // namespace

bool is_device_pointer(const void* ptr) {
  PointerGetAttribute query = driver_query();
  if (!ptr || !query) return false;
  auto address = reinterpret_cast<CUdeviceptr>(ptr);
  unsigned int type = 0;
  if (query(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address) != CUDA_SUCCESS) return false;
  if (type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_UNIFIED) return true;
  // Managed memory is device memory here, as on the NCCL side (one rule:
  // docs/architecture.md, "Managed memory"): its pages sit where the GPU
  // last wrote them, so compressing it on the GPU moves no page to the host.
  int managed = 0;
  return query(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, address) == CUDA_SUCCESS && managed;
}

}  // namespace slimreduce::device_staging
