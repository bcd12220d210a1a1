#include "core/runtime/setting_checks.h"

#include <string>
#include <vector>

#include "core/runtime/setting_values.h"

namespace slimreduce {
namespace {

// A compressor's setting that takes two levels (gentle,hard), as set.
struct LevelSetting {
  const char* variable;
  const char* compressor;  // the SLIMREDUCE_COMPRESSOR name whose levels it holds
  std::string shown;       // as the log shows it
  bool two;                // given as gentle,hard
  bool harder;             // the hard level compresses more
  const char* harder_means;
  const char* one;      // what a single value is ("one ratio")
  const char* example;  // two levels
};

std::vector<LevelSetting> level_settings(const Settings& s) {
  return {{"SLIMREDUCE_TOPK_RATIO", "topk", show_levels(s.topk_ratio, s.topk_ratio_hard),
           s.topk_ratio_hard.has_value(), s.topk_ratio_hard < s.topk_ratio, "a smaller ratio",
           "one ratio", "0.01,0.001"},
          {"SLIMREDUCE_POWERSGD_RANK", "powersgd",
           show_levels(s.powersgd_rank, s.powersgd_rank_hard), s.powersgd_rank_hard.has_value(),
           s.powersgd_rank_hard < s.powersgd_rank, "a smaller rank", "one rank", "4,1"},
          {"SLIMREDUCE_QUANT_BITS", "quant", show_levels(s.quant_bits, s.quant_bits_hard),
           s.quant_bits_hard.has_value(), s.quant_bits_hard < s.quant_bits, "fewer bits",
           "one width", "8,4"}};
}

// Two levels only with accordion, the hard one harder; accordion only for a
// compressor given two; its window and threshold only with it.
void check_levels(const Settings& s) {
  const std::vector<LevelSetting> settings = level_settings(s);
  for (const LevelSetting& level : settings) {
    if (level.two && !level.harder)
      throw SettingsError(level.variable, level.shown,
                          std::string("gentle,hard with the hard level ") + level.harder_means +
                              " (e.g. " + level.example + ")");
  }
  if (!s.adapts_levels()) {
    for (const LevelSetting& level : settings) {
      if (level.two)
        throw SettingsError(level.variable, level.shown,
                            std::string(level.one) + " unless SLIMREDUCE_ADAPTIVE=accordion");
    }
    if (s.adaptive_window)
      throw SettingsError("SLIMREDUCE_ADAPTIVE_WINDOW", std::to_string(*s.adaptive_window),
                          "unset unless SLIMREDUCE_ADAPTIVE=accordion");
    if (s.adaptive_threshold)
      throw SettingsError("SLIMREDUCE_ADAPTIVE_THRESHOLD", show_real(*s.adaptive_threshold),
                          "unset unless SLIMREDUCE_ADAPTIVE=accordion");
    return;
  }
  for (const LevelSetting& level : settings) {
    if (s.compressor != level.compressor) continue;
    if (!level.two)
      throw SettingsError(level.variable, level.shown,
                          std::string("two levels, gentle,hard (e.g. ") + level.example +
                              "), with SLIMREDUCE_ADAPTIVE=accordion");
    return;
  }
  throw SettingsError("SLIMREDUCE_ADAPTIVE", "accordion",
                      "off unless SLIMREDUCE_COMPRESSOR is a compressor with two levels, topk, "
                      "powersgd or quant (SLIMREDUCE_COMPRESSOR=" +
                          s.compressor + " has one)");
}

// Stochastic rounding is the integer quantizers' (kernels/rounding.h): fp8
// rounds to nearest only, so asking for both is refused rather than ignored.
void check_rounding(const Settings& s) {
  if (s.quant_rounding != compressors::QuantRounding::stochastic) return;
  bool fp8 = s.compressor == "fp8";
  for (const std::string& candidate : s.auto_candidates.value_or(std::vector<std::string>{}))
    fp8 = fp8 || (s.compressor == "auto" && candidate == "fp8");
  if (fp8)
    throw SettingsError("SLIMREDUCE_QUANT_ROUNDING", "stochastic",
                        "nearest with fp8 (its codes round to nearest only; stochastic is for "
                        "int8, quant, int4 and int2)");
}

// HIERARCHICAL=auto measures the compressor flat and two-level: one that has
// no two-level form (none: the real library's allreduce; powersgd: its Q is
// a factor of the whole tensor flat and of a shard two-level) has nothing to
// choose between, and adaptive levels would change the compressor between
// the probes being compared.
void check_hierarchy_choice(const Settings& s) {
  if (!s.chooses_hierarchy || s.chooses_compressor()) return;
  if (s.compressor == "none" || s.compressor == "powersgd")
    throw SettingsError("SLIMREDUCE_HIERARCHICAL", "auto",
                        "0 or 1 with SLIMREDUCE_COMPRESSOR=" + s.compressor +
                            ", which has no two-level form to measure (auto needs a compressor "
                            "that has one, or SLIMREDUCE_COMPRESSOR=auto)");
  if (s.adapts_levels())
    throw SettingsError("SLIMREDUCE_HIERARCHICAL", "auto",
                        "0 or 1 with SLIMREDUCE_ADAPTIVE=accordion (its levels would change the "
                        "compressor between the measurements compared)");
}

}  // namespace

void check_together(const Settings& settings) {
  check_levels(settings);
  check_rounding(settings);
  check_hierarchy_choice(settings);
}

}  // namespace slimreduce
