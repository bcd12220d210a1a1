// SLIMREDUCE_HIERARCHICAL=1 on the NCCL path (algorithms/hierarchical.h,
// docs/architecture.md "Hierarchical"): a communicator's nodes, learnt once
// by an exchange over it; its node and cross-node sub-communicators
// (ncclCommSplit), kept with it and ended before it; and the step that runs
// one fp32 call hierarchically on the caller's stream. CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "backends/nccl_transport.h"
#include "compressors/compressor.h"
#include "core/gpu/device_memory.h"
#include "core/runtime/counters.h"
#include "core/runtime/node_split.h"
#include "scheduler/plan.h"
#include "scheduler/route.h"

namespace slimreduce {

struct CallPlan;

// What one communicator's nodes allow, decided once from facts every rank
// gathered alike: the same on every rank.
struct NcclHierarchy {
  // The sub-communicators (ncclCommSplit), owned: destroyed with these. Each
  // call runs on views of them on its own stream (their stream is unused).
  std::unique_ptr<backends::NcclTransport> node;   // this node's ranks, by rank
  std::unique_ptr<backends::NcclTransport> cross;  // this local index on every node, by node
  NodeSplit split;                                 // the nodes (core/runtime/node_split.h)
  bool flat() const { return !node; }

  // How the parent ends; its sub-communicators end the same way first.
  enum class Ending { destroy, abort, finalize };
  // Ends (and drops) the sub-communicators, in the same order on every rank.
  void end(Ending how);
};

// Learns comm's nodes (an allgather of each rank's node name over comm, on a
// private stream waited for here: once per communicator, at its first
// eligible call outside a group, like the splits, which block too) and
// splits it when they allow. Nodes: blocks of local_size ranks of the job
// (job_rank: the launcher's or MPI's rank) when set, else the ranks on one
// machine (host name and boot id). Flat, with the reason, for one node,
// nodes of unequal size, one rank per node, or an NCCL without ncclCommSplit.
// The exchange's buffer comes from `allocator`, ordered on its stream.
ncclResult_t make_nccl_hierarchy(ncclComm_t comm, int rank, int size, int device, int job_rank,
                                 std::optional<int> local_size, DeviceAllocator& allocator,
                                 NcclHierarchy* out);

// Whether a communicator with `nodes` (nullptr: not known yet) reduces a
// call of `route` hierarchically: nodes known and not flat, a cast or top-k.
bool nodes_take(const NcclHierarchy* nodes, ReductionPath route);
// Whether this planned call runs hierarchically: compressed, fp32, not flat
// by its decision (SLIMREDUCE_HIERARCHICAL=auto), and nodes_take its route.
bool runs_hierarchically(const CallPlan& p);

// The workspace bytes of one hierarchical call (its region).
std::size_t hierarchical_region_bytes(const CallPlan& p, const compressors::Compressor& compressor);

// Bytes this rank hands to the transports for one hierarchical call.
double hierarchical_wire_sent(const CallPlan& p, const compressors::Compressor& compressor);

// The call's step (after its region was assigned): the padded copy before
// the group's collectives, the node's reduce-scatter among them, and after
// the group ends the shard's compress kernel, the collective across nodes,
// its finishing kernel and the node's allgather, all on the call's stream.
std::unique_ptr<scheduler::Step> hierarchical_step(const CallPlan& p,
                                                   compressors::Compressor& compressor);

// Splits a call's counted bytes by node (Counters::inter_node_*), once its
// communicator's nodes are known (nodes: null while not).
void count_by_node(Counters& counted, const NcclHierarchy* nodes, bool hierarchical,
                   std::size_t count);

}  // namespace slimreduce
