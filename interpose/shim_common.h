// What the C and Fortran MPI shims share: the MPI side, started after MPI, and
// the rule that no exception crosses the extern "C" boundary.
#pragma once

#include <mpi.h>

#include <cstdio>
#include <new>

#include "core/mpi/engine.h"
#include "interpose/shim_base.h"

namespace slimreduce::interpose {

using slimreduce::Engine;

// Ends the process with one line when the job's MPI is of the other family
// than this library's build (interpose/mpi_abi_guard.cc); `before_mpi_init`:
// from our MPI_Init, before PMPI_Init (exit_with_one_line).
void refuse_other_mpi_family(bool before_mpi_init);

// The runtime for an MPI job, from our MPI_Init (before PMPI_Init): the
// library's ABI checked, then the settings.
inline Runtime& mpi_runtime_or_exit() {
  refuse_other_mpi_family(true);
  return runtime_or_exit(true);
}

// Attaches the MPI side to the runtime after a successful PMPI_Init*; the
// runtime was made (settings read) before it.
inline int start_engine(int rc, Runtime& runtime) {
  if (rc != MPI_SUCCESS) return rc;
  try {
    Engine::start(runtime);
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
  refuse_other_mpi_family(false);
  try {
    return &Engine::start(Runtime::start([] { return parse_settings(read_environment()); }));
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
    return engine->finalized() ? nullptr : engine;
  return start_engine_late();
}

// The MPI code for the exception being handled (call inside a catch block).
inline int code_of_current_exception() {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return MPI_ERR_NO_MEM;
  } catch (...) {
    return MPI_ERR_INTERN;
  }
}

// Runs body, turning any exception into the MPI code the caller can handle.
template <typename Body>
int guarded(Body&& body) {
  try {
    return body();
  } catch (...) {
    return code_of_current_exception();
  }
}

// The same for `call` on comm. No MPI call has reported an exception of
// ours, so comm's error handler hears of it, as it would of the real call's
// error: under the default MPI_ERRORS_ARE_FATAL the job stops rather than
// going on with a buffer that was never reduced.
template <typename Body>
int guarded_on(MPI_Comm comm, const char* call, Body&& body) {
  try {
    return body();
  } catch (...) {
    return Engine::raise(comm, code_of_current_exception(), call);
  }
}

// Before a wait, test or free on `requests`: flushes the queued
// MPI_Iallreduce calls they wait for (core/mpi/engine_queue.cc); a failure goes to
// the handler of the communicator whose flush failed, as the real wait would
// have reported it. C (interpose/mpi_request_shim.cc) and Fortran
// (interpose/mpi_fortran_requests.cc) alike.
[[gnu::noinline]] inline int flush_before(const MPI_Request* requests, int count,
                                          Engine::Until until, const char* call) {
  Engine* engine = Engine::get();
  if (!engine || !requests || count <= 0) return MPI_SUCCESS;
  MPI_Comm failed = MPI_COMM_WORLD;
  const int rc = guarded([&] { return engine->flush_for(requests, count, until, &failed); });
  return rc == MPI_SUCCESS ? rc : Engine::raise(failed, rc, call);
}

// Everything but MPI_Allreduce's hot path (interpose/mpi_shim.cc): the
// engine started late, the first call on a communicator, compressed calls,
// and the error codes. MPI_Iallreduce's whole way in. Also the ways in of
// the MPI-4 large-count calls whose count fits an int
// (interpose/mpi_large_count_shim.cc).
int allreduce_through_engine(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                             MPI_Op op, MPI_Comm comm);
int iallreduce_through_engine(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                              MPI_Op op, MPI_Comm comm, MPI_Request* request);

// Whether anything is queued: the waits' and tests' one load while nothing is.
inline bool queued() {
  const Engine* engine = Engine::get();
  return engine && engine->has_queued();
}

}  // namespace slimreduce::interpose
