// The extern "C" boundary for NCCL: under LD_PRELOAD (or linked ahead of
// NCCL) these definitions see the job's ncclAllReduce, group and communicator
// calls. Each hands the call to the NCCL engine, or, while this thread is
// inside the real NCCL (which may call its own exported functions), straight
// to the real function. No exception crosses this boundary: failures become
// the ncclResult_t the caller handles. Built only on CUDA builds.
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>

#include "backends/nccl_backend.h"
#include "core/nccl/engine.h"
#include "interpose/shim_base.h"
#include "interpose/slimreduce.h"

namespace {

using slimreduce::NcclEngine;
using slimreduce::NcclHierarchy;
namespace real = slimreduce::backends::nccl;

// The NCCL side, attached on the first NCCL call: to the runtime MPI_Init
// made, or to one made now, the settings read now (a bad one ends the job
// before any collective changes, invariant 6 of docs/architecture.md, with the MPI shim's line).
[[gnu::noinline, gnu::cold]] NcclEngine& start_engine() {
  return NcclEngine::start(slimreduce::interpose::runtime_or_exit());
}

NcclEngine& engine() {
  if (NcclEngine* started = NcclEngine::get()) [[likely]]
    return *started;
  return start_engine();
}

template <class Body>
ncclResult_t guarded(Body&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return ncclSystemError;
  } catch (...) {
    return ncclInternalError;
  }
}

// Runs a real communicator-creating call, then tells the engine of the new
// communicators (settings are read first: "at comm init").
template <class Call>
ncclResult_t creating(Call&& call) {
  return guarded([&] {
    NcclEngine& e = engine();
    return call(e);
  });
}

bool created(ncclResult_t rc) { return rc == ncclSuccess || rc == ncclInProgress; }

// A split, shrink or grow: `real_call` makes *newcomm from `parent` (null for
// a rank joining a grow), which gives it its mode when there is no config.
template <class RealCall>
ncclResult_t child_of(ncclComm_t parent, ncclComm_t* newcomm, ncclConfig_t* config,
                      RealCall&& real_call) {
  return creating([&](NcclEngine& e) {
    const ncclResult_t rc = real_call();
    // A rank left out (NCCL_SPLIT_NOCOLOR) gets a null *newcomm: nothing was made.
    if (created(rc) && newcomm && *newcomm) e.comm_created(*newcomm, rc, config, parent);
    return rc;
  });
}

// Our sub-communicators of comm (SLIMREDUCE_HIERARCHICAL) end before it, the same way.
void sub_communicators_end(ncclComm_t comm, NcclHierarchy::Ending how) {
  guarded([&] {
    if (NcclEngine* e = NcclEngine::get()) e->comm_ending(comm, how);
    return ncclSuccess;
  });
}

// Destroy and abort: our sub-communicators of it first, then the real call
// (it ends the work on the communicator), then our memory of it goes.
template <class Fn>
ncclResult_t ending(Fn fn, ncclComm_t comm, bool aborted) {
  if (real::in_real_call()) return real::call(fn, comm);
  sub_communicators_end(comm,
                        aborted ? NcclHierarchy::Ending::abort : NcclHierarchy::Ending::destroy);
  const ncclResult_t rc = real::call(fn, comm);
  guarded([&] {
    if (NcclEngine* e = NcclEngine::get()) e->comm_gone(comm, aborted);
    return ncclSuccess;
  });
  return rc;
}

}  // namespace

SR_EXPORT ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                     ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                     cudaStream_t stream) {
  if (real::in_real_call()) {
    return real::call(real::api().all_reduce, sendbuff, recvbuff, count, datatype, op, comm,
                      stream);
  }
  return guarded(
      [&] { return engine().all_reduce(sendbuff, recvbuff, count, datatype, op, comm, stream); });
}

// NCCL 2.32 and later. A config that leaves every choice to NCCL makes the
// plain call; one that asks for anything passes the call through with it.
SR_EXPORT ncclResult_t ncclAllReduceConfig(const void* sendbuff, void* recvbuff, size_t count,
                                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                           cudaStream_t stream, const ncclCollConfig_t* config) {
  if (real::in_real_call()) {
    return real::call(real::api().all_reduce_config, sendbuff, recvbuff, count, datatype, op, comm,
                      stream, config);
  }
  return guarded([&] {
    return engine().all_reduce(sendbuff, recvbuff, count, datatype, op, comm, stream, config);
  });
}

SR_EXPORT ncclResult_t ncclGroupStart() {
  if (real::in_real_call()) return real::call(real::api().group_start);
  return guarded([] { return engine().group_start(); });
}

SR_EXPORT ncclResult_t ncclGroupEnd() {
  if (real::in_real_call()) return real::call(real::api().group_end);
  return guarded([] { return engine().group_end(); });
}

#if SLIMREDUCE_NCCL_HAS_SIMULATE_END
// NCCL ends the group (its depth goes down) without running it: our depth and
// held calls must follow, or every later call on the thread would be held.
SR_EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* sim_info) {
  if (real::in_real_call()) return real::call(real::api().group_simulate_end, sim_info);
  return guarded([&] { return engine().group_simulate_end(sim_info); });
}
#endif

SR_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  if (real::in_real_call()) return real::call(real::api().comm_init_rank, comm, nranks, id, rank);
  return creating([&](NcclEngine& e) {
    const ncclResult_t rc = real::call(real::api().comm_init_rank, comm, nranks, id, rank);
    if (created(rc) && comm) e.comm_created(*comm, rc, nullptr);
    return rc;
  });
}

SR_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id,
                                              int rank, ncclConfig_t* config) {
  const auto fn = real::api().comm_init_rank_config;
  if (real::in_real_call()) return real::call(fn, comm, nranks, id, rank, config);
  return creating([&](NcclEngine& e) {
    const ncclResult_t rc = real::call(fn, comm, nranks, id, rank, config);
    if (created(rc) && comm) e.comm_created(*comm, rc, config);
    return rc;
  });
}

SR_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t* comm, int nranks, int rank, int nids,
                                                ncclUniqueId* ids, ncclConfig_t* config) {
  const auto fn = real::api().comm_init_rank_scalable;
  if (real::in_real_call()) return real::call(fn, comm, nranks, rank, nids, ids, config);
  return creating([&](NcclEngine& e) {
    const ncclResult_t rc = real::call(fn, comm, nranks, rank, nids, ids, config);
    if (created(rc) && comm) e.comm_created(*comm, rc, config);
    return rc;
  });
}

SR_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  if (real::in_real_call()) return real::call(real::api().comm_init_all, comms, ndev, devlist);
  return creating([&](NcclEngine& e) {
    const ncclResult_t rc = real::call(real::api().comm_init_all, comms, ndev, devlist);
    for (int i = 0; created(rc) && comms && i < ndev; ++i) e.comm_created(comms[i], rc, nullptr);
    return rc;
  });
}

SR_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                     ncclConfig_t* config) {
  const auto fn = real::api().comm_split;
  if (real::in_real_call()) return real::call(fn, comm, color, key, newcomm, config);
  return child_of(comm, newcomm, config,
                  [&] { return real::call(fn, comm, color, key, newcomm, config); });
}

SR_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int* exclude, int nexclude,
                                      ncclComm_t* newcomm, ncclConfig_t* config, int flags) {
  const auto fn = real::api().comm_shrink;
  if (real::in_real_call()) return real::call(fn, comm, exclude, nexclude, newcomm, config, flags);
  return child_of(comm, newcomm, config,
                  [&] { return real::call(fn, comm, exclude, nexclude, newcomm, config, flags); });
}

// NCCL 2.29 and later. A rank that joins passes comm = NULL: without a config
// its communicator takes NCCL's default mode.
SR_EXPORT ncclResult_t ncclCommGrow(ncclComm_t comm, int nranks, const ncclUniqueId* id, int rank,
                                    ncclComm_t* newcomm, ncclConfig_t* config) {
  const auto fn = real::api().comm_grow;
  if (real::in_real_call()) return real::call(fn, comm, nranks, id, rank, newcomm, config);
  return child_of(comm, newcomm, config,
                  [&] { return real::call(fn, comm, nranks, id, rank, newcomm, config); });
}

SR_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  return ending(real::api().comm_destroy, comm, false);
}

SR_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  return ending(real::api().comm_abort, comm, true);
}

// Finalize flushes the communicator's work: our sub-communicators of it are
// finalized and destroyed first; our memory of it stays until destroy.
SR_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (!real::in_real_call()) sub_communicators_end(comm, NcclHierarchy::Ending::finalize);
  return real::call(real::api().comm_finalize, comm);
}

// SlimReduce's own API, NCCL side: the counters of this process's NCCL calls.
// Returns 0, or -1 before the first NCCL call.
SR_EXPORT int slimreduce_nccl_get_counters(slimreduce_counters* out) {
  const NcclEngine* e = NcclEngine::get();
  if (!e || !out) return -1;
  const slimreduce::Counters c = e->counters();
  *out = slimreduce::interpose::to_c_counters(c);
  return 0;
}
