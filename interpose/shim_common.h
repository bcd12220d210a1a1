// What the C and Fortran MPI shims share: settings at start-up, the engine,
// and the rule that no exception crosses the extern "C" boundary.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <thread>

#include "core/engine.h"
#include "interpose/slimreduce.h"

#define SR_EXPORT extern "C" __attribute__((visibility("default")))

namespace slimreduce::interpose {

using slimreduce::Engine;
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

// Bad settings end the job before any collective runs (design invariant 6).
inline Settings settings_or_exit() {
  try {
    return Engine::load_settings();
  } catch (const SettingsError& error) {
    if (launcher_rank_is_zero()) {
      std::fprintf(stderr, "slimreduce: error: %s\n", error.what());
      std::exit(1);
    }
    // The other ranks wait for rank 0's line to reach the launcher, which then
    // ends them; were rank 0 gone without a word, they end themselves.
    std::this_thread::sleep_for(std::chrono::seconds(20));
    std::exit(1);
  }
}

// Starts the engine after a successful PMPI_Init*; settings were read first.
inline int start_engine(int rc, Settings settings) {
  if (rc != MPI_SUCCESS) return rc;
  try {
    Engine::start(std::move(settings));
  } catch (const std::exception& error) {
    std::fprintf(stderr, "slimreduce: error: cannot start: %s\n", error.what());
    PMPI_Abort(MPI_COMM_WORLD, 1);
  }
  return rc;
}

// The engine started on first use, when MPI came up without our MPI_Init
// (for example through a binding that calls PMPI_Init itself). Out of line,
// so that the calls that find the engine running carry none of this.
[[gnu::noinline, gnu::cold]] inline Engine* start_engine_late() {
  int initialized = 0, finalized = 0;
  PMPI_Initialized(&initialized);
  PMPI_Finalized(&finalized);
  if (!initialized || finalized) return nullptr;
  try {
    return &Engine::start(Engine::load_settings());
  } catch (const SettingsError& error) {
    std::fprintf(stderr, "slimreduce: error: %s\n", error.what());
    PMPI_Abort(MPI_COMM_WORLD, 1);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "slimreduce: error: cannot start: %s\n", error.what());
  }
  return nullptr;
}

// The engine, or nullptr where MPI is not (or no longer) running.
inline Engine* engine_or_null() {
  if (Engine* engine = Engine::get()) [[likely]]
    return engine;
  return start_engine_late();
}

// Runs body, turning any exception into the MPI code the caller can handle.
template <typename Body>
int guarded(Body&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return MPI_ERR_NO_MEM;
  } catch (...) {
    return MPI_ERR_INTERN;
  }
}

// The engine's counters in the C API's layout.
inline slimreduce_counters to_c_counters(const Counters& c) {
  return {c.intercepted, c.compressed,    c.passed_through, c.warmup,   c.ef_cap_fallback,
          c.input_bytes, c.wire_baseline, c.wire_sent,      c.ef_resets};
}

}  // namespace slimreduce::interpose
