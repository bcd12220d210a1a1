/* A stand-in for a framework's extension module (PyTorch's libtorch_cuda):
 * it links NCCL itself, and a job loads it with dlopen(RTLD_LOCAL), so NCCL
 * is loaded privately, out of the global scope. Its calls to ncclAllReduce
 * still reach SlimReduce (preloaded, so in the global scope), which must find
 * this private NCCL among the loaded objects. Used by nccl_private.c; its name
 * has no "libnccl" in it, as libtorch_cuda's has none. */
#include <nccl.h>

ncclResult_t pncclAllReduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                            cudaStream_t);

static float buffer[1024];

/* The framework's call: reaches SlimReduce's ncclAllReduce. */
int framework_allreduce(void) {
  return ncclAllReduce(buffer, buffer, 1024, ncclFloat32, ncclSum, NULL, NULL);
}

/* What NCCL itself answers the same call (no communicator: an error). */
int framework_real_allreduce(void) {
  return pncclAllReduce(buffer, buffer, 1024, ncclFloat32, ncclSum, NULL, NULL);
}
