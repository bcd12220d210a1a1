// The NCCL side of the runtime (core/runtime/runtime.h): the communicators we saw
// created, this thread's group, and the plan of each ncclAllReduce. Made by
// interpose/nccl_shim.cc on the first NCCL call (a job may use NCCL without
// MPI). Settings, policy, decision, residuals and counters are the runtime's.
// CUDA builds only (core/CMakeLists.txt compiles its users there alone).
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "backends/nccl_backend.h"
#include "core/gpu/cuda_support.h"
#include "core/nccl/auto_timing.h"
#include "core/nccl/eligibility.h"
#include "core/nccl/hierarchy.h"
#include "core/nccl/memory.h"
#include "core/nccl/norms.h"
#include "core/nccl/plan.h"
#include "core/nccl/timeline.h"
#include "core/runtime/counters.h"
#include "core/runtime/runtime.h"
#include "scheduler/group_deferral.h"

namespace slimreduce {

class NcclEngine : public RuntimeSide {
 public:
  explicit NcclEngine(Runtime& runtime);
  ~NcclEngine() override;
  NcclEngine(const NcclEngine&) = delete;
  NcclEngine& operator=(const NcclEngine&) = delete;

  // The NCCL side, or nullptr before the first NCCL call.
  static NcclEngine* get() {
    Runtime* runtime = Runtime::get();
    return runtime ? static_cast<NcclEngine*>(runtime->side(Side::nccl)) : nullptr;
  }
  // Attaches the NCCL side to the runtime (once).
  static NcclEngine& start(Runtime& runtime);

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
  // Before a real destroy, abort or finalize: the communicator's node
  // sub-communicators (SLIMREDUCE_HIERARCHICAL) end first, the same way.
  void comm_ending(ncclComm_t comm, NcclHierarchy::Ending how);

  // The runtime switched the compressor: the devices of our communicators,
  // whose queued kernels may still use the residuals it dropped.
  void policy_changed(std::vector<int>& devices) override;
  // Before the timeline's file closes: the NCCL groups' spans still waiting
  // for their events are written (core/nccl/timeline.h).
  void before_timeline_ends() override;
  // The counters of NCCL calls alone.
  Counters counters() const { return runtime_.counters(Side::nccl); }

 private:
  class PlanRunner;
  friend class PlanRunner;

  NcclModeFacts mode_facts(ncclResult_t rc, const ncclConfig_t* config, ncclComm_t parent) const;
  // Asks a blocking communicator its rank count, rank and device, once they mean something.
  void shape(ncclComm_t comm);
  void shape_created_in_group();
  // What a communicator's one-time set-up steps (agree_on_wire, know_nodes)
  // read of it, copied under mutex_; nullopt unless it is one we saw created
  // in blocking mode and its shape is known.
  struct ReadyComm {
    CommShape shape;
    int device = -1;
    bool wire_agreed = false;
    bool knows_nodes = false;
  };
  std::optional<ReadyComm> ready_comm(ncclComm_t comm) const;
  // SLIMREDUCE_HIERARCHICAL=1, outside any group: comm's nodes learnt and its
  // sub-communicators made, once (nccl_engine_setup.cc).
  ncclResult_t know_nodes(ncclComm_t comm, cudaStream_t stream);
  // Once per communicator, outside any group and capture: its ranks agree on
  // what shapes the wire (core/nccl/wire_check.h), or the call fails.
  ncclResult_t agree_on_wire(ncclComm_t comm, cudaStream_t stream);
  void comm_facts(ncclComm_t comm, CallFacts& facts) const;
  // The call's facts (filled) and the shared classifier's verdict on them.
  ReductionVerdict classify_call(const Reduction& call, const compressors::Compressor* compressor,
                                 CallFacts& facts);
  // alone: the plan is one call made outside any group (it may be pipelined).
  ncclResult_t plan(GroupPlan& plan, bool alone);
  void count_planned(const GroupPlan& plan, std::size_t first);
  void pipeline(GroupPlan& plan);
  ncclResult_t plan_memory(GroupPlan& plan);
  enum class Planned { ok, out_of_memory };
  // planned: the policy's compressor, or nullptr under auto. timed: the
  // call may be a timed step of auto's schedule (a call alone, not captured).
  Planned decide(CallPlan& p, const compressors::Compressor* planned, bool capturing, bool timed,
                 SharedState& shared, Counters& counted);
  std::optional<CallDecision> fixed_decision(const CallPlan& p,
                                             const compressors::Compressor& planned,
                                             const CallShape& shape, bool capturing,
                                             SharedState& shared, Counters& counted);
  Planned with_residual(CallPlan& p, const CallDecision& decision, bool capturing,
                        SharedState& shared);
  // SLIMREDUCE_COMPRESSOR=auto (core/nccl/engine_auto.cc).
  std::optional<CallDecision> auto_decision(CallPlan& p, const CallShape& shape, bool capturing,
                                            bool timed, SharedState& shared, Counters& counted);
  static std::size_t auto_key_floats(const CallPlan& p,
                                     const std::vector<scheduler::Partition>& pieces,
                                     const Policy& policy);
  static bool owner_side_kept(ResidualSlot& slot, int candidate, float* tail,
                              std::size_t tail_floats, void* stream);
  void record_auto_steps(const GroupPlan& plan);
  ncclResult_t absorb_auto(const GroupPlan& plan);
  // A plan of one timed call: its start event (stop: its stop event) on its stream.
  ncclResult_t time_auto_call(const GroupPlan& plan, bool stop);
  void count_pass_through(const Reduction& call);
  void warn_no_residual_in_graph();  // under mutex_
  static bool topk_shards(const CallPlan& p, const compressors::Compressor& compressor);
  void note_topk_gathered_in_graph();  // under mutex_
  void count_after_run(const GroupPlan& plan);
  // SLIMREDUCE_ADAPTIVE (core/nccl/norms.h): before a plan's decisions, the
  // due norms of its shapes into the runtime's schedule; after its work is
  // enqueued, the norms of its calls that adapt.
  ncclResult_t absorb_norms(const GroupPlan& plan);
  ncclResult_t measure_norms(const GroupPlan& plan);
  // SLIMREDUCE_TIMELINE: the planned group's marks, a stream per (stream with
  // compressed calls not being captured); nullopt when the timeline is off.
  std::optional<NcclTimeline::Group> time_group(const GroupPlan& plan);
  // SLIMREDUCE_TIMELINE, a pipelined call: a group of marks per piece (each
  // phase's span on the stream it ran on); empty when the timeline is off.
  std::vector<NcclTimeline::Group> time_pieces(const GroupPlan& plan);

  Runtime& runtime_;
  DeviceAllocator& device_memory_;  // the runtime's

  mutable std::mutex mutex_;  // guards everything below; never held across a real NCCL call
  std::map<ncclComm_t, std::shared_ptr<NcclCommState>> comms_;
  int first_rank_ = -1;  // the first communicator's rank, which our log lines carry
  bool warned_no_residual_in_graph_ = false;
  bool noted_topk_gathered_in_graph_ = false;
  std::unique_ptr<NcclTimeline> timeline_;  // made at the first timed group
  NcclNorms norms_;                         // SLIMREDUCE_ADAPTIVE's, pending (own lock)
  NcclAutoTiming auto_timing_;              // SLIMREDUCE_COMPRESSOR=auto's (own lock)
};

}  // namespace slimreduce
