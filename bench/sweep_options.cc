#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "bench/bench_options.h"

namespace slimreduce::bench {
namespace {

const char kUsage[] =
    "usage: slimreduce-bench [options]   (under mpirun, with LD_PRELOAD=libslimreduce.so)\n"
    "  -b, --minbytes SIZE     smallest message (default 1K)\n"
    "  -e, --maxbytes SIZE     largest message (default 64M)\n"
    "  -f, --stepfactor F      size multiplier between steps (default 2)\n"
    "  -n, --iters N           timed iterations per size and compressor (default 20)\n"
    "  -w, --warmup_iters N    untimed, uncounted iterations before them (default 5)\n"
    "  -c, --check 0|1         verify results against a float64 reference (default 1)\n"
    "  --compressors LIST      comma-separated: none,fp16,bf16,int8,topk,topk:RATIO,powersgd,\n"
    "                          powersgd:RANK (1-64), auto (SLIMREDUCE_AUTO_CANDIDATES; give it\n"
    "                          -w 12 or more, for its probe round of 9 calls: 3 a candidate,\n"
    "                          twins of SLIMREDUCE_HIERARCHICAL=auto included), set (the\n"
    "                          compressor the library started with, never switched: alone,\n"
    "                          with --no-baseline; e.g. int8 under SLIMREDUCE_HIERARCHICAL=auto)\n"
    "                          (default none,fp16,bf16,topk; none is always run first,\n"
    "                          as the baseline of every size)\n"
    "  --csv FILE, --json FILE also write the results there (rank 0)\n"
    "  --label TEXT            stored with the results, e.g. '1 Gbit/s netem'\n"
    "  --no-baseline           run only the listed compressors (speedup 0: none measured)\n"
    "SIZE: 65536, 64K, 64KiB, 1M, 256M (powers of 1024). Messages are MPI_FLOAT, MPI_SUM,\n"
    "MPI_IN_PLACE on MPI_COMM_WORLD.\n";

std::optional<CompressorSpec> parse_compressor(const std::string& item) {
  if (item == "set") {
    const char* started = std::getenv("SLIMREDUCE_COMPRESSOR");
    return CompressorSpec{item, started ? started : "none", std::nullopt, std::nullopt, true};
  }
  CompressorSpec spec{item, item, std::nullopt};
  const auto colon = item.find(':');
  if (colon == std::string::npos) return item.empty() ? std::nullopt : std::optional(spec);
  spec.name = item.substr(0, colon);
  char* end = nullptr;
  const std::string text = item.substr(colon + 1);
  if (spec.name == "powersgd") {
    const long rank = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || rank < 1 || rank > 64) return std::nullopt;
    spec.rank = static_cast<int>(rank);
    return spec;
  }
  if (spec.name != "topk") return std::nullopt;  // only top-k and powersgd take a parameter
  const double ratio = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(ratio > 0 && ratio <= 1)) return std::nullopt;
  spec.ratio = ratio;
  return spec;
}

// With a baseline, "none" comes first whether or not the user named it.
std::optional<std::vector<CompressorSpec>> parse_compressors(const std::string& list,
                                                             bool baseline) {
  std::vector<CompressorSpec> specs;
  if (baseline) specs.push_back({"none", "none", std::nullopt});
  std::stringstream stream(list);
  std::string item;
  while (std::getline(stream, item, ',')) {
    if (item == "none" && baseline) continue;
    auto spec = parse_compressor(item);
    if (!spec) return std::nullopt;
    specs.push_back(*spec);
  }
  if (specs.empty()) return std::nullopt;
  for (const CompressorSpec& spec : specs) {  // "set" alone: any switch would end its setting
    if (spec.as_started && specs.size() > 1) return std::nullopt;
  }
  return specs;
}

bool parse_int(const std::string& text, int low, int* out) {
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || value < low || value > 1000000) return false;
  *out = static_cast<int>(value);
  return true;
}

// Applies one "--flag value" pair; false when the value is bad.
bool apply(const std::string& flag, const std::string& value, Options& o) {
  if (flag == "-b" || flag == "--minbytes") {
    auto size = parse_size(value);
    return size && (o.min_bytes = *size, true);
  }
  if (flag == "-e" || flag == "--maxbytes") {
    auto size = parse_size(value);
    return size && (o.max_bytes = *size, true);
  }
  if (flag == "-f" || flag == "--stepfactor") {
    o.step_factor = std::strtod(value.c_str(), nullptr);
    return o.step_factor > 1;
  }
  if (flag == "-n" || flag == "--iters") return parse_int(value, 1, &o.iters);
  if (flag == "-w" || flag == "--warmup_iters") return parse_int(value, 0, &o.warmup);
  if (flag == "-c" || flag == "--check") {
    int check = 0;
    return parse_int(value, 0, &check) && check <= 1 && (o.check = check == 1, true);
  }
  if (flag == "--compressors") return !(o.compressor_list = value).empty();
  if (flag == "--csv") return !(o.csv_path = value).empty();
  if (flag == "--json") return !(o.json_path = value).empty();
  if (flag == "--label") return (o.label = value, true);
  return false;
}

}  // namespace

std::optional<Options> parse_options(int argc, char** argv, std::string* message, bool* help) {
  Options options;
  *help = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      *help = true;
      *message = kUsage;
      return std::nullopt;
    }
    if (flag == "--corrupt" || flag == "--no-baseline") {
      (flag == "--corrupt" ? options.corrupt : options.no_baseline) = true;
      continue;
    }
    if (i + 1 >= argc || !apply(flag, argv[i + 1], options)) {
      std::string given = flag;
      if (i + 1 < argc) given.append(" ").append(argv[i + 1]);
      *message = "slimreduce-bench: bad or incomplete option '" + given + "'\n" + kUsage;
      return std::nullopt;
    }
    ++i;
  }
  if (options.min_bytes > options.max_bytes) {
    *message = "slimreduce-bench: -b is larger than -e\n";
    return std::nullopt;
  }
  auto specs = parse_compressors(options.compressor_list, !options.no_baseline);
  if (!specs) {
    *message = "slimreduce-bench: bad --compressors '" + options.compressor_list + "'\n" + kUsage;
    return std::nullopt;
  }
  options.compressors = *specs;
  return options;
}

std::vector<std::uint64_t> sweep_sizes(const Options& options) {
  std::vector<std::uint64_t> sizes;
  for (double size = double(options.min_bytes); size <= double(options.max_bytes) * (1 + 1e-9);
       size *= options.step_factor) {
    const std::uint64_t floats = std::max<std::uint64_t>(1, std::uint64_t(size) / 4);
    if (sizes.empty() || floats * 4 != sizes.back()) sizes.push_back(floats * 4);
  }
  return sizes;
}

std::optional<std::uint64_t> parse_size(const std::string& text) {
  char* end = nullptr;
  const double number = std::strtod(text.c_str(), &end);
  if (text.empty() || end == text.c_str() || !(number >= 0)) return std::nullopt;
  std::string unit(end);
  for (auto& c : unit) c = char(std::toupper(static_cast<unsigned char>(c)));
  // 64K, 64KB and 64KiB all mean 64 x 1024.
  if (unit.ends_with("IB")) {
    unit.resize(unit.size() - 2);
  } else if (unit.ends_with("B")) {
    unit.resize(unit.size() - 1);
  }
  double scale = 1;
  if (!unit.empty()) {
    const auto at = std::string("KMGT").find(unit);
    if (unit.size() != 1 || at == std::string::npos) return std::nullopt;
    scale = std::pow(1024.0, double(at + 1));
  }
  return std::uint64_t(std::llround(number * scale));
}

std::string format_size(std::uint64_t bytes) {
  const char* units[] = {"", "K", "M", "G", "T"};
  double value = double(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4 && std::fmod(value, 1024) == 0) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.0f%s", value, units[unit]);
  return text;
}

}  // namespace slimreduce::bench
