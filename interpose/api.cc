// SlimReduce's own C API (interpose/slimreduce.h).
#include "core/engine.h"
#include "interpose/slimreduce.h"

#define SR_EXPORT extern "C" __attribute__((visibility("default")))

SR_EXPORT const char* slimreduce_version(void) { return SLIMREDUCE_VERSION; }

SR_EXPORT int slimreduce_get_counters(slimreduce_counters* out) {
  const slimreduce::Engine* engine = slimreduce::Engine::get();
  if (!engine || !out) return -1;
  const slimreduce::Counters c = engine->counters();
  *out = {c.intercepted,     c.compressed,  c.passed_through, c.warmup,
          c.ef_cap_fallback, c.input_bytes, c.wire_baseline,  c.wire_sent};
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
    return engine->use_compressor(name) ? 0 : -1;
  } catch (...) {
    return -1;
  }
}
