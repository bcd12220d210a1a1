// The simulated NCCL's communicators (the rest of it: nccl_sim.cc): made by
// ncclCommInitRank* and ncclCommGrow (each an MPI_COMM_WORLD split), split or
// shrunk from a parent, destroyed and aborted, and asked about.
//
// ncclCommAbort, as NCCL's, ends the collectives of the communicator that wait
// for other ranks (from any thread): their output is left as it was, a call
// that was running its work in place answers ncclInternalError (what NCCL's
// host code answers when it finds its abort flag set), and the stream's later
// work runs. MPI cannot cancel a collective: the one cut short stays with MPI,
// with buffers of its own, and the communicator's MPI communicator is never
// freed. Point-to-point calls are not ended by an abort.
#include "tests/hostsim/nccl_sim_comms.h"

#include <mpi.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "tests/hostsim/sim.h"

namespace slimreduce::hostsim {
namespace {

// The communicators alive. Work queued on a stream holds its communicator
// too, so that a destroy or abort never frees one that work still uses.
std::mutex registry_mutex;
std::map<const ncclComm*, std::shared_ptr<ncclComm>>& registry() {
  static auto* comms =
      std::make_unique<std::map<const ncclComm*, std::shared_ptr<ncclComm>>>().release();
  return *comms;
}

// Communicators made here so far, or more: each new one's order is the
// largest of its ranks' counts, so two communicators that share ranks come in
// one order on all of them.
std::atomic<std::uint64_t> communicators_made{0};

void agree_on_order(ncclComm& comm) {
  std::uint64_t order = communicators_made.load();
  if (comm.mpi != MPI_COMM_NULL)
    MPI_Allreduce(MPI_IN_PLACE, &order, 1, MPI_UINT64_T, MPI_MAX, comm.mpi);
  comm.order = order;
  std::uint64_t seen = communicators_made.load();
  while (seen < order + 1 && !communicators_made.compare_exchange_weak(seen, order + 1)) {
  }
}

ncclComm_t keep(std::unique_ptr<ncclComm> comm) {
  agree_on_order(*comm);
  ncclComm* raw = comm.get();
  std::lock_guard lock(registry_mutex);
  registry().emplace(raw, std::move(comm));
  return raw;
}

std::atomic<std::size_t> ended_before_children{0};

// Destroy and abort. With work still queued or running on it, the
// communicator stays with that work, and so does its MPI communicator (a
// collective cut short by the abort may still use it).
ncclResult_t forget(ncclComm_t comm, bool abort) {
  std::shared_ptr<ncclComm> gone;
  {
    std::lock_guard lock(registry_mutex);
    auto it = registry().find(comm);
    if (it == registry().end()) return ncclInvalidArgument;
    for (const auto& [handle, other] : registry()) ended_before_children += other->parent == comm;
    gone = std::move(it->second);
    registry().erase(it);
  }
  if (abort) gone->aborted = true;
  if (gone.use_count() == 1 && gone->mpi != MPI_COMM_NULL) MPI_Comm_free(&gone->mpi);
  return ncclSuccess;
}

// Calls cut short by an abort: MPI still owns their requests, so their
// buffers are kept to the end of the process.
std::mutex cut_short_mutex;
std::vector<std::unique_ptr<InFlight>>& cut_short() {
  static auto* kept = std::make_unique<std::vector<std::unique_ptr<InFlight>>>().release();
  return *kept;
}

std::atomic<std::size_t> waiting{0};  // collectives waiting for other ranks now

ncclResult_t init_rank(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank,
                       const ncclConfig_t* config = nullptr) {
  if (!out || nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  auto comm = std::make_unique<ncclComm>();
  comm->rank = rank;
  comm->size = nranks;
  comm->blocking = !config || config->blocking != 0;
  if (nranks > 1) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) return ncclInvalidUsage;  // the job brings MPI_Init for several ranks
    std::uint32_t color = 0;
    std::memcpy(&color, id.internal, sizeof color);
    MPI_Comm_split(MPI_COMM_WORLD, static_cast<int>(color & INT_MAX), rank, &comm->mpi);
    int got = 0;
    MPI_Comm_size(comm->mpi, &got);
    if (got != nranks) {
      MPI_Comm_free(&comm->mpi);
      return ncclInvalidArgument;
    }
  }
  ncclComm* made = comm.get();
  *out = keep(std::move(comm));
  return taken(made);
}

}  // namespace

std::shared_ptr<ncclComm> held(const ncclComm* comm) {
  std::lock_guard lock(registry_mutex);
  auto it = registry().find(comm);
  return it == registry().end() ? nullptr : it->second;
}

bool known(const ncclComm* comm) { return held(comm) != nullptr; }

constexpr int kBusyPolls = 3;

ncclResult_t taken(ncclComm* comm) {
  if (comm->aborted) return ncclInternalError;
  if (comm->blocking) return ncclSuccess;
  comm->busy_polls = kBusyPolls;
  return ncclInProgress;
}

bool wait_unless_aborted(const ncclComm& comm, InFlight& in_flight) {
  ++waiting;
  // Polls (MPI has no blocking wait that an abort can cut short), yielding
  // at first, then sleeping a little longer each time up to 100 us: ranks
  // oversubscribe the cores, and a stream thread that spins on yield takes
  // them from the ranks it waits for.
  auto pause = std::chrono::microseconds(0);
  for (int done = 0;;) {
    MPI_Testall(static_cast<int>(in_flight.requests.size()), in_flight.requests.data(), &done,
                MPI_STATUSES_IGNORE);
    if (done) break;
    if (comm.aborted) {
      --waiting;
      {
        std::lock_guard lock(cut_short_mutex);
        cut_short().push_back(std::make_unique<InFlight>(std::move(in_flight)));
      }
      // A GPU kernel takes a while to see NCCL's abort flag: the work queued
      // after it runs that much later, so that memory freed by the aborting
      // thread without waiting for the device is gone by then, as on a GPU.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      return false;
    }
    if (pause.count() == 0) {
      std::this_thread::yield();
      pause = std::chrono::microseconds(1);
    } else {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(100));
    }
  }
  --waiting;
  return true;
}

// HOSTSIM_WIRE_NS_PER_BYTE (default 0): a link of that speed under the
// ranks, so that what a compressor saves shows in a collective's time (the
// test of SLIMREDUCE_COMPRESSOR=auto's choice). Each rank's stream holds its
// collective that long per byte it sent, after the data arrived.
void wire_time(std::size_t bytes) {
  static const double ns_per_byte = [] {
    const char* value = std::getenv("HOSTSIM_WIRE_NS_PER_BYTE");
    return value ? std::atof(value) : 0.0;
  }();
  if (ns_per_byte > 0)
    std::this_thread::sleep_for(std::chrono::nanoseconds(
        static_cast<std::int64_t>(ns_per_byte * static_cast<double>(bytes))));
}

bool gather_all(const ncclComm& comm, const void* send, std::size_t bytes,
                std::vector<std::byte>& all) {
  if (comm.size == 1) {
    all.assign(static_cast<const std::byte*>(send), static_cast<const std::byte*>(send) + bytes);
    return true;
  }
  InFlight gather;
  gather.buffers.emplace_back(static_cast<const std::byte*>(send),
                              static_cast<const std::byte*>(send) + bytes);
  gather.buffers.emplace_back(bytes * comm.size);
  MPI_Request& request = gather.requests.emplace_back();
  MPI_Iallgather(gather.buffers[0].data(), static_cast<int>(bytes), MPI_BYTE,
                 gather.buffers[1].data(), static_cast<int>(bytes), MPI_BYTE, comm.mpi, &request);
  if (!wait_unless_aborted(comm, gather)) return false;
  all = std::move(gather.buffers[1]);
  wire_time(bytes);
  return true;
}

std::size_t nccl_collectives_waiting() { return waiting; }

std::size_t nccl_comms_ended_before_their_splits() { return ended_before_children; }

std::size_t nccl_comms_alive() {
  std::lock_guard lock(registry_mutex);
  return registry().size();
}

}  // namespace slimreduce::hostsim

namespace sim = slimreduce::hostsim;

extern "C" {

const char* ncclGetErrorString(ncclResult_t rc) {
  return rc == ncclSuccess ? "no error" : "NCCL error (host simulation)";
}
const char* ncclGetLastError(ncclComm_t) { return ""; }
ncclResult_t ncclGetVersion(int* version) {
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  static std::atomic<std::uint32_t> counter{0};
  std::memset(id->internal, 0, sizeof id->internal);
  const std::uint32_t tag = (static_cast<std::uint32_t>(getpid()) << 8) ^ ++counter;
  std::memcpy(id->internal, &tag, sizeof tag);
  return ncclSuccess;
}
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return sim::init_rank(comm, nranks, id, rank);
}
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t* config) {
  return sim::init_rank(comm, nranks, id, rank, config);
}
ncclResult_t ncclCommInitRankScalable(ncclComm_t* comm, int nranks, int rank, int nIds,
                                      ncclUniqueId* ids, ncclConfig_t* config) {
  if (nIds < 1 || !ids) return ncclInvalidArgument;
  return sim::init_rank(comm, nranks, ids[0], rank, config);
}
// As NCCL's (init.cc), inside a group opened and closed by its exported
// ncclGroupStart/End: under LD_PRELOAD those reach SlimReduce's first, whose
// re-entry guard hands them straight to NCCL (without the guard the engine
// would open and close an empty group of its own around them: no test here
// can tell the two apart).
ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  if (ndev != 1 || (devlist && devlist[0] != 0)) return ncclInvalidArgument;  // one device
  ncclUniqueId id{};
  if (const ncclResult_t rc = ncclGroupStart(); rc != ncclSuccess) return rc;
  const ncclResult_t rc = sim::init_rank(&comms[0], 1, id, 0);
  const ncclResult_t end = ncclGroupEnd();
  return rc != ncclSuccess ? rc : end;
}
#ifndef HOSTSIM_NCCL_WITHOUT_SPLIT  // defined: an NCCL before 2.18, which had no split
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  if (!sim::known(comm) || !newcomm) return ncclInvalidArgument;
  *newcomm = nullptr;
  auto made = std::make_unique<ncclComm>();
  if (comm->size == 1) {
    if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;
  } else {
    MPI_Comm_split(comm->mpi, color == NCCL_SPLIT_NOCOLOR ? MPI_UNDEFINED : color, key, &made->mpi);
    if (made->mpi == MPI_COMM_NULL) return ncclSuccess;
    MPI_Comm_rank(made->mpi, &made->rank);
    MPI_Comm_size(made->mpi, &made->size);
    if (made->size == 1) MPI_Comm_free(&made->mpi);
  }
  made->blocking = config ? config->blocking != 0 : comm->blocking;  // inherited, as in NCCL
  made->parent = comm;
  ncclComm* child = made.get();
  *newcomm = sim::keep(std::move(made));
  return sim::taken(child);
}
#endif
// The parent's ranks but the excluded ones, in their order. As in NCCL, only
// the ranks that stay call it: MPI_Comm_create_group involves them alone.
ncclResult_t ncclCommShrink(ncclComm_t comm, int* exclude, int nexclude, ncclComm_t* newcomm,
                            ncclConfig_t* config, int) {
  if (!sim::known(comm) || !newcomm || nexclude < 0 || (nexclude > 0 && !exclude))
    return ncclInvalidArgument;
  *newcomm = nullptr;
  const std::set<int> excluded(exclude, exclude + nexclude);
  if (excluded.size() != static_cast<std::size_t>(nexclude) || excluded.count(comm->rank) ||
      *excluded.begin() < 0 || *excluded.rbegin() >= comm->size || nexclude >= comm->size)
    return ncclInvalidArgument;
  auto made = std::make_unique<ncclComm>();
  made->size = comm->size - nexclude;
  made->rank = comm->rank -
               static_cast<int>(std::distance(excluded.begin(), excluded.lower_bound(comm->rank)));
  if (made->size > 1) {
    MPI_Group parent, kept;
    MPI_Comm_group(comm->mpi, &parent);
    MPI_Group_excl(parent, nexclude, exclude, &kept);
    MPI_Comm_create_group(comm->mpi, kept, 0, &made->mpi);
    MPI_Group_free(&kept);
    MPI_Group_free(&parent);
  }
  made->blocking = config ? config->blocking != 0 : comm->blocking;  // inherited, as in NCCL
  ncclComm* child = made.get();
  *newcomm = sim::keep(std::move(made));
  return sim::taken(child);
}
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* id) {
  return sim::known(comm) ? ncclGetUniqueId(id) : ncclInvalidArgument;
}
// Ranks already in `comm` keep their numbers and new ones take theirs. Limit:
// the grown communicator spans MPI_COMM_WORLD (it is split from it).
ncclResult_t ncclCommGrow(ncclComm_t comm, int nranks, const ncclUniqueId* id, int rank,
                          ncclComm_t* newcomm, ncclConfig_t* config) {
  if (!newcomm || (comm && (!sim::known(comm) || rank != -1 || nranks <= comm->size)) ||
      (!comm && (!id || rank < 0 || rank >= nranks)))
    return ncclInvalidArgument;
  *newcomm = nullptr;
  auto made = std::make_unique<ncclComm>();
  made->size = nranks;
  made->rank = comm ? comm->rank : rank;
  MPI_Comm_split(MPI_COMM_WORLD, 0, made->rank, &made->mpi);
  int got = 0;
  MPI_Comm_size(made->mpi, &got);
  if (got != nranks) {
    MPI_Comm_free(&made->mpi);
    return ncclInvalidArgument;
  }
  made->blocking = config ? config->blocking != 0 : !comm || comm->blocking;
  ncclComm* grown = made.get();
  *newcomm = sim::keep(std::move(made));
  return sim::taken(grown);
}
ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  return sim::known(comm) ? ncclSuccess : ncclInvalidArgument;
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) { return sim::forget(comm, false); }
ncclResult_t ncclCommAbort(ncclComm_t comm) { return sim::forget(comm, true); }
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* state) {
  if (!sim::known(comm)) return ncclInvalidArgument;
  *state = comm->busy_polls > 0 && comm->busy_polls-- > 0 ? ncclInProgress : ncclSuccess;
  return ncclSuccess;
}
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (!sim::known(comm)) return ncclInvalidArgument;
  *count = comm->size;
  return ncclSuccess;
}
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (!sim::known(comm)) return ncclInvalidArgument;
  *rank = comm->rank;
  return ncclSuccess;
}
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (!sim::known(comm)) return ncclInvalidArgument;
  *device = 0;
  return ncclSuccess;
}

}  // extern "C"
