// SlimReduce's own C API (interpose/slimreduce.h).
#include <cstring>
#include <string>

#include "interpose/shim_common.h"
#ifdef SLIMREDUCE_HAVE_CUDA
#include "core/nccl_engine.h"
#endif
#include "interpose/slimreduce.h"

SR_EXPORT const char* slimreduce_version(void) { return SLIMREDUCE_VERSION; }

SR_EXPORT int slimreduce_get_counters(slimreduce_counters* out) {
  const slimreduce::Engine* engine = slimreduce::Engine::get();
  if (!engine || !out) return -1;
  const slimreduce::Counters c = engine->counters();
  *out = slimreduce::interpose::to_c_counters(c);
  return 0;
}

SR_EXPORT const char* slimreduce_compressor(void) {
  const slimreduce::Engine* engine = slimreduce::Engine::get();
  return engine ? engine->settings().compressor.c_str() : nullptr;
}

SR_EXPORT int slimreduce_set_compressor(const char* name) {
  slimreduce::Engine* engine = slimreduce::Engine::get();
  if (!engine || !name) return -1;
  try {
#ifdef SLIMREDUCE_HAVE_CUDA
    if (slimreduce::NcclEngine* nccl = slimreduce::NcclEngine::get()) nccl->use_compressor(name);
#endif
    return engine->use_compressor(name) ? 0 : -1;
  } catch (...) {
    return -1;
  }
}

SR_EXPORT int slimreduce_set_topk_ratio(double ratio) {
  slimreduce::Engine* engine = slimreduce::Engine::get();
  if (!engine) return -1;
  try {
    return engine->set_topk_ratio(ratio) ? 0 : -1;
  } catch (...) {
    return -1;
  }
}

SR_EXPORT int slimreduce_get_setting(const char* name, char* value, size_t size) {
  const slimreduce::Engine* engine = slimreduce::Engine::get();
  if (!engine || !name || !value || size == 0) return -1;
  try {
    const std::string prefix = std::string(name) + "=";
    for (const std::string& line : slimreduce::describe_settings(engine->settings())) {
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
