#include "core/nccl/plan.h"

#include <algorithm>

#include "algorithms/cast_ring.h"
#include "algorithms/gathered.h"
#include "backends/nccl_backend.h"
#include "backends/nccl_transport.h"
#include "core/gpu/cuda_support.h"
#include "core/nccl/low_rank.h"
#include "core/nccl/sharded.h"
#include "core/runtime/counters.h"
#include "fusion/layout.h"

namespace slimreduce {
namespace {

namespace real = backends::nccl;

compressors::Elem elem_of(int datatype) {
  switch (nccl_elem(datatype)) {
    case ElemType::fp16:
      return compressors::Elem::fp16;
    case ElemType::bf16:
      return compressors::Elem::bf16;
    default:
      return compressors::Elem::fp32;
  }
}

cudaStream_t stream_of(const Reduction& call) { return static_cast<cudaStream_t>(call.stream); }

// A compressed call's own compressor, as the kind its path uses.
compressors::GatheredCompressor& gathered_of(const CallPlan& p) {
  return compressors::kind_cast<compressors::GatheredCompressor>(*p.compressor);
}
compressors::SummableCompressor& summable_of(const CallPlan& p) {
  return compressors::kind_cast<compressors::SummableCompressor>(*p.compressor);
}

// A top-k call's own region: [select scratch | accumulate scratch].
std::byte* accumulate_scratch_of(const CallPlan& p) {
  return p.place.region + round256(p.place.select_scratch);
}

// Runs one kernel launch on `device` and turns failure into the NCCL code
// the caller would get: every stage of a plan launches this way.
template <typename Launch>
Status launch_on(int device, Launch&& launch) {
  DeviceGuard guard(device);
  if (!guard.ok()) return Status::cuda(cudaErrorInvalidDevice);
  return Status::cuda(launch());
}

// A call NCCL runs unchanged, in its place among the plan's collectives.
class PassedStep final : public scheduler::Step {
 public:
  explicit PassedStep(const Reduction& call) : call_(call) {}
  Status compress() override { return {}; }
  Status communicate() override {
    return Status::nccl(real::call(
        real::api().all_reduce, call_.sendbuff, call_.recvbuff, static_cast<size_t>(call_.count),
        static_cast<ncclDataType_t>(call_.datatype), static_cast<ncclRedOp_t>(call_.op),
        static_cast<ncclComm_t>(call_.comm), stream_of(call_)));
  }
  Status finish() override { return {}; }
  double wire_sent() const override { return 0; }

 private:
  Reduction call_;
};

// A fusion batch of casts: one pack kernel into the fused buffer, the cast
// ring (NCCL sums the 16-bit elements itself), one unpack kernel.
class CastBatchStep final : public scheduler::Step {
 public:
  CastBatchStep(const CastBatch& batch, const std::vector<CallPlan>& calls)
      : batch_(batch),
        compressor_(*batch.compressor),
        transport_(batch.comm->comm, batch.comm->rank, batch.comm->size, batch.stream),
        ring_(transport_, compressor_, batch.elements, batch.fused, nullptr) {
    for (int i : batch.members) {
      const CallPlan& p = calls[i];
      const std::size_t count = p.call.count;
      packed_.push_back({static_cast<const float*>(p.call.sendbuff), p.residual, count,
                         p.place.offset, kernels::fusion_align(count) - count});
      unpacked_.push_back({static_cast<float*>(p.call.recvbuff), count, p.place.offset});
    }
  }
  Status compress() override {
    return launch_on(batch_.comm->device, [&] {
      return compressor_.device_pack(packed_.data(), static_cast<int>(packed_.size()), batch_.fused,
                                     batch_.kernels);
    });
  }
  Status communicate() override { return ring_.communicate(); }
  Status finish() override {
    const int divisor = batch_.average ? batch_.comm->size : 1;
    return launch_on(batch_.comm->device, [&] {
      return compressor_.device_unpack(batch_.fused, unpacked_.data(),
                                       static_cast<int>(unpacked_.size()), divisor, batch_.kernels);
    });
  }
  double wire_sent() const override { return ring_.wire_sent(); }

 private:
  const CastBatch& batch_;
  compressors::SummableCompressor& compressor_;
  std::vector<kernels::PackItem> packed_;
  std::vector<kernels::UnpackItem> unpacked_;
  backends::NcclTransport transport_;
  algorithms::CastRing ring_;
};

// A batch of top-k calls: each selects into its slot of the fused slot, one
// allgather carries every rank's fused slot, each accumulates its payloads
// (slot_bytes apart) in rank order: the bits each call would get alone.
class TopkBatchStep final : public scheduler::Step {
 public:
  TopkBatchStep(const TopkBatch& batch, const std::vector<CallPlan>& calls)
      : batch_(batch),
        calls_(calls),
        compressor_(*batch.compressor),
        transport_(batch.comm->comm, batch.comm->rank, batch.comm->size, batch.stream) {}
  Status compress() override {
    for (int i : batch_.members) {
      const CallPlan& p = calls_[i];
      const Reduction& c = p.call;
      SLIMREDUCE_TRY(launch_on(batch_.comm->device, [&] {
        return compressor_.device_compress(elem_of(c.datatype), c.sendbuff, p.residual, c.count,
                                           batch_.payload + p.place.offset, p.place.region,
                                           batch_.kernels);
      }));
    }
    return {};
  }
  Status communicate() override {
    return transport_.allgather(batch_.payload, batch_.slot_bytes, batch_.gathered);
  }
  Status finish() override {
    const int ranks = batch_.comm->size;
    for (int i : batch_.members) {
      const CallPlan& p = calls_[i];
      const Reduction& c = p.call;
      const int divisor = c.verdict.average ? ranks : 1;
      SLIMREDUCE_TRY(launch_on(batch_.comm->device, [&] {
        return compressor_.device_finish(batch_.gathered + p.place.offset, batch_.slot_bytes, ranks,
                                         c.count, elem_of(c.datatype), c.recvbuff, divisor,
                                         accumulate_scratch_of(p), batch_.kernels);
      }));
    }
    return {};
  }
  double wire_sent() const override {
    return algorithms::ring_allgather_wire_bytes(batch_.slot_bytes, batch_.comm->size);
  }

 private:
  const TopkBatch& batch_;
  const std::vector<CallPlan>& calls_;
  compressors::GatheredCompressor& compressor_;
  backends::NcclTransport transport_;
};

}  // namespace

NcclCommState::~NcclCommState() {
  // Our kernels queued after NCCL's on the caller's stream (unpack,
  // accumulate, a graph's) may still use these: wait for the device first.
  std::vector<DeviceBlock> blocks = std::move(orphaned_residuals);
  for (auto& [stream, workspace] : workspaces) workspace.take_blocks(blocks);
  for (auto& [stream, workspace] : norm_workspaces) workspace.take_blocks(blocks);
  for (auto& [stream, workspace] : auto_workspaces) workspace.take_blocks(blocks);
  if (allocator) release_after_device_wait(blocks, {device}, *allocator);
}

std::vector<scheduler::Partition> nccl_pieces(const Reduction& call, bool hierarchical,
                                              std::uint64_t partition_bytes) {
  if (hierarchical || call.verdict.path == ReductionPath::low_rank || partition_bytes == 0)
    return {{0, call.count}};
  return scheduler::partitions(call.count, nccl_type_bytes(call.datatype), partition_bytes);
}

std::size_t nccl_type_bytes(int datatype) {
  switch (datatype) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

bool carries_path(const compressors::Compressor& compressor, ReductionPath path) {
  using compressors::DeviceKernels;
  const DeviceKernels kernels = compressor.device_kernels();
  return (path == ReductionPath::cast && kernels == DeviceKernels::cast16) ||
         (path == ReductionPath::topk && kernels == DeviceKernels::topk) ||
         (path == ReductionPath::low_rank && kernels == DeviceKernels::low_rank) ||
         (path == ReductionPath::sharded && kernels == DeviceKernels::sharded);
}

bool is_topk(const CallPlan& p) {
  return p.compressor && p.compressor->aggregation() == compressors::Aggregation::gathered;
}

std::size_t GroupPlan::own_region_bytes(const CallPlan& p) const {
  const compressors::Compressor& compressor = *p.compressor;
  if (p.hierarchical) return round256(hierarchical_region_bytes(p, compressor));
  if (p.call.verdict.path == ReductionPath::low_rank) return low_rank_region_bytes(p, compressor);
  if (p.call.verdict.path == ReductionPath::sharded) return sharded_region_bytes(p, compressor);
  return 0;
}

std::size_t GroupPlan::topk_region_bytes(const CallPlan& p) const {
  return round256(p.place.select_scratch) +
         round256(gathered_of(p).device_finish_scratch_bytes(p.call.count, p.comm->size));
}

// A top-k batch's fused slot and every rank's copy of it.
std::size_t topk_batch_bytes(const TopkBatch& batch) {
  return round256(batch.slot_bytes) + round256(batch.slot_bytes * batch.comm->size);
}

std::map<std::pair<NcclCommState*, cudaStream_t>, std::size_t> GroupPlan::layout() {
  // The one planner (fusion/layout.h), by key anywhere in the group: casts
  // that one 16-bit collective can carry (same communicator, stream,
  // compressor and op) share a fused buffer; top-k calls on one
  // communicator and stream with one compressor share a fused slot, each
  // call its own scratch. A partition's piece runs alone, as the MPI path
  // runs a cut call's pieces.
  struct CastKey {
    NcclCommState* comm;
    cudaStream_t stream;
    compressors::SummableCompressor* compressor;  // the members' (levels: one per batch)
    bool average;
    bool operator==(const CastKey&) const = default;
  };
  struct TopkKey {
    NcclCommState* comm;
    cudaStream_t stream;
    compressors::GatheredCompressor* compressor;
    bool operator==(const TopkKey&) const = default;
  };
  fusion::Layout<CastKey> casts;
  fusion::Layout<TopkKey> topks(fusion::BatchRule{.placed = fusion::as_given});  // slot bytes
  std::vector<int> cast_calls, topk_calls;  // the call of each tensor each layout placed
  std::map<std::pair<NcclCommState*, cudaStream_t>, std::size_t> need;
  for (int i = 0; i < static_cast<int>(calls.size()); ++i) {
    CallPlan& p = calls[i];
    if (!p.compressed) continue;
    const auto key = std::make_pair(p.comm.get(), stream_of(p.call));
    const bool alone = p.piece.of > 1;
    fusion::Placement placed;
    if (const std::size_t own = own_region_bytes(p)) {  // a step of its own
      need[key] += own;
      continue;
    }
    if (p.call.verdict.path == ReductionPath::topk) {
      p.place.stride = gathered_of(p).device_slot_bytes(p.call.count);  // a multiple of 16 bytes
      p.place.select_scratch = gathered_of(p).device_compress_scratch_bytes(p.call.count);
      need[key] += topk_region_bytes(p);
      placed = topks.add({key.first, key.second, &gathered_of(p)}, p.place.stride, alone);
      topk_calls.push_back(i);
    } else {
      placed = casts.add({key.first, key.second, &summable_of(p), p.call.verdict.average},
                         p.call.count, alone);
      cast_calls.push_back(i);
    }
    p.place.batch = placed.batch;
    p.place.offset = placed.offset;
  }
  batches_.clear();
  for (int b = 0; b < casts.batches(); ++b) {
    CastBatch& batch = batches_.emplace_back();
    batch.comm = casts.key(b).comm;
    batch.stream = casts.key(b).stream;
    batch.compressor = casts.key(b).compressor;
    batch.kernels = batch.stream;
    batch.average = casts.key(b).average;
    batch.elements = casts.elements(b);
    for (int member : casts.members(b)) batch.members.push_back(cast_calls[member]);
    need[{batch.comm, batch.stream}] += round256(batch.elements * sizeof(std::uint16_t));
  }
  topk_batches_.clear();
  for (int b = 0; b < topks.batches(); ++b) {
    TopkBatch& batch = topk_batches_.emplace_back();
    batch.comm = topks.key(b).comm;
    batch.stream = topks.key(b).stream;
    batch.compressor = topks.key(b).compressor;
    batch.kernels = batch.stream;
    batch.slot_bytes = topks.elements(b);
    for (int member : topks.members(b)) batch.members.push_back(topk_calls[member]);
    need[{batch.comm, batch.stream}] += topk_batch_bytes(batch);
  }
  return need;
}

void GroupPlan::assign(NcclCommState* comm, cudaStream_t stream, std::byte* base) {
  for (CastBatch& batch : batches_) {
    if (batch.comm != comm || batch.stream != stream) continue;
    batch.fused = base;
    base += round256(batch.elements * sizeof(std::uint16_t));
  }
  for (TopkBatch& batch : topk_batches_) {
    if (batch.comm != comm || batch.stream != stream) continue;
    batch.payload = base;
    batch.gathered = base + round256(batch.slot_bytes);
    base += topk_batch_bytes(batch);
  }
  for (CallPlan& p : calls) {
    if (!p.compressed || p.comm.get() != comm || stream_of(p.call) != stream) continue;
    std::size_t bytes = own_region_bytes(p);
    if (!bytes && p.call.verdict.path == ReductionPath::topk) bytes = topk_region_bytes(p);
    if (!bytes) continue;  // a cast: its batch's fused buffer
    p.place.region = base;
    base += bytes;
  }
}

void GroupPlan::cut(std::uint64_t partition_bytes) {
  std::vector<CallPlan> cut_calls;
  for (CallPlan& p : calls) {
    const bool sharded = p.compressed && p.call.verdict.path == ReductionPath::sharded;
    const std::vector<scheduler::Partition> pieces =
        p.compressed ? nccl_pieces(p.call, p.hierarchical, partition_bytes)
                     : std::vector<scheduler::Partition>{{0, p.call.count}};
    const std::size_t element = nccl_type_bytes(p.call.datatype);
    // The owner-side residuals follow the values' residual (sharded_key_floats).
    float* owner = sharded && p.residual ? p.residual + p.call.count : nullptr;
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      CallPlan& piece = cut_calls.emplace_back(p);
      piece.piece.index = static_cast<int>(i);
      piece.piece.of = static_cast<int>(pieces.size());
      piece.piece.owner_residual = owner;
      if (owner)
        owner += sharded_owned_floats(*p.compressor, pieces[i].count, p.comm->size, p.comm->rank);
      if (pieces.size() == 1) continue;
      piece.draw = p.draw.at(pieces[i].begin);
      const std::size_t skip = pieces[i].begin * element;
      piece.call.sendbuff = static_cast<const std::byte*>(p.call.sendbuff) + skip;
      piece.call.recvbuff = static_cast<std::byte*>(p.call.recvbuff) + skip;
      piece.call.count = pieces[i].count;
      if (p.residual) piece.residual = p.residual + pieces[i].begin;
    }
  }
  calls = std::move(cut_calls);
}

bool GroupPlan::pipelinable() const {
  if (calls.size() < 2 || calls.front().piece.of != static_cast<int>(calls.size())) return false;
  for (const CallPlan& p : calls) {
    const ReductionPath path = p.call.verdict.path;
    if (!p.compressed || p.hierarchical ||
        (path != ReductionPath::cast && path != ReductionPath::topk))
      return false;
  }
  return true;
}

void GroupPlan::run_kernels_on(cudaStream_t side) {
  for (CastBatch& batch : batches_) batch.kernels = side;
  for (TopkBatch& batch : topk_batches_) batch.kernels = side;
}

// A call passed through runs as the caller made it: a cut call's pieces
// become the whole call again (piece 0 holds its start; they follow it).
void GroupPlan::pass_through_on(NcclCommState* comm, cudaStream_t stream) {
  std::vector<CallPlan> kept;
  for (CallPlan& p : calls) {
    if (p.comm.get() != comm || stream_of(p.call) != stream) {
      kept.push_back(std::move(p));
      continue;
    }
    p.compressed = p.hierarchical = false;
    if (p.piece.index > 0) {
      kept.back().call.count += p.call.count;
      continue;
    }
    p.piece.of = 1;
    kept.push_back(std::move(p));
  }
  calls = std::move(kept);
}

std::vector<std::size_t> GroupPlan::batch_sizes() const {
  std::vector<std::size_t> sizes;
  for (const CastBatch& batch : batches_) sizes.push_back(batch.members.size());
  for (const TopkBatch& batch : topk_batches_) sizes.push_back(batch.members.size());
  return sizes;
}

double GroupPlan::wire_sent(const CallPlan& p) const {
  const compressors::Compressor& compressor = *p.compressor;
  if (p.hierarchical) return hierarchical_wire_sent(p, compressor);
  if (p.call.verdict.path == ReductionPath::low_rank) return low_rank_wire_sent(p, compressor);
  if (p.call.verdict.path == ReductionPath::sharded) return sharded_wire_sent(p, compressor);
  if (p.call.verdict.path == ReductionPath::topk)
    return ring_allgather_wire_bytes(p.place.stride, p.comm->size);
  return ring_allreduce_wire_bytes(p.call.count * sizeof(std::uint16_t), p.comm->size);
}

// The calls communicator by communicator (CommShape::id, the order every rank
// made them), each communicator's in call order. The ranks may issue a group's
// calls on different communicators in different orders (NCCL launches a group
// together), but the steps that run collectives after the group ends
// (PowerSGD, the quantizers, sharded top-k) run them step by step outside any
// group: every rank must take the steps in one order, or two of them wait on
// each other.
std::vector<const CallPlan*> GroupPlan::in_communicator_order() const {
  std::vector<const CallPlan*> ordered;
  for (const CallPlan& p : calls) ordered.push_back(&p);
  std::stable_sort(ordered.begin(), ordered.end(), [](const CallPlan* a, const CallPlan* b) {
    return (a->comm ? a->comm->id : 0) < (b->comm ? b->comm->id : 0);
  });
  return ordered;
}

scheduler::Plan GroupPlan::steps() {
  scheduler::Plan steps;
  sent_after_run_.assign(calls.size(), -1);
  std::vector<bool> batch_added(batches_.size(), false);
  std::vector<bool> topk_added(topk_batches_.size(), false);
  for (const CallPlan* in_order : in_communicator_order()) {
    const CallPlan& p = *in_order;
    if (!p.compressed) {
      steps.add(std::make_unique<PassedStep>(p.call));
    } else if (p.hierarchical) {
      steps.add(hierarchical_step(p, *p.compressor));
    } else if (p.call.verdict.path == ReductionPath::low_rank) {
      steps.add(low_rank_step(p, *p.compressor));
    } else if (p.call.verdict.path == ReductionPath::sharded) {
      steps.add(sharded_step(p, *p.compressor, &sent_after_run_[&p - calls.data()]));
    } else if (p.call.verdict.path == ReductionPath::topk) {
      if (topk_added[p.place.batch]) continue;  // as a cast batch: where its first call was
      topk_added[p.place.batch] = true;
      steps.add(std::make_unique<TopkBatchStep>(topk_batches_[p.place.batch], calls));
    } else if (!batch_added[p.place.batch]) {
      // The batch's one collective goes where its first call was: the same place on every rank.
      batch_added[p.place.batch] = true;
      steps.add(std::make_unique<CastBatchStep>(batches_[p.place.batch], calls));
    }
  }
  return steps;
}

}  // namespace slimreduce
