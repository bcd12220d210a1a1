// What every shim shares, MPI or NCCL: the export macro, the runtime made
// with the settings read at start-up (the one-line refusal of a bad one),
// and the C API's counters.
// No MPI here: libslimreduce_nccl.so (for jobs without MPI) is built from it.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "core/runtime/counters.h"
#include "core/runtime/runtime.h"
#include "core/runtime/settings.h"
#include "interpose/slimreduce.h"

#define SR_EXPORT extern "C" __attribute__((visibility("default")))

namespace slimreduce::interpose {

using slimreduce::Runtime;
using slimreduce::Settings;
using slimreduce::SettingsError;

// The rank the launcher gave this process, before MPI or NCCL can tell us.
inline bool launcher_rank_is_zero() {
  // mpirun (Open MPI, PMIx, PMI), then torchrun and Slurm for NCCL-only jobs.
  for (const char* name :
       {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "RANK", "SLURM_PROCID"}) {
    if (const char* value = std::getenv(name)) return std::string(value) == "0";
  }
  return true;
}

// Ends the job before any collective runs, with one line on stderr (rank 0's).
// The other ranks wait up to `wait` for rank 0's line to reach the launcher,
// which then ends them (Open MPI's mpirun does; MPICH's Hydra waits for them);
// were rank 0 gone without a word, they end themselves.
[[noreturn]] inline void exit_with_one_line(const char* what,
                                            std::chrono::seconds wait = std::chrono::seconds(20)) {
  if (launcher_rank_is_zero()) {
    std::fprintf(stderr, "slimreduce: error: %s\n", what);
    std::exit(1);
  }
  std::this_thread::sleep_for(wait);
  std::exit(1);
}

// Bad settings end the job before any collective runs (invariant 6 of docs/architecture.md).
inline Settings settings_or_exit() {
  try {
    return parse_settings(read_environment());
  } catch (const SettingsError& error) {
    exit_with_one_line(error.what());
  }
}

// The runtime, made on the first call with the settings read now (a bad one
// ends the job: settings_or_exit).
inline Runtime& runtime_or_exit() { return Runtime::start(settings_or_exit); }

// The runtime's counters in the C API's layout.
inline slimreduce_counters to_c_counters(const Counters& c) {
  return {c.intercepted, c.compressed,    c.passed_through, c.warmup,   c.ef_cap_fallback,
          c.input_bytes, c.wire_baseline, c.wire_sent,      c.ef_resets};
}

}  // namespace slimreduce::interpose
