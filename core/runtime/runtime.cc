#include "core/runtime/runtime.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <utility>

#include "compressors/kind.h"
#include "core/runtime/compressor_choice.h"
#include "core/runtime/log.h"

namespace slimreduce {
namespace {

// The first of the launcher's variables that is set, as a number.
int env_int(std::initializer_list<const char*> names, int fallback) {
  for (const char* name : names) {
    if (const char* value = std::getenv(name)) return std::atoi(value);
  }
  return fallback;
}

// mpirun (Open MPI, PMIx, PMI), then torchrun and Slurm for NCCL-only jobs.
int launcher_rank() {
  return env_int({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "RANK", "SLURM_PROCID"}, 0);
}

// SLIMREDUCE_ADAPTIVE=accordion: the settings of the compressor's hard
// level, where it has one (an API call that set one ratio or rank leaves it
// without: the one level is sent).
std::optional<Settings> hard_level(const Settings& settings) {
  if (!settings.adapts_levels()) return std::nullopt;
  Settings hard = settings;
  if (settings.compressor == "topk" && settings.topk_ratio_hard) {
    hard.topk_ratio = *settings.topk_ratio_hard;
  } else if (settings.compressor == "powersgd" && settings.powersgd_rank_hard) {
    hard.powersgd_rank = *settings.powersgd_rank_hard;
  } else if (settings.compressor == "quant" && settings.quant_bits_hard) {
    hard.quant_bits = *settings.quant_bits_hard;
  } else {
    return std::nullopt;
  }
  return hard;
}

// "auto": the candidates, each made as if it were SLIMREDUCE_COMPRESSOR; with
// a fixed compressor and SLIMREDUCE_HIERARCHICAL=auto, that compressor alone,
// then its two-level twin.
Policy policy_for(const Settings& settings) {
  Policy policy;
  if (settings.chooses()) {
    const std::vector<std::string> names = settings.chooses_compressor()
                                               ? settings.candidates()
                                               : std::vector<std::string>{settings.compressor};
    for (const std::string& name : names) {
      std::shared_ptr<compressors::Compressor> made = compressor_named(name, settings);
      const bool feedback = error_feedback_on(made.get(), settings);
      policy.candidates.push_back({name, std::move(made), feedback});
    }
    if (settings.chooses_hierarchy) {
      add_two_level_twins(policy, [&settings](const std::string& name) {
        return compressor_named(name, settings);
      });
    }
    if (settings.chooses_compressor()) {
      add_unbiased_twins(policy, [&settings](const std::string& name) {
        Settings unbiased = settings;
        unbiased.quant_rounding = compressors::QuantRounding::stochastic;
        return compressor_named(name, unbiased);
      });
    }
    return policy;
  }
  policy.compressor = compressor_named(settings.compressor, settings);
  policy.error_feedback = error_feedback_on(policy.compressor.get(), settings);
  if (const std::optional<Settings> hard = hard_level(settings)) {
    policy.levels = {policy.compressor, compressor_named(hard->compressor, *hard)};
  }
  return policy;
}

// "topk ratio 0.01,0.001": what the two levels are, for the report.
std::string levels_text(const Settings& settings) {
  char text[96];
  if (settings.compressor == "topk" && settings.topk_ratio_hard) {
    std::snprintf(text, sizeof text, "topk ratio %g,%g", settings.topk_ratio,
                  *settings.topk_ratio_hard);
  } else if (settings.compressor == "powersgd" && settings.powersgd_rank_hard) {
    std::snprintf(text, sizeof text, "powersgd rank %d,%d", settings.powersgd_rank,
                  *settings.powersgd_rank_hard);
  } else if (settings.compressor == "quant" && settings.quant_bits_hard) {
    std::snprintf(text, sizeof text, "quant bits %d,%d", settings.quant_bits,
                  *settings.quant_bits_hard);
  } else {
    return "?";
  }
  return text;
}

std::optional<LevelSchedule> levels_for(const Policy& policy, const Settings& settings) {
  if (!policy.adapts()) return std::nullopt;
  return LevelSchedule({settings.window(), settings.threshold()});
}

std::optional<AutoChooser> chooser_for(const Policy& policy) {
  if (!policy.chooses()) return std::nullopt;
  AutoChooser chooser(static_cast<int>(policy.candidates.size()));
  std::vector<bool> keeps, unbiased;
  for (const Policy::Candidate& candidate : policy.candidates) {
    keeps.push_back(candidate.error_feedback);
    unbiased.push_back(candidate.unbiased);
  }
  chooser.set_keeps_residual(std::move(keeps));
  chooser.set_for_resetting(std::move(unbiased));
  chooser.set_model(auto_model(policy));
  return chooser;
}

// The warm-up and residual-cap rule of the settings; each shape's calls
// numbered only where stochastic rounding draws from them (the settings', or
// an unbiased twin's of auto).
CompressionDecision decision_for(const Settings& settings, const Policy& policy) {
  bool draws = settings.quant_rounding == compressors::QuantRounding::stochastic;
  for (const Policy::Candidate& candidate : policy.candidates) draws = draws || candidate.unbiased;
  return CompressionDecision(settings.ef_max_bytes, settings.warmup_steps, draws);
}

}  // namespace

Runtime::Runtime(Settings settings, std::unique_ptr<DeviceAllocator> device_memory,
                 int launcher_rank)
    : settings_(std::move(settings)),
      device_memory_(std::move(device_memory)),
      shared_{policy_for(settings_),
              CompressionDecision(settings_.ef_max_bytes, settings_.warmup_steps),
              ResidualStore(settings_.ef_max_bytes, settings_.ef_evict_calls),
              1,
              std::nullopt,
              std::nullopt} {
  shared_.decision = decision_for(settings_, shared_.policy);
  shared_.chooser = chooser_for(shared_.policy);
  shared_.levels = levels_for(shared_.policy, settings_);
  log_settings(launcher_rank);
  log_products(launcher_rank);
  timeline_.know_rank(launcher_rank);  // until MPI or NCCL says
}

// A runtime a test made and dropped: its device residuals are left unfreed,
// as at exit (the CUDA runtime may be gone before it).
Runtime::~Runtime() { shared_.residuals.abandon_device_memory(); }

Runtime& Runtime::start(const std::function<Settings()>& read_settings) {
  static std::once_flag once;
  std::call_once(once, [&read_settings] {
    // Never destroyed (see the header); the exit handler writes the report.
    auto made =
        std::make_unique<Runtime>(read_settings(), make_device_allocator(), launcher_rank());
    instance_.runtime.store(made.release(), std::memory_order_release);
    std::atexit(report_at_exit);
  });
  return *get();
}

RuntimeSide& Runtime::attach(Side which,
                             const std::function<std::unique_ptr<RuntimeSide>()>& make) {
  std::lock_guard lock(attach_mutex_);
  if (RuntimeSide* attached = side(which)) return *attached;
  owned_sides_[index(which)] = make();
  sides_[index(which)].store(owned_sides_[index(which)].get(), std::memory_order_release);
  return *owned_sides_[index(which)];
}

void Runtime::log_settings(int rank) const {
  if (rank != 0) return;
  for (const auto& line : describe_settings(settings_)) {
    log_line(settings_.log_level, LogLevel::info, rank, "setting %s", line.c_str());
  }
  log_line(settings_.log_level, LogLevel::info, rank, "error feedback %s",
           shared_.policy.chooses()        ? "per candidate (auto)"
           : shared_.policy.error_feedback ? "on"
                                           : "off");
}

void Runtime::log_products(int rank) {
  if (settings_.log_level < LogLevel::info) return;
  const std::shared_ptr<compressors::Compressor> compressor = policy().compressor;
  if (!compressor || compressor->aggregation() != compressors::Aggregation::low_rank ||
      logged_products_.exchange(true))
    return;
  log_line(settings_.log_level, LogLevel::info, rank, "powersgd products: %s",
           compressors::kind_cast<compressors::LowRankCompressor>(*compressor).products().c_str());
}

Policy Runtime::policy() const {
  std::lock_guard lock(mutex_);
  return shared_.policy;
}

bool Runtime::use_compressor(const std::string& name) {
  Settings chosen;
  {
    std::lock_guard lock(mutex_);
    chosen = settings_;
  }
  chosen.compressor = name;
  // A compressor set through the API ends every measured choice, flat or
  // two-level included (the hierarchy is then SLIMREDUCE_HIERARCHICAL=1's).
  chosen.chooses_hierarchy = chosen.chooses_hierarchy && name == "auto";
  Policy policy = policy_for(chosen);
  if (name != "none" && !policy.compressor && !policy.chooses()) return false;
  std::vector<DeviceBlock> dropped;
  bool ends_choice = false;
  {
    std::lock_guard lock(mutex_);
    ends_choice = shared_.policy.chooses() && !policy.chooses();
    settings_.compressor = name;
    settings_.chooses_hierarchy = chosen.chooses_hierarchy;
    shared_.policy = std::move(policy);
    // What one compressor left behind means nothing to another.
    shared_.residuals.take_all(dropped);
    shared_.decision = decision_for(settings_, shared_.policy);
    shared_.chooser = chooser_for(shared_.policy);
    shared_.levels = levels_for(shared_.policy, settings_);
  }
  std::vector<int> devices;
  for (const auto& attached : sides_) {
    if (RuntimeSide* s = attached.load(std::memory_order_acquire)) s->policy_changed(devices);
  }
  std::sort(devices.begin(), devices.end());
  devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
  // Kernels already queued may still write them. (A plan of another thread
  // between its planning and its launches is not covered: switching the
  // compressor while another thread reduces is not supported.)
  if (device_memory_) release_after_device_wait(dropped, devices, *device_memory_);
  if (ends_choice) {
    log_line(settings_.log_level, LogLevel::info, report_context().rank,
             "auto: the compressor set through the API (%s) ends the measured choice",
             name.c_str());
  }
  log_products(report_context().rank);
  return true;
}

bool Runtime::set_topk_ratio(double ratio) {
  if (!(ratio > 0.0 && ratio <= 1.0)) return false;
  std::string name;
  {
    std::lock_guard lock(mutex_);
    settings_.topk_ratio = ratio;
    settings_.topk_ratio_hard.reset();  // one level from now on
    name = settings_.compressor;
  }
  return use_compressor(name);
}

bool Runtime::set_powersgd_rank(int rank) {
  if (rank < 1 || rank > 64) return false;
  std::string name;
  {
    std::lock_guard lock(mutex_);
    settings_.powersgd_rank = rank;
    settings_.powersgd_rank_hard.reset();  // one level from now on
    name = settings_.compressor;
  }
  return use_compressor(name);
}

void Runtime::forget_communicator(std::uint64_t comm_id, std::vector<DeviceBlock>& out) {
  std::lock_guard lock(mutex_);
  shared_.residuals.take_communicator(comm_id, out);
  shared_.decision.forget_communicator(comm_id);
  if (shared_.chooser) shared_.chooser->forget_communicator(comm_id);
  if (shared_.levels) shared_.levels->forget_communicator(comm_id);
}

Counters Runtime::counters(Side which) const {
  Counters total = boards_[index(which)].total();
  if (const RuntimeSide* s = side(which)) total += s->own_counters();
  return total;
}

Counters Runtime::counters() const {
  Counters total = counters(Side::mpi);
  total += counters(Side::nccl);
  return total;
}

void Runtime::know_rank(int rank, int size, bool from_mpi) {
  std::lock_guard lock(report_mutex_);
  if (rank_from_mpi_ || (!from_mpi && rank_ >= 0)) return;
  rank_ = rank;
  size_ = size;
  rank_from_mpi_ = from_mpi;
  timeline_.know_rank(rank);
}

ReportContext Runtime::report_context() const {
  ReportContext context;
  context.node_bytes = settings_.hierarchical;
  {
    std::lock_guard lock(mutex_);
    context.compressor = settings_.compressor;
  }
  std::lock_guard lock(report_mutex_);
  if (rank_from_mpi_) {
    context.rank = rank_;
    context.world_size = size_;
    return context;
  }
  // Without MPI: the launcher's word first (a communicator's rank need not be the job's).
  context.rank =
      env_int({"RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}, rank_ < 0 ? 0 : rank_);
  context.world_size =
      env_int({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}, size_ < 1 ? 1 : size_);
  return context;
}

bool Runtime::claim_report() {
  std::lock_guard lock(report_mutex_);
  return !std::exchange(reported_, true);
}

// SLIMREDUCE_COMPRESSOR=auto: the choice table, the same on every rank.
void Runtime::add_auto_choices(ReportContext& context) const {
  std::lock_guard lock(mutex_);
  if (!shared_.chooser) return;
  context.chooses = true;
  for (const auto& [key, summary] : shared_.chooser->summaries())
    context.auto_choices.push_back(auto_choice_row(shared_.policy, key.first, key.second, summary));
}

// SLIMREDUCE_ADAPTIVE: the levels and each class's calls at them, the same on every rank.
void Runtime::add_levels(ReportContext& context) const {
  std::lock_guard lock(mutex_);
  if (!shared_.levels) return;
  context.levels = levels_text(settings_);
  for (const auto& [key, summary] : shared_.levels->summaries()) {
    context.level_rows.push_back({key.first, key.second, summary.calls[LevelSchedule::kGentle],
                                  summary.calls[LevelSchedule::kHard], summary.windows,
                                  summary.critical, summary.switches});
  }
}

void Runtime::write_report(const Counters& counters, const ReportContext& given) const {
  ReportContext context = given;
  add_auto_choices(context);
  add_levels(context);
  if (settings_.report == "stderr") {
    std::fputs(report_table(counters, context).c_str(), stderr);
    return;
  }
  if (settings_.report.empty()) return;
  const std::string path = settings_.report + "." + std::to_string(context.rank) + ".json";
  std::ofstream out(path);
  out << report_json(counters, context);
  if (!out) {
    log_line(settings_.log_level, LogLevel::error, context.rank, "cannot write the report to %s",
             path.c_str());
  }
}

void Runtime::finish_timeline() {
  for (const auto& attached : sides_) {
    if (RuntimeSide* side = attached.load(std::memory_order_acquire)) side->before_timeline_ends();
  }
  timeline_.finish();
}

// Without MPI_Finalize there is no MPI to sum over ranks: each rank speaks for itself.
void Runtime::report_at_exit() {
  Runtime* runtime = get();
  if (!runtime) return;
  runtime->finish_timeline();
  if (!runtime->claim_report()) return;
  runtime->write_report(runtime->counters(), runtime->report_context());
}

void Runtime::note_compressed(std::uint64_t calls, std::uint64_t resets) {
  const std::uint64_t compressed = compressed_noted_.fetch_add(calls) + calls;
  const std::uint64_t reset = resets_noted_.fetch_add(resets) + resets;
  if (compressed < kResetWarningCalls || reset * 10 < compressed || warned_resets_.exchange(true))
    return;
  log_line(settings_.log_level, LogLevel::warn, report_context().rank,
           "error-feedback residuals were reset %llu times in the first %llu compressed calls: "
           "receive buffers are reduced with changing counts, as a fusion buffer whose tensors "
           "change is (Horovod's), and each reset throws away what error feedback carried. With "
           "Horovod, pass groups=1 to hvd.DistributedOptimizer or set HOROVOD_FUSION_THRESHOLD=0, "
           "so that each tensor keeps its own buffer; see docs/horovod.md",
           static_cast<unsigned long long>(reset), static_cast<unsigned long long>(compressed));
}

void Runtime::warn_about_counters() const {
  const Counters mine = counters();
  const int rank = report_context().rank;
  // Error feedback only works if a residual key sees the same tensor call
  // after call; a key whose count keeps changing throws its residual away.
  // (Said once: here, unless note_compressed said it while the job ran.)
  if (!warned_resets_ && mine.ef_resets != 0 && mine.ef_resets * 10 >= mine.compressed) {
    log_line(settings_.log_level, LogLevel::warn, rank,
             "error-feedback residuals were reset %llu times in %llu compressed calls: a receive "
             "buffer was reduced with changing counts (a fusion buffer?); see docs/horovod.md",
             static_cast<unsigned long long>(mine.ef_resets),
             static_cast<unsigned long long>(mine.compressed));
  }
  if (mine.ef_cap_fallback != 0) {
    log_line(settings_.log_level, LogLevel::warn, rank,
             "%llu calls went without error feedback: SLIMREDUCE_EF_MAX_BYTES (%llu bytes) was "
             "reached (a tensor larger than it, or more keys than fit: new receive buffers each "
             "step?); raise it, or reuse the buffers",
             static_cast<unsigned long long>(mine.ef_cap_fallback),
             static_cast<unsigned long long>(settings_.ef_max_bytes));
  }
}

}  // namespace slimreduce
