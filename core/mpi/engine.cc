#include "core/mpi/engine.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "algorithms/hierarchical.h"
#include "backends/mpi_backend.h"
#include "backends/mpi_transport.h"
#include "core/mpi/device_staging.h"
#include "core/mpi/eligibility.h"
#include "core/mpi/hierarchy.h"
#include "core/mpi/host_allreduce.h"
#include "core/mpi/wire_check.h"
#include "core/runtime/decision.h"
#include "core/runtime/log.h"
#include "core/runtime/timeline.h"
#include "core/runtime/wire_agreement.h"
#include "kernels/element_rules.h"

namespace slimreduce {
namespace {

// MPI calls this when a user communicator is freed (and at MPI_Finalize).
int on_comm_delete(MPI_Comm, int, void* attribute, void*) {
  if (Engine* engine = Engine::get()) engine->forget(static_cast<CommState*>(attribute));
  return MPI_SUCCESS;
}

// A predefined 4-byte float: C's float, or Fortran's REAL when it is 4 bytes wide.
bool is_float32(MPI_Datatype datatype, int type_size) {
  return type_size == 4 && (datatype == MPI_FLOAT || datatype == MPI_REAL || datatype == MPI_REAL4);
}

}  // namespace

Engine& Engine::start(Runtime& runtime) {
  return static_cast<Engine&>(
      runtime.attach(Side::mpi, [&runtime] { return std::make_unique<Engine>(runtime); }));
}

Engine::Engine(Runtime& runtime)
    : runtime_(runtime),
      staging_(std::make_unique<device_staging::StagingPool>(runtime.device_memory())),
      rule_(eligibility_rule(runtime.settings(), runtime.policy().compressor.get(), kMpiRules)) {
  PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, on_comm_delete, &comm_keyval_, nullptr);
  if (int real_size = 0; PMPI_Type_size(MPI_REAL, &real_size) == MPI_SUCCESS && real_size == 4) {
    real32_ = MPI_REAL;
  }
  PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
  PMPI_Comm_size(MPI_COMM_WORLD, &world_size_);
  runtime_.know_rank(world_rank_, world_size_, true);
  pipelined_ = pipelining_wanted();
  // Emulated nodes are blocks of the world: a size that does not divide it is a bad setting.
  if (const auto local = runtime_.settings().local_size; local && world_size_ % *local != 0) {
    throw SettingsError(
        "SLIMREDUCE_LOCAL_SIZE", std::to_string(*local),
        "a whole number that divides the world size (" + std::to_string(world_size_) + " ranks)");
  }
  Runtime::publish_tally_board(tallies_.id());
}

// The tallies go with the engine: no call may find them after this.
Engine::~Engine() {
  if (Runtime::tally_board() == tallies_.id()) Runtime::publish_tally_board(0);
}

void Engine::policy_changed(std::vector<int>&) {
  std::lock_guard lock(mutex_);
  rule_ = eligibility_rule(runtime_.settings(), runtime_.policy().compressor.get(), kMpiRules);
  tallies_.forget_communicators();  // their compress_from came from the old rule
}

namespace {

// What a pass-through call's bytes become on the wire, in all and by node.
ThreadTally::Factors factors_of(const CommState& state) {
  ThreadTally::Factors factors;
  factors.ring = state.ring_factor();
  if (const Hierarchy* hierarchy = state.hierarchy()) {
    (hierarchy->split.ring_hop_crosses ? factors.inter : factors.intra) = factors.ring;
  }
  return factors;
}

}  // namespace

CommState* Engine::state_of(MPI_Comm comm) {
  ThreadTally& tally = tallies_.mine();
  if (tally.comm.load(std::memory_order_relaxed) == comm && tally.state) return tally.state;
  CommState* state = look_up_state(comm);
  if (!state) return nullptr;
  // The same rule as classify(), for the fp32 SUM calls the hot path sees.
  const bool compressible = rule_.compressing && !state->is_intercommunicator() &&
                            state->size() >= kMpiRules.fewest_ranks;
  const std::uint64_t compress_from =
      compressible ? std::max<std::uint64_t>(rule_.min_bytes, 1) : ThreadTally::kNever;
  tally.real_type = real32_;
  tally.move_to(comm, state, compress_from, factors_of(*state));
  return state;
}

CommState* Engine::look_up_state(MPI_Comm comm) {
  void* attribute = nullptr;
  int found = 0;
  if (PMPI_Comm_get_attr(comm, comm_keyval_, &attribute, &found) != MPI_SUCCESS) return nullptr;
  if (found) return static_cast<CommState*>(attribute);
  const std::uint64_t id = runtime_.shared()->next_comm_id++;
  std::lock_guard lock(mutex_);
  auto state = std::make_unique<CommState>(id, comm);
  CommState* raw = state.get();
  if (PMPI_Comm_set_attr(comm, comm_keyval_, raw) != MPI_SUCCESS) return nullptr;
  comms_.emplace(raw, std::move(state));
  return raw;
}

// Communicators in the order every rank made them (their ids): the order
// of collective work across several of them.
void Engine::sort_by_id(std::vector<CommState*>& states) {
  std::sort(states.begin(), states.end(),
            [](const CommState* a, const CommState* b) { return a->id() < b->id(); });
}

void Engine::forget(CommState* state) {
  flush_all(*state);  // the caller freed it with calls still queued: they run first
  tallies_.forget_communicators();
  std::unique_ptr<CommState> gone;
  {
    std::lock_guard lock(mutex_);
    auto found = comms_.find(state);
    if (found == comms_.end()) return;
    gone = std::move(found->second);
    comms_.erase(found);
  }
  // Its device residuals too, freed at once: the MPI device path's calls are
  // synchronous, so no work of ours still uses them.
  std::vector<DeviceBlock> freed_now;
  runtime_.forget_communicator(gone->id(), freed_now);
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

bool Engine::read_call(const void* sendbuf, const void* recvbuf, int count, MPI_Datatype datatype,
                       MPI_Op op, MPI_Comm comm, ReadCall* read) {
  int type_size = 0;
  CommState* state = null_handle(comm, datatype) ? nullptr : state_of(comm);
  if (!state || PMPI_Type_size(datatype, &type_size) != MPI_SUCCESS || count < 0) return false;
  read->state = state;
  read->bytes = std::uint64_t(count) * std::uint64_t(type_size);
  MpiCall call;
  call.float32 = is_float32(datatype, type_size);
  call.op_sum = op == MPI_SUM;
  call.intracomm = !state->is_intercommunicator();
  call.comm_size = state->size();
  call.count = static_cast<std::uint64_t>(count);
  call.usable_buffers = usable_buffers(sendbuf, recvbuf, MPI_IN_PLACE);
  read->compress = mpi_compresses(call, rule_);
  return true;
}

int Engine::allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                      MPI_Op op, MPI_Comm comm) {
  ReadCall read;
  if (!read_call(sendbuf, recvbuf, count, datatype, op, comm, &read)) {
    // Not something we can read: the real library gives the caller its own error.
    return backends::mpi::allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  }
  if (read.compress) return compress_call(sendbuf, recvbuf, count, datatype, op, comm, *read.state);
  tallies_.mine().count(read.bytes);  // state_of made comm the tally's communicator
  return backends::mpi::allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

void Engine::count_pass_through(std::uint64_t bytes, const CommState& state,
                                std::uint64_t Counters::*reason) {
  CallOutcome call;
  call.bytes = bytes;
  call.passed_because = reason;
  runtime_.board(Side::mpi).add(counted_call(state.size(), state.nodes(), call));
}

void Engine::count_compressed(std::uint64_t bytes, const CommState& state, double wire_sent,
                              bool flat, Counters& delta) const {
  // This call alone, then added: the node split reads the call's own baseline
  // (delta may hold a fused batch's earlier calls).
  CallOutcome call;
  call.bytes = bytes;
  call.count = bytes / sizeof(float);
  call.compressed = true;
  call.wire_sent = wire_sent;
  call.ran_hierarchically = state.runs_two_level(flat);
  delta += counted_call(state.size(), state.nodes(), call);
}

int Engine::compress_call(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                          MPI_Op op, MPI_Comm comm, CommState& state) {
  const AllreduceCall call{static_cast<const float*>(sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf),
                           static_cast<float*>(recvbuf), static_cast<std::size_t>(count), nullptr};
  // GPU buffers under an MPI that cannot read them are compressed on the GPU
  // (false at once on a CPU-only build, or in a process without CUDA).
  const bool device = device_staging::is_device_pointer(call.input) ||
                      device_staging::is_device_pointer(call.output);
  MPI_Comm wire_comm = MPI_COMM_NULL;
  if (const int rc = prepare_wire(state, comm, &wire_comm)) return rc;
  const Started started = start_call(call, datatype, state, device);
  const std::optional<AutoStep>& auto_step = started.decision.auto_step;
  // A timed call of auto's schedule starts together on every rank, so that
  // its time is the collective's, not the ranks' arrival skew.
  if (auto_step && auto_step->timed) {
    if (const int rc = PMPI_Barrier(wire_comm)) return raise(comm, rc, "auto");
  }
  const double begin_us = auto_step ? Timeline::now_us() : 0.0;
  const int rc =
      run_decided(started, sendbuf, recvbuf, datatype, op, comm, state, wire_comm, device);
  if (!auto_step) return rc;
  // Timed and exchanged whatever rc says: every rank's schedule stays in step.
  const int agreed = after_auto_step(state, wire_comm, *auto_step,
                                     (Timeline::now_us() - begin_us) * 1e-6, started.shape_changes);
  return rc != MPI_SUCCESS ? rc : agreed == MPI_SUCCESS ? rc : raise(comm, agreed, "auto");
}

// The call as its decision says: passed through (to the real library, or
// staged through the host for device buffers), or compressed and counted.
int Engine::run_decided(const Started& started, const void* sendbuf, void* recvbuf,
                        MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, CommState& state,
                        MPI_Comm wire_comm, bool device) {
  const int count = static_cast<int>(started.call.count);
  if (!started.decision.compressed()) {
    // Outside the lock: a thread in a collective must never hold what a
    // thread on another communicator needs (each rank's lock would wait on a
    // call that the other rank's lock holds back).
    count_pass_through(std::uint64_t(count) * sizeof(float), state,
                       started.decision.passes_because);
    // auto's none on a key that carried a residual: input + residual instead.
    if (!started.carried.empty())
      return backends::mpi::allreduce(started.carried.data(), recvbuf, count, datatype, op, comm);
    if (!device) return backends::mpi::allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    return passed_through_staged(started.call, datatype, op, comm);
  }
  Reduced reduced;
  const Status status = run_compressed(started, state, wire_comm, device, &reduced);
  if (!status.ok()) return raise(comm, backends::mpi_code(status), "MPI_Allreduce (compressed)");
  finish_call(started, state, reduced);
  if (const int rc = note_reduced(started.shape, started.decision, started.call.output))
    return raise(comm, rc, "MPI_Allreduce (the reduced norm of adaptive levels)");
  return MPI_SUCCESS;
}

namespace {

// input + residual, the residual spent (zeroed): what a call that sends fp32
// sends for a key that carries a residual.
std::vector<float> spend_residual(const float* input, std::vector<float>& residual) {
  std::vector<float> sent(residual.size());
  for (std::size_t i = 0; i < residual.size(); ++i) {
    sent[i] = kernels::add_nan_first(input[i], residual[i]);
    residual[i] = 0.0f;
  }
  return sent;
}

}  // namespace

// Under the runtime's lock: the call's decision (from its shape and the calls
// before it, as on every rank) and, if compressed, its residual.
Engine::Started Engine::start_call(const AllreduceCall& call, MPI_Datatype datatype,
                                   CommState& state, bool device) {
  Started started;
  started.call = call;
  Runtime::Locked shared = runtime_.shared();
  const auto datatype_tag = backends::mpi::handle_tag(datatype);
  started.shape = {state.id(), call.count, datatype_tag};
  started.decision = shared->decide(started.shape, rule_.route, /*timed_path=*/true,
                                    two_level_on(state), state.size());
  started.call.draw = {started.decision.shape_call, state.rank()};
  const std::uint64_t changes_before = shared->residuals.shape_changes();
  if (!started.decision.compressed()) {
    // auto sent it with none: what its key carries from a compressed call
    // before goes with it (host buffers; a device residual waits for the
    // key's next compressed call).
    if (started.decision.auto_step && !started.decision.passes_because && !device) {
      ResidualSlot* slot =
          shared->residuals.find_existing({state.id(), call.output}, call.count, datatype_tag);
      if (slot && slot->feeds_back && !slot->residual.empty())
        started.carried = spend_residual(call.input, slot->residual);
    }
    started.shape_changes = shared->residuals.shape_changes() - changes_before;
    return started;
  }
  // The residual: local, keyed by our buffer address. A missing one (no room
  // under the cap) means no error feedback, never another path. One store for
  // host and device residuals: the device path takes the slot's device memory.
  ResidualStore& residuals = shared->residuals;
  const std::uint64_t resets_before = residuals.resets(), evicted_before = residuals.evicted();
  started.slot = residuals.find_or_create({state.id(), call.output}, call.count, datatype_tag,
                                          started.decision.error_feedback);
  started.resets = residuals.resets() - resets_before;
  started.evicted = residuals.evicted() - evicted_before;
  started.shape_changes = residuals.shape_changes() - changes_before;
  if (!started.slot) return started;
  const bool two_level = state.runs_two_level(started.decision.flat);
  started.slot->keep_state_for(two_level);
  const bool residual_on_device =
      device && !two_level &&
      device_staging::keeps_residual_on_device(call, *started.decision.compressor, state.size());
  if (!residual_on_device) started.call.residual = started.slot->host_residual();
  started.call.state = &started.slot->compressor_state;  // kept per key (PowerSGD's Q)
  return started;
}

// Device buffers passed through to an MPI that may not read them: staged through the host.
int Engine::passed_through_staged(const AllreduceCall& call, MPI_Datatype datatype, MPI_Op op,
                                  MPI_Comm comm) {
  int mpi_rc = MPI_SUCCESS;
  const int rc =
      device_staging::passed_through_allreduce(call, datatype, op, comm, *staging_, &mpi_rc);
  return rc == MPI_SUCCESS ? mpi_rc : raise(comm, rc, "MPI_Allreduce (staged through the host)");
}

// The compressed call over the private duplicate: on the host, or on the GPU
// with only the compressed bytes staged through the host.
Status Engine::run_compressed(const Started& started, CommState& state, MPI_Comm wire_comm,
                              bool device, Reduced* reduced) {
  backends::MpiTransport transport(wire_comm, state.rank(), state.size());
  compressors::Compressor& compressor = *started.decision.compressor;
  std::optional<TimelinePhases> phases;  // SLIMREDUCE_TIMELINE: the call's phases as spans
  if (runtime_.timeline().on()) {
    phases.emplace(runtime_.timeline(), span_args(compressor, started.call.count, 1) +
                                            (device ? ", \"memory\": \"device\"" : "") +
                                            auto_span_args(started.decision.auto_step) +
                                            level_span_args(started.decision));
  }
  if (!device) {
    return host_allreduce(started.call, compressor, transport, state,
                          run_options(phases, started.decision.flat), reduced);
  }
  return device_staging::allreduce(started.call, compressor, state, transport, started.slot,
                                   *staging_, reduced, run_options(phases, started.decision.flat));
}

// What the call made for its key (an owner-side residual) counts against the
// cap from now; the call is counted for the report.
void Engine::finish_call(const Started& started, const CommState& state, const Reduced& reduced) {
  if (started.slot && started.slot->state_uncounted())
    runtime_.shared()->residuals.count_state({state.id(), started.call.output});
  Counters delta;
  count_compressed(std::uint64_t(started.call.count) * sizeof(float), state, reduced.wire_sent,
                   started.decision.flat, delta);
  delta.overflow_rescued = reduced.overflow_rescued ? 1 : 0;
  delta.partitions = reduced.partitions > 1 ? reduced.partitions : 0;
  if (started.decision.route == ReductionPath::topk)
    delta.count_topk(reduced.sharded, reduced.wire_sent);
  if (started.decision.levels_adapt) delta.count_level(started.decision.level);
  delta.ef_cap_fallback = started.slot ? 0 : 1;  // no room under the cap: none for this call
  delta.ef_resets = started.resets;
  delta.ef_evicted = started.evicted;
  runtime_.board(Side::mpi).add(delta);
  runtime_.note_compressed(1, started.resets);
}

RunOptions Engine::run_options(std::optional<TimelinePhases>& phases, bool flat) {
  return {runtime_.settings().partition_bytes, pipelined_ ? &runtime_.helpers() : nullptr,
          phases ? &*phases : nullptr, flat};
}

int Engine::prepare_wire(CommState& state, MPI_Comm comm, MPI_Comm* wire_comm) {
  // A failed dup was raised on comm by MPI itself; everything after it is ours to raise.
  if (const int rc = state.private_comm(wire_comm)) return rc;
  const Settings& settings = runtime_.settings();
  if (!state.wire_agreed()) {
    advise_on_transport();
    const std::vector<char> record =
        wire_agreement::record(wire_agreement::fields(settings, wire_agreement::library_version()));
    const auto start = std::chrono::steady_clock::now();
    if (const int rc = check_wire_agreement(*wire_comm, state.rank(), state.size(), record))
      return raise(comm, rc, "MPI_Allreduce (the ranks' agreement on the wire)");
    state.mark_wire_agreed();
    log_line(settings.log_level, LogLevel::debug, world_rank_,
             "communicator %llu: its ranks agree on the version and the wire's settings (%lld us)",
             static_cast<unsigned long long>(state.id()),
             static_cast<long long>(std::chrono::duration_cast<std::chrono::microseconds>(
                                        std::chrono::steady_clock::now() - start)
                                        .count()));
  }
  if (!settings.hierarchical || state.hierarchy()) return MPI_SUCCESS;
  backends::MpiTransport transport(*wire_comm, state.rank(), state.size());
  Hierarchy hierarchy;
  const Status status =
      make_hierarchy(*wire_comm, transport, world_rank_, settings.local_size, &hierarchy);
  if (!status.ok()) {
    return raise(comm, backends::mpi_code(status), "MPI_Allreduce (node sub-communicators)");
  }
  if (hierarchy.flat() && state.rank() == 0) {
    log_line(settings.log_level, LogLevel::info, world_rank_,
             "communicator %llu reduces flat, not hierarchically: %s",
             static_cast<unsigned long long>(state.id()), hierarchy.split.flat_because.c_str());
  }
  state.keep_hierarchy(std::move(hierarchy));
  tallies_.forget_communicators();  // their node factors were made without it
  return MPI_SUCCESS;
}

int Engine::raise(MPI_Comm comm, int code, const char* what) {
  try {  // the line is a courtesy: out of memory, the handler still hears of the error
    const Engine* engine = get();
    log_line(engine ? engine->runtime_.settings().log_level : LogLevel::error, LogLevel::error,
             engine ? engine->world_rank_ : 0, "%s failed in SlimReduce: %s", what,
             backends::mpi::error_text(code).c_str());
  } catch (...) {
  }
  return backends::mpi::raise_error(comm, code);
}

void Engine::finish() {
  finalized_.store(true, std::memory_order_relaxed);
  std::vector<CommState*> states;
  {
    std::lock_guard lock(mutex_);
    for (auto& [raw, state] : comms_) states.push_back(raw);
  }
  // Every rank flushes every communicator's queue, in the order of their ids.
  sort_by_id(states);
  for (CommState* state : states) flush_all(*state);
  runtime_.finish_timeline();
  if (!runtime_.claim_report()) return;
  {
    std::lock_guard lock(mutex_);
    for (auto& [raw, state] : comms_) state->release();
  }
  runtime_.warn_about_counters();
  const ReportContext context = runtime_.report_context();
  const Counters mine = runtime_.counters();  // the NCCL side's too: one report per job
  if (runtime_.settings().report != "stderr") {
    runtime_.write_report(mine, context);
    return;
  }
  double local[Counters::kValues];
  double total[Counters::kValues] = {};
  mine.to_values(local);
  PMPI_Reduce(local, total, Counters::kValues, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  if (world_rank_ != 0) return;
  const Counters sum = Counters::from_values(total);
  ReportContext summed = context;
  summed.summed_over_ranks = true;
  runtime_.write_report(sum, summed);
}

}  // namespace slimreduce
