// The simulated NCCL's communicators (nccl_sim_comms.cc), shared by its
// collectives (nccl_sim.cc). Tests only.
#pragma once

#include <mpi.h>
#include <nccl.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

struct ncclComm {
  MPI_Comm mpi = MPI_COMM_NULL;  // MPI_COMM_NULL for one rank
  int rank = 0;
  int size = 1;
  // Non-blocking (config.blocking = 0): its init, its calls and a group end
  // that holds one answer ncclInProgress, and ncclCommGetAsyncError answers
  // ncclInProgress a few more times before ncclSuccess, as a real one may.
  bool blocking = true;
  std::atomic<int> busy_polls{0};
  const ncclComm* parent = nullptr;  // the communicator ncclCommSplit made it from
  std::atomic<bool> aborted{false};  // by ncclCommAbort: its waiting collectives end
  // Its place in an order of communicators that its ranks agree on (the
  // largest of their counts of communicators made before it): a group's
  // calls run communicator by communicator in this order (launch_together).
  std::uint64_t order = 0;
};

namespace slimreduce::hostsim {

// The communicator while it is alive (not destroyed or aborted), or nullptr.
// Work on a stream holds it, so that a destroy or abort never frees it under
// that work.
std::shared_ptr<ncclComm> held(const ncclComm* comm);
bool known(const ncclComm* comm);

// What a call on comm answers once it has been taken: an error if an abort
// ended it while it ran in place (no stream thread, no capture).
ncclResult_t taken(ncclComm* comm);

// Every rank's `bytes` from send, rank after rank (one rank: just its own),
// into all; false if comm was aborted while this waited for the other ranks.
bool gather_all(const ncclComm& comm, const void* send, std::size_t bytes,
                std::vector<std::byte>& all);

// MPI requests posted on comm's MPI communicator for one NCCL call, on
// buffers of their own (MPI writes or reads them until they complete).
struct InFlight {
  std::vector<std::vector<std::byte>> buffers;
  std::vector<MPI_Request> requests;
};
// Waits for them, counted as a collective waiting, as NCCL's kernels wait;
// false if comm is aborted meanwhile: an abort ends point-to-point calls as it
// ends collectives (the requests and their buffers are then kept to the end
// of the process: MPI still owns them).
bool wait_unless_aborted(const ncclComm& comm, InFlight& in_flight);

}  // namespace slimreduce::hostsim
