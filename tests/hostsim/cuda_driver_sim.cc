// The one driver call SlimReduce makes, for the host simulation: its MPI path
// asks the driver the job loaded (libcuda.so.1, looked up, never linked)
// whether a buffer is device memory. Built as libcuda.so.1 in the build tree,
// loaded by the simulation's programs only.
#include <cuda.h>

#include "tests/hostsim/sim.h"

extern "C" CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute,
                                          CUdeviceptr ptr) {
  // The driver knows nothing of unregistered host memory: an error, as there.
  if (!slimreduce::hostsim::is_device_range(reinterpret_cast<const void*>(ptr), 1)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:  // managed memory too, as a GPU's driver says
      *static_cast<unsigned int*>(data) = CU_MEMORYTYPE_DEVICE;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      *static_cast<int*>(data) =
          slimreduce::hostsim::is_managed(reinterpret_cast<const void*>(ptr));
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_NOT_SUPPORTED;
  }
}
