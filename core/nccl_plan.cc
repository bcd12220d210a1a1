#ifdef SLIMREDUCE_HAVE_CUDA
#include "core/nccl_plan.h"

#include "algorithms/cast_ring.h"
#include "algorithms/gathered.h"
#include "backends/nccl_backend.h"
#include "backends/nccl_transport.h"
#include "core/counters.h"
#include "core/cuda_support.h"
#include "fusion/layout.h"

namespace slimreduce {
namespace {

namespace real = backends::nccl;

constexpr std::size_t round256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

compressors::Elem elem_of(int datatype) {
  switch (nccl_elem(datatype)) {
    case NcclElem::fp16:
      return compressors::Elem::fp16;
    case NcclElem::bf16:
      return compressors::Elem::bf16;
    default:
      return compressors::Elem::fp32;
  }
}

cudaStream_t stream_of(const Reduction& call) { return static_cast<cudaStream_t>(call.stream); }

// A topk region: [select scratch | payload | gathered payloads | accumulate scratch].
struct TopkRegion {
  std::byte* scratch;
  std::byte* payload;
  std::byte* gathered;
  std::byte* accumulate;
};

TopkRegion topk_region(const CallPlan& p) {
  TopkRegion r;
  r.scratch = p.region;
  r.payload = r.scratch + round256(p.select_scratch);
  r.gathered = r.payload + round256(p.stride);
  r.accumulate = r.gathered + round256(p.stride * p.comm->size);
  return r;
}

// Runs one kernel launch on `device` and turns failure into the NCCL code
// the caller would get: every stage of a plan launches this way.
template <typename Launch>
Status launch_on(int device, Launch&& launch) {
  DeviceGuard guard(device);
  if (!guard.ok()) return Status::cuda(cudaErrorInvalidDevice);
  return Status::cuda(launch());
}

}  // namespace

NcclCommState::~NcclCommState() {
  // Our kernels queued after NCCL's on the caller's stream (unpack,
  // accumulate, a graph's) may still use these: wait for the device first.
  std::vector<DeviceBlock> blocks = std::move(orphaned_residuals);
  for (auto& [stream, workspace] : workspaces) workspace.take_blocks(blocks);
  if (allocator) release_after_device_wait(blocks, {device}, *allocator);
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

bool GroupPlan::carries(ReductionPath path) const {
  using compressors::DeviceKernels;
  if (!compressor_) return false;
  const DeviceKernels kernels = compressor_->device_kernels();
  return (path == ReductionPath::cast && kernels == DeviceKernels::cast16) ||
         (path == ReductionPath::topk && kernels == DeviceKernels::topk);
}

std::size_t GroupPlan::topk_region_bytes(const CallPlan& p) const {
  return round256(p.select_scratch) + round256(p.stride) + round256(p.stride * p.comm->size) +
         round256(gathered().device_finish_scratch_bytes(p.call.count, p.comm->size));
}

std::map<std::pair<NcclCommState*, cudaStream_t>, std::size_t> GroupPlan::layout() {
  // Casts that one 16-bit collective can carry (same communicator, stream and
  // op) share a fused buffer (fusion/layout.h); top-k calls each have a region.
  struct CastKey {
    NcclCommState* comm;
    cudaStream_t stream;
    bool average;
    bool operator==(const CastKey&) const = default;
  };
  fusion::Layout<CastKey> casts;
  std::vector<int> cast_calls;  // the call of each tensor casts placed
  std::map<std::pair<NcclCommState*, cudaStream_t>, std::size_t> need;
  for (int i = 0; i < static_cast<int>(calls.size()); ++i) {
    CallPlan& p = calls[i];
    if (!p.compressed) continue;
    const auto key = std::make_pair(p.comm.get(), stream_of(p.call));
    if (p.call.verdict.path == ReductionPath::topk) {
      p.stride = gathered().device_slot_bytes(p.call.count);
      p.select_scratch = gathered().device_compress_scratch_bytes(p.call.count);
      need[key] += topk_region_bytes(p);
      continue;
    }
    const fusion::Placement placed =
        casts.add({key.first, key.second, p.call.verdict.average}, p.call.count);
    p.batch = placed.batch;
    p.offset = placed.offset;
    cast_calls.push_back(i);
  }
  batches_.clear();
  for (int b = 0; b < casts.batches(); ++b) {
    CastBatch& batch = batches_.emplace_back();
    batch.comm = casts.key(b).comm;
    batch.stream = casts.key(b).stream;
    batch.average = casts.key(b).average;
    batch.elements = casts.elements(b);
    for (int member : casts.members(b)) batch.members.push_back(cast_calls[member]);
    need[{batch.comm, batch.stream}] += round256(batch.elements * sizeof(std::uint16_t));
  }
  return need;
}

void GroupPlan::assign(NcclCommState* comm, cudaStream_t stream, std::byte* base) {
  for (CastBatch& batch : batches_) {
    if (batch.comm != comm || batch.stream != stream) continue;
    batch.fused = base;
    base += round256(batch.elements * sizeof(std::uint16_t));
  }
  for (CallPlan& p : calls) {
    if (!p.compressed || p.comm.get() != comm || stream_of(p.call) != stream) continue;
    if (p.call.verdict.path != ReductionPath::topk) continue;
    p.region = base;
    base += topk_region_bytes(p);
  }
}

void GroupPlan::pass_through_on(NcclCommState* comm, cudaStream_t stream) {
  for (CallPlan& p : calls) {
    if (p.comm.get() == comm && stream_of(p.call) == stream) p.compressed = false;
  }
}

double GroupPlan::wire_sent(const CallPlan& p) const {
  if (p.call.verdict.path == ReductionPath::topk)
    return ring_allgather_wire_bytes(p.stride, p.comm->size);
  return ring_allreduce_wire_bytes(p.call.count * sizeof(std::uint16_t), p.comm->size);
}

// The compressor's device entry points, on the call's device and stream.
Status GroupPlan::compress() {
  for (const CastBatch& batch : batches_) {
    std::vector<kernels::PackItem> items;
    for (int i : batch.members) {
      const CallPlan& p = calls[i];
      const std::size_t count = p.call.count;
      items.push_back({static_cast<const float*>(p.call.sendbuff), p.residual, count, p.offset,
                       kernels::fusion_align(count) - count});
    }
    SLIMREDUCE_TRY(launch_on(batch.comm->device, [&] {
      return summable().device_pack(items.data(), static_cast<int>(items.size()), batch.fused,
                                    batch.stream);
    }));
  }
  for (const CallPlan& p : calls) {
    if (!p.compressed || p.call.verdict.path != ReductionPath::topk) continue;
    const TopkRegion r = topk_region(p);
    SLIMREDUCE_TRY(launch_on(p.comm->device, [&] {
      return gathered().device_compress(elem_of(p.call.datatype), p.call.sendbuff, p.residual,
                                        p.call.count, r.payload, r.scratch, stream_of(p.call));
    }));
  }
  return {};
}

// The collectives, in call order, through the same algorithm objects as the
// MPI paths (their communicate phase): NCCL sums the casts' 16-bit elements
// itself, and allgathers the top-k payloads at their padded stride.
Status GroupPlan::collectives() {
  for (CallPlan& p : calls) {
    const Reduction& c = p.call;
    auto comm = static_cast<ncclComm_t>(c.comm);
    if (!p.compressed) {
      SLIMREDUCE_TRY(Status::nccl(real::call(real::api().all_reduce, c.sendbuff, c.recvbuff,
                                             static_cast<size_t>(c.count),
                                             static_cast<ncclDataType_t>(c.datatype),
                                             static_cast<ncclRedOp_t>(c.op), comm, stream_of(c))));
    } else if (c.verdict.path == ReductionPath::topk) {
      const TopkRegion r = topk_region(p);
      backends::NcclTransport transport(comm, p.comm->rank, p.comm->size, stream_of(c));
      algorithms::GatheredAllreduce gather(transport, gathered(), p.call.count, p.stride, r.payload,
                                           r.gathered);
      SLIMREDUCE_TRY(gather.communicate());
    } else if (CastBatch& batch = batches_[p.batch]; !batch.issued) {
      // The batch's one collective goes where its first call was: the same place on every rank.
      batch.issued = true;
      backends::NcclTransport transport(comm, p.comm->rank, p.comm->size, batch.stream);
      algorithms::CastRing ring(transport, summable(), batch.elements, batch.fused, nullptr);
      SLIMREDUCE_TRY(ring.communicate());
    }
  }
  return {};
}

Status GroupPlan::finish() {
  for (const CastBatch& batch : batches_) {
    std::vector<kernels::UnpackItem> items;
    for (int i : batch.members) {
      const CallPlan& p = calls[i];
      items.push_back({static_cast<float*>(p.call.recvbuff), p.call.count, p.offset});
    }
    const int divisor = batch.average ? batch.comm->size : 1;
    SLIMREDUCE_TRY(launch_on(batch.comm->device, [&] {
      return summable().device_unpack(batch.fused, items.data(), static_cast<int>(items.size()),
                                      divisor, batch.stream);
    }));
  }
  for (const CallPlan& p : calls) {
    if (!p.compressed || p.call.verdict.path != ReductionPath::topk) continue;
    const TopkRegion r = topk_region(p);
    const int divisor = p.call.verdict.average ? p.comm->size : 1;
    SLIMREDUCE_TRY(launch_on(p.comm->device, [&] {
      return gathered().device_finish(r.gathered, p.comm->size, p.call.count,
                                      elem_of(p.call.datatype), p.call.recvbuff, divisor,
                                      r.accumulate, stream_of(p.call));
    }));
  }
  return {};
}

}  // namespace slimreduce
#endif  // SLIMREDUCE_HAVE_CUDA
