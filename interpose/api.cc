// SlimReduce's own C API (interpose/slimreduce.h).
#include <cstring>
#include <string>

#include "interpose/shim_common.h"
#ifdef SLIMREDUCE_HAVE_CUDA
#include "core/nccl_engine.h"
#endif
#include "interpose/slimreduce.h"

SR_EXPORT const char* slimreduce_version(void) { return SLIMREDUCE_VERSION; }

namespace {

// The settings the API reports: the MPI engine's, or in a job that uses NCCL
// without MPI (torchrun, DDP), the NCCL engine's; nullptr before either starts.
const slimreduce::Settings* active_settings() {
  if (const slimreduce::Engine* engine = slimreduce::Engine::get()) return &engine->settings();
#ifdef SLIMREDUCE_HAVE_CUDA
  if (const slimreduce::NcclEngine* nccl = slimreduce::NcclEngine::get()) return &nccl->settings();
#endif
  return nullptr;
}

// Applies a change to every engine that is up: both, when MPI carries the
// control plane and NCCL the data. False when none is up or one refuses.
template <class Change>
bool change_engines(Change change) {
  slimreduce::Engine* engine = slimreduce::Engine::get();
  bool any = false, all = true;
#ifdef SLIMREDUCE_HAVE_CUDA
  if (slimreduce::NcclEngine* nccl = slimreduce::NcclEngine::get()) {
    any = true;
    all = change(*nccl) && all;
  }
#endif
  if (engine) {
    any = true;
    all = change(*engine) && all;
  }
  return any && all;
}

}  // namespace

SR_EXPORT int slimreduce_get_counters(slimreduce_counters* out) {
  if (!out) return -1;
  slimreduce::Counters counters;
  if (const slimreduce::Engine* engine = slimreduce::Engine::get()) {
    counters = engine->counters();  // includes the NCCL engine's
#ifdef SLIMREDUCE_HAVE_CUDA
  } else if (const slimreduce::NcclEngine* nccl = slimreduce::NcclEngine::get()) {
    counters = nccl->counters();
#endif
  } else {
    return -1;
  }
  *out = slimreduce::interpose::to_c_counters(counters);
  return 0;
}

SR_EXPORT const char* slimreduce_compressor(void) {
  const slimreduce::Settings* settings = active_settings();
  return settings ? settings->compressor.c_str() : nullptr;
}

SR_EXPORT int slimreduce_set_compressor(const char* name) {
  if (!name) return -1;
  try {
    return change_engines([name](auto& engine) { return engine.use_compressor(name); }) ? 0 : -1;
  } catch (...) {
    return -1;
  }
}

SR_EXPORT int slimreduce_set_topk_ratio(double ratio) {
  try {
    return change_engines([ratio](auto& engine) { return engine.set_topk_ratio(ratio); }) ? 0 : -1;
  } catch (...) {
    return -1;
  }
}

SR_EXPORT int slimreduce_get_setting(const char* name, char* value, size_t size) {
  const slimreduce::Settings* settings = active_settings();
  if (!settings || !name || !value || size == 0) return -1;
  try {
    const std::string prefix = std::string(name) + "=";
    for (const std::string& line : slimreduce::describe_settings(*settings)) {
      if (line.rfind(prefix, 0) != 0) continue;
      const std::string text = line.substr(prefix.size());
      if (text.size() + 1 > size) return -1;
      std::memcpy(value, text.c_str(), text.size() + 1);
      return 0;
    }
  } catch (...) {
  }
  return -1;
}
