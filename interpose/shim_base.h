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

// Whether the launcher is MPICH's Hydra, whose proxies give each process
// PMI_FD (the socket to the proxy) and MPI_LOCALNRANKS (both, so that another
// PMI launcher that passes PMI_FD, and may end a job at a task's exit, is
// not taken for it). Before MPI has started in the ranks, Hydra ends no rank
// when another exits, and waits for them all: tried, a rank's exit(1) before
// MPI_Init left rank 0 running, and its line came out.
inline bool hydra_waits_for_every_rank() {
  return std::getenv("PMI_FD") != nullptr && std::getenv("MPI_LOCALNRANKS") != nullptr;
}

// Ends the job before any collective runs, with one line on stderr (rank 0's).
// The other ranks wait up to `wait` for rank 0's line to reach the launcher,
// which then ends them (Open MPI's mpirun does); were rank 0 gone without a
// word, they end themselves. Under Hydra, before MPI starts
// (`before_mpi_init`), they end at once: Hydra waits for rank 0 anyway.
[[noreturn]] inline void exit_with_one_line(const char* what, bool before_mpi_init,
                                            std::chrono::seconds wait = std::chrono::seconds(20)) {
  if (launcher_rank_is_zero()) {
    std::fprintf(stderr, "slimreduce: error: %s\n", what);
    std::exit(1);
  }
  if (!(before_mpi_init && hydra_waits_for_every_rank())) std::this_thread::sleep_for(wait);
  std::exit(1);
}

// Bad settings end the job before any collective runs (invariant 6 of
// docs/architecture.md). `before_mpi_init`: read from our MPI_Init, before PMPI_Init.
inline Settings settings_or_exit(bool before_mpi_init) {
  try {
    return parse_settings(read_environment());
  } catch (const SettingsError& error) {
    exit_with_one_line(error.what(), before_mpi_init);
  }
}

// The runtime, made on the first call with the settings read now (a bad one
// ends the job: settings_or_exit).
inline Runtime& runtime_or_exit(bool before_mpi_init = false) {
  return Runtime::start([before_mpi_init] { return settings_or_exit(before_mpi_init); });
}

// The runtime's counters in the C API's layout.
inline slimreduce_counters to_c_counters(const Counters& c) {
  return {c.intercepted, c.compressed,    c.passed_through, c.warmup,   c.ef_cap_fallback,
          c.input_bytes, c.wire_baseline, c.wire_sent,      c.ef_resets};
}

}  // namespace slimreduce::interpose
