// Command line of slimreduce-bench, in the spirit of nccl-tests
// (-b/-e/-f sizes, -n iterations, -w warm-up, -c check).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace slimreduce::bench {

// One entry of --compressors: "none", "fp16", "bf16", "topk", "topk:0.01",
// "powersgd" or "powersgd:4".
struct CompressorSpec {
  std::string label;                       // as the user wrote it; names the rows
  std::string name;                        // what slimreduce_set_compressor gets
  std::optional<double> ratio;             // top-k only; unset: the library's SLIMREDUCE_TOPK_RATIO
  std::optional<int> rank = std::nullopt;  // powersgd only; unset: SLIMREDUCE_POWERSGD_RANK
  // "set": the compressor the library started with (SLIMREDUCE_COMPRESSOR, with
  // every setting as the environment gave it), never switched through the API,
  // which would end a SLIMREDUCE_HIERARCHICAL=auto choice; alone, with --no-baseline.
  bool as_started = false;
};

struct Options {
  std::uint64_t min_bytes = 1 << 10;
  std::uint64_t max_bytes = std::uint64_t{64} << 20;
  double step_factor = 2;
  int iters = 20;
  int warmup = 5;
  bool check = true;
  std::string compressor_list = "fp16,bf16,topk";  // as given to --compressors
  bool no_baseline = false;                        // without the implicit "none" first
  std::vector<CompressorSpec> compressors;         // parsed from the two above
  std::string csv_path;
  std::string json_path;
  std::string label;     // free text stored with the results ("1 Gbit/s netem", ...)
  bool corrupt = false;  // tests only: spoil one value before the check, which must then fail
};

// Parses argv; on error or --help returns nullopt after writing to `message`
// (usage text or what was wrong); `*help` tells the two apart.
std::optional<Options> parse_options(int argc, char** argv, std::string* message, bool* help);

// The message sizes of the sweep: min, min*f, ... up to max, each a whole
// number of floats (at least one).
std::vector<std::uint64_t> sweep_sizes(const Options& options);

// "65536", "64K", "64KiB", "1M", "256MB" (powers of 1024); nullopt if malformed.
std::optional<std::uint64_t> parse_size(const std::string& text);

// "1K", "64M", "1.5M": the short form used in tables.
std::string format_size(std::uint64_t bytes);

}  // namespace slimreduce::bench
