// The runtime: the one owner of SlimReduce's state in a process, and its one
// stateful global (docs/architecture.md, "One owner"). It holds the settings
// (read once), the policy (the compressor and whether error feedback wraps
// it), the decision (residual cap, warm-up), the one residual store, the
// device memory behind residuals, the counters and the report. It is made by
// whichever comes first, MPI_Init or the first NCCL call, and never destroyed:
// at exit the CUDA runtime may already be gone, and freeing device memory then
// could crash a job that finished well. The report is written once: at
// MPI_Finalize (summed over ranks), else by the one exit handler.
//
// The MPI and NCCL sides (core/mpi/engine.h, core/nccl/engine.h) are parts of it:
// each keeps the registry of its own communicators and the work of its calls,
// and reads everything above from here.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "compressors/compressor.h"
#include "core/gpu/device_memory.h"
#include "core/runtime/counters.h"
#include "core/runtime/decision.h"
#include "core/runtime/residuals.h"
#include "core/runtime/settings.h"
#include "core/runtime/timeline.h"
#include "scheduler/pipeline.h"

namespace slimreduce {

// The two sides a process may use, each made on its first use.
enum class Side { mpi = 0, nccl = 1 };

// What a side adds to the runtime it is part of.
class RuntimeSide {
 public:
  virtual ~RuntimeSide() = default;
  // After a compressor switch, outside the runtime's lock: forget what was
  // derived from the old policy. Appends the devices whose queued work may
  // still use residuals just dropped (they are freed after a wait on them).
  virtual void policy_changed(std::vector<int>& devices) = 0;
  // Calls the side counted outside the runtime's boards (the MPI hot path's
  // per-thread tallies).
  virtual Counters own_counters() const { return {}; }
  // Before the timeline's file closes: spans the side still holds are written.
  virtual void before_timeline_ends() {}
};

// What every path decides and keeps per call, reached under the runtime's lock.
struct SharedState {
  Policy policy;
  CompressionDecision decision;
  ResidualStore residuals;
  std::uint64_t next_comm_id = 1;       // one numbering for MPI and NCCL communicators
  std::optional<AutoChooser> chooser;   // SLIMREDUCE_COMPRESSOR=auto's schedule and choices
  std::optional<LevelSchedule> levels;  // SLIMREDUCE_ADAPTIVE's, where the policy adapts

  // The call's decision (core/runtime/decision.h): chosen, then settled by
  // warm-up and the cap; decide() does both.
  CallDecision choose(const CallShape& shape, ReductionPath route) const {
    return choose_for(policy, route, levels ? levels->level(shape) : 0);
  }
  // SLIMREDUCE_ADAPTIVE: a call of `shape` decided with `call` was reduced,
  // its result's norm `norm` (kernels/fixed_order_norm); true when that
  // changed the shape's level.
  bool reduced(const CallShape& shape, const CallDecision& call, double norm) {
    return call.levels_adapt && levels && levels->record(shape, call.level, norm);
  }
  void settle(CallDecision& call, const CallShape& shape) {
    slimreduce::settle(decision, call, shape);
  }
  // `timed_path`, `two_level`, `ranks`: see decide_auto (a policy that chooses).
  CallDecision decide(const CallShape& shape, ReductionPath route, bool timed_path = true,
                      const std::function<bool(const Policy::Candidate&)>& two_level = {},
                      int ranks = 0) {
    if (chooser)
      return decide_auto(policy, decision, *chooser, shape, timed_path, two_level, ranks);
    CallDecision call = choose(shape, route);
    settle(call, shape);
    return call;
  }
};

class Runtime {
 public:
  // `device_memory`: the allocator of device residuals (nullptr on a
  // CPU-only build). `launcher_rank`: this process's rank as its launcher
  // says (the settings are logged by rank 0).
  Runtime(Settings settings, std::unique_ptr<DeviceAllocator> device_memory, int launcher_rank);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // The process's runtime, made on the first call with `read_settings()`
  // (which may end the process on a bad setting); later calls return it.
  static Runtime& start(const std::function<Settings()>& read_settings);
  // The runtime, or nullptr before start().
  static Runtime* get() { return instance_.runtime.load(std::memory_order_acquire); }

  // The side, or nullptr before it was attached.
  RuntimeSide* side(Side which) const {
    return sides_[index(which)].load(std::memory_order_acquire);
  }
  // Attaches the side `make()` builds, once; later calls return the first.
  RuntimeSide& attach(Side which, const std::function<std::unique_ptr<RuntimeSide>()>& make);

  const Settings& settings() const { return settings_; }
  Policy policy() const;
  // Switches the compressor ("none" included) and drops every residual and
  // warm-up count. Every rank must switch at the same point, with no call of
  // its own in flight. False for a name no compressor has.
  bool use_compressor(const std::string& name);
  // SLIMREDUCE_TOPK_RATIO for the calls that follow (the same rule); false
  // unless 0 < ratio <= 1.
  bool set_topk_ratio(double ratio);
  // SLIMREDUCE_POWERSGD_RANK for the calls that follow (the same rule: the
  // residuals and each key's Q are dropped); false unless 1 <= rank <= 64.
  bool set_powersgd_rank(int rank);

  // The state every path shares, for as long as the returned lock is held.
  // Never held across a call into MPI or NCCL (a thread in a collective must
  // not hold what a thread on another communicator needs).
  class Locked {
   public:
    Locked(std::mutex& mutex, SharedState& state) : lock_(mutex), state_(state) {}
    SharedState* operator->() const { return &state_; }
    SharedState& operator*() const { return state_; }

   private:
    std::unique_lock<std::mutex> lock_;
    SharedState& state_;
  };
  Locked shared() { return Locked(mutex_, shared_); }
  // SLIMREDUCE_ADAPTIVE (core/runtime/runtime_levels.cc): a call of `shape`
  // sent at `level` was reduced, its result's norm `norm` (fixed_order_norm,
  // the same on every rank); a level change is counted on `side`, marked and
  // logged (as `rank`). True when the shape's level changed.
  bool record_norm(Side side, const CallShape& shape, int level, double norm, int rank);
  // SLIMREDUCE_COMPRESSOR=auto (core/runtime/runtime_auto.cc), one code for
  // both sides. After a call of the schedule on communicator `comm_id`: its
  // time and this rank's residual resets (a probe counted on `side`); where
  // the step ends a window, this rank's window to exchange.
  std::optional<std::vector<double>> auto_recorded(Side side, std::uint64_t comm_id,
                                                   const AutoStep& step, double seconds,
                                                   std::uint64_t resets);
  // The exchanged window (each element the ranks' largest) of the window
  // `step` ended, taken at the same call on every rank; a switch is counted
  // on `side`, logged by the communicator's rank 0 and marked on the
  // timeline (the exchange from `exchange_begin_us`).
  void auto_agreed(Side side, std::uint64_t comm_id, int comm_rank, const AutoStep& step,
                   const std::vector<double>& agreed, double exchange_begin_us);
  // Forgets a communicator's warm-up counts and residuals; its device blocks
  // go to `out` (free them once nothing queued can use them).
  void forget_communicator(std::uint64_t comm_id, std::vector<DeviceBlock>& out);
  // Device memory for residuals and workspaces; nullptr on a CPU-only build.
  DeviceAllocator* device_memory() const { return device_memory_.get(); }
  // SLIMREDUCE_TIMELINE's spans (core/runtime/timeline.h); finished with the report.
  Timeline& timeline() { return timeline_; }
  // Closes the timeline's file, after every side wrote what it still holds.
  void finish_timeline();
  // The helper threads of pipelined calls (scheduler/pipeline.h).
  scheduler::HelperPool& helpers() { return helpers_; }

  // The counters of one side's calls, and of all.
  CounterBoard& board(Side which) { return boards_[index(which)]; }
  Counters counters(Side which) const;
  Counters counters() const;

  // The report's rank and size: MPI's world (`from_mpi`), else the first
  // NCCL communicator's, unless the launcher's variables say otherwise.
  void know_rank(int rank, int size, bool from_mpi);
  ReportContext report_context() const;
  // True once: the caller writes the report (MPI_Finalize, or exit).
  bool claim_report();
  // This rank's counters as the table (stderr) or a per-rank JSON file.
  void write_report(const Counters& counters, const ReportContext& context) const;
  // Warnings the counters call for (residuals reset, the cap reached).
  void warn_about_counters() const;
  // Compressed calls and the residual resets they caused, as they happen:
  // once resets are a tenth of the calls after kResetWarningCalls calls, one
  // warning at once, naming the remedy (a framework's fusion buffer whose
  // composition changes, as Horovod's does), rather than at the end.
  static constexpr std::uint64_t kResetWarningCalls = 20;
  void note_compressed(std::uint64_t calls, std::uint64_t resets);
  // The hot path's view of the MPI side's per-thread tallies (core/mpi/engine.h).
  static std::uint64_t tally_board() { return instance_.tally_board; }
  static void publish_tally_board(std::uint64_t board) { instance_.tally_board = board; }

 private:
  static constexpr std::size_t index(Side which) { return static_cast<std::size_t>(which); }
  // The one exit handler: the report of a job that never reached MPI_Finalize.
  static void report_at_exit();
  void log_settings(int launcher_rank) const;
  void add_auto_choices(ReportContext& context) const;
  void add_levels(ReportContext& context) const;
  // Once per runtime, on every rank (nodes may differ): what computes
  // PowerSGD's products, when the compressor is low-rank.
  void log_products(int rank);

  // The runtime, and the number of the MPI side's tally board (0 while there
  // is none), side by side so the MPI hot path reads one line of ours.
  struct Instance {
    std::atomic<Runtime*> runtime;
    std::uint64_t tally_board;  // static storage: zero until the MPI side starts
  };
  static inline Instance instance_;

  Settings settings_;
  Timeline timeline_{settings_.timeline};
  scheduler::HelperPool helpers_;
  std::unique_ptr<DeviceAllocator> device_memory_;

  mutable std::mutex mutex_;  // guards shared_ and settings_' compressor and ratio
  SharedState shared_;
  std::array<CounterBoard, 2> boards_;

  std::mutex attach_mutex_;  // guards the making of a side
  std::array<std::unique_ptr<RuntimeSide>, 2> owned_sides_;
  std::array<std::atomic<RuntimeSide*>, 2> sides_{};

  std::atomic<std::uint64_t> compressed_noted_{0};
  std::atomic<std::uint64_t> resets_noted_{0};
  std::atomic<bool> warned_resets_{false};
  std::atomic<bool> logged_products_{false};

  mutable std::mutex report_mutex_;  // guards the report's identity and claim
  int rank_ = -1;
  int size_ = 0;
  bool rank_from_mpi_ = false;
  bool reported_ = false;
};

}  // namespace slimreduce
