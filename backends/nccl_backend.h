// The real NCCL: the functions SlimReduce intercepts or calls, resolved once
// at run time from the library the job loaded (its pnccl* aliases first, the
// way PMPI_* serve the MPI shim), never linked: a CUDA build of
// libslimreduce.so loads where there is no NCCL at all. Compiled in
// CUDA builds (it needs nccl.h; backends/CMakeLists.txt).
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "backends/nccl_compat.h"

// ncclGroupSimulateEnd and ncclSimInfo_t came with NCCL 2.22.
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 22, 0)
#define SLIMREDUCE_NCCL_HAS_SIMULATE_END 1
#else
#define SLIMREDUCE_NCCL_HAS_SIMULATE_END 0
#endif

namespace slimreduce::backends::nccl {

struct Api {
  ncclResult_t (*all_reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                             cudaStream_t) = nullptr;
  // NCCL 2.32 and later: ncclAllReduce with a per-call config.
  ncclResult_t (*all_reduce_config)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                    ncclComm_t, cudaStream_t, const ncclCollConfig_t*) = nullptr;
  ncclResult_t (*all_gather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t,
                             cudaStream_t) = nullptr;
  ncclResult_t (*reduce_scatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                 ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*send)(const void*, size_t, ncclDataType_t, int, ncclComm_t,
                       cudaStream_t) = nullptr;
  ncclResult_t (*recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*group_start)() = nullptr;
  ncclResult_t (*group_end)() = nullptr;
#if SLIMREDUCE_NCCL_HAS_SIMULATE_END
  ncclResult_t (*group_simulate_end)(ncclSimInfo_t*) = nullptr;
#endif
  ncclResult_t (*comm_init_rank)(ncclComm_t*, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*comm_init_rank_config)(ncclComm_t*, int, ncclUniqueId, int,
                                        ncclConfig_t*) = nullptr;
  ncclResult_t (*comm_init_rank_scalable)(ncclComm_t*, int, int, int, ncclUniqueId*,
                                          ncclConfig_t*) = nullptr;
  ncclResult_t (*comm_init_all)(ncclComm_t*, int, const int*) = nullptr;
  ncclResult_t (*comm_split)(ncclComm_t, int, int, ncclComm_t*, ncclConfig_t*) = nullptr;
  ncclResult_t (*comm_shrink)(ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int) = nullptr;
  ncclResult_t (*comm_grow)(ncclComm_t, int, const ncclUniqueId*, int, ncclComm_t*,
                            ncclConfig_t*) = nullptr;  // NCCL 2.29 and later
  ncclResult_t (*comm_destroy)(ncclComm_t) = nullptr;
  ncclResult_t (*comm_abort)(ncclComm_t) = nullptr;
  ncclResult_t (*comm_finalize)(ncclComm_t) = nullptr;
  ncclResult_t (*comm_count)(const ncclComm_t, int*) = nullptr;
  ncclResult_t (*comm_user_rank)(const ncclComm_t, int*) = nullptr;
  ncclResult_t (*comm_cu_device)(const ncclComm_t, int*) = nullptr;
  ncclResult_t (*comm_get_async_error)(ncclComm_t, ncclResult_t*) = nullptr;

  // Where the functions came from ("pnccl* of <path>", ...), for the INFO log.
  const char* origin = "not found";
};

// Resolved on the first call, then the same table for the life of the
// process. A function NCCL does not have stays nullptr.
const Api& api();

// Whether this thread is inside a call to the real NCCL. NCCL may call its own
// exported functions (ncclCommInitAll opens a group, for one); such calls must
// reach NCCL unchanged, not SlimReduce again.
bool in_real_call();

// Marks this thread as inside the real NCCL while it lives.
class RealCall {
 public:
  RealCall();
  ~RealCall();
  RealCall(const RealCall&) = delete;
  RealCall& operator=(const RealCall&) = delete;
};

// Calls the real function through the table, marked as a real call, with
// ncclSystemError when NCCL does not have it.
template <class Fn, class... Args>
ncclResult_t call(Fn fn, Args... args) {
  if (!fn) return ncclSystemError;
  RealCall scope;
  return fn(args...);
}

}  // namespace slimreduce::backends::nccl
