#include <cmath>
#include <fstream>
#include <sstream>

#include "bench/bench_options.h"
#include "bench/bench_output.h"

namespace slimreduce::bench {
namespace {

const char* kFields[] = {"label",
                         "ranks",
                         "bytes",
                         "count",
                         "compressor",
                         "topk_ratio",
                         "time_us",
                         "time_median_us",
                         "algbw_gbs",
                         "busbw_gbs",
                         "baseline_us",
                         "speedup",
                         "compressed",
                         "wire_bytes_per_rank",
                         "wire_baseline_per_rank",
                         "savings",
                         "error_metric",
                         "error",
                         "error_first",
                         "check"};

std::string number(double value) {
  if (!std::isfinite(value)) return "null";  // JSON has no NaN; CSV readers take "null" as text
  std::ostringstream text;
  text.precision(10);
  text << value;
  return text.str();
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string csv_string(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// The row's fields in kFields order; strings already quoted for `quote`.
template <typename Quote>
std::vector<std::string> fields(const RunInfo& info, const Row& r, Quote quote, bool json) {
  const std::string yes = json ? "true" : "1", no = json ? "false" : "0";
  return {quote(info.label),
          std::to_string(info.ranks),
          std::to_string(r.bytes),
          std::to_string(r.count),
          quote(r.compressor),
          number(r.topk_ratio),
          number(r.time_us),
          number(r.time_median_us),
          number(r.algbw_gbs),
          number(r.busbw_gbs),
          number(r.baseline_us),
          number(r.speedup),
          r.compressed ? yes : no,
          number(r.wire_bytes_per_rank),
          number(r.wire_baseline_per_rank),
          number(r.savings),
          quote(r.error_metric),
          r.error < 0 ? (json ? "null" : "") : number(r.error),
          r.error_first < 0 ? (json ? "null" : "") : number(r.error_first),
          quote(r.check)};
}

std::string error_cell(double error) {
  if (error < 0) return "-";
  char text[16];
  std::snprintf(text, sizeof text, "%.2e", error);
  return text;
}

}  // namespace

void print_header(std::FILE* out, const RunInfo& info) {
  std::fprintf(out,
               "# slimreduce-bench: MPI_Allreduce(MPI_IN_PLACE, MPI_FLOAT, MPI_SUM) on %d ranks,\n"
               "#   driving the preloaded libslimreduce.so %s through slimreduce_set_compressor\n"
               "# date %s, %d timed + %d warm-up iterations, check %s%s%s\n"
               "# settings: %s\n",
               info.ranks, info.library_version.c_str(), info.date.c_str(), info.iters, info.warmup,
               info.check ? "on" : "off", info.label.empty() ? "" : ", label: ", info.label.c_str(),
               info.environment.empty() ? "(defaults)" : info.environment.c_str());
  std::fprintf(out,
               "# time: median over iterations, then max over ranks (tmed: median over ranks)\n"
               "# algbw = bytes/time, busbw = algbw*2(n-1)/n (nccl-tests); speedup = none's time / "
               "time\n"
               "# comp: the library compressed every timed call (below SLIMREDUCE_MIN_BYTES it "
               "passes through)\n"
               "# wire/rank: bytes per call per rank from slimreduce_get_counters; savings = 1 - "
               "wire_sent/wire_baseline\n"
               "# error: max_i |out-ref|/sum_r|x_r,i| (none, casts) or ||out-ref||_2/||ref||_2 "
               "(topk), last timed step;\n"
               "#   first: the first step after switching compressor (no residual yet)\n");
  std::fprintf(out, "#%9s %10s %-11s %4s %11s %11s %8s %8s %7s %12s %7s %9s %9s %s\n", "size",
               "count", "compressor", "comp", "time(us)", "tmed(us)", "algbw", "busbw", "speedup",
               "wire/rank", "savings", "error", "first", "check");
  std::fflush(out);
}

void print_row(std::FILE* out, const Row& r) {
  std::fprintf(out,
               "%10s %10llu %-11s %4s %11.1f %11.1f %8.3f %8.3f %7.2f %12.0f %7.3f %9s %9s %s\n",
               format_size(r.bytes).c_str(), static_cast<unsigned long long>(r.count),
               r.compressor.c_str(), r.compressed ? "yes" : "no", r.time_us, r.time_median_us,
               r.algbw_gbs, r.busbw_gbs, r.speedup, r.wire_bytes_per_rank, r.savings,
               error_cell(r.error).c_str(), error_cell(r.error_first).c_str(), r.check.c_str());
  std::fflush(out);
}

bool write_csv(const std::string& path, const RunInfo& info, const std::vector<Row>& rows) {
  std::ofstream out(path);
  for (std::size_t i = 0; i < std::size(kFields); ++i) out << (i ? "," : "") << kFields[i];
  out << "\n";
  for (const Row& row : rows) {
    const auto values = fields(info, row, csv_string, false);
    for (std::size_t i = 0; i < values.size(); ++i) out << (i ? "," : "") << values[i];
    out << "\n";
  }
  out.close();
  if (!out) std::fprintf(stderr, "slimreduce-bench: cannot write %s\n", path.c_str());
  return bool(out);
}

bool write_json(const std::string& path, const RunInfo& info, const std::vector<Row>& rows) {
  std::ofstream out(path);
  out << "{\"tool\": \"slimreduce-bench\", \"library_version\": "
      << json_string(info.library_version) << ", \"ranks\": " << info.ranks
      << ", \"iters\": " << info.iters << ", \"warmup\": " << info.warmup
      << ", \"check\": " << (info.check ? "true" : "false")
      << ", \"label\": " << json_string(info.label) << ", \"date\": " << json_string(info.date)
      << ", \"environment\": " << json_string(info.environment)
      << ", \"total_wire_sent\": " << number(info.total_wire_sent) << ",\n \"rows\": [";
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const auto values = fields(info, rows[r], json_string, true);
    out << (r ? ",\n  {" : "\n  {");
    for (std::size_t i = 0; i < values.size(); ++i) {
      out << (i ? ", " : "") << "\"" << kFields[i] << "\": " << values[i];
    }
    out << "}";
  }
  out << "\n ]}\n";
  out.close();
  if (!out) std::fprintf(stderr, "slimreduce-bench: cannot write %s\n", path.c_str());
  return bool(out);
}

}  // namespace slimreduce::bench
