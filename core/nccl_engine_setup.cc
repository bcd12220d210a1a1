// The NCCL side's making, and what it does when the runtime switches the
// compressor. The call path is in nccl_engine.cc.

#include <memory>

#include "backends/nccl_backend.h"
#include "core/log.h"
#include "core/nccl_engine.h"

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
           runtime_.settings().compressor.c_str(), policy.error_feedback ? "on" : "off",
           real::api().origin);
  if (runtime_.settings().hierarchical) {
    log_line(runtime_.settings().log_level, LogLevel::info, runtime_.report_context().rank,
             "nccl: SLIMREDUCE_HIERARCHICAL is not carried by the NCCL path yet: its calls "
             "reduce flat");
  }
}

NcclEngine::~NcclEngine() = default;

void NcclEngine::policy_changed(std::vector<int>& devices) {
  std::lock_guard lock(mutex_);
  for (const auto& [comm, state] : comms_) {
    if (state->size >= 1) devices.push_back(state->device);
  }
}

}  // namespace slimreduce
