#ifdef SLIMREDUCE_HAVE_CUDA
#include "core/nccl_engine.h"

#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>

#include "backends/nccl_backend.h"
#include "core/compressor_choice.h"
#include "core/log.h"

namespace slimreduce {
namespace {

namespace real = backends::nccl;

static_assert(kNcclFloat16 == ncclFloat16 && kNcclFloat32 == ncclFloat32 &&
              kNcclBfloat16 == ncclBfloat16 && kNcclSum == ncclSum && kNcclAvg == ncclAvg);
static_assert(kNcclSuccess == ncclSuccess && kNcclInProgress == ncclInProgress);

NcclEngine*& instance() {
  static NcclEngine* engine = nullptr;
  return engine;
}

// NCCL keeps its group depth per thread; so do we.
thread_local NcclGroup group;

bool error_feedback_for(const Settings& settings) {
  return error_feedback_on(compressor_named(settings.compressor, settings).get(), settings);
}

// A communicator blocks unless its config or NCCL_COMM_BLOCKING=0 says otherwise;
// split and shrink inherit their parent's mode when the config leaves it unset.
bool blocking_mode(const ncclConfig_t* config, const NcclCommState* parent) {
  if (config && config->blocking != NCCL_CONFIG_UNDEF_INT) return config->blocking != 0;
  if (parent) return parent->blocking;
  const char* env = std::getenv("NCCL_COMM_BLOCKING");
  return !(env && std::atoi(env) == 0);
}

int env_int(std::initializer_list<const char*> names, int fallback) {
  for (const char* name : names) {
    if (const char* value = std::getenv(name)) return std::atoi(value);
  }
  return fallback;
}

}  // namespace

// The NCCL and CUDA work of one group (or one call), for NcclGroup to drive.
class NcclEngine::Actions : public GroupActions {
 public:
  explicit Actions(NcclEngine& engine) : engine_(engine), plan_(engine.codec()) {}

  int real_group_start() override { return real::call(real::api().group_start); }
  int real_group_end() override { return real::call(real::api().group_end); }

  int pass_through(const NcclCall& c) override {
    // A held call the group now passes through is counted here; the others were already.
    if (c.verdict.path != NcclPath::pass_through) engine_.count_pass_through(c);
    return real::call(real::api().all_reduce, c.sendbuff, c.recvbuff, static_cast<size_t>(c.count),
                      static_cast<ncclDataType_t>(c.datatype), static_cast<ncclRedOp_t>(c.op),
                      static_cast<ncclComm_t>(c.comm), static_cast<cudaStream_t>(c.stream));
  }

  int begin(std::vector<NcclCall>& held) override {
    for (const NcclCall& c : held) plan_.calls.push_back(CallPlan{c});
    if (const ncclResult_t rc = engine_.plan(plan_); rc != ncclSuccess) return rc;
    return plan_.compress();
  }
  int issue(std::vector<NcclCall>&) override { return plan_.collectives(); }
  int finish(std::vector<NcclCall>&) override { return plan_.finish(); }

  // A host wait, only when a non-blocking communicator we did not see in the
  // group made the real end return early: NCCL requires it before further use.
  int wait_ready(std::vector<NcclCall>& held) override {
    std::set<void*> comms;
    for (const NcclCall& c : held) comms.insert(c.comm);
    for (void* comm : comms) {
      ncclResult_t state = ncclInProgress;
      while (state == ncclInProgress) {
        const ncclResult_t rc =
            real::call(real::api().comm_get_async_error, static_cast<ncclComm_t>(comm), &state);
        if (rc != ncclSuccess) return rc;
        if (state == ncclInProgress) sched_yield();
      }
      if (state != ncclSuccess) return state;
    }
    return ncclSuccess;
  }

 private:
  NcclEngine& engine_;
  GroupPlan plan_;
};

NcclEngine* NcclEngine::get() { return instance(); }

NcclEngine& NcclEngine::start(Settings settings) {
  static std::once_flag once;
  std::call_once(once, [&settings] {
    // Never destroyed: at exit the CUDA runtime may already be gone, and
    // freeing device memory then could crash a job that finished well.
    instance() = std::make_unique<NcclEngine>(std::move(settings)).release();
  });
  return *instance();
}

NcclEngine::NcclEngine(Settings settings)
    : settings_(std::move(settings)),
      error_feedback_(error_feedback_for(settings_)),
      residuals_(settings_.ef_max_bytes) {
  log_line(settings_.log_level, LogLevel::info, env_int({"RANK", "OMPI_COMM_WORLD_RANK"}, 0),
           "nccl: compressor %s, error feedback %s, real NCCL: %s", settings_.compressor.c_str(),
           error_feedback_ ? "on" : "off", real::api().origin);
}

NcclEngine::~NcclEngine() = default;

NcclCodec NcclEngine::codec() const {
  return {gpu_compressor(settings_.compressor), settings_.topk_ratio,
          settings_.topk_values == TopkValueFormat::fp16};
}

void NcclEngine::comm_created(ncclComm_t comm, const ncclConfig_t* config, ncclComm_t parent) {
  if (!comm) return;
  auto state = std::make_unique<NcclCommState>();
  state->comm = comm;
  {
    std::lock_guard lock(mutex_);
    auto found = parent ? comms_.find(parent) : comms_.end();
    state->blocking = blocking_mode(config, found != comms_.end() ? found->second.get() : nullptr);
  }
  // A blocking communicator is ready: ask it its shape now, once.
  if (state->blocking) {
    const real::Api& nccl = real::api();
    const bool shaped = real::call(nccl.comm_count, comm, &state->size) == ncclSuccess &&
                        real::call(nccl.comm_user_rank, comm, &state->rank) == ncclSuccess &&
                        real::call(nccl.comm_cu_device, comm, &state->device) == ncclSuccess;
    if (!shaped) state->blocking = false;  // never compressed
  }
  std::lock_guard lock(mutex_);
  state->id = next_comm_id_++;
  if (state->blocking && report_rank_ < 0) {
    report_rank_ = state->rank;
    report_size_ = state->size;
  }
  log_line(settings_.log_level, LogLevel::debug, state->rank,
           "nccl: communicator %llu: rank %d of %d on device %d, %s",
           static_cast<unsigned long long>(state->id), state->rank, state->size, state->device,
           state->blocking ? "blocking" : "non-blocking: passed through");
  comms_[comm] = std::move(state);
}

void NcclEngine::comm_gone(ncclComm_t comm) {
  std::unique_ptr<NcclCommState> gone;
  {
    std::lock_guard lock(mutex_);
    auto found = comms_.find(comm);
    if (found == comms_.end()) return;
    gone = std::move(found->second);
    comms_.erase(found);
    residuals_.forget_communicator(gone->id);
  }
  // Its workspaces go with it (a device-wide wait: NCCL has just torn the communicator down).
}

NcclCommState* NcclEngine::find(ncclComm_t comm) {
  std::lock_guard lock(mutex_);
  auto found = comms_.find(comm);
  return found == comms_.end() ? nullptr : found->second.get();
}

NcclCallFacts NcclEngine::facts_of(const NcclCall& call) {
  NcclCallFacts facts;
  facts.datatype = call.datatype;
  facts.op = call.op;
  facts.count = call.count;
  if (const NcclCommState* state = find(static_cast<ncclComm_t>(call.comm))) {
    facts.blocking_comm = state->blocking;
    facts.comm_size = state->size;
  }
  // The pointer check is the one CUDA call here: only for a call otherwise eligible.
  facts.device_buffers = true;
  if (classify_nccl(facts, settings_).path != NcclPath::pass_through) {
    facts.device_buffers = is_device_memory(call.sendbuff) && is_device_memory(call.recvbuff);
  }
  return facts;
}

ncclResult_t NcclEngine::all_reduce(const void* sendbuff, void* recvbuff, size_t count,
                                    ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                    cudaStream_t stream) {
  NcclCall call{sendbuff, recvbuff, count,        static_cast<int>(datatype), static_cast<int>(op),
                comm,     stream,   NcclVerdict{}};
  const NcclCallFacts facts = facts_of(call);
  call.verdict = classify_nccl(facts, settings_);
  Actions actions(*this);
  if (call.verdict.path == NcclPath::pass_through) {
    count_pass_through(call);
    return static_cast<ncclResult_t>(group.pass_through(call, facts.blocking_comm, actions));
  }
  return static_cast<ncclResult_t>(group.eligible(call, actions));
}

ncclResult_t NcclEngine::group_start() {
  Actions actions(*this);
  return static_cast<ncclResult_t>(group.start(actions));
}

ncclResult_t NcclEngine::group_end() {
  Actions actions(*this);
  return static_cast<ncclResult_t>(group.end(actions));
}

// 1 compress, 0 pass through (warm-up, residual cap, capture without a
// residual yet), -1 no device memory. Under mutex_.
int NcclEngine::decide(CallPlan& p, bool capturing) {
  if (!p.comm || !p.comm->blocking || p.comm->size < 1) return 0;
  NcclResidualSlot* slot = nullptr;
  const NcclCall& c = p.call;
  DeviceGuard device(p.comm->device);
  const auto status =
      residuals_.find_or_create({p.comm->id, c.recvbuff}, c.count, c.datatype, error_feedback_,
                                !capturing, c.stream, allocator_, &slot);
  switch (status) {
    case NcclResidualStore::Status::over_cap:
      ++counters_.ef_cap_fallback;
      return 0;
    case NcclResidualStore::Status::not_now:
      return 0;
    case NcclResidualStore::Status::no_memory:
      return -1;
    case NcclResidualStore::Status::ok:
      break;
  }
  if (++slot->calls <= settings_.warmup_steps) {
    ++counters_.warmup;
    return 0;
  }
  p.residual = static_cast<float*>(slot->residual.get());
  if (capturing && p.residual) slot->captured = true;
  return 1;
}

ncclResult_t NcclEngine::plan(GroupPlan& plan) {
  std::lock_guard lock(mutex_);
  for (CallPlan& p : plan.calls) {
    auto found = comms_.find(static_cast<ncclComm_t>(p.call.comm));
    p.comm = found == comms_.end() ? nullptr : found->second.get();
    const int verdict = decide(p, is_capturing(static_cast<cudaStream_t>(p.call.stream)));
    if (verdict < 0) return ncclSystemError;
    p.compressed = verdict > 0;
  }
  if (const ncclResult_t rc = plan_memory(plan); rc != ncclSuccess) return rc;
  for (const CallPlan& p : plan.calls) {
    const std::uint64_t bytes = p.call.count * nccl_type_bytes(p.call.datatype);
    if (p.compressed) {
      counters_.count_compressed(bytes, p.comm->size, plan.wire_sent(p));
    } else {
      counters_.count_pass_through(bytes, p.comm ? p.comm->size : 1);
    }
  }
  return ncclSuccess;
}

// Grows each (communicator, stream) workspace to what the plan needs. Under
// graph capture nothing is allocated: calls whose workspace is too small pass
// through, which every rank decides alike from the same call history.
ncclResult_t NcclEngine::plan_memory(GroupPlan& plan) {
  auto need = plan.layout();
  bool dropped = false;
  for (const auto& [key, bytes] : need) {
    Workspace& ws = key.first->workspaces[key.second];
    if (is_capturing(key.second)) {
      if (ws.large_enough(bytes)) {
        ws.mark_captured();
      } else {
        plan.pass_through_on(key.first, key.second);
        dropped = true;
      }
      continue;
    }
    DeviceGuard device(key.first->device);
    if (!device.ok() || !ws.ensure(bytes, key.second, allocator_)) return ncclSystemError;
  }
  if (dropped) need = plan.layout();
  for (const auto& [key, bytes] : need) {
    plan.assign(key.first, key.second,
                static_cast<std::byte*>(key.first->workspaces[key.second].get()));
  }
  return ncclSuccess;
}

void NcclEngine::count_pass_through(const NcclCall& call) {
  const std::uint64_t bytes = call.count * nccl_type_bytes(call.datatype);
  int size = 0;
  if (const NcclCommState* state = find(static_cast<ncclComm_t>(call.comm))) size = state->size;
  // A communicator we know nothing of: ask it (cheap; a non-ready one answers nothing).
  if (size < 1 && real::call(real::api().comm_count, static_cast<ncclComm_t>(call.comm), &size) !=
                      ncclSuccess) {
    size = 1;
  }
  std::lock_guard lock(mutex_);
  counters_.count_pass_through(bytes, size);
}

Counters NcclEngine::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

bool NcclEngine::use_compressor(const std::string& name) {
  if (name != "none" && !compressor_named(name, settings_)) return false;
  std::lock_guard lock(mutex_);
  settings_.compressor = name;
  error_feedback_ = error_feedback_for(settings_);
  residuals_.clear();  // what one compressor left behind means nothing to another
  return true;
}

bool NcclEngine::set_topk_ratio(double ratio) {
  if (!(ratio > 0.0 && ratio <= 1.0)) return false;
  {
    std::lock_guard lock(mutex_);
    settings_.topk_ratio = ratio;
  }
  return use_compressor(settings_.compressor);
}

void NcclEngine::write_report_at_exit() {
  Counters mine;
  ReportContext context;
  {
    std::lock_guard lock(mutex_);
    if (reported_ || settings_.report.empty()) return;
    reported_ = true;
    mine = counters_;
    context.rank = env_int({"RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"},
                           report_rank_ < 0 ? 0 : report_rank_);
    context.world_size = env_int({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"},
                                 report_size_ < 1 ? 1 : report_size_);
    context.compressor = settings_.compressor;
  }
  if (settings_.report == "stderr") {
    std::fputs(report_table(mine, context).c_str(), stderr);
    return;
  }
  const std::string path = settings_.report + "." + std::to_string(context.rank) + ".json";
  std::ofstream out(path);
  out << report_json(mine, context);
  if (!out) {
    log_line(settings_.log_level, LogLevel::error, context.rank, "cannot write the report to %s",
             path.c_str());
  }
}

}  // namespace slimreduce
#endif  // SLIMREDUCE_HAVE_CUDA
