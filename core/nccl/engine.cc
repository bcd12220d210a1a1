#include "core/nccl/engine.h"

#include <cstdlib>
#include <thread>
#include <utility>

#include "backends/nccl_backend.h"
#include "backends/nccl_coll_config.h"
#include "backends/nccl_transport.h"
#include "core/nccl/low_rank.h"
#include "core/nccl/pipeline.h"
#include "core/nccl/real_group.h"
#include "core/nccl/sharded.h"
#include "core/runtime/compressor_choice.h"
#include "core/runtime/log.h"
#include "scheduler/stream_pipeline.h"

namespace slimreduce {
namespace {

namespace real = backends::nccl;

static_assert(kNcclFloat16 == ncclFloat16 && kNcclFloat32 == ncclFloat32 &&
              kNcclBfloat16 == ncclBfloat16 && kNcclSum == ncclSum && kNcclAvg == ncclAvg);
static_assert(kNcclSuccess == ncclSuccess && kNcclInProgress == ncclInProgress &&
              kNcclSystemError == ncclSystemError && kNcclInternalError == ncclInternalError);
static_assert(kNcclConfigUndefInt == NCCL_CONFIG_UNDEF_INT);

// NCCL keeps its group depth per thread; so do we.
thread_local GroupDeferral group;
// Blocking communicators this thread created inside its open group: NCCL
// initializes them at the outermost ncclGroupEnd, and only then can they say
// their shape.
thread_local std::vector<ncclComm_t> created_in_group;

}  // namespace

// The planning and running of one group (or one call), for GroupDeferral to
// drive; what only speaks to the real NCCL is RealGroupActions'.
class NcclEngine::PlanRunner : public RealGroupActions {
 public:
  // alone: a call made outside any group (GroupDeferral runs it as a group of one).
  explicit PlanRunner(NcclEngine& engine, bool alone = false)
      : engine_(engine), plan_(engine.runtime_.policy().compressor), alone_(alone) {}

  ~PlanRunner() override { submit_timing(); }

  void count_pass_through(const Reduction& c) override { engine_.count_pass_through(c); }

  int plan(std::vector<Reduction>& held) override {
    for (const Reduction& c : held) plan_.calls.emplace_back().call = c;
    if (const ncclResult_t rc = engine_.plan(plan_, alone_); rc != ncclSuccess) return rc;
    steps_ = plan_.steps();
    return engine_.time_auto_call(plan_, false);  // a timed call alone: before its work
  }
  // A pipelined call (core/nccl/pipeline.h), outside any group.
  bool runs_whole() const override { return plan_.side != nullptr; }
  int run_whole(std::vector<Reduction>&) override {
    int rc = run_pipelined();
    if (rc == ncclSuccess) rc = engine_.time_auto_call(plan_, true);
    return rc == ncclSuccess ? engine_.measure_norms(plan_) : rc;
  }
  int begin(std::vector<Reduction>&) override {
    if (auto timed = engine_.time_group(plan_))
      timing_ = std::make_unique<NcclTimeline::Group>(std::move(*timed));
    mark();  // before the compress kernels
    const int rc = run(scheduler::Phase::compress);
    mark();  // before the group's collectives
    return rc;
  }
  int issue(std::vector<Reduction>&) override { return run(scheduler::Phase::communicate); }
  int finish(std::vector<Reduction>&) override {
    mark();  // the real group has ended: its collectives are on the streams
    int rc = run(scheduler::Phase::finish);
    engine_.count_after_run(plan_);
    if (rc == ncclSuccess) rc = engine_.time_auto_call(plan_, true);  // after its work
    if (rc == ncclSuccess) rc = engine_.measure_norms(plan_);
    mark();  // after the finishing kernels
    submit_timing();
    return rc;
  }

 private:
  int run(scheduler::Phase phase) {
    return backends::nccl_code(scheduler::run_phase(steps_, phase));
  }
  void mark() {
    if (timing_) timing_->mark();
  }
  // A group that never reached its end (a failed begin) is submitted too:
  // its events go back, and it writes no span.
  void submit_timing() {
    if (timing_) timing_->owner().submit(std::move(*timing_));
    timing_.reset();
  }

  // Each piece's collectives in a real group of their own.
  int run_pipelined() {
    std::vector<NcclTimeline::Group> pieces = engine_.time_pieces(plan_);
    auto mark = [&](std::size_t step, cudaStream_t on) {
      if (step < pieces.size()) pieces[step].mark_on(on);
    };
    NcclHandoff handoff(
        static_cast<cudaStream_t>(plan_.calls.front().call.stream), *plan_.side,
        [this] { return real_group_start(); }, [this] { return real_group_end(); },
        pieces.empty() ? NcclHandoff::Mark{} : NcclHandoff::Mark(mark));
    const int rc = backends::nccl_code(scheduler::run_on_two_streams(steps_, handoff));
    for (NcclTimeline::Group& piece : pieces) piece.owner().submit(std::move(piece));
    engine_.count_after_run(plan_);
    return rc;
  }

  NcclEngine& engine_;
  GroupPlan plan_;
  bool alone_;
  scheduler::Plan steps_;                        // points into plan_
  std::unique_ptr<NcclTimeline::Group> timing_;  // null: not timed
};

NcclModeFacts NcclEngine::mode_facts(ncclResult_t rc, const ncclConfig_t* config,
                                     ncclComm_t parent) const {
  NcclModeFacts facts;
  facts.env_blocking = std::getenv("NCCL_COMM_BLOCKING");
  facts.has_config = config != nullptr;
  // NCCL takes a config older than 2.14 as leaving the mode unset.
  if (config && config->version >= NCCL_VERSION(2, 14, 0)) facts.config_blocking = config->blocking;
  facts.init_in_progress = rc == ncclInProgress;
  if (parent) {
    auto found = comms_.find(parent);
    facts.parent = found == comms_.end()     ? NcclParent::unknown
                   : found->second->blocking ? NcclParent::blocking
                                             : NcclParent::non_blocking;
  }
  return facts;
}

void NcclEngine::comm_created(ncclComm_t comm, ncclResult_t rc, const ncclConfig_t* config,
                              ncclComm_t parent) {
  if (!comm) return;
  auto state = std::make_shared<NcclCommState>();
  state->comm = comm;
  state->allocator = &device_memory_;
  state->id = runtime_.shared()->next_comm_id++;
  std::shared_ptr<NcclCommState> replaced;  // a handle we never saw go: dropped outside the lock
  {
    std::lock_guard lock(mutex_);
    state->blocking = nccl_blocking_mode(mode_facts(rc, config, parent));
    log_line(runtime_.settings().log_level, LogLevel::debug, first_rank_ < 0 ? 0 : first_rank_,
             "nccl: communicator %llu created, %s", static_cast<unsigned long long>(state->id),
             state->blocking ? "blocking" : "non-blocking: passed through");
    replaced = std::exchange(comms_[comm], state);
    if (replaced) runtime_.forget_communicator(replaced->id, replaced->orphaned_residuals);
  }
  if (!state->blocking) return;
  // Created inside the caller's group: NCCL has only queued it, and answers
  // 0 ranks, rank 0, device 0 until the outermost ncclGroupEnd. Ask then.
  if (group.in_group()) {
    created_in_group.push_back(comm);
  } else {
    shape(comm);
  }
}

void NcclEngine::shape(ncclComm_t comm) {
  int size = 0, rank = 0, device = -1;
  const real::Api& nccl = real::api();
  const bool ok = real::call(nccl.comm_count, comm, &size) == ncclSuccess &&
                  real::call(nccl.comm_user_rank, comm, &rank) == ncclSuccess &&
                  real::call(nccl.comm_cu_device, comm, &device) == ncclSuccess;
  std::lock_guard lock(mutex_);
  auto found = comms_.find(comm);
  if (found == comms_.end() || found->second->size != 0) return;
  NcclCommState& state = *found->second;
  switch (nccl_shape(ok, size)) {
    case NcclShape::later:
      return;  // asked again at its next call outside a group
    case NcclShape::never:
      state.size = -1;  // never compressed
      return;
    case NcclShape::ready:
      break;
  }
  state.rank = rank;
  state.device = device;
  state.size = size;
  if (first_rank_ < 0) first_rank_ = rank;
  runtime_.know_rank(rank, size, false);  // the report's, unless MPI or the launcher says
  log_line(runtime_.settings().log_level, LogLevel::debug, rank,
           "nccl: communicator %llu: rank %d of %d on device %d",
           static_cast<unsigned long long>(state.id), rank, size, device);
}

// After this thread's outermost group end: its communicators are made now.
void NcclEngine::shape_created_in_group() {
  if (group.in_group() || created_in_group.empty()) return;
  for (ncclComm_t comm : std::exchange(created_in_group, {})) shape(comm);
}

void NcclEngine::comm_gone(ncclComm_t comm, bool aborted) {
  std::shared_ptr<NcclCommState> gone;
  std::shared_ptr<NcclHierarchy> hierarchy;
  {
    std::lock_guard lock(mutex_);
    auto found = comms_.find(comm);
    if (found == comms_.end()) return;
    gone = std::move(found->second);
    comms_.erase(found);
    // Its residuals stay with it: a plan on another thread may still use them.
    runtime_.forget_communicator(gone->id, gone->orphaned_residuals);
    norms_.forget_communicator(gone->id);
    auto_timing_.forget_communicator(gone->id);
    hierarchy = std::move(gone->hierarchy);
  }
  // Ended before the real call (comm_ending) unless the shim could not: then now.
  if (hierarchy) {
    hierarchy->end(aborted ? NcclHierarchy::Ending::abort : NcclHierarchy::Ending::destroy);
  }
  // Dropped outside the lock: unless a plan still holds it, its device memory
  // is freed then, after a wait for the device (~NcclCommState): NCCL's destroy
  // or abort does not wait for our kernels queued after its own. After an
  // abort other communicators' kernels may hang until they too are aborted,
  // so that wait must not hold up the aborting thread.
  if (aborted && gone.use_count() == 1) {
    std::thread([state = std::move(gone)]() mutable { state.reset(); }).detach();
  }
}

void NcclEngine::comm_facts(ncclComm_t comm, CallFacts& facts) const {
  std::lock_guard lock(mutex_);
  auto found = comms_.find(comm);
  if (found == comms_.end()) return;
  facts.comm_ready = found->second->blocking;
  facts.comm_size = found->second->size;
}

ReductionVerdict NcclEngine::classify_call(const Reduction& call,
                                           const compressors::Compressor* compressor,
                                           CallFacts& facts) {
  facts = nccl_call_facts(call.datatype, call.op, call.count, call.coll_config != nullptr);
  const auto comm = static_cast<ncclComm_t>(call.comm);
  comm_facts(comm, facts);
  // Created inside a group and not asked since: outside any group, it is made.
  if (facts.comm_ready && facts.comm_size == 0 && !group.in_group()) {
    shape(comm);
    comm_facts(comm, facts);
  }
  // The pointer check is the one CUDA call here: only for a call otherwise
  // eligible; classified again only where it finds host memory (for the reason).
  facts.device_buffers = true;
  const ReductionVerdict verdict = classify_nccl(facts, runtime_.settings(), compressor);
  if (verdict.path == ReductionPath::pass_through) return verdict;
  facts.device_buffers = is_device_memory(call.sendbuff) && is_device_memory(call.recvbuff);
  return facts.device_buffers ? verdict : classify_nccl(facts, runtime_.settings(), compressor);
}

ncclResult_t NcclEngine::all_reduce(const void* sendbuff, void* recvbuff, size_t count,
                                    ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                    cudaStream_t stream, const ncclCollConfig_t* coll_config) {
  Reduction call{sendbuff, recvbuff, count,   static_cast<int>(datatype), static_cast<int>(op),
                 comm,     stream,   nullptr, ReductionVerdict{}};
  // A config that leaves every choice to NCCL makes the plain call (nccl.h).
  if (!nccl_coll_config_plain(coll_config)) call.coll_config = coll_config;
  const std::shared_ptr<compressors::Compressor> compressor = runtime_.policy().compressor;
  CallFacts facts;
  call.verdict = classify_call(call, compressor.get(), facts);
  PlanRunner actions(*this, !group.in_group());
  if (call.verdict.path == ReductionPath::pass_through) {
    return static_cast<ncclResult_t>(group.pass_through(call, facts.comm_ready, actions));
  }
  // The same call on every rank (the verdict reads the arguments alone) first
  // checks that the ranks agree on what shapes the wire, once per communicator.
  if (!group.in_group()) {
    if (const ncclResult_t rc = agree_on_wire(comm, stream); rc != ncclSuccess) return rc;
  }
  // Hierarchical: the communicator's nodes and sub-communicators, made at its
  // first eligible call outside any group (inside one NCCL would only queue
  // the splits), the same call on every rank; calls before it reduce flat.
  if (runtime_.settings().hierarchical && !group.in_group()) {
    if (const ncclResult_t rc = know_nodes(comm, stream); rc != ncclSuccess) return rc;
  }
  return static_cast<ncclResult_t>(group.eligible(call, actions));
}

ncclResult_t NcclEngine::group_start() {
  PlanRunner actions(*this);
  return static_cast<ncclResult_t>(group.start(actions));
}

ncclResult_t NcclEngine::group_end() {
  PlanRunner actions(*this);
  const auto rc = static_cast<ncclResult_t>(group.end(actions));
  shape_created_in_group();
  return rc;
}

#if SLIMREDUCE_NCCL_HAS_SIMULATE_END
ncclResult_t NcclEngine::group_simulate_end(ncclSimInfo_t* sim_info) {
  PlanRunner actions(*this);
  const auto rc = static_cast<ncclResult_t>(group.simulate_end(sim_info, actions));
  // A simulated group runs nothing, its communicator inits included: they are
  // not asked here (their handles may be gone); a later call asks them.
  if (!group.in_group()) created_in_group.clear();
  return rc;
}
#endif

std::optional<NcclTimeline::Group> NcclEngine::time_group(const GroupPlan& plan) {
  Timeline& timeline = runtime_.timeline();
  if (!timeline.on()) return std::nullopt;
  std::vector<TimedStream> streams = timed_streams(plan);
  if (streams.empty()) return std::nullopt;
  {
    std::lock_guard lock(mutex_);
    if (!timeline_) timeline_ = std::make_unique<NcclTimeline>(timeline);
  }
  NcclTimeline::Group group = timeline_->start();
  for (TimedStream& t : streams) group.add(t.stream, t.device, std::move(t.args));
  return group;
}

std::vector<NcclTimeline::Group> NcclEngine::time_pieces(const GroupPlan& plan) {
  std::vector<NcclTimeline::Group> pieces;
  Timeline& timeline = runtime_.timeline();
  if (!timeline.on()) return pieces;
  {
    std::lock_guard lock(mutex_);
    if (!timeline_) timeline_ = std::make_unique<NcclTimeline>(timeline);
  }
  for (std::size_t i = 0; i < plan.calls.size(); ++i) {
    const CallPlan& p = plan.calls[i];
    NcclTimeline::Group& piece = pieces.emplace_back(timeline_->start_piece());
    piece.add(static_cast<cudaStream_t>(p.call.stream), p.comm->device, piece_args(plan, i));
  }
  return pieces;
}

void NcclEngine::before_timeline_ends() {
  NcclTimeline* timeline = nullptr;
  {
    std::lock_guard lock(mutex_);
    timeline = timeline_.get();
  }
  if (timeline) timeline->drain();
}

void NcclEngine::count_pass_through(const Reduction& call) {
  const std::uint64_t bytes = call.count * nccl_type_bytes(call.datatype);
  int size = 0;
  std::shared_ptr<NcclHierarchy> nodes;  // the report's node split, once they are known
  {
    std::lock_guard lock(mutex_);
    if (auto found = comms_.find(static_cast<ncclComm_t>(call.comm)); found != comms_.end()) {
      size = found->second->size;
      nodes = found->second->hierarchy;
    }
  }
  // A communicator we know nothing of: ask it (cheap; a non-ready one answers nothing, or 0).
  if (size < 1 && (real::call(real::api().comm_count, static_cast<ncclComm_t>(call.comm), &size) !=
                       ncclSuccess ||
                   size < 1)) {
    size = 1;
  }
  CallOutcome outcome;
  outcome.bytes = bytes;
  outcome.count = call.count;
  runtime_.board(Side::nccl).add(counted_call(size, nodes ? &nodes->split : nullptr, outcome));
}

}  // namespace slimreduce
