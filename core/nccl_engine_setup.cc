#ifdef SLIMREDUCE_HAVE_CUDA
// The NCCL engine's making, the changes the C API makes to its settings, and
// its report at exit. The call path is in nccl_engine.cc.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <utility>

#include "backends/nccl_backend.h"
#include "core/compressor_choice.h"
#include "core/log.h"
#include "core/nccl_engine.h"

namespace slimreduce {
namespace {

namespace real = backends::nccl;

// Atomic: the first NCCL call on one thread makes the engine while another
// thread may ask for it (slimreduce_nccl_get_counters, the MPI engine's report).
std::atomic<NcclEngine*>& instance() {
  static std::atomic<NcclEngine*> engine{nullptr};
  return engine;
}

int env_int(std::initializer_list<const char*> names, int fallback) {
  for (const char* name : names) {
    if (const char* value = std::getenv(name)) return std::atoi(value);
  }
  return fallback;
}

}  // namespace

NcclEngine* NcclEngine::get() { return instance().load(std::memory_order_acquire); }

NcclEngine& NcclEngine::start(Settings settings) {
  static std::once_flag once;
  std::call_once(once, [&settings] {
    // Never destroyed: at exit the CUDA runtime may already be gone, and
    // freeing device memory then could crash a job that finished well.
    instance().store(std::make_unique<NcclEngine>(std::move(settings)).release(),
                     std::memory_order_release);
  });
  return *get();
}

NcclEngine::NcclEngine(Settings settings)
    : settings_(std::move(settings)),
      compressor_(compressor_named(settings_.compressor, settings_)),
      residuals_(settings_.ef_max_bytes),
      decision_(settings_.ef_max_bytes, settings_.warmup_steps) {
  error_feedback_ = error_feedback_on(compressor_.get(), settings_);
  log_line(settings_.log_level, LogLevel::info, env_int({"RANK", "OMPI_COMM_WORLD_RANK"}, 0),
           "nccl: compressor %s, error feedback %s, real NCCL: %s", settings_.compressor.c_str(),
           error_feedback_ ? "on" : "off", real::api().origin);
}

NcclEngine::~NcclEngine() = default;

Counters NcclEngine::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

bool NcclEngine::use_compressor(const std::string& name) {
  std::shared_ptr<compressors::Compressor> chosen = compressor_named(name, settings_);
  if (name != "none" && !chosen) return false;
  std::vector<DeviceBlock> dropped;
  std::vector<int> devices;
  {
    std::lock_guard lock(mutex_);
    settings_.compressor = name;
    compressor_ = std::move(chosen);
    error_feedback_ = error_feedback_on(compressor_.get(), settings_);
    // What one compressor left behind means nothing to another.
    residuals_.take_all(dropped);
    decision_ = CompressionDecision(settings_.ef_max_bytes, settings_.warmup_steps);
    for (const auto& [comm, state] : comms_) {
      if (state->size >= 1) devices.push_back(state->device);
    }
  }
  std::sort(devices.begin(), devices.end());
  devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
  // Kernels already queued may still write them. (A plan of another thread
  // between its planning and its launches is not covered: switching the
  // compressor while another thread calls ncclAllReduce is not supported.)
  release_after_device_wait(dropped, devices, allocator_);
  return true;
}

bool NcclEngine::set_topk_ratio(double ratio) {
  if (!(ratio > 0.0 && ratio <= 1.0)) return false;
  {
    std::lock_guard lock(mutex_);
    settings_.topk_ratio = ratio;
  }
  return use_compressor(settings_.compressor);
}

void NcclEngine::write_report_at_exit() {
  Counters mine;
  ReportContext context;
  {
    std::lock_guard lock(mutex_);
    if (reported_ || settings_.report.empty()) return;
    reported_ = true;
    mine = counters_;
    context.rank = env_int({"RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"},
                           report_rank_ < 0 ? 0 : report_rank_);
    context.world_size = env_int({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"},
                                 report_size_ < 1 ? 1 : report_size_);
    context.compressor = settings_.compressor;
  }
  if (settings_.report == "stderr") {
    std::fputs(report_table(mine, context).c_str(), stderr);
    return;
  }
  const std::string path = settings_.report + "." + std::to_string(context.rank) + ".json";
  std::ofstream out(path);
  out << report_json(mine, context);
  if (!out) {
    log_line(settings_.log_level, LogLevel::error, context.rank, "cannot write the report to %s",
             path.c_str());
  }
}

}  // namespace slimreduce
#endif  // SLIMREDUCE_HAVE_CUDA
