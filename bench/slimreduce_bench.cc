// slimreduce-bench: an allreduce size sweep in the style of nccl-tests, run
// under LD_PRELOAD=libslimreduce.so. For every size it times plain
// MPI_Allreduce (compressor "none": pass-through) and then each compressor, on
// the same persistent MPI_IN_PLACE buffer, switching compressors through the
// library's own C API, and reads wire bytes from the library's counters.
#include <dlfcn.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "bench/bench_options.h"
#include "bench/bench_output.h"
#include "bench/bench_reference.h"
#include "interpose/slimreduce.h"

extern char** environ;

namespace slimreduce::bench {
namespace {

// The library's C API, looked up in the process rather than linked, so the
// bench measures exactly what an unmodified job gets from the preload.
struct Library {
  int (*get_counters)(slimreduce_counters*) = nullptr;
  int (*set_compressor)(const char*) = nullptr;
  const char* (*version)() = nullptr;
  int (*set_topk_ratio)(double) = nullptr;  // optional: not in the C API (yet)
  int (*set_powersgd_rank)(int) = nullptr;  // optional: a library without PowerSGD lacks it
  int (*get_counter)(const char*, double*) = nullptr;  // a report key by name
};

template <typename Function>
Function lookup(const char* name) {
  return reinterpret_cast<Function>(dlsym(RTLD_DEFAULT, name));
}

Library find_library() {
  Library lib;
  lib.get_counters = lookup<decltype(lib.get_counters)>("slimreduce_get_counters");
  lib.set_compressor = lookup<decltype(lib.set_compressor)>("slimreduce_set_compressor");
  lib.version = lookup<decltype(lib.version)>("slimreduce_version");
  lib.set_topk_ratio = lookup<decltype(lib.set_topk_ratio)>("slimreduce_set_topk_ratio");
  lib.set_powersgd_rank = lookup<decltype(lib.set_powersgd_rank)>("slimreduce_set_powersgd_rank");
  lib.get_counter = lookup<decltype(lib.get_counter)>("slimreduce_get_counter");
  return lib;
}

std::string environment_value(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

// The SLIMREDUCE_* settings this run was started with, to store with the results.
std::string slimreduce_environment() {
  std::string settings;
  for (char** entry = environ; *entry; ++entry) {
    if (std::strncmp(*entry, "SLIMREDUCE_", 11) != 0) continue;
    settings += (settings.empty() ? "" : " ") + std::string(*entry);
  }
  return settings;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return text;
}

// Without slimreduce_set_topk_ratio the library keeps the ratio it read at
// MPI_Init, so a top-k entry asking for another one cannot be honoured here.
std::string unmet_ratio(const Options& options, const Library& lib, double library_ratio) {
  if (lib.set_topk_ratio) return "";
  for (const CompressorSpec& spec : options.compressors) {
    if (!spec.ratio || std::fabs(*spec.ratio - library_ratio) <= 1e-12 * library_ratio) continue;
    char text[400];
    std::snprintf(text, sizeof text,
                  "slimreduce-bench: '%s' needs SLIMREDUCE_TOPK_RATIO=%g in every rank's "
                  "environment (mpirun -x); this library reads the ratio once at MPI_Init and "
                  "has %g. Run one process per ratio (bench/run_all.sh does).\n",
                  spec.label.c_str(), *spec.ratio, library_ratio);
    return text;
  }
  return "";
}

struct Sample {  // one rank's view of one round, gathered to rank 0
  double median_us, wire_sent, wire_baseline, compressed_calls;
};
static_assert(sizeof(Sample) == 4 * sizeof(double), "gathered as 4 MPI_DOUBLE");

// The middle value; the mean of the two middle ones for an even count.
double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

class Sweep {
 public:
  Sweep(const Options& options, const Library& lib, int rank, int ranks)
      : options_(options), lib_(lib), rank_(rank), ranks_(ranks) {
    topk_ratio_ = std::strtod(environment_value("SLIMREDUCE_TOPK_RATIO", "0.01").c_str(), nullptr);
    topk_fp16_ = environment_value("SLIMREDUCE_TOPK_VALUES", "fp32") == "fp16";
    hierarchical_ = environment_value("SLIMREDUCE_HIERARCHICAL", "0") == "1";
    powersgd_rank_ = std::atoi(environment_value("SLIMREDUCE_POWERSGD_RANK", "4").c_str());
  }

  double library_topk_ratio() const { return topk_ratio_; }
  bool failed() const { return failed_; }
  const std::vector<Row>& rows() const { return rows_; }

  void run_size(std::uint64_t bytes) {
    const std::size_t count = bytes / sizeof(float);
    input_.assign(count, 0.0f);
    work_.assign(count, 0.0f);  // touched now, so no page faults are timed
    fill_input(rank_, input_.data(), count);
    double baseline_us = 0;
    for (const CompressorSpec& spec : options_.compressors) {
      Row row = run_round(spec, bytes);
      if (spec.name == "none") baseline_us = row.time_us;
      row.baseline_us = baseline_us;
      row.speedup = baseline_us > 0 ? baseline_us / row.time_us : 0;  // 0: no baseline
      if (rank_ == 0) print_row(stdout, row);
      rows_.push_back(row);
    }
  }

 private:
  void select(const CompressorSpec& spec, Row& row) {
    row.topk_ratio = spec.name == "topk" ? spec.ratio.value_or(topk_ratio_) : 0;
    if (spec.name == "topk" && lib_.set_topk_ratio && lib_.set_topk_ratio(row.topk_ratio) != 0) {
      abort_run("slimreduce_set_topk_ratio refused " + std::to_string(row.topk_ratio));
    }
    // PowerSGD's rank: the entry's, else the environment's (a row after
    // "powersgd:8" must not keep 8).
    const int rank = spec.rank.value_or(powersgd_rank_);
    if (spec.name == "powersgd" && (!lib_.set_powersgd_rank || lib_.set_powersgd_rank(rank) != 0)) {
      abort_run("the library cannot set PowerSGD's rank to " + std::to_string(rank));
    }
    MPI_Barrier(MPI_COMM_WORLD);  // nobody has a reduction in flight while switching
    if (spec.as_started) return;  // as the library started: no switch
    if (lib_.set_compressor(spec.name.c_str()) != 0) {
      abort_run("the library does not know the compressor '" + spec.name + "'");
    }
  }

  void abort_run(const std::string& why) {
    std::fprintf(stderr, "slimreduce-bench: %s\n", why.c_str());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }

  slimreduce_counters counters() const {
    slimreduce_counters c{};
    lib_.get_counters(&c);
    return c;
  }

  // One iteration as a training step sees it: the gradient is fresh (the
  // buffer reset from the input) while the library's residual carries over.
  double step(bool timed) {
    std::memcpy(work_.data(), input_.data(), input_.size() * sizeof(float));
    if (timed) MPI_Barrier(MPI_COMM_WORLD);  // every rank starts the call together
    const double start = MPI_Wtime();
    const int rc = MPI_Allreduce(MPI_IN_PLACE, work_.data(), int(work_.size()), MPI_FLOAT, MPI_SUM,
                                 MPI_COMM_WORLD);
    const double seconds = MPI_Wtime() - start;
    if (rc != MPI_SUCCESS) abort_run("MPI_Allreduce returned " + std::to_string(rc));
    return seconds;
  }

  Bound bound_for(const std::string& name, bool compressed, bool first) const {
    // auto: its default candidates (none, fp16, int8), any of which a call
    // may take, re-probes included: the loosest of their bounds.
    if (name == "auto") return Bound::quant8;
    if (!compressed) return Bound::exact_sum;
    if (name == "fp16") return Bound::cast_fp16;
    if (name == "bf16") return Bound::cast_bf16;
    if (name == "int8") return Bound::quant8;
    // Hierarchical top-k keeps the top k of each node's sum, not of each
    // rank's input: the first step is judged as any step is.
    if (name == "topk") return first && !hierarchical_ ? Bound::topk_first : Bound::topk_step;
    // PowerSGD: a low-rank approximation, with no elementwise bound; the
    // check is that every rank holds the same bits.
    return Bound::none_known;
  }

  // Judges the work buffer on rank 0 (which rebuilds every rank's input) and
  // checks that all ranks hold the same bits. Collective.
  double verify(const std::string& name, bool compressed, bool first, double ratio, Row& row) {
    const std::uint64_t mine = digest(work_.data(), work_.size());
    std::vector<std::uint64_t> digests(rank_ == 0 ? ranks_ : 0);
    MPI_Gather(&mine, 1, MPI_UINT64_T, digests.data(), 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (rank_ != 0) return 0;
    if (first && options_.corrupt) work_[work_.size() / 2] += 1.0f;
    TopkShape shape{ratio > 0 ? topk_k(work_.size(), ratio) : 0, topk_fp16_, ratio};
    shape.pieces = std::max<std::size_t>(1, first_pieces_);  // a call cut in pieces counts them
    shape.sharded = first_sharded_;
    Judgement j =
        judge(work_.data(), work_.size(), ranks_, bound_for(name, compressed, first), shape);
    if (j.ok && std::count(digests.begin(), digests.end(), mine) != ranks_) {
      j = {j.error, false, "ranks hold different results"};
    }
    row.error_metric =
        uses_l2_metric(bound_for(name, compressed, first)) ? "rel_l2" : "max_rel_sum_abs";
    if (!j.ok && row.check.rfind("FAILED", 0) != 0) {
      const std::string detail = (first ? "first step: " : "last step: ") + j.why;
      row.check = "FAILED: " + detail;
      failed_ = true;
      std::fprintf(stderr, "slimreduce-bench: CHECK FAILED at %s %s: %s\n",
                   format_size(row.bytes).c_str(), row.compressor.c_str(), detail.c_str());
    }
    return j.error;
  }

  // A report key by name (0 where the library has no such key).
  double counter(const char* key) const {
    double value = 0;
    if (!lib_.get_counter || lib_.get_counter(key, &value) != 0) return 0;
    return value;
  }

  Row run_round(const CompressorSpec& spec, std::uint64_t bytes) {
    Row row;
    row.bytes = bytes;
    row.count = bytes / sizeof(float);
    row.compressor = spec.label;
    row.check = options_.check ? "ok" : "skipped";
    select(spec, row);
    if (options_.check) {  // the first step after the switch: no residual yet
      const slimreduce_counters before = counters();
      const double pieces_before = counter("calls.partitions");
      const double sharded_before = counter("calls.topk_sharded");
      step(false);
      const bool compressed = counters().compressed > before.compressed;
      first_pieces_ = std::size_t(counter("calls.partitions") - pieces_before);
      first_sharded_ = counter("calls.topk_sharded") > sharded_before;
      row.error_first = verify(spec.name, compressed, true, row.topk_ratio, row);
    }
    for (int i = 0; i < options_.warmup; ++i) step(false);
    const slimreduce_counters before = counters();
    std::vector<double> times;
    for (int i = 0; i < options_.iters; ++i) times.push_back(step(true));
    const slimreduce_counters after = counters();
    const bool compressed = after.compressed - before.compressed == std::uint64_t(options_.iters);
    if (options_.check) row.error = verify(spec.name, compressed, false, row.topk_ratio, row);
    const Sample mine{median(times) * 1e6, (after.wire_sent - before.wire_sent) / options_.iters,
                      (after.wire_baseline - before.wire_baseline) / options_.iters,
                      double(after.compressed - before.compressed)};
    summarize(mine, row);
    return row;
  }

  // Rank 0 turns every rank's sample into the row's time, bandwidth and wire columns.
  void summarize(const Sample& mine, Row& row) const {
    std::vector<Sample> all(rank_ == 0 ? ranks_ : 0);
    MPI_Gather(&mine, 4, MPI_DOUBLE, all.data(), 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank_ != 0) return;
    std::vector<double> medians;
    double sent = 0, baseline = 0;
    bool compressed = true;
    for (const Sample& s : all) {
      medians.push_back(s.median_us);
      sent += s.wire_sent;
      baseline += s.wire_baseline;
      compressed = compressed && s.compressed_calls == options_.iters;
    }
    row.time_us = *std::max_element(medians.begin(), medians.end());
    row.time_median_us = median(medians);
    row.algbw_gbs = double(row.bytes) / row.time_us / 1e3;
    row.busbw_gbs = row.algbw_gbs * 2.0 * (ranks_ - 1) / ranks_;
    row.compressed = compressed;
    row.wire_bytes_per_rank = sent / ranks_;
    row.wire_baseline_per_rank = baseline / ranks_;
    row.savings = baseline > 0 ? 1 - sent / baseline : 0;
  }

  const Options& options_;
  const Library& lib_;
  int rank_, ranks_;
  int powersgd_rank_ = 4;
  double topk_ratio_ = 0.01;
  bool topk_fp16_ = false;
  bool hierarchical_ = false;     // SLIMREDUCE_HIERARCHICAL=1
  std::size_t first_pieces_ = 0;  // what the first step's call was cut into (0: whole)
  bool first_sharded_ = false;    // whether it went sharded
  bool failed_ = false;
  std::vector<float> input_, work_;
  std::vector<Row> rows_;
};

// Every rank learns whether all ranks have the library: a rank without it
// would otherwise wait forever for the others' switches.
bool all_ranks_have(const Library& lib) {
  int have = lib.get_counters && lib.set_compressor && lib.version ? 1 : 0;
  int all = 0;
  MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);  // an int: passed through
  return all == 1;
}

int finish(int code) {
  MPI_Finalize();
  return code;
}

int run(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  std::string message;
  bool help = false;
  const auto options = parse_options(argc, argv, &message, &help);
  if (!options) {
    if (rank == 0) std::fputs(message.c_str(), help ? stdout : stderr);
    return finish(help ? 0 : 2);
  }
  const Library lib = find_library();
  if (!all_ranks_have(lib)) {
    if (rank == 0) {
      std::fputs(
          "slimreduce-bench: libslimreduce.so is not loaded in every rank. This bench "
          "drives the library through its C API; run it preloaded, e.g.\n"
          "  mpirun -np 4 -x LD_PRELOAD=/path/to/libslimreduce.so slimreduce-bench ...\n",
          stderr);
    }
    return finish(2);
  }
  Sweep sweep(*options, lib, rank, ranks);
  if (const std::string unmet = unmet_ratio(*options, lib, sweep.library_topk_ratio());
      !unmet.empty()) {
    if (rank == 0) std::fputs(unmet.c_str(), stderr);
    return finish(2);
  }
  RunInfo info{lib.version(),
               ranks,
               options->iters,
               options->warmup,
               options->check,
               options->label,
               utc_now(),
               slimreduce_environment(),
               0};
  if (rank == 0) print_header(stdout, info);
  for (std::uint64_t bytes : sweep_sizes(*options)) sweep.run_size(bytes);

  // Everything the library counted in this run (checks and warm-ups included),
  // to set against the bytes that really crossed an emulated wire.
  slimreduce_counters total{};
  lib.get_counters(&total);
  MPI_Reduce(&total.wire_sent, &info.total_wire_sent, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  bool written = true;
  if (rank == 0) {
    std::printf("# total wire_sent, all ranks, every intercepted call: %.0f bytes\n",
                info.total_wire_sent);
    if (!options->csv_path.empty()) written &= write_csv(options->csv_path, info, sweep.rows());
    if (!options->json_path.empty()) written &= write_json(options->json_path, info, sweep.rows());
  }
  int failed = sweep.failed() || !written ? 1 : 0, any = 0;
  MPI_Reduce(&failed, &any, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
  return finish(rank == 0 && any ? 1 : 0);
}

}  // namespace
}  // namespace slimreduce::bench

int main(int argc, char** argv) { return slimreduce::bench::run(argc, argv); }
