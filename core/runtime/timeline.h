// SLIMREDUCE_TIMELINE (docs/architecture.md, "Timeline"): what each
// compressed call and fused batch spent where, as Chrome-trace JSON (opens
// in Perfetto and chrome://tracing), one file per rank, <prefix>.<rank>.json.
// Each span is a complete event ("ph": "X", a begin and a duration), so a
// file never holds an unmatched begin or end. Spans: QUEUE (a queued
// MPI_Iallreduce, from the call to its flush), FUSE (a flush cutting its
// calls into buffers), COMPRESS, COMMUNICATE, DECOMPRESS (a step's phases;
// on the CPU a fused buffer's compress writes each tensor straight into its
// place and its decompress writes each result straight out, so packing and
// unpacking are inside them). Off: one branch. On: spans are held in a
// bounded buffer and written when it fills and at the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "compressors/compressor.h"
#include "scheduler/plan.h"

namespace slimreduce {

class Timeline {
 public:
  // prefix "": off.
  explicit Timeline(std::string prefix) : prefix_(std::move(prefix)) {}
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  bool on() const { return !prefix_.empty(); }
  // Microseconds on the scheduler's steady clock (the phases' too).
  static double now_us() { return scheduler::now_us(); }
  // One span of this rank: `args` is a JSON object's members ("\"count\": 4").
  // `lane`: the thread's row in the trace (0: the caller's; 1: the pipeline's helper).
  void span(const char* name, double begin_us, double end_us, const std::string& args,
            int lane = 0);
  // This process's rank, which names the file (the one known when the file
  // is first written: the buffer may fill before MPI_Finalize).
  void know_rank(int rank);
  // Writes what is held and closes the file's array: at MPI_Finalize or exit.
  // Spans after it are dropped.
  void finish();

 private:
  struct Span {
    const char* name;
    double begin_us;
    double duration_us;
    std::string args;
    int lane;
  };
  static constexpr std::size_t kHeld = 4096;
  void write_held();  // under mutex_

  std::string prefix_;
  std::mutex mutex_;  // guards everything below
  std::vector<Span> held_;
  std::FILE* file_ = nullptr;
  int rank_ = 0;  // names the file; fixed once the file is open
  bool finished_ = false;
  std::size_t written_ = 0;
};

// A span's args: the compressor, the values and the calls it covers; bytes:
// the values' (fp32's count * 4 unless given).
std::string span_args(const compressors::Compressor& compressor, std::uint64_t count,
                      std::size_t calls);
std::string span_args(const compressors::Compressor& compressor, std::uint64_t count,
                      std::size_t calls, std::uint64_t bytes);

// A plan's phases as spans (scheduler::PhaseObserver): COMPRESS, COMMUNICATE,
// DECOMPRESS, each with the step's `args` (and, for a call cut into
// partitions, which partition), on the lane of the thread that ran it.
class TimelinePhases final : public scheduler::PhaseObserver {
 public:
  TimelinePhases(Timeline& timeline, std::string args)
      : timeline_(timeline), args_(std::move(args)) {}
  void phase_ran(const scheduler::PhaseRun& run) override;

 private:
  Timeline& timeline_;
  std::string args_;
};

}  // namespace slimreduce
