// SLIMREDUCE_ADAPTIVE on the NCCL side: a plan's compressed fp32 calls that
// adapt have their reduced norms measured on their streams once their work is
// enqueued, and read kLag calls of their shape later (core/nccl/norms.h) into
// the runtime's schedule (Runtime::record_norm), which later decisions read.
// fp16 and bf16 calls (top-k's) are measured on their values widened to fp32,
// exactly. Calls in a CUDA graph are not measured: their shapes keep the
// level they have.
#include <algorithm>

#include "backends/nccl_backend.h"
#include "core/nccl/engine.h"

namespace slimreduce {

ncclResult_t NcclEngine::absorb_norms(const GroupPlan& plan) {
  if (!runtime_.settings().adapts_levels()) return ncclSuccess;
  std::vector<CallShape> shapes;
  int rank = 0;
  {
    std::lock_guard lock(mutex_);
    rank = first_rank_ < 0 ? 0 : first_rank_;
    for (const CallPlan& p : plan.calls) {
      const auto found = comms_.find(static_cast<ncclComm_t>(p.call.comm));
      if (found == comms_.end()) continue;
      const CallShape shape{found->second->id, p.call.count,
                            static_cast<std::uint64_t>(p.call.datatype)};
      if (std::find(shapes.begin(), shapes.end(), shape) == shapes.end()) shapes.push_back(shape);
    }
  }
  // Outside the engine's lock: a wait here is for this thread's own earlier calls.
  for (const CallShape& shape : shapes) {
    std::vector<NcclNorms::Measured> due;
    const Status status = norms_.take_due(shape, &due);
    for (const NcclNorms::Measured& m : due)
      runtime_.record_norm(Side::nccl, shape, m.level, m.norm, rank);
    if (!status.ok()) return backends::nccl_code(status);
  }
  return ncclSuccess;
}

ncclResult_t NcclEngine::measure_norms(const GroupPlan& plan) {
  for (std::size_t first = 0; first < plan.calls.size(); first += plan.calls[first].piece.of) {
    const CallPlan& p = plan.calls[first];
    const ElemType type = nccl_elem(p.call.datatype);
    if (!p.compressed || p.level < 0 || type == ElemType::other) continue;
    const auto stream = static_cast<cudaStream_t>(p.call.stream);
    if (is_capturing(stream)) continue;
    std::uint64_t count = 0;  // a cut call's norm is the whole call's
    for (int i = 0; i < p.piece.of; ++i) count += plan.calls[first + i].call.count;
    const CallShape shape{p.comm->id, count, static_cast<std::uint64_t>(p.call.datatype)};
    std::lock_guard lock(mutex_);  // the communicator's workspaces
    DeviceGuard device(p.comm->device);
    void* scratch = device.ok() ? p.comm->norm_workspaces[stream].ensure(
                                      NcclNorms::scratch_bytes(count), stream, device_memory_)
                                : nullptr;
    if (!scratch) return ncclSystemError;
    const Status status =
        norms_.measure(shape, p.level, p.call.recvbuff, type, scratch, stream, p.comm->device);
    if (!status.ok()) return backends::nccl_code(status);
  }
  return ncclSuccess;
}

}  // namespace slimreduce
