// The MPI side's queue of compressed MPI_Iallreduce calls (docs/architecture.md,
// "Fusion"): each eligible call is decided at once (warm-up, the cap: the
// same rule as MPI_Allreduce), queued with a generalized request, and
// reduced by a flush (core/mpi/engine_flush.cc): when the caller waits on, tests
// or frees one of them, when the queued bytes reach
// SLIMREDUCE_FUSION_THRESHOLD, when the communicator is freed, and at
// MPI_Finalize. Here: the queue, the requests, and each fused buffer's
// reduction, whose requests complete as soon as it ran.
#include <algorithm>
#include <climits>
#include <optional>

#include "algorithms/fused_casts.h"
#include "algorithms/fused_gathered.h"
#include "algorithms/fused_powersgd.h"
#include "backends/mpi_backend.h"
#include "backends/mpi_transport.h"
#include "compressors/kind.h"
#include "core/mpi/engine.h"
#include "core/mpi/host_allreduce.h"
#include "core/runtime/decision.h"
#include "core/runtime/log.h"
#include "core/runtime/timeline.h"
#include "scheduler/host_step.h"

namespace slimreduce {
namespace {

// The generalized request's callbacks (MPI_Grequest_start).
int query_request(void* extra, MPI_Status* status) {
  const auto* record = static_cast<const RequestRecord*>(extra);
  PMPI_Status_set_elements(status, MPI_BYTE, 0);
  PMPI_Status_set_cancelled(status, 0);
  status->MPI_SOURCE = MPI_UNDEFINED;
  status->MPI_TAG = MPI_UNDEFINED;
  status->MPI_ERROR = record->error;
  return record->error;
}

int free_request(void* extra) {
  if (Engine* engine = Engine::get()) engine->release_record(static_cast<RequestRecord*>(extra));
  return MPI_SUCCESS;
}

// A collective cannot be cancelled (MPI 4.0, 3.8.4): the request completes
// at the next flush all the same, and MPI_Test_cancelled says false.
int cancel_request(void*, int) { return MPI_SUCCESS; }

// The fused step of a batch: the compressor's fused algorithm on the
// communicator's workspace (batches run one after another, so one serves).
std::unique_ptr<scheduler::Step> fused_step(compressors::Compressor& compressor,
                                            backends::Transport& transport,
                                            std::vector<algorithms::BatchTensor> tensors,
                                            CommState& state) {
  using scheduler::HostBatchStep;
  using namespace compressors;
  using Fused = std::unique_ptr<scheduler::Step>;
  return with_kind(
      compressor,
      Overloaded{
          [&](SummableCompressor& summable) -> Fused {
            using algorithms::FusedCasts;
            std::vector<std::size_t> counts;
            for (const auto& t : tensors) counts.push_back(t.count);
            const FusedCasts::Layout layout = FusedCasts::layout(counts, transport.size());
            std::byte* wire = state.wire(FusedCasts::wire_bytes(summable, layout));
            std::byte* scratch = state.scratch(FusedCasts::scratch_bytes(summable, layout));
            return std::make_unique<HostBatchStep<FusedCasts>>(transport, summable,
                                                               std::move(tensors), wire, scratch);
          },
          [&](GatheredCompressor& gathered) -> Fused {
            using algorithms::FusedGathered;
            const std::size_t slot = FusedGathered::slot_bytes(gathered, tensors);
            std::byte* payload = state.scratch(slot);
            std::byte* all = state.wire(slot * transport.size());
            return std::make_unique<HostBatchStep<FusedGathered>>(transport, gathered,
                                                                  std::move(tensors), payload, all);
          },
          [&](LowRankCompressor& low_rank) -> Fused {
            using algorithms::FusedPowerSgd;
            std::byte* workspace =
                state.scratch(FusedPowerSgd::workspace_bytes(low_rank, tensors, transport.size()));
            return std::make_unique<HostBatchStep<FusedPowerSgd>>(transport, low_rank,
                                                                  std::move(tensors), workspace);
          },
          [&](ShardedCompressor&) -> Fused {
            throw std::logic_error("a sharded compressor's calls are never fused (fusable())");
          }});
}

// What a batch's collective handed to the transport, and how many of its
// calls were rescued from an overflow.
struct BatchReduced {
  double wire_sent = 0;
  std::size_t rescued = 0;
  std::size_t partitions = 0;  // of a call cut into partitions
  std::uint64_t sharded = 0;   // calls reduced by algorithms/sharded.h,
  double sharded_sent = 0;     // and what they sent
};

// The batch's collective: one fused step; a lone call larger than a
// partition cut and pipelined as a blocking call is; on a hierarchical
// communicator, or with a sharded compressor (not fused yet), the calls one
// by one; a lone low-rank call too.
Status run_batch(compressors::Compressor& compressor, backends::Transport& transport,
                 std::vector<algorithms::BatchTensor> tensors, CommState& state,
                 const RunOptions& options, BatchReduced* reduced) {
  const bool cut =
      tensors.size() == 1 && tensors.front().count * sizeof(float) > options.partition_bytes;
  // A lone low-rank call as a blocking one: its sums then pad P and Q to
  // whole blocks, as MPI_Allreduce's do (the same bits, the same bytes).
  const bool lone_low_rank =
      tensors.size() == 1 && compressor.aggregation() == compressors::Aggregation::low_rank;
  const bool one_by_one =
      state.runs_two_level(options.flat) || cut || !compressors::fusable(compressor) ||
      lone_low_rank ||
      (tensors.size() == 1 && reduces_sharded(compressor, tensors.front().count, transport.size()));
  if (one_by_one) {
    for (const algorithms::BatchTensor& t : tensors) {
      Reduced one;
      SLIMREDUCE_TRY(
          host_allreduce({t.input, t.output, t.count, t.residual, t.state, t.rows, t.draw},
                         compressor, transport, state, options, &one));
      reduced->wire_sent += one.wire_sent;
      reduced->rescued += one.overflow_rescued ? 1 : 0;
      reduced->partitions += one.partitions > 1 ? one.partitions : 0;
      reduced->sharded += one.sharded ? 1 : 0;
      reduced->sharded_sent += one.sharded ? one.wire_sent : 0.0;
    }
    return {};
  }
  scheduler::Plan plan;
  plan.add(fused_step(compressor, transport, std::move(tensors), state));
  SLIMREDUCE_TRY(scheduler::run_blocking(plan, options.observer));
  reduced->wire_sent = plan.wire_sent();
  reduced->rescued = plan.overflow_rescued();
  return {};
}

}  // namespace

int Engine::iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                       MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return iallreduce_keyed(sendbuf, recvbuf, count, datatype, op, comm, request, Tag{recvbuf});
}

int Engine::iallreduce_keyed(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                             MPI_Op op, MPI_Comm comm, MPI_Request* request, const Tag& tag) {
  ReadCall read;
  if (!read_call(sendbuf, recvbuf, count, datatype, op, comm, &read)) {
    return backends::mpi::iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
  }
  Counters called;
  called.iallreduce = 1;
  runtime_.board(Side::mpi).add(called);
  const void* input = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  const bool device =
      device_staging::is_device_pointer(input) || device_staging::is_device_pointer(recvbuf);
  if (read.compress && device) {
    // Device buffers are not queued yet: reduced at once by the device path
    // (an MPI that cannot read device memory could not take them as given),
    // the request complete on return.
    const int rc = compress_call(sendbuf, recvbuf, count, datatype, op, comm, *read.state);
    return rc == MPI_SUCCESS ? completed_request(comm, request) : rc;
  }
  if (read.compress) {
    return enqueue(sendbuf, recvbuf, count, datatype, op, comm, *read.state, request, tag);
  }
  tallies_.mine().count(read.bytes);  // read_call made comm the tally's communicator
  return backends::mpi::iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
}

int Engine::enqueue(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                    MPI_Comm comm, CommState& state, MPI_Request* request, const Tag& tag) {
  MPI_Comm wire_comm = MPI_COMM_NULL;
  if (const int rc = prepare_wire(state, comm, &wire_comm)) return rc;
  const auto datatype_tag = backends::mpi::handle_tag(datatype);
  const CallDecision decision =
      runtime_.shared()->decide({state.id(), std::uint64_t(count), datatype_tag}, rule_.route,
                                /*timed_path=*/false, two_level_on(state));
  if (!decision.compressed()) {
    count_pass_through(std::uint64_t(count) * sizeof(float), state, decision.passes_because);
    return backends::mpi::iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
  }
  MPI_Request made = MPI_REQUEST_NULL;
  RequestRecord* held = nullptr;
  if (const int rc = start_request(&made, &held)) return raise(comm, rc, "MPI_Iallreduce");
  {
    std::lock_guard lock(requests_mutex_);
    queued_requests_.emplace(made, &state);
    queued_.store(queued_requests_.size(), std::memory_order_relaxed);
  }
  ReductionQueue& queue = state.queue();
  bool full = false;
  {
    std::lock_guard lock(queue.mutex);
    queue.pending.push_back({static_cast<const float*>(sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf),
                             static_cast<float*>(recvbuf), static_cast<std::size_t>(count),
                             tag.residual_key, datatype_tag, decision, tag.priority,
                             runtime_.timeline().on() ? Timeline::now_us() : 0.0, made, held,
                             tag.rows});
    queue.bytes += queue.pending.back().bytes();
    full = queue.bytes >= runtime_.settings().fusion_threshold;  // 0: every call at once
  }
  *request = made;
  if (!full) return MPI_SUCCESS;
  const int rc = flush(state);
  return rc == MPI_SUCCESS ? rc : raise(comm, rc, "MPI_Iallreduce (a fused batch)");
}

int Engine::start_request(MPI_Request* request, RequestRecord** record) {
  auto made = std::make_unique<RequestRecord>();
  if (const int rc =
          PMPI_Grequest_start(query_request, free_request, cancel_request, made.get(), request)) {
    return rc;
  }
  *record = made.get();
  std::lock_guard lock(requests_mutex_);
  records_.emplace(made.get(), std::move(made));
  return MPI_SUCCESS;
}

int Engine::completed_request(MPI_Comm comm, MPI_Request* request) {
  RequestRecord* record = nullptr;
  if (const int rc = start_request(request, &record)) return raise(comm, rc, "MPI_Iallreduce");
  return PMPI_Grequest_complete(*request);
}

void Engine::complete(const std::vector<QueuedReduction>& reductions, int rc) {
  for (const QueuedReduction& reduction : reductions) {
    reduction.record->error = rc;
    MPI_Request request = reduction.request;
    PMPI_Grequest_complete(request);
  }
  std::lock_guard lock(requests_mutex_);
  for (const QueuedReduction& reduction : reductions) queued_requests_.erase(reduction.request);
  queued_.store(queued_requests_.size(), std::memory_order_relaxed);
}

int Engine::enqueue_named(const char* name, float* buffer, std::size_t count, std::size_t rows,
                          MPI_Comm comm, int priority) {
  if (count > static_cast<std::size_t>(INT_MAX)) {
    return raise(comm, MPI_ERR_COUNT, "slimreduce_enqueue");
  }
  const void* key = buffer;
  if (name) {
    std::lock_guard lock(native_mutex_);
    auto& stand_in = name_keys_[name];
    if (!stand_in) stand_in = std::make_unique<std::byte>();
    key = stand_in.get();
  }
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc = iallreduce_keyed(MPI_IN_PLACE, buffer, static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                                  comm, &request, Tag{key, priority, rows});
  if (rc != MPI_SUCCESS) return rc;
  std::lock_guard lock(native_mutex_);
  native_requests_[comm].push_back(request);
  return MPI_SUCCESS;
}

int Engine::synchronize(MPI_Comm comm) {
  std::vector<MPI_Request> requests;
  {
    std::lock_guard lock(native_mutex_);
    if (auto found = native_requests_.find(comm); found != native_requests_.end()) {
      requests = std::move(found->second);
      native_requests_.erase(found);
    }
  }
  if (requests.empty()) return MPI_SUCCESS;
  MPI_Comm failed = comm;
  const int n = static_cast<int>(requests.size());
  if (const int rc = flush_for(requests.data(), n, Until::all_done, &failed)) {
    return raise(failed, rc, "slimreduce_synchronize");
  }
  return PMPI_Waitall(n, requests.data(), MPI_STATUSES_IGNORE);
}

void Engine::release_record(const RequestRecord* record) {
  std::unique_ptr<RequestRecord> gone;  // freed outside the lock
  std::lock_guard lock(requests_mutex_);
  if (auto found = records_.find(record); found != records_.end()) {
    gone = std::move(found->second);
    records_.erase(found);
  }
}

// One batch: each reduction's residual found now, in call order (the keys
// are this rank's buffers, as for MPI_Allreduce), then one fused collective
// (one by one on a hierarchical communicator: its algorithm wraps one call).
int Engine::reduce_queued(CommState& state, MPI_Comm wire_comm,
                          const std::vector<QueuedReduction>& batch) {
  std::vector<algorithms::BatchTensor> tensors;
  std::vector<std::pair<ResidualKey, ResidualSlot*>> slots;  // those found
  Counters delta;
  {
    Runtime::Locked shared = runtime_.shared();
    for (const QueuedReduction& r : batch) {
      const std::uint64_t resets_before = shared->residuals.resets();
      const std::uint64_t evicted_before = shared->residuals.evicted();
      ResidualSlot* slot = shared->residuals.find_or_create(
          {state.id(), r.residual_key}, r.count, r.datatype_tag, r.decision.error_feedback);
      delta.ef_resets += shared->residuals.resets() - resets_before;
      delta.ef_evicted += shared->residuals.evicted() - evicted_before;
      delta.ef_cap_fallback += slot ? 0 : 1;
      if (slot) slots.emplace_back(ResidualKey{state.id(), r.residual_key}, slot);
      if (slot) slot->keep_state_for(state.runs_two_level(r.decision.flat));
      tensors.push_back({r.input, slot ? slot->host_residual() : nullptr, r.output, r.count,
                         slot ? &slot->compressor_state : nullptr, r.rows,
                         compressors::CallDraw{r.decision.shape_call, state.rank()}});
    }
  }
  backends::MpiTransport transport(wire_comm, state.rank(), state.size());
  compressors::Compressor& compressor = *batch.front().decision.compressor;
  std::optional<TimelinePhases> phases;  // SLIMREDUCE_TIMELINE: the batch's phases as spans
  if (runtime_.timeline().on()) {
    std::uint64_t values = 0;
    for (const QueuedReduction& r : batch) values += r.count;
    // A batch holds one compressor, so one level.
    phases.emplace(runtime_.timeline(), span_args(compressor, values, batch.size()) +
                                            level_span_args(batch.front().decision));
  }
  BatchReduced reduced;
  const Status status = run_batch(compressor, transport, std::move(tensors), state,
                                  run_options(phases, batch.front().decision.flat), &reduced);
  if (!status.ok()) return backends::mpi_code(status);
  // What the batch made for its keys (owner-side residuals) counts against the cap from now.
  if (std::any_of(slots.begin(), slots.end(),
                  [](auto& s) { return s.second->state_uncounted(); })) {
    Runtime::Locked shared = runtime_.shared();
    for (const auto& [key, slot] : slots) shared->residuals.count_state(key);
  }
  count_batch(batch, state, reduced.wire_sent, delta);
  delta.overflow_rescued += reduced.rescued;
  delta.partitions += reduced.partitions;
  if (compressor.aggregation() == compressors::Aggregation::gathered) {
    delta.topk_sharded += reduced.sharded;
    delta.topk_sharded_sent += reduced.sharded_sent;
    delta.topk_gathered += batch.size() - reduced.sharded;
    delta.topk_gathered_sent += reduced.wire_sent - reduced.sharded_sent;
  }
  runtime_.board(Side::mpi).add(delta);
  runtime_.note_compressed(batch.size(), delta.ef_resets);
  // In the batch's order, the same on every rank (the flush's agreed plan).
  for (const QueuedReduction& r : batch) {
    if (const int rc = note_reduced({state.id(), r.count, r.datatype_tag}, r.decision, r.output))
      return rc;
  }
  return MPI_SUCCESS;
}

// Each reduction's baseline, and the batch's bytes shared by their sizes.
void Engine::count_batch(const std::vector<QueuedReduction>& batch, const CommState& state,
                         double wire_sent, Counters& delta) const {
  std::uint64_t bytes = 0;
  for (const QueuedReduction& r : batch) bytes += r.bytes();
  for (const QueuedReduction& r : batch) {
    const double share = bytes ? wire_sent * double(r.bytes()) / double(bytes) : 0.0;
    count_compressed(r.bytes(), state, share, r.decision.flat, delta);
    if (r.decision.levels_adapt) delta.count_level(r.decision.level);
  }
  if (batch.size() >= 2) {
    ++delta.fused_batches;
    delta.fused_tensors += batch.size();
  }
}

}  // namespace slimreduce
