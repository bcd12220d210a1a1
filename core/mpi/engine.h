// The MPI side: what an intercepted MPI call meets first.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/mpi/comm_state.h"
#include "core/mpi/device_staging.h"
#include "core/mpi/eligibility.h"
#include "core/mpi/host_allreduce.h"
#include "core/mpi/thread_tally.h"
#include "core/runtime/counters.h"
#include "core/runtime/runtime.h"

namespace slimreduce {

// SLIMREDUCE_ADAPTIVE: the level a call was sent at (`"level": "hard"`), for its spans.
std::string level_span_args(const CallDecision& decision);

// The MPI side of the runtime (core/runtime/runtime.h): the communicators MPI
// calls reach, the hot path of calls that pass through, and the work of a
// compressed call. Settings, policy, decision, residuals and counters are the
// runtime's.
class Engine : public RuntimeSide {
 public:
  // Attaches the MPI side to the runtime once MPI is up. Idempotent.
  static Engine& start(Runtime& runtime);
  // The MPI side, or nullptr before start() (a process that never uses MPI).
  static Engine* get() {
    Runtime* runtime = Runtime::get();
    return runtime ? static_cast<Engine*>(runtime->side(Side::mpi)) : nullptr;
  }

  explicit Engine(Runtime& runtime);
  ~Engine() override;

  // The hot path of a call that passes through, which must cost next to
  // nothing: true when the call, on the communicator this thread used last,
  // is not compressed; it has then been counted, and the caller hands it to
  // the real MPI as given. False: the caller takes allreduce(), which decides
  // everything. No call into MPI, no lock, no exception.
  // Static: it reads no line of the engine object, only the thread's tally.
  static bool counted_pass_through(int count, MPI_Datatype datatype, MPI_Op op,
                                   MPI_Comm comm) noexcept {
    ThreadTally* tally = TallyBoard::known_on(Runtime::tally_board());
    if (!tally || tally->comm.load(std::memory_order_relaxed) != comm ||
        (datatype != tally->float_type && datatype != tally->real_type) || count < 0) {
      return false;
    }
    const std::uint64_t bytes = std::uint64_t(count) * sizeof(float);
    if (op == tally->sum_op && bytes >= tally->compress_from) return false;
    tally->count(bytes);
    return true;
  }

  // Any call: compressed, or counted and passed through.
  int allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                MPI_Comm comm);
  int iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                 MPI_Comm comm, MPI_Request* request);

  // ---- queued MPI_Iallreduce calls (core/mpi/engine_queue.cc) ----
  // The native API (interpose/slimreduce.h): an in-place float32 SUM
  // MPI_Iallreduce whose residual is keyed by `name`, its request held here
  // until synchronize(comm) completes every one of comm's.
  // rows: the tensor's real row count (slimreduce_enqueue_matrix), or 0.
  int enqueue_named(const char* name, float* buffer, std::size_t count, std::size_t rows,
                    MPI_Comm comm, int priority);
  int synchronize(MPI_Comm comm);
  // Whether any compressed MPI_Iallreduce waits in a queue: the wait and
  // test shims skip everything else while none does.
  bool has_queued() const noexcept { return queued_.load(std::memory_order_relaxed) > 0; }
  enum class Until { all_done, one_done, one_pass };
  // Before the caller waits on, tests or frees `requests`: flushes the queues
  // that hold any of them (in communicator order) until all of them ran, one
  // of them ran, or once. Returns an MPI code; *failed_comm gets the caller's
  // communicator of a failed flush.
  int flush_for(const MPI_Request* requests, int count, Until until, MPI_Comm* failed_comm);
  // MPI frees a request of ours: its record goes.
  void release_record(const RequestRecord* record);

  // Writes the report (once, summed over ranks) and lets go of MPI
  // resources; call before PMPI_Finalize. From then on finalized() is true.
  void finish();
  // Whether MPI_Finalize has begun: every later call goes to the real MPI as
  // given, which reports a call after MPI_Finalize in its own words (not as
  // a call of ours, such as the attribute lookup a compressed call makes).
  bool finalized() const { return finalized_.load(std::memory_order_relaxed); }

  // An error that no MPI call has reported to the caller yet (an exception
  // of ours, a failed compressed call): logged, then handed to comm's error
  // handler as the real call would have done. Returns code.
  static int raise(MPI_Comm comm, int code, const char* what);

  void forget(CommState* state);
  // The runtime switched the compressor: the eligibility rule and every
  // thread's hot-path threshold follow.
  void policy_changed(std::vector<int>& devices) override;
  Counters own_counters() const override { return tallies_.total(); }

 private:
  // The communicator's state. Most jobs reduce on one communicator call after
  // call: the thread's tally remembers the last one, so a call on it skips
  // MPI's attribute lookup. A freed communicator clears every thread's
  // memory, so a reused handle never finds a stale state.
  CommState* state_of(MPI_Comm comm);
  CommState* look_up_state(MPI_Comm comm);

  // What classify() makes of a call (its communicator's state, its bytes, the
  // verdict); false where only the real library can answer (bad handles, a
  // negative count).
  struct ReadCall {
    CommState* state = nullptr;
    std::uint64_t bytes = 0;
    bool compress = false;
  };
  bool read_call(const void* sendbuf, const void* recvbuf, int count, MPI_Datatype datatype,
                 MPI_Op op, MPI_Comm comm, ReadCall* read);

  // The private duplicate of the communicator and, with SLIMREDUCE_HIERARCHICAL,
  // its node sub-transports: made at its first eligible call, the same call
  // on every rank (classify() reads the arguments alone).
  int prepare_wire(CommState& state, MPI_Comm comm, MPI_Comm* wire_comm);
  int compress_call(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                    MPI_Comm comm, CommState& state);
  // What the runtime decided for one eligible call, under its lock.
  struct Started {
    AllreduceCall call;            // with the residual and compressor state it runs with
    CallShape shape;               // as every rank sees the call
    CallDecision decision;         // route, compressor (held for the call) and level
    ResidualSlot* slot = nullptr;  // nullptr: no error feedback for this call
    // auto's none on a key that carried a residual: input + residual, to send instead.
    std::vector<float> carried;
    std::uint64_t resets = 0;   // the key came back with another shape: its residual was dropped
    std::uint64_t evicted = 0;  // keys unused for SLIMREDUCE_EF_EVICT_CALLS calls, freed now
    // The key came back with another shape, whatever it held (auto's signal:
    // ResidualStore::shape_changes).
    std::uint64_t shape_changes = 0;
  };
  Started start_call(const AllreduceCall& call, MPI_Datatype datatype, CommState& state,
                     bool device);
  int run_decided(const Started& started, const void* sendbuf, void* recvbuf, MPI_Datatype datatype,
                  MPI_Op op, MPI_Comm comm, CommState& state, MPI_Comm wire_comm, bool device);
  // shape_changes: the call found its key with another shape on this rank
  // (AutoChooser::record's resets).
  int after_auto_step(CommState& state, MPI_Comm wire_comm, const AutoStep& step, double seconds,
                      std::uint64_t shape_changes);
  // SLIMREDUCE_ADAPTIVE: a call decided with `decision` left its reduced
  // result at `output` (host or device memory): its norm goes to the shape's
  // schedule (core/mpi/engine_levels.cc). An MPI code: a device norm that
  // could not be read fails the call (its rank's schedule would part from
  // the others').
  int note_reduced(const CallShape& shape, const CallDecision& decision, const float* output);
  int passed_through_staged(const AllreduceCall& call, MPI_Datatype datatype, MPI_Op op,
                            MPI_Comm comm);
  Status run_compressed(const Started& started, CommState& state, MPI_Comm wire_comm, bool device,
                        Reduced* reduced);
  void finish_call(const Started& started, const CommState& state, const Reduced& reduced);
  // How this process cuts and runs a host call (the settings'), observed by
  // `phases` (the timeline's) where it holds one; `flat`: the decision's.
  RunOptions run_options(std::optional<TimelinePhases>& phases, bool flat);
  // SLIMREDUCE_HIERARCHICAL=auto: whether the communicator runs a two-level
  // candidate two-level (it spans nodes; the host algorithm takes every
  // aggregation two-level, device buffers through the host).
  static std::function<bool(const Policy::Candidate&)> two_level_on(const CommState& state) {
    return [&state](const Policy::Candidate&) { return state.runs_two_level(false); };
  }
  bool pipelining_wanted() const;
  void advise_on_transport();
  // Counts a call that reached the real library as given; reason, if any, says why it
  // was not compressed (Counters::warmup or Counters::ef_cap_fallback).
  void count_pass_through(std::uint64_t bytes, const CommState& state,
                          std::uint64_t Counters::*reason = nullptr);
  // Counts a compressed call into delta, split by node where the nodes are known;
  // `flat`: its decision's (CommState::runs_two_level).
  void count_compressed(std::uint64_t bytes, const CommState& state, double wire_sent, bool flat,
                        Counters& delta) const;

  // What a queued call carries besides MPI's arguments: its residual key (the
  // receive buffer, or a tensor name's stand-in), the native API's priority
  // (0 for MPI_Iallreduce) and the tensor's real row count (or 0).
  struct Tag {
    const void* residual_key;
    int priority = 0;
    std::size_t rows = 0;
  };
  // An eligible MPI_Iallreduce, queued (or passed through by the decision).
  int iallreduce_keyed(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                       MPI_Op op, MPI_Comm comm, MPI_Request* request, const Tag& tag);
  int enqueue(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
              MPI_Comm comm, CommState& state, MPI_Request* request, const Tag& tag);
  // A generalized request of ours (its record kept until MPI frees it).
  int start_request(MPI_Request* request, RequestRecord** record);
  // A request already complete: a call reduced before it returned.
  int completed_request(MPI_Comm comm, MPI_Request* request);
  // What a flush is for: every queued call (requests == nullptr), or the
  // caller's wait or test on these requests (flush_for).
  struct Awaited {
    const MPI_Request* requests = nullptr;
    int count = 0;
    Until until = Until::all_done;
  };
  // Agrees with the other ranks how many queued calls all of them hold, and
  // reduces that many, fused, in priority order; completes their requests.
  // With more than one buffer, the ranks agree (the most any rank needs) how
  // many buffers this flush runs: a wait on the first layer's gradients, sent
  // first in `reverse` order, returns before the rest ran; the rest go back
  // to the queue's front. An MPI code.
  int flush(CommState& state, const Awaited& awaited);
  int flush(CommState& state);  // every queued call
  // Every queue, to the end (MPI_Finalize, a communicator freed).
  void flush_all(CommState& state);
  int reduce_queued(CommState& state, MPI_Comm wire_comm,
                    const std::vector<QueuedReduction>& batch);
  void complete(const std::vector<QueuedReduction>& reductions, int rc);
  static void sort_by_id(std::vector<CommState*>& states);
  std::vector<QueuedReduction> ordered(const std::vector<QueuedReduction>& taken) const;
  int reduce_in_order(CommState& state, MPI_Comm wire_comm,
                      const std::vector<QueuedReduction>& taken, const Awaited& awaited,
                      std::vector<QueuedReduction>* left);
  // How many of the flush's buffers to run: agreed over the ranks (each one's need, the most).
  std::size_t buffers_to_run(MPI_Comm wire_comm,
                             const std::vector<std::vector<QueuedReduction>>& batches,
                             const Awaited& awaited) const;
  void log_plan(const CommState& state,
                const std::vector<std::vector<QueuedReduction>>& batches) const;
  void count_batch(const std::vector<QueuedReduction>& batch, const CommState& state,
                   double wire_sent, Counters& delta) const;

  Runtime& runtime_;
  TallyBoard tallies_;  // plain pass-through calls and the last communicator, per thread
  MPI_Datatype real32_ = MPI_FLOAT;  // MPI_REAL when it is 4 bytes wide (the hot path's test)
  int comm_keyval_ = MPI_KEYVAL_INVALID;
  int world_rank_ = 0;
  int world_size_ = 1;
  bool pipelined_ = false;           // partitioned calls pipelined (SLIMREDUCE_PIPELINE)
  std::once_flag transport_advice_;  // advise_on_transport's one line
  // Pinned and device workspaces of calls on device buffers, kept between calls.
  std::unique_ptr<device_staging::StagingPool> staging_;

  // From the runtime's settings; changed only by policy_changed (a switch
  // comes with no call in flight), read without a lock.
  EligibilityRule rule_;

  mutable std::mutex mutex_;  // guards comms_
  std::map<CommState*, std::unique_ptr<CommState>> comms_;

  std::atomic<std::size_t> queued_{0};  // queued_requests_.size(), read without the lock
  std::atomic<bool> finalized_{false};
  std::mutex requests_mutex_;  // guards the two maps below; never held across MPI
  std::unordered_map<MPI_Request, CommState*> queued_requests_;
  std::unordered_map<const RequestRecord*, std::unique_ptr<RequestRecord>> records_;

  std::mutex native_mutex_;  // guards the two maps below; never held across MPI
  std::map<MPI_Comm, std::vector<MPI_Request>> native_requests_;           // until synchronize
  std::unordered_map<std::string, std::unique_ptr<std::byte>> name_keys_;  // a name's key
};

}  // namespace slimreduce
