// The NCCL side of SlimReduce: settings, the communicators we saw created,
// residuals, counters, and the decision for each ncclAllReduce. One instance
// per process, made by interpose/nccl_shim.cc on the first NCCL call (a job may
// use NCCL without MPI, so it does not hang off the MPI engine); the MPI
// engine may read its counters. Only with SLIMREDUCE_HAVE_CUDA.
#pragma once

#ifdef SLIMREDUCE_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "backends/nccl_backend.h"
#include "core/counters.h"
#include "core/cuda_support.h"
#include "core/decision.h"
#include "core/nccl_eligibility.h"
#include "core/nccl_memory.h"
#include "core/nccl_plan.h"
#include "core/residuals.h"
#include "core/settings.h"
#include "scheduler/group_deferral.h"

namespace slimreduce {

class NcclEngine {
 public:
  explicit NcclEngine(Settings settings);
  ~NcclEngine();
  NcclEngine(const NcclEngine&) = delete;
  NcclEngine& operator=(const NcclEngine&) = delete;

  // The instance the NCCL shim made, or nullptr before the first NCCL call.
  static NcclEngine* get();
  // Makes the instance (once; it lives until the process ends).
  static NcclEngine& start(Settings settings);

  ncclResult_t all_reduce(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                          cudaStream_t stream, const ncclCollConfig_t* coll_config = nullptr);
  ncclResult_t group_start();
  ncclResult_t group_end();
#if SLIMREDUCE_NCCL_HAS_SIMULATE_END
  ncclResult_t group_simulate_end(ncclSimInfo_t* sim_info);
#endif

  // After a real init, split or shrink returned rc (ncclSuccess or
  // ncclInProgress); the mode follows NCCL's rule (nccl_blocking_mode).
  void comm_created(ncclComm_t comm, ncclResult_t rc, const ncclConfig_t* config,
                    ncclComm_t parent = nullptr);
  // After a real destroy or abort: forgets the communicator. Its device memory
  // is freed, after a device-wide wait, once no plan on another thread uses it.
  // After an abort (`aborted`), the wait for the device before the free runs
  // on a thread of its own: a watchdog aborting several hung communicators one
  // by one must not block on the kernels of those it has not aborted yet.
  void comm_gone(ncclComm_t comm, bool aborted = false);

  // Switches the compressor and drops every residual (as Engine::use_compressor).
  bool use_compressor(const std::string& name);
  // Sets the top-k ratio, 0 < ratio <= 1, and drops every residual (as Engine's).
  bool set_topk_ratio(double ratio);
  Counters counters() const;
  const Settings& settings() const { return settings_; }
  // The report of a job that never started the MPI engine (NCCL only: with
  // MPI up, the MPI engine writes it, these counters included; the shim asks).
  void write_report_at_exit();

 private:
  class PlanRunner;
  friend class PlanRunner;

  NcclModeFacts mode_facts(ncclResult_t rc, const ncclConfig_t* config, ncclComm_t parent) const;
  // Asks a blocking communicator its rank count, rank and device, once they mean something.
  void shape(ncclComm_t comm);
  void shape_created_in_group();
  void comm_facts(ncclComm_t comm, NcclCallFacts& facts) const;
  NcclCallFacts facts_of(const Reduction& call, const compressors::Compressor* compressor);
  ncclResult_t plan(GroupPlan& plan);
  ncclResult_t plan_memory(GroupPlan& plan);
  enum class Planned { ok, out_of_memory };
  Planned decide(CallPlan& p, bool capturing);
  // The compressor in effect (nullptr: none), held by whoever runs a call with it.
  std::shared_ptr<compressors::Compressor> current_compressor() const;
  void count_pass_through(const Reduction& call);
  void warn_no_residual_in_graph();  // under mutex_

  Settings settings_;
  bool error_feedback_ = false;
  CudaAllocator allocator_;

  mutable std::mutex mutex_;  // guards everything below; never held across a real NCCL call
  std::shared_ptr<compressors::Compressor> compressor_;  // nullptr for "none"
  std::uint64_t next_comm_id_ = 1;
  std::map<ncclComm_t, std::shared_ptr<NcclCommState>> comms_;
  NcclResidualStore residuals_;
  CompressionDecision decision_;
  Counters counters_;
  int report_rank_ = -1;
  int report_size_ = 0;
  bool reported_ = false;
  bool warned_no_residual_in_graph_ = false;
};

}  // namespace slimreduce
#endif  // SLIMREDUCE_HAVE_CUDA
