#include "core/runtime/compressor_choice.h"

#include "compressors/registry.h"

namespace slimreduce {

std::unique_ptr<compressors::Compressor> compressor_named(const std::string& name,
                                                          const Settings& settings) {
  if (name == "none") return nullptr;
  const compressors::CompressorOptions options{
      settings.topk_ratio,     settings.topk_values == TopkValueFormat::fp16,
      settings.powersgd_rank,  settings.powersgd_min_compression,
      settings.topk_algorithm, static_cast<std::size_t>(settings.quant_bucket),
      settings.powersgd_blas,  settings.quant_codes,
      settings.quant_bits,     settings.quant_rounding,
      settings.quant_seed};
  return compressors::make_compressor(name, options);
}

bool error_feedback_on(const compressors::Compressor* compressor, const Settings& settings) {
  return compressor && settings.error_feedback.value_or(compressor->default_error_feedback());
}

bool has_unbiased_rounding(const std::string& name) {
  return name == "int8" || name == "quant" || name == "int4" || name == "int2";
}

}  // namespace slimreduce
