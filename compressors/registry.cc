#include "compressors/registry.h"

#include <functional>
#include <utility>

namespace slimreduce::compressors {
namespace {

using Factory = std::function<std::unique_ptr<Compressor>(const CompressorOptions&)>;

// The registration table: one line per compressor.
const std::vector<std::pair<std::string, Factory>>& registry() {
  static const std::vector<std::pair<std::string, Factory>> table = {
      {"fp16", make_fp16_compressor}, {"bf16", make_bf16_compressor},
      {"topk", make_topk_compressor}, {"powersgd", make_powersgd_compressor},
      {"int8", make_int8_compressor}, {"quant", make_quant_compressor},
      {"int4", make_int4_compressor}, {"int2", make_int2_compressor},
      {"fp8", make_fp8_compressor},
  };
  return table;
}

}  // namespace

std::vector<std::string> registered_names() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : registry()) names.push_back(name);
  return names;
}

std::unique_ptr<Compressor> make_compressor(const std::string& name,
                                            const CompressorOptions& options) {
  for (const auto& [registered, factory] : registry()) {
    if (registered == name) return factory(options);
  }
  return nullptr;
}

}  // namespace slimreduce::compressors
