// The engine: the one instance that holds settings, per-communicator state,
// residuals and counters, and decides what happens to each intercepted call.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "compressors/compressor.h"
#include "core/comm_state.h"
#include "core/counters.h"
#include "core/decision.h"
#include "core/eligibility.h"
#include "core/residuals.h"
#include "core/settings.h"
#include "core/thread_tally.h"

namespace slimreduce {

class Engine {
 public:
  // Reads and validates the settings; throws SettingsError. Call before MPI starts.
  static Settings load_settings();
  // Creates the instance once MPI is up. Idempotent.
  static Engine& start(Settings settings);
  // The instance, or nullptr before start() (a process that never uses MPI).
  static Engine* get() { return instance_.engine.get(); }

  explicit Engine(Settings settings);
  ~Engine();

  // The hot path of a call that passes through, which must cost next to
  // nothing: true when the call, on the communicator this thread used last,
  // is not compressed; it has then been counted, and the caller hands it to
  // the real MPI as given. False: the caller takes allreduce(), which decides
  // everything. No call into MPI, no lock, no exception.
  // Static: it reads no line of the engine object, only the thread's tally.
  static bool counted_pass_through(int count, MPI_Datatype datatype, MPI_Op op,
                                   MPI_Comm comm) noexcept {
    ThreadTally* tally = TallyBoard::known_on(instance_.tally_board);
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

  // Writes the report (once) and lets go of MPI resources; call before PMPI_Finalize.
  void finish();
  // Writes the per-rank JSON if finish() never ran (the process exits without MPI_Finalize).
  void write_report_at_exit();

  // Switches the compressor ("none" included) and drops all residuals. Every
  // rank must switch at the same point, with no call of its own in flight.
  bool use_compressor(const std::string& name);
  // Sets SLIMREDUCE_TOPK_RATIO's value for the calls that follow (same rule as
  // use_compressor); false unless 0 < ratio <= 1.
  bool set_topk_ratio(double ratio);

  // An error that no MPI call has reported to the caller yet (an exception
  // of ours, a failed compressed call): logged, then handed to comm's error
  // handler as the real call would have done. Returns code.
  static int raise(MPI_Comm comm, int code, const char* what);

  const Settings& settings() const { return settings_; }
  Counters counters() const;
  void forget(CommState* state);

 private:
  // The communicator's state. Most jobs reduce on one communicator call after
  // call: the thread's tally remembers the last one, so a call on it skips
  // MPI's attribute lookup. A freed communicator clears every thread's
  // memory, so a reused handle never finds a stale state.
  CommState* state_of(MPI_Comm comm);
  CommState* look_up_state(MPI_Comm comm);

  int compress_call(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                    MPI_Comm comm, CommState& state);
  // The key's residual slot (nullptr: no room under the cap), counting a
  // reset. Under mutex_.
  ResidualSlot* residual_for(const ResidualKey& key, std::size_t count, std::uint64_t datatype_tag);
  void log_settings() const;
  // Warns once, at the report, when error feedback kept losing its residuals.
  void warn_about_resets() const;
  // Warns once, at the report, when the residual cap turned error feedback off.
  void warn_about_cap() const;
  // Counts a call that reached the real library as given; reason, if any, says why it
  // was not compressed (Counters::warmup or Counters::ef_cap_fallback).
  void count_pass_through(std::uint64_t bytes, int ranks,
                          std::uint64_t Counters::*reason = nullptr);
  void write_json_report();

  // The one engine of the process, and the number of its tally board (0
  // while there is none), side by side so the hot path reads one line of ours.
  struct Instance {
    std::unique_ptr<Engine> engine;
    std::uint64_t tally_board;  // static storage: zero until start()
  };
  static inline Instance instance_;

  TallyBoard tallies_;    // plain pass-through calls and the last communicator, per thread
  EligibilityRule rule_;  // from settings_, kept in step by use_compressor
  MPI_Datatype real32_ = MPI_FLOAT;  // MPI_REAL when it is 4 bytes wide (the hot path's test)

  Settings settings_;
  std::unique_ptr<compressors::Compressor> compressor_;  // nullptr for "none"
  bool error_feedback_ = false;
  int comm_keyval_ = MPI_KEYVAL_INVALID;
  int world_rank_ = 0;
  int world_size_ = 1;

  mutable std::mutex mutex_;  // guards everything below
  std::uint64_t next_comm_id_ = 1;
  std::map<CommState*, std::unique_ptr<CommState>> comms_;
  ResidualStore residuals_;
  CompressionDecision decision_;
  CounterBoard board_;  // every call but a plain pass-through
  bool reported_ = false;
};

}  // namespace slimreduce
