// One group's compressed ncclAllReduce calls, planned and carried out: the
// workspace layout, the compress kernels, the real collectives (in call
// order), and the finishing kernels. Cast calls on the same communicator,
// stream and op share one fusion buffer and one real ncclAllReduce; top-k
// calls on the same communicator and stream share one fused slot and one
// ncclAllGather, each selecting into and accumulating from its own part. CUDA builds only
// (core/CMakeLists.txt).
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "backends/status.h"
#include "compressors/compressor.h"
#include "compressors/kind.h"
#include "core/nccl/eligibility.h"
#include "core/nccl/hierarchy.h"
#include "core/nccl/memory.h"
#include "core/nccl/pipeline.h"
#include "core/runtime/auto_choice.h"
#include "core/runtime/comm_shape.h"
#include "kernels/pack.h"
#include "scheduler/group_deferral.h"
#include "scheduler/partition.h"
#include "scheduler/plan.h"

namespace slimreduce {

// What SlimReduce keeps per NCCL communicator. Shared: the engine's table
// holds it, and so does each plan using it, so a destroy or abort on another
// thread (PyTorch's watchdog) never frees it under a running plan. Its device
// memory goes with the last holder, after a device-wide wait. rank, device
// and size are set once, size last, under the engine's lock; so are the
// workspaces and orphaned_residuals changed.
// The NCCL side's communicator: its id and shape as both sides keep them
// (core/runtime/comm_shape.h; size 0 until known, -1 never), and what only
// the NCCL side needs.
struct NcclCommState : CommShape {
  NcclCommState() = default;
  NcclCommState(const NcclCommState&) = delete;
  NcclCommState& operator=(const NcclCommState&) = delete;
  ~NcclCommState();  // release_after_device_wait of everything below

  ncclComm_t comm = nullptr;
  int device = -1;
  bool blocking = false;  // created in blocking mode, seen by us
  // Its ranks agreed on what shapes the wire (core/nccl/wire_check.h); under the engine's lock.
  bool wire_agreed = false;
  DeviceAllocator* allocator = nullptr;
  std::map<cudaStream_t, Workspace> workspaces;  // under the engine's lock
  // SLIMREDUCE_ADAPTIVE: per stream, the scratch of its calls' norms
  // (core/nccl/norms.h); under the engine's lock.
  std::map<cudaStream_t, Workspace> norm_workspaces;
  // SLIMREDUCE_COMPRESSOR=auto: per stream, the device side of its exchanges
  // (core/nccl/auto_timing.h); under the engine's lock.
  std::map<cudaStream_t, Workspace> auto_workspaces;
  std::vector<DeviceBlock> orphaned_residuals;  // its residuals, once it is gone
  // SLIMREDUCE_HIERARCHICAL=1: its nodes and sub-communicators, once made
  // (core/nccl/hierarchy.h); under the engine's lock. Shared with the plans
  // that use it; ended before the communicator ends.
  std::shared_ptr<NcclHierarchy> hierarchy;
  // Per stream of the caller's: the side stream of its pipelined calls
  // (core/nccl/pipeline.h), made at the first; under the engine's lock.
  std::map<cudaStream_t, SideStream> side_streams;
};

// One call of a group's plan, in the parts that the planning stages fill one
// after another: its decision (NcclEngine::decide: whether it is compressed,
// with what, its residual; the fields at the top), its piece (GroupPlan::cut)
// and its place (GroupPlan::layout and assign). What only a run learns (the
// bytes of sharded top-k) is kept by the GroupPlan, not here.
struct CallPlan {
  Reduction call;
  std::shared_ptr<NcclCommState> comm;  // kept alive while the plan runs
  bool compressed = false;              // false: issued unchanged, in its place
  // Compressed: the compressor its decision chose (SharedState::choose: the
  // policy's, or its level's under SLIMREDUCE_ADAPTIVE), held while the plan
  // runs; each step and batch uses its calls' own.
  std::shared_ptr<compressors::Compressor> compressor;
  // SLIMREDUCE_ADAPTIVE: the level it is sent at (LevelSchedule), or -1
  // where levels do not adapt.
  int level = -1;
  float* residual = nullptr;  // sharded: then this rank's owner-side residual (nccl_sharded.h)
  float* q_state = nullptr;   // low rank: the key's Q on the device, or nullptr (seeded per call)
  // Error feedback wanted but no residual: none fits under the cap, or none
  // can be made during graph capture. Counted once the call is known to be
  // compressed (a capture may still pass it through for want of workspace).
  enum class Missing { none, no_room, in_graph } residual_missing = Missing::none;
  // The communicator's nodes when known (the report's node split), and
  // whether the call runs hierarchically over them (core/nccl/hierarchy.h).
  std::shared_ptr<NcclHierarchy> nodes;
  bool hierarchical = false;
  bool flat = false;  // its decision's CallDecision::flat: flat even over nodes
  // The call's number among its shape's, this rank, and the piece's first
  // value: a stochastic quantizer's draw (compressors::CallDraw).
  compressors::CallDraw draw;
  // SLIMREDUCE_COMPRESSOR=auto: the call's step of its size class's schedule
  // (core/nccl/auto_timing.h; compressed or passed through), and the residual
  // resets its decision caused on this rank.
  std::optional<AutoStep> auto_step;
  std::uint64_t auto_resets = 0;

  // A call cut into partitions (GroupPlan::cut): each piece is a CallPlan of
  // its own, in order, its call the piece's stretch of the caller's buffers
  // and its residual that stretch of the key's; piece `index` of `of`.
  struct Piece {
    int index = 0;
    int of = 1;
    // Sharded: this piece's owner-side residual (the key's, after its
    // values' residual: the pieces' owned shards back to back), or nullptr.
    float* owner_residual = nullptr;
  } piece;

  // Where the call's bytes sit (GroupPlan::layout, then assign).
  struct Place {
    int batch = -1;          // its fusion batch (a CastBatch, or a TopkBatch)
    std::size_t offset = 0;  // cast: elements into the fused buffer; top-k: bytes into the slot
    std::size_t stride = 0;  // top-k: the payload's own slot (device_slot_bytes)
    std::size_t select_scratch = 0;  // top-k: device_compress's scratch
    // top-k: select scratch, then accumulate; hierarchical, low rank, sharded: all its own
    std::byte* region = nullptr;
  } place;
};

// Top-k calls on one communicator and stream: each selects into its slot of
// one fused slot, one allgather carries every rank's, and each accumulates
// its payloads from the gathered slots, slot_bytes apart.
struct TopkBatch {
  NcclCommState* comm = nullptr;
  cudaStream_t stream = nullptr;
  compressors::GatheredCompressor* compressor = nullptr;  // its members' (one per batch)
  cudaStream_t kernels =
      nullptr;                   // its selects and accumulates: stream, or a pipeline's side stream
  std::size_t slot_bytes = 0;    // every member's device slot, end to end
  std::byte* payload = nullptr;  // this rank's fused slot
  std::byte* gathered = nullptr;  // every rank's, in rank order
  std::vector<int> members;       // indices into GroupPlan::calls
};

struct CastBatch {
  NcclCommState* comm = nullptr;
  cudaStream_t stream = nullptr;
  compressors::SummableCompressor* compressor = nullptr;  // its members' (one per batch)
  cudaStream_t kernels = nullptr;  // its pack and unpack: stream, or a pipeline's side stream
  bool average = false;
  std::size_t elements = 0;  // in the fusion buffer, padding included
  std::byte* fused = nullptr;
  std::vector<int> members;  // indices into GroupPlan::calls
};

// Whether `compressor` has the device entry points of a call classified as
// `path` (a classified top-k call comes as ReductionPath::topk, and the
// engine may shard it later; a sharded verdict is int8's).
bool carries_path(const compressors::Compressor& compressor, ReductionPath path);
// Whether a compressed call is top-k's (gathered, or sharded where the engine
// chose it: ReductionPath::sharded).
bool is_topk(const CallPlan& plan);

class GroupPlan {
 public:
  // compressor: the policy's when the plan was made, whose device kernels the
  // calls were classified for; held while the plan runs, so a switch on
  // another thread never frees it under the plan. Each compressed call
  // carries its own decision's compressor (CallPlan::compressor): a kind of
  // this one's, at the level its decision chose.
  explicit GroupPlan(std::shared_ptr<compressors::Compressor> compressor)
      : compressor_(std::move(compressor)) {}

  std::vector<CallPlan> calls;
  // Set when the plan runs pipelined: the side stream its kernels go on (run_kernels_on).
  SideStream* side = nullptr;

  // Cuts each compressed call larger than partition_bytes into partitions
  // (nccl_pieces), each a CallPlan of its own in the call's place. After the
  // decisions, before layout().
  void cut(std::uint64_t partition_bytes);
  // Whether the plan is one call cut into pieces that a second stream can
  // pipeline (casts and gathered top-k: their compress and finish are
  // kernels alone).
  bool pipelinable() const;
  // The pieces' compress and finish kernels go on `side` (after layout()).
  void run_kernels_on(cudaStream_t side);

  // The policy's compressor when the plan was made (nullptr under auto,
  // whose calls each take their candidate's).
  const compressors::Compressor* planned() const { return compressor_.get(); }
  // Whether the plan's compressor has the device entry points of `path`.
  bool carries(ReductionPath path) const { return compressor_ && carries_path(*compressor_, path); }

  // Lays the compressed calls out; returns the workspace bytes each
  // (communicator, stream) needs.
  std::map<std::pair<NcclCommState*, cudaStream_t>, std::size_t> layout();
  // Points each call into its workspace (after layout() and the workspaces grew).
  void assign(NcclCommState* comm, cudaStream_t stream, std::byte* base);
  // Passes every compressed call on (comm, stream) through (its workspace is too small).
  void pass_through_on(NcclCommState* comm, cudaStream_t stream);

  // How many calls each batch fuses, casts' and top-k's (after layout()).
  std::vector<std::size_t> batch_sizes() const;

  // The bytes this rank hands to the transport for calls[i] (compressed).
  double wire_sent(const CallPlan& plan) const;

  // The plan's steps (after assign()), communicator by communicator in the
  // order every rank made them, each communicator's in call order: a cast
  // batch where its first call was, each top-k call, and each call passed
  // through in its place. They point into this plan, which outlives them; run phase by
  // phase (scheduler::run_phase), each failure in the domain it came from
  // (the runner turns it into the ncclResult_t the caller gets: backends::nccl_code).
  scheduler::Plan steps();
  // The bytes of calls[i] that only its run could know (sharded top-k, whose
  // part sizes vary: set by its step as it finishes), or -1: counted when
  // planned (wire_sent). After steps() ran.
  double sent_after_run(std::size_t i) const {
    return i < sent_after_run_.size() ? sent_after_run_[i] : -1;
  }

 private:
  std::vector<const CallPlan*> in_communicator_order() const;
  // The region of a compressed call whose step is its own and needs all of
  // its workspace for itself (hierarchical, low rank, sharded); 0 for the others.
  std::size_t own_region_bytes(const CallPlan& plan) const;
  std::size_t topk_region_bytes(const CallPlan& plan) const;

  std::shared_ptr<compressors::Compressor> compressor_;
  std::vector<CastBatch> batches_;
  std::vector<TopkBatch> topk_batches_;
  std::vector<double> sent_after_run_;  // per call, set by steps() (-1: nothing to add)
};

// The size of one element of any NCCL datatype (0 when unknown).
std::size_t nccl_type_bytes(int datatype);

// The pieces a compressed flat call is reduced in (scheduler/partition.h):
// cut by partition_bytes, as the MPI path cuts; whole when hierarchical or
// low rank (one matrix, one Q). Reads the call's arguments and the setting
// alone, so every rank cuts alike.
std::vector<scheduler::Partition> nccl_pieces(const Reduction& call, bool hierarchical,
                                              std::uint64_t partition_bytes);

}  // namespace slimreduce
