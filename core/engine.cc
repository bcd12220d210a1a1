#include "core/engine.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "backends/mpi_backend.h"
#include "backends/mpi_transport.h"
#include "core/compressor_choice.h"
#include "core/decision.h"
#include "core/device_staging.h"
#include "core/eligibility.h"
#include "core/host_allreduce.h"
#include "core/log.h"
#ifdef SLIMREDUCE_HAVE_CUDA
#include "core/nccl_engine.h"
#endif

namespace slimreduce {
namespace {

// MPI calls this when a user communicator is freed (and at MPI_Finalize).
int on_comm_delete(MPI_Comm, int, void* attribute, void*) {
  if (Engine* engine = Engine::get()) engine->forget(static_cast<CommState*>(attribute));
  return MPI_SUCCESS;
}

void report_at_exit() {
  if (Engine* engine = Engine::get()) engine->write_report_at_exit();
}

// A predefined 4-byte float: C's float, or Fortran's REAL when it is 4 bytes wide.
bool is_float32(MPI_Datatype datatype, int type_size) {
  return type_size == 4 && (datatype == MPI_FLOAT || datatype == MPI_REAL || datatype == MPI_REAL4);
}

}  // namespace

Settings Engine::load_settings() { return parse_settings(read_environment()); }

Engine& Engine::start(Settings settings) {
  if (!instance_.engine) {
    instance_.engine = std::make_unique<Engine>(std::move(settings));
    instance_.tally_board = instance_.engine->tallies_.id();
    std::atexit(report_at_exit);
  }
  return *instance_.engine;
}

Engine::Engine(Settings settings)
    : settings_(std::move(settings)),
      residuals_(settings_.ef_max_bytes),
      decision_(settings_.ef_max_bytes, settings_.warmup_steps) {
  use_compressor(settings_.compressor);
  PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, on_comm_delete, &comm_keyval_, nullptr);
  if (int real_size = 0; PMPI_Type_size(MPI_REAL, &real_size) == MPI_SUCCESS && real_size == 4) {
    real32_ = MPI_REAL;
  }
  PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
  PMPI_Comm_size(MPI_COMM_WORLD, &world_size_);
  log_settings();
}

// The tallies go with the engine: no call may find them after this.
// At exit: the CUDA runtime may be gone before the engine, so device
// residuals are left unfreed rather than freed into a runtime that is not there.
Engine::~Engine() {
  instance_.tally_board = 0;
  residuals_.abandon_device_memory();
}

bool Engine::set_topk_ratio(double ratio) {
  if (!(ratio > 0.0 && ratio <= 1.0)) return false;
  settings_.topk_ratio = ratio;
  return use_compressor(settings_.compressor);
}

bool Engine::use_compressor(const std::string& name) {
  std::unique_ptr<compressors::Compressor> chosen = compressor_named(name, settings_);
  if (name != "none" && !chosen) return false;
  std::lock_guard lock(mutex_);
  compressor_ = std::move(chosen);
  settings_.compressor = name;
  rule_ = eligibility_rule(settings_);
  tallies_.forget_communicators();  // their compress_from came from the old rule
  error_feedback_ = error_feedback_on(compressor_.get(), settings_);
  // What one compressor left behind means nothing to another.
  residuals_ = ResidualStore(settings_.ef_max_bytes);
  decision_ = CompressionDecision(settings_.ef_max_bytes, settings_.warmup_steps);
  return true;
}

void Engine::log_settings() const {
  if (world_rank_ != 0) return;
  for (const auto& line : describe_settings(settings_)) {
    log_line(settings_.log_level, LogLevel::info, world_rank_, "setting %s", line.c_str());
  }
  log_line(settings_.log_level, LogLevel::info, world_rank_, "error feedback %s",
           error_feedback_ ? "on" : "off");
}

CommState* Engine::state_of(MPI_Comm comm) {
  ThreadTally& tally = tallies_.mine();
  if (tally.comm.load(std::memory_order_relaxed) == comm && tally.state) return tally.state;
  CommState* state = look_up_state(comm);
  if (!state) return nullptr;
  // The same rule as classify(), for the fp32 SUM calls the hot path sees.
  const bool compressible = rule_.compressing && !state->is_intercommunicator();
  const std::uint64_t compress_from =
      compressible ? std::max<std::uint64_t>(rule_.min_bytes, 1) : ThreadTally::kNever;
  tally.real_type = real32_;
  tally.move_to(comm, state, compress_from, state->ring_factor());
  return state;
}

CommState* Engine::look_up_state(MPI_Comm comm) {
  void* attribute = nullptr;
  int found = 0;
  if (PMPI_Comm_get_attr(comm, comm_keyval_, &attribute, &found) != MPI_SUCCESS) return nullptr;
  if (found) return static_cast<CommState*>(attribute);
  std::lock_guard lock(mutex_);
  auto state = std::make_unique<CommState>(next_comm_id_++, comm);
  CommState* raw = state.get();
  if (PMPI_Comm_set_attr(comm, comm_keyval_, raw) != MPI_SUCCESS) return nullptr;
  comms_.emplace(raw, std::move(state));
  return raw;
}

void Engine::forget(CommState* state) {
  tallies_.forget_communicators();
  std::unique_ptr<CommState> gone;
  {
    std::lock_guard lock(mutex_);
    auto found = comms_.find(state);
    if (found == comms_.end()) return;
    // Its device residuals too: the MPI device path's calls are synchronous,
    // so no work of ours still uses them.
    residuals_.forget_communicator(state->id());
    decision_.forget_communicator(state->id());
    gone = std::move(found->second);
    comms_.erase(found);
  }
  // `gone` is dropped outside the lock: freeing the private duplicate calls into MPI.
}

namespace {

// Handles only MPI's error can answer. Asking MPI about them first (an
// attribute, a type's size) would raise the error once more, before the
// real call raises it: a caller's handler would run twice.
bool null_handle(MPI_Comm comm, MPI_Datatype datatype) {
  return comm == MPI_COMM_NULL || datatype == MPI_DATATYPE_NULL;
}

}  // namespace

int Engine::allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                      MPI_Op op, MPI_Comm comm) {
  int type_size = 0;
  CommState* state = null_handle(comm, datatype) ? nullptr : state_of(comm);
  if (!state || PMPI_Type_size(datatype, &type_size) != MPI_SUCCESS || count < 0) {
    // Not something we can read: the real library gives the caller its own error.
    return backends::mpi::allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  }
  const std::uint64_t bytes = std::uint64_t(count) * std::uint64_t(type_size);
  const CallFacts facts{is_float32(datatype, type_size), op == MPI_SUM,
                        !state->is_intercommunicator(), bytes,
                        usable_buffers(sendbuf, recvbuf, MPI_IN_PLACE)};
  if (classify(facts, rule_) == Verdict::compress) {
    return compress_call(sendbuf, recvbuf, count, datatype, op, comm, *state);
  }
  tallies_.mine().count(bytes);  // state_of made comm the tally's communicator
  return backends::mpi::allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

void Engine::count_pass_through(std::uint64_t bytes, int ranks, std::uint64_t Counters::*reason) {
  Counters delta;
  delta.count_pass_through(bytes, ranks);
  if (reason) ++(delta.*reason);
  board_.add(delta);
}

ResidualSlot* Engine::residual_for(const ResidualKey& key, std::size_t count,
                                   std::uint64_t datatype_tag) {
  const std::uint64_t resets_before = residuals_.resets();
  ResidualSlot* slot = residuals_.find_or_create(key, count, datatype_tag, error_feedback_);
  if (residuals_.resets() != resets_before) {
    Counters reset;
    reset.ef_resets = 1;
    board_.add(reset);
  }
  return slot;
}

int Engine::compress_call(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                          MPI_Op op, MPI_Comm comm, CommState& state) {
  const std::uint64_t bytes = std::uint64_t(count) * sizeof(float);
  AllreduceCall call{static_cast<const float*>(sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf),
                     static_cast<float*>(recvbuf), static_cast<std::size_t>(count), nullptr};
  // GPU buffers under an MPI that cannot read them are compressed on the GPU
  // (false at once on a CPU-only build, or in a process without CUDA).
  const bool device = device_staging::is_device_pointer(call.input) ||
                      device_staging::is_device_pointer(call.output);
  const bool residual_on_device =
      device && device_staging::keeps_residual_on_device(call, *compressor_);
  ResidualSlot* slot = nullptr;
  bool no_room = false;  // error feedback wanted, but the cap is reached: none for this call
  std::uint64_t Counters::*passes_because = nullptr;  // set: passed through, for this reason
  {
    std::lock_guard lock(mutex_);
    const auto datatype_tag = reinterpret_cast<std::uintptr_t>(datatype);
    // Whether to compress: from the arguments and the calls before, as on every rank.
    passes_because =
        counted_as(decision_.decide(error_feedback_, state.id(), call.count, datatype_tag));
    if (!passes_because) {
      // The residual: local, keyed by our buffer address. A missing one (no
      // room under the cap) means no error feedback, never another path.
      // One store for host and device residuals: the device path takes the slot's device memory.
      slot = residual_for({state.id(), recvbuf}, call.count, datatype_tag);
      no_room = slot == nullptr;
      if (slot && !residual_on_device) call.residual = slot->host_residual();
    }
  }
  if (passes_because) {
    // Outside the lock: a thread in a collective must never hold what a
    // thread on another communicator needs (each rank's lock would wait on a
    // call that the other rank's lock holds back).
    count_pass_through(bytes, state.size(), passes_because);
    // Device buffers too go to an MPI that may not read them: staged through the host.
    if (!device) return backends::mpi::allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    int mpi_rc = MPI_SUCCESS;
    const int rc = device_staging::passed_through_allreduce(call, datatype, op, comm, &mpi_rc);
    return rc == MPI_SUCCESS ? mpi_rc : raise(comm, rc, "MPI_Allreduce (staged through the host)");
  }
  // A failed dup was raised on comm by MPI itself; everything after it is ours to raise.
  MPI_Comm wire_comm = MPI_COMM_NULL;
  if (const int rc = state.private_comm(&wire_comm)) return rc;
  backends::MpiTransport transport(wire_comm, state.rank(), state.size());
  double wire_sent = 0;
  // Device buffers: compressed on the GPU, only the compressed bytes staged through the host.
  const int rc =
      device ? device_staging::allreduce(call, *compressor_, state, transport, slot, &wire_sent)
             : backends::mpi_code(host_allreduce(call, *compressor_, transport, state, &wire_sent));
  if (rc != MPI_SUCCESS) return raise(comm, rc, "MPI_Allreduce (compressed)");
  Counters delta;
  delta.count_compressed(bytes, state.size(), wire_sent);
  delta.ef_cap_fallback = no_room ? 1 : 0;
  board_.add(delta);
  return MPI_SUCCESS;
}

int Engine::raise(MPI_Comm comm, int code, const char* what) {
  try {  // the line is a courtesy: out of memory, the handler still hears of the error
    const Engine* engine = get();
    log_line(engine ? engine->settings_.log_level : LogLevel::error, LogLevel::error,
             engine ? engine->world_rank_ : 0, "%s failed in SlimReduce: %s", what,
             backends::mpi::error_text(code).c_str());
  } catch (...) {
  }
  return backends::mpi::raise_error(comm, code);
}

int Engine::iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                       MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  // Passed through and counted: compressing it needs the scheduler (a later layer).
  int type_size = 0;
  CommState* state = null_handle(comm, datatype) ? nullptr : state_of(comm);
  if (state && count >= 0 && PMPI_Type_size(datatype, &type_size) == MPI_SUCCESS) {
    tallies_.mine().count(std::uint64_t(count) * type_size);  // state_of made comm the tally's
  }
  return backends::mpi::iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
}

Counters Engine::counters() const {
  Counters total = board_.total();
  total += tallies_.total();
#ifdef SLIMREDUCE_HAVE_CUDA
  // A job on both (Horovod: MPI control, NCCL data) gets one report with both.
  if (const NcclEngine* nccl = NcclEngine::get()) total += nccl->counters();
#endif
  return total;
}

void Engine::finish() {
  {
    std::lock_guard lock(mutex_);
    if (reported_) return;
    reported_ = true;
    for (auto& [raw, state] : comms_) state->release();
  }
  warn_about_resets();
  warn_about_cap();
  const ReportContext context{world_rank_, world_size_, settings_.compressor};
  if (settings_.report == "stderr") {
    const Counters mine = counters();
    double local[9] = {double(mine.intercepted),     double(mine.compressed),
                       double(mine.passed_through),  double(mine.warmup),
                       double(mine.ef_cap_fallback), double(mine.input_bytes),
                       mine.wire_baseline,           mine.wire_sent,
                       double(mine.ef_resets)};
    double total[9] = {};
    PMPI_Reduce(local, total, 9, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (world_rank_ == 0) {
      const Counters sum{std::uint64_t(total[0]),
                         std::uint64_t(total[1]),
                         std::uint64_t(total[2]),
                         std::uint64_t(total[3]),
                         std::uint64_t(total[4]),
                         std::uint64_t(total[5]),
                         total[6],
                         total[7],
                         std::uint64_t(total[8])};
      ReportContext summed = context;
      summed.summed_over_ranks = true;
      std::fputs(report_table(sum, summed).c_str(), stderr);
    }
  } else if (!settings_.report.empty()) {
    write_json_report();
  }
}

void Engine::warn_about_cap() const {
  const Counters mine = counters();
  if (mine.ef_cap_fallback == 0) return;
  log_line(settings_.log_level, LogLevel::warn, world_rank_,
           "%llu calls went without error feedback: SLIMREDUCE_EF_MAX_BYTES (%llu bytes) was "
           "reached (a tensor larger than it, or more keys than fit: new receive buffers each "
           "step?); raise it, or reuse the buffers",
           static_cast<unsigned long long>(mine.ef_cap_fallback),
           static_cast<unsigned long long>(settings_.ef_max_bytes));
}

void Engine::warn_about_resets() const {
  const Counters mine = counters();
  // Error feedback only works if a residual key sees the same tensor call
  // after call; a key whose count keeps changing throws its residual away.
  if (mine.ef_resets == 0 || mine.ef_resets * 10 < mine.compressed) return;
  log_line(settings_.log_level, LogLevel::warn, world_rank_,
           "error-feedback residuals were reset %llu times in %llu compressed calls: a receive "
           "buffer was reduced with changing counts (a fusion buffer?); see docs/horovod.md",
           static_cast<unsigned long long>(mine.ef_resets),
           static_cast<unsigned long long>(mine.compressed));
}

void Engine::write_report_at_exit() {
  {
    std::lock_guard lock(mutex_);
    if (reported_) return;
    reported_ = true;
  }
  // Without MPI_Finalize there is no MPI to sum over ranks: each rank speaks for itself.
  if (settings_.report == "stderr") {
    const ReportContext context{world_rank_, world_size_, settings_.compressor};
    std::fputs(report_table(counters(), context).c_str(), stderr);
  } else if (!settings_.report.empty()) {
    write_json_report();
  }
}

void Engine::write_json_report() {
  const ReportContext context{world_rank_, world_size_, settings_.compressor};
  const std::string path = settings_.report + "." + std::to_string(world_rank_) + ".json";
  std::ofstream out(path);
  out << report_json(counters(), context);
  if (!out) {
    log_line(settings_.log_level, LogLevel::error, world_rank_, "cannot write the report to %s",
             path.c_str());
  }
}

}  // namespace slimreduce
