// The MPI engine's side of the C API, in libslimreduce.so (interpose/shim_base.h).
#include "core/engine.h"
#include "interpose/shim_base.h"

namespace slimreduce::interpose::mpi_side {

bool up() { return Engine::get() != nullptr; }

const Settings* settings() {
  const Engine* engine = Engine::get();
  return engine ? &engine->settings() : nullptr;
}

bool counters(Counters* out) {
  const Engine* engine = Engine::get();
  if (!engine) return false;
  *out = engine->counters();
  return true;
}

std::optional<bool> use_compressor(const std::string& name) {
  Engine* engine = Engine::get();
  if (!engine) return std::nullopt;
  return engine->use_compressor(name);
}

std::optional<bool> set_topk_ratio(double ratio) {
  Engine* engine = Engine::get();
  if (!engine) return std::nullopt;
  return engine->set_topk_ratio(ratio);
}

}  // namespace slimreduce::interpose::mpi_side
