// SlimReduce's own C API (interpose/slimreduce.h): answers from the runtime,
// whichever side made it (MPI_Init, or the first NCCL call of a job without
// MPI); a change applies to both sides at once.
#include <cstring>
#include <optional>
#include <string>

#include "interpose/shim_base.h"
#include "interpose/slimreduce.h"

namespace {

using slimreduce::Runtime;

// A change of the runtime's policy: 0, or -1 when there is no runtime yet,
// the change was refused, or it threw.
template <class Change>
int change_policy(Change change) {
  try {
    Runtime* runtime = Runtime::get();
    return runtime && change(*runtime) ? 0 : -1;
  } catch (...) {
    return -1;
  }
}

}  // namespace

SR_EXPORT const char* slimreduce_version(void) { return SLIMREDUCE_VERSION; }

SR_EXPORT int slimreduce_get_counters(slimreduce_counters* out) {
  if (!out) return -1;
  const Runtime* runtime = Runtime::get();
  if (!runtime) return -1;
  *out = slimreduce::interpose::to_c_counters(runtime->counters());  // MPI's and NCCL's calls
  return 0;
}

SR_EXPORT int slimreduce_get_counter(const char* key, double* value) {
  const Runtime* runtime = Runtime::get();
  if (!runtime || !key || !value) return -1;
  try {
    const std::optional<double> found = slimreduce::report_value(runtime->counters(), key);
    if (!found) return -1;
    *value = *found;
    return 0;
  } catch (...) {
    return -1;
  }
}

SR_EXPORT const char* slimreduce_compressor(void) {
  const Runtime* runtime = Runtime::get();
  return runtime ? runtime->settings().compressor.c_str() : nullptr;
}

SR_EXPORT int slimreduce_set_compressor(const char* name) {
  if (!name) return -1;
  return change_policy([&](Runtime& runtime) { return runtime.use_compressor(name); });
}

SR_EXPORT int slimreduce_set_topk_ratio(double ratio) {
  return change_policy([&](Runtime& runtime) { return runtime.set_topk_ratio(ratio); });
}

SR_EXPORT int slimreduce_set_powersgd_rank(int rank) {
  return change_policy([&](Runtime& runtime) { return runtime.set_powersgd_rank(rank); });
}

SR_EXPORT int slimreduce_get_setting(const char* name, char* value, size_t size) {
  const Runtime* runtime = Runtime::get();
  if (!runtime || !name || !value || size == 0) return -1;
  try {
    const std::string prefix = std::string(name) + "=";
    for (const std::string& line : slimreduce::describe_settings(runtime->settings())) {
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
