// Compressors by name. A new compressor is one file plus one line in registry.cc.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compressors/compressor.h"

namespace slimreduce::compressors {

// Factories of the registered compressors (one file each).
std::unique_ptr<Compressor> make_fp16_compressor(const CompressorOptions& options);
std::unique_ptr<Compressor> make_bf16_compressor(const CompressorOptions& options);
std::unique_ptr<Compressor> make_topk_compressor(const CompressorOptions& options);
std::unique_ptr<Compressor> make_powersgd_compressor(const CompressorOptions& options);
std::unique_ptr<Compressor> make_int8_compressor(const CompressorOptions& options);
// quant at SLIMREDUCE_QUANT_BITS, and its 4- and 2-bit shorthands (quant_compressor.cc).
std::unique_ptr<Compressor> make_quant_compressor(const CompressorOptions& options);
std::unique_ptr<Compressor> make_int4_compressor(const CompressorOptions& options);
std::unique_ptr<Compressor> make_int2_compressor(const CompressorOptions& options);
std::unique_ptr<Compressor> make_fp8_compressor(const CompressorOptions& options);

// Registered names, in registration order ("none" is not a compressor).
std::vector<std::string> registered_names();

// nullptr for an unknown name.
std::unique_ptr<Compressor> make_compressor(const std::string& name,
                                            const CompressorOptions& options);

}  // namespace slimreduce::compressors
