// SlimReduce's own C API (interpose/slimreduce.h): answers from the MPI
// engine when it is up, else from the NCCL engine (a job using NCCL without
// MPI); changes go to every engine that is up.
#include <cstring>
#include <optional>
#include <string>

#include "interpose/shim_base.h"
#ifdef SLIMREDUCE_HAVE_CUDA
#include "core/nccl_engine.h"
#endif
#include "interpose/slimreduce.h"

namespace {

namespace mpi_side = slimreduce::interpose::mpi_side;

const slimreduce::Settings* active_settings() {
  if (const slimreduce::Settings* settings = mpi_side::settings()) return settings;
#ifdef SLIMREDUCE_HAVE_CUDA
  if (const slimreduce::NcclEngine* nccl = slimreduce::NcclEngine::get()) return &nccl->settings();
#endif
  return nullptr;
}

// A change applied to every engine that is up: 0, or -1 when none is up, one
// refused, or one threw. nccl_change takes the NCCL engine (a generic lambda:
// never instantiated in a CPU-only build).
template <class MpiChange, class NcclChange>
int change_engines(MpiChange mpi_change, NcclChange nccl_change) {
  try {
    std::optional<bool> nccl_answer;
#ifdef SLIMREDUCE_HAVE_CUDA
    if (slimreduce::NcclEngine* nccl = slimreduce::NcclEngine::get()) {
      nccl_answer = nccl_change(*nccl);
    }
#endif
    const std::optional<bool> mpi_answer = mpi_change();
    if (!mpi_answer && !nccl_answer) return -1;
    return mpi_answer.value_or(true) && nccl_answer.value_or(true) ? 0 : -1;
  } catch (...) {
    return -1;
  }
}

}  // namespace

SR_EXPORT const char* slimreduce_version(void) { return SLIMREDUCE_VERSION; }

SR_EXPORT int slimreduce_get_counters(slimreduce_counters* out) {
  if (!out) return -1;
  slimreduce::Counters counters;
  if (!mpi_side::counters(&counters)) {  // the MPI engine's include the NCCL engine's
#ifdef SLIMREDUCE_HAVE_CUDA
    const slimreduce::NcclEngine* nccl = slimreduce::NcclEngine::get();
    if (!nccl) return -1;
    counters = nccl->counters();
#else
    return -1;
#endif
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
  return change_engines([&] { return mpi_side::use_compressor(name); },
                        [&](auto& nccl) { return nccl.use_compressor(name); });
}

SR_EXPORT int slimreduce_set_topk_ratio(double ratio) {
  return change_engines([&] { return mpi_side::set_topk_ratio(ratio); },
                        [&](auto& nccl) { return nccl.set_topk_ratio(ratio); });
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
