// The compressor the settings name, and whether error feedback wraps it: one
// rule for the MPI and the NCCL engines.
#pragma once

#include <memory>
#include <string>

#include "compressors/compressor.h"
#include "core/runtime/settings.h"

namespace slimreduce {

// The compressor called `name`, made with the settings' options (top-k ratio
// and value format, PowerSGD's rank and minimum compression); nullptr for "none" and for a name no
// compressor has.
std::unique_ptr<compressors::Compressor> compressor_named(const std::string& name,
                                                          const Settings& settings);

// Error feedback: as SLIMREDUCE_ERROR_FEEDBACK says, else the compressor's own
// default; never without a compressor.
bool error_feedback_on(const compressors::Compressor* compressor, const Settings& settings);

// Whether the compressor called `name` can round stochastically
// (SLIMREDUCE_QUANT_ROUNDING): the integer quantizers; fp8 rounds to nearest only.
bool has_unbiased_rounding(const std::string& name);

}  // namespace slimreduce
