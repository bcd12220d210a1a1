#include "core/nccl/real_group.h"

#include <nccl.h>
#include <sched.h>

#include <set>

#include "backends/nccl_backend.h"

namespace slimreduce {
namespace {
namespace real = backends::nccl;
}  // namespace

int RealGroupActions::real_group_start() { return real::call(real::api().group_start); }

int RealGroupActions::real_group_end() { return real::call(real::api().group_end); }

int RealGroupActions::real_group_simulate_end(void* sim_info) {
#if SLIMREDUCE_NCCL_HAS_SIMULATE_END
  return real::call(real::api().group_simulate_end, static_cast<ncclSimInfo_t*>(sim_info));
#else
  (void)sim_info;
  return ncclInvalidUsage;  // never called: the shim has no ncclGroupSimulateEnd then
#endif
}

int RealGroupActions::pass_through(const Reduction& c) {
  if (c.coll_config) {
    return real::call(real::api().all_reduce_config, c.sendbuff, c.recvbuff,
                      static_cast<size_t>(c.count), static_cast<ncclDataType_t>(c.datatype),
                      static_cast<ncclRedOp_t>(c.op), static_cast<ncclComm_t>(c.comm),
                      static_cast<cudaStream_t>(c.stream),
                      static_cast<const ncclCollConfig_t*>(c.coll_config));
  }
  return real::call(real::api().all_reduce, c.sendbuff, c.recvbuff, static_cast<size_t>(c.count),
                    static_cast<ncclDataType_t>(c.datatype), static_cast<ncclRedOp_t>(c.op),
                    static_cast<ncclComm_t>(c.comm), static_cast<cudaStream_t>(c.stream));
}

int RealGroupActions::wait_ready(std::vector<Reduction>& held) {
  std::set<void*> comms;
  for (const Reduction& c : held) comms.insert(c.comm);
  for (void* comm : comms) {
    ncclResult_t state = ncclInProgress;
    while (state == ncclInProgress) {
      const ncclResult_t rc =
          real::call(real::api().comm_get_async_error, static_cast<ncclComm_t>(comm), &state);
      if (rc != ncclSuccess) return rc;
      if (state == ncclInProgress) sched_yield();
    }
    if (state != ncclSuccess) return state;
  }
  return ncclSuccess;
}

}  // namespace slimreduce
