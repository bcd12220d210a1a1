// What slimreduce-bench reports: one row per (size, compressor), printed as a
// table by rank 0 and optionally written as CSV and JSON with the same fields.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace slimreduce::bench {

struct Row {
  std::uint64_t bytes = 0;
  std::uint64_t count = 0;
  std::string compressor;  // the label given on the command line ("topk:0.01")
  double topk_ratio = 0;   // the ratio in effect, for top-k rows
  // Median over the timed iterations on each rank, then max / median over ranks.
  double time_us = 0;
  double time_median_us = 0;
  double algbw_gbs = 0;            // bytes / time_us (GB/s, 1e9 bytes)
  double busbw_gbs = 0;            // algbw x 2(n-1)/n
  double baseline_us = 0;          // time_us of "none" at this size, same run
  double speedup = 0;              // baseline_us / time_us
  bool compressed = false;         // every timed call was compressed (library counters)
  double wire_bytes_per_rank = 0;  // wire_sent per call, mean over ranks (counters)
  double wire_baseline_per_rank = 0;
  double savings = 0;             // 1 - wire_sent / wire_baseline
  std::string error_metric;       // "max_rel_sum_abs", "rel_l2" or "" (no check)
  double error = -1;              // the last timed step; -1: not checked
  double error_first = -1;        // the first step after switching (no residual)
  std::string check = "skipped";  // "ok", "FAILED: ...", "skipped"
};

struct RunInfo {
  std::string library_version;
  int ranks = 1;
  int iters = 0;
  int warmup = 0;
  bool check = false;
  std::string label;
  std::string date;            // UTC, ISO 8601
  std::string environment;     // the SLIMREDUCE_* settings, "NAME=VALUE ..."
  double total_wire_sent = 0;  // over all ranks and every intercepted call of the run
};

void print_header(std::FILE* out, const RunInfo& info);
void print_row(std::FILE* out, const Row& row);
// The whole run; false (after a message on stderr) when the file cannot be written.
bool write_csv(const std::string& path, const RunInfo& info, const std::vector<Row>& rows);
bool write_json(const std::string& path, const RunInfo& info, const std::vector<Row>& rows);

}  // namespace slimreduce::bench
