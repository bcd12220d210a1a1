// The NCCL side's making, its communicators' node sub-communicators
// (SLIMREDUCE_HIERARCHICAL), and what it does when the runtime switches the
// compressor. The call path is in nccl_engine.cc.

#include <memory>
#include <utility>

#include "backends/nccl_backend.h"
#include "core/nccl/engine.h"
#include "core/nccl/wire_check.h"
#include "core/runtime/log.h"
#include "core/runtime/wire_agreement.h"

namespace slimreduce {
namespace {

namespace real = backends::nccl;

}  // namespace

NcclEngine& NcclEngine::start(Runtime& runtime) {
  return static_cast<NcclEngine&>(
      runtime.attach(Side::nccl, [&runtime] { return std::make_unique<NcclEngine>(runtime); }));
}

NcclEngine::NcclEngine(Runtime& runtime)
    : runtime_(runtime), device_memory_(*runtime.device_memory()) {
  const Policy policy = runtime_.policy();
  log_line(runtime_.settings().log_level, LogLevel::info, runtime_.report_context().rank,
           "nccl: compressor %s, error feedback %s, real NCCL: %s",
           runtime_.settings().compressor.c_str(),
           policy.chooses()        ? "per candidate"
           : policy.error_feedback ? "on"
                                   : "off",
           real::api().origin);
  if (runtime_.settings().chooses()) {
    log_line(runtime_.settings().log_level, LogLevel::info, runtime_.report_context().rank,
             "nccl: auto (SLIMREDUCE_COMPRESSOR or SLIMREDUCE_HIERARCHICAL) times fp32 calls made "
             "outside any group and "
             "capture; calls in a group or a CUDA graph take their size class's choice");
  }
  if (runtime_.settings().hierarchical) {
    log_line(runtime_.settings().log_level, LogLevel::info, runtime_.report_context().rank,
             "nccl: SLIMREDUCE_HIERARCHICAL: fp32 calls reduce hierarchically from their "
             "communicator's first eligible call outside a group on (calls in a group before it, "
             "and 16-bit top-k calls, reduce flat)");
  }
}

std::optional<NcclEngine::ReadyComm> NcclEngine::ready_comm(ncclComm_t comm) const {
  std::lock_guard lock(mutex_);
  auto found = comms_.find(comm);
  if (found == comms_.end()) return std::nullopt;
  const NcclCommState& state = *found->second;
  if (!state.blocking || state.size < 1) return std::nullopt;
  return ReadyComm{state, state.device, state.wire_agreed, state.hierarchy != nullptr};
}

ncclResult_t NcclEngine::agree_on_wire(ncclComm_t comm, cudaStream_t stream) {
  const std::optional<ReadyComm> ready = ready_comm(comm);
  if (!ready || ready->wire_agreed) return ncclSuccess;
  // Capture allows no host wait: the check waits for the first such call outside capture.
  if (is_capturing(stream)) return ncclSuccess;
  DeviceGuard guard(ready->device);
  if (!guard.ok()) return backends::nccl_code(Status::cuda(cudaErrorInvalidDevice));
  const std::vector<char> record = wire_agreement::record(
      wire_agreement::fields(runtime_.settings(), wire_agreement::library_version()));
  if (const ncclResult_t rc =
          check_wire_agreement(comm, ready->shape.rank, ready->shape.size, stream, record);
      rc != ncclSuccess)
    return rc;
  std::lock_guard lock(mutex_);
  if (auto found = comms_.find(comm); found != comms_.end()) found->second->wire_agreed = true;
  return ncclSuccess;
}

ncclResult_t NcclEngine::know_nodes(ncclComm_t comm, cudaStream_t stream) {
  const std::optional<ReadyComm> ready = ready_comm(comm);
  if (!ready || ready->knows_nodes) return ncclSuccess;
  const auto [id, rank, size] = ready->shape;
  const int device = ready->device;
  // Capture allows no allocation nor host wait: the communicator learns its
  // nodes at its first such call outside capture (every rank captures alike).
  if (is_capturing(stream)) return ncclSuccess;
  const Settings& settings = runtime_.settings();
  const int job_rank = runtime_.report_context().rank;
  auto made = std::make_shared<NcclHierarchy>();
  if (const ncclResult_t rc = make_nccl_hierarchy(comm, rank, size, device, job_rank,
                                                  settings.local_size, device_memory_, made.get());
      rc != ncclSuccess) {
    log_line(settings.log_level, LogLevel::error, job_rank,
             "nccl: communicator %llu: its nodes or node sub-communicators could not be made "
             "(NCCL error %d)",
             static_cast<unsigned long long>(id), static_cast<int>(rc));
    return rc;
  }
  if (made->flat() && rank == 0) {
    log_line(settings.log_level, LogLevel::info, job_rank,
             "nccl: communicator %llu reduces flat, not hierarchically: %s",
             static_cast<unsigned long long>(id), made->split.flat_because.c_str());
  } else if (!made->flat()) {
    log_line(settings.log_level, LogLevel::debug, job_rank,
             "nccl: communicator %llu reduces hierarchically: %d nodes of %d ranks",
             static_cast<unsigned long long>(id), made->cross->size(), made->node->size());
  }
  std::lock_guard lock(mutex_);
  auto found = comms_.find(comm);
  // Gone meanwhile (another thread destroyed it): `made` goes with this scope.
  if (found != comms_.end() && found->second->id == id && !found->second->hierarchy)
    found->second->hierarchy = std::move(made);
  return ncclSuccess;
}

void NcclEngine::comm_ending(ncclComm_t comm, NcclHierarchy::Ending how) {
  std::shared_ptr<NcclHierarchy> ending;
  {
    std::lock_guard lock(mutex_);
    auto found = comms_.find(comm);
    if (found == comms_.end() || !found->second->hierarchy) return;
    // What stays: its nodes, for the report of any call still made on it, and
    // no sub-communicators (a plan on another thread keeps its own pointer).
    auto kept = std::make_shared<NcclHierarchy>();
    kept->split = found->second->hierarchy->split;
    kept->split.flat_because = "the communicator is ending";
    ending = std::exchange(found->second->hierarchy, std::move(kept));
  }
  ending->end(how);
}

NcclEngine::~NcclEngine() = default;

void NcclEngine::policy_changed(std::vector<int>& devices) {
  std::lock_guard lock(mutex_);
  for (const auto& [comm, state] : comms_) {
    if (state->size >= 1) devices.push_back(state->device);
  }
}

}  // namespace slimreduce
