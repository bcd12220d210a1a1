// The SLIMREDUCE_* settings: each one defined once (name, default, accepted
// values, doc line, parser) in settings.cc, read once at initialization.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "compressors/compressor.h"

namespace slimreduce {

enum class Priority { fifo, reverse };
// auto: pipelined where each rank on the node has a spare CPU for its helper thread.
enum class Pipelining { automatic, off, on };
enum class LogLevel { error, warn, info, debug };
enum class TopkValueFormat { fp32, fp16 };
// SLIMREDUCE_ADAPTIVE: how hard a compressor with two levels compresses
// each call (core/runtime/adaptive_levels.h).
enum class Adaptive { off, accordion };

// SLIMREDUCE_AUTO_CANDIDATES' default: the compressors that leave the loss
// as it is on our jobs (top-k and PowerSGD change what the model sees).
inline const std::vector<std::string> kDefaultAutoCandidates = {"none", "fp16", "int8"};

// SLIMREDUCE_ADAPTIVE_WINDOW's and _THRESHOLD's defaults (docs/performance.md
// says how the window was measured; the threshold is Accordion's).
inline constexpr std::uint64_t kDefaultAdaptiveWindow = 10;
inline constexpr double kDefaultAdaptiveThreshold = 0.5;

struct Settings {
  std::string compressor = "none";  // a registered name, "none" or "auto"
  // SLIMREDUCE_COMPRESSOR=auto: what it measures and chooses from (unset: the default list).
  std::optional<std::vector<std::string>> auto_candidates;
  double topk_ratio = 0.01;  // the only level, or the gentle one
  // SLIMREDUCE_TOPK_RATIO and SLIMREDUCE_POWERSGD_RANK given as "gentle,hard"
  // (SLIMREDUCE_ADAPTIVE=accordion): the hard level; unset: one level.
  std::optional<double> topk_ratio_hard;
  std::optional<int> powersgd_rank_hard;
  std::optional<int> quant_bits_hard;  // SLIMREDUCE_QUANT_BITS's, for `quant`
  Adaptive adaptive = Adaptive::off;
  std::optional<std::uint64_t> adaptive_window;  // set only with accordion
  std::optional<double> adaptive_threshold;      // set only with accordion
  TopkValueFormat topk_values = TopkValueFormat::fp32;
  compressors::TopkAlgorithm topk_algorithm = compressors::TopkAlgorithm::automatic;
  std::uint64_t quant_bucket = 512;
  compressors::QuantCodes quant_codes = compressors::QuantCodes::by_width;
  int quant_bits = 8;  // SLIMREDUCE_QUANT_BITS: the width of `quant` (int8/int4/int2 fix theirs)
  compressors::QuantRounding quant_rounding = compressors::QuantRounding::nearest;
  std::uint64_t quant_seed = 0;  // SLIMREDUCE_QUANT_SEED
  int powersgd_rank = 4;         // the only level, or the gentle one
  double powersgd_min_compression = 2.0;
  compressors::PowerSgdProducts powersgd_blas = compressors::PowerSgdProducts::automatic;
  std::optional<bool> error_feedback;  // unset: the compressor's default
  std::uint64_t min_bytes = 65536;
  std::uint64_t warmup_steps = 0;
  std::uint64_t ef_max_bytes = std::uint64_t{4} << 30;
  std::uint64_t ef_evict_calls = 10000;
  std::uint64_t fusion_threshold = std::uint64_t{64} << 20;
  std::uint64_t partition_bytes = std::uint64_t{4} << 20;
  Pipelining pipeline = Pipelining::automatic;
  Priority priority = Priority::fifo;
  bool hierarchical = false;  // node sub-communicators are made (1 or auto)
  // SLIMREDUCE_HIERARCHICAL=auto: flat or two-level is a measured choice.
  bool chooses_hierarchy = false;
  std::optional<int> local_size;  // unset: ranks per node as the MPI library sees them
  std::string report;             // "", "stderr" or a path prefix
  std::string timeline;           // "" (off) or a path prefix (core/runtime/timeline.h)
  LogLevel log_level = LogLevel::warn;

  bool chooses_compressor() const { return compressor == "auto"; }
  // A measured choice of any kind (compressor, flat or two-level): auto's
  // chooser runs, over policy_for's candidates.
  bool chooses() const { return chooses_compressor() || chooses_hierarchy; }
  bool adapts_levels() const { return adaptive == Adaptive::accordion; }
  std::uint64_t window() const { return adaptive_window.value_or(kDefaultAdaptiveWindow); }
  double threshold() const { return adaptive_threshold.value_or(kDefaultAdaptiveThreshold); }
  const std::vector<std::string>& candidates() const {
    return auto_candidates ? *auto_candidates : kDefaultAutoCandidates;
  }
};

// A bad setting: names the variable, the value and what is accepted.
class SettingsError : public std::runtime_error {
 public:
  SettingsError(std::string variable, std::string value, std::string accepted);
  const std::string& variable() const { return variable_; }

 private:
  std::string variable_;
};

using Environment = std::vector<std::pair<std::string, std::string>>;

// The SLIMREDUCE_* entries of the process environment.
Environment read_environment();

// Parses every SLIMREDUCE_* entry; throws SettingsError on the first bad value
// or unknown SLIMREDUCE_* name (most likely a typo). Unset names keep defaults.
Settings parse_settings(const Environment& env);

// One line per setting with its effective value, for the INFO log.
std::vector<std::string> describe_settings(const Settings& settings);

// The settings every rank of a communicator must share (name, effective value),
// in table order: those that decide which calls are compressed and how.
std::vector<std::pair<std::string, std::string>> wire_settings(const Settings& settings);

// The settings table as Markdown (name, default, accepted, effect): the source
// of docs/configuration.md.
std::string settings_markdown();

// Byte sizes as users write them: 65536, 64K, 64KB, 64KiB, 1M, 1MiB, 4G ...
// (K, M, G, T are powers of 1024). Throws std::invalid_argument.
std::uint64_t parse_byte_size(const std::string& text);

}  // namespace slimreduce
