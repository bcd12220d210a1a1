// An NCCL that runs on the host, for the host simulation of the GPU path: the
// collectives SlimReduce issues or passes on (ncclAllReduce and
// ncclAllReduceConfig, ncclAllGather, ncclReduceScatter, ncclSend and ncclRecv),
// groups, and the communicator
// lifecycle, carried by MPI between processes (one process per rank, under
// mpirun) and by nothing at all for one rank. Collectives run
// on the simulated runtime's streams, so they are recorded under capture and
// held until the outermost ncclGroupEnd inside a group, as NCCL holds them,
// then launched together (launch_together).
// Reductions add in rank order, rounding each step to the element type, so
// every rank gets the same bits (a real NCCL's order differs; the tests that
// run here check sums that do not depend on it, or with a tolerance).
// A non-blocking communicator (ncclConfig_t.blocking = 0) answers
// ncclInProgress where a real one may, so that a job must poll it.
// Limits: ncclCommInitRank and ncclCommGrow split MPI_COMM_WORLD (by the
// unique id; a grown communicator spans it), so every process makes each such
// communicator; splits and shrinks come from their parent; one device (0),
// one thread per communicator; fp8 types are refused. Built with
// HOSTSIM_NCCL_WITHOUT_SPLIT, it has no ncclCommSplit, as NCCL before 2.18.
// The communicators, their lifecycle and abort: nccl_sim_comms.cc.
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "backends/nccl_compat.h"
#include "kernels/element_rules.h"
#include "tests/hostsim/nccl_sim_comms.h"
#include "tests/hostsim/sim.h"

namespace slimreduce::hostsim {
namespace {

namespace k = kernels;

// ncclRedOpCreatePreMulSum's ops (fp32 only here): the scalar, read when the call runs.
struct PreMulSum {
  const float* scalar;
  float immediate;
};
std::mutex ops_mutex;
std::map<int, PreMulSum> premul_ops;

bool premul_of(ncclRedOp_t op, float* scalar) {
  std::lock_guard lock(ops_mutex);
  auto it = premul_ops.find(static_cast<int>(op));
  if (it == premul_ops.end()) return false;
  *scalar = it->second.scalar ? *it->second.scalar : it->second.immediate;
  return true;
}

// One ncclSend or ncclRecv.
struct P2p {
  bool send;
  void* buffer;
  std::size_t bytes;
  int peer;
};
// A collective held until the group ends, or a group's point-to-point calls
// on one communicator and stream, which run together as NCCL runs them.
struct Pending {
  cudaStream_t stream;
  std::function<void()> work;
  std::shared_ptr<ncclComm> comm;
  std::vector<P2p> p2p;
};
thread_local int group_depth = 0;
thread_local std::vector<Pending> pending;

std::size_t type_bytes(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;  // fp8 and unknown: refused
  }
}

template <class W>
W apply(ncclRedOp_t op, W a, W b) {
  switch (op) {
    case ncclProd:
      return a * b;
    case ncclMax:
      return a < b ? b : a;
    case ncclMin:
      return b < a ? b : a;
    default:
      return a + b;  // ncclSum, ncclAvg
  }
}

// out[i] = rank 0's value, op rank 1's, ... each step rounded to T; ncclAvg
// divides the sum by the rank count at the end.
template <class T, class W, class Widen, class Narrow>
void reduce(void* out, const std::vector<std::byte>& all, int ranks, std::size_t count,
            ncclRedOp_t op, Widen widen, Narrow narrow) {
  const auto* values = reinterpret_cast<const T*>(all.data());
  auto* result = static_cast<T*>(out);
  for (std::size_t i = 0; i < count; ++i) {
    W acc = widen(values[i]);
    for (int r = 1; r < ranks; ++r)
      acc = widen(narrow(apply<W>(op, acc, widen(values[r * count + i]))));
    result[i] = narrow(op == ncclAvg ? acc / static_cast<W>(ranks) : acc);
  }
}

template <class T>
void reduce_plain(void* out, const std::vector<std::byte>& all, int ranks, std::size_t count,
                  ncclRedOp_t op) {
  reduce<T, T>(
      out, all, ranks, count, op, [](T v) { return v; }, [](T v) { return v; });
}

void reduce_any(ncclDataType_t type, void* out, const std::vector<std::byte>& all, int ranks,
                std::size_t count, ncclRedOp_t op) {
  if (float scalar = 0; op >= ncclNumOps && premul_of(op, &scalar)) {  // fp32: checked at the call
    const auto* values = reinterpret_cast<const float*>(all.data());
    auto* result = static_cast<float*>(out);
    for (std::size_t i = 0; i < count; ++i) {
      float acc = scalar * values[i];
      for (int r = 1; r < ranks; ++r) acc = acc + scalar * values[r * count + i];
      result[i] = acc;
    }
    return;
  }
  switch (type) {
    case ncclInt8:
      return reduce_plain<std::int8_t>(out, all, ranks, count, op);
    case ncclUint8:
      return reduce_plain<std::uint8_t>(out, all, ranks, count, op);
    case ncclInt32:
      return reduce_plain<std::int32_t>(out, all, ranks, count, op);
    case ncclUint32:
      return reduce_plain<std::uint32_t>(out, all, ranks, count, op);
    case ncclInt64:
      return reduce_plain<std::int64_t>(out, all, ranks, count, op);
    case ncclUint64:
      return reduce_plain<std::uint64_t>(out, all, ranks, count, op);
    case ncclFloat32:
      return reduce_plain<float>(out, all, ranks, count, op);
    case ncclFloat64:
      return reduce_plain<double>(out, all, ranks, count, op);
    case ncclFloat16:
      return reduce<std::uint16_t, float>(out, all, ranks, count, op, k::fp16_bits_to_float,
                                          k::float_to_fp16_bits);
    case ncclBfloat16:
      return reduce<std::uint16_t, float>(out, all, ranks, count, op, k::bf16_bits_to_float,
                                          k::float_to_bf16_bits);
    default:
      return;
  }
}

// Runs `work` on `stream` now, or at the outermost ncclGroupEnd. As in NCCL
// (enqueue.cc, taskAppend: its one-rank path), a one-rank communicator's
// collective is enqueued at once, even inside a group.
// The work holds the communicator until it has run.
ncclResult_t submit(ncclComm_t handle, cudaStream_t stream, std::function<void(ncclComm&)> work) {
  std::shared_ptr<ncclComm> comm = held(handle);
  if (!comm) return ncclInvalidArgument;
  std::function<void()> bound = [comm, work = std::move(work)] { work(*comm); };
  if (group_depth > 0 && comm->size > 1) {
    pending.push_back({stream, std::move(bound), comm, {}});
    return ncclSuccess;
  }
  enqueue(stream, std::move(bound));
  return taken(comm.get());
}

// Runs point-to-point calls together: every receive and send posted, then
// all awaited, unless the communicator is aborted meanwhile (then nothing is
// received). One rank: its sends go to its receives, in call order.
void run_p2p(const ncclComm& comm, const std::vector<P2p>& calls) {
  std::vector<std::byte*> buffers;  // where the device reaches each call's bytes
  for (const P2p& call : calls) {
    buffers.push_back(static_cast<std::byte*>(
        on_device(call.send ? "ncclSend sendbuff" : "ncclRecv recvbuff", call.buffer, call.bytes)));
  }
  if (comm.size == 1) {
    std::vector<std::size_t> sends, recvs;
    for (std::size_t i = 0; i < calls.size(); ++i) (calls[i].send ? sends : recvs).push_back(i);
    for (std::size_t i = 0; i < sends.size() && i < recvs.size(); ++i) {
      std::memcpy(buffers[recvs[i]], buffers[sends[i]],
                  std::min(calls[sends[i]].bytes, calls[recvs[i]].bytes));
    }
    return;
  }
  // Buffers of their own: an abort may leave MPI holding them past the call.
  InFlight in_flight;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    std::vector<std::byte>& staged = in_flight.buffers.emplace_back(calls[i].bytes);
    if (calls[i].send) std::copy(buffers[i], buffers[i] + calls[i].bytes, staged.begin());
  }
  for (std::size_t i = 0; i < calls.size(); ++i) {
    MPI_Request& request = in_flight.requests.emplace_back();
    const int bytes = static_cast<int>(calls[i].bytes);
    void* staged = in_flight.buffers[i].data();
    if (calls[i].send) {
      MPI_Isend(staged, bytes, MPI_BYTE, calls[i].peer, 0, comm.mpi, &request);
    } else {
      MPI_Irecv(staged, bytes, MPI_BYTE, calls[i].peer, 0, comm.mpi, &request);
    }
  }
  if (!wait_unless_aborted(comm, in_flight)) return;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (!calls[i].send)
      std::copy(in_flight.buffers[i].begin(), in_flight.buffers[i].end(), buffers[i]);
  }
}

// A group's calls, launched as NCCL launches them: one launch after every
// stream they name has reached the group's end, which holds each of those
// streams until it is done. NCCL's one kernel progresses every call at once,
// so the ranks may order calls on different communicators differently; here
// each communicator's calls run in their order, communicator by communicator
// in the order their ranks agreed on (ncclComm::order), which has the same
// outcome without threads inside MPI.
void launch_together(std::vector<Pending> group) {
  std::vector<cudaStream_t> streams;
  for (const Pending& p : group) {
    if (std::find(streams.begin(), streams.end(), p.stream) == streams.end())
      streams.push_back(p.stream);
  }
  std::stable_sort(group.begin(), group.end(), [](const Pending& a, const Pending& b) {
    return a.comm->order < b.comm->order;
  });
  std::vector<std::function<void()>> works;
  for (Pending& p : group) works.push_back(std::move(p.work));
  enqueue_joined(streams, [works = std::move(works)] {
    for (const auto& work : works) work();
  });
}

// ncclSend and ncclRecv: at once outside a group; inside one, joined to the
// group's other point-to-point calls on the same communicator and stream.
ncclResult_t submit_p2p(ncclComm_t handle, cudaStream_t stream, P2p call) {
  std::shared_ptr<ncclComm> comm = held(handle);
  if (!comm || call.peer < 0 || call.peer >= comm->size || call.bytes > INT_MAX)
    return ncclInvalidArgument;
  if (group_depth > 0) {  // one rank too: its send and receive meet at the group's end
    for (Pending& p : pending) {
      if (p.comm == comm && p.stream == stream && !p.p2p.empty()) {
        p.p2p.push_back(call);
        return ncclSuccess;
      }
    }
    pending.push_back({stream, {}, comm, {call}});
    return ncclSuccess;
  }
  enqueue(stream, [comm, call] { run_p2p(*comm, {call}); });
  return taken(comm.get());
}

// ncclAllReduce, and ncclAllReduceConfig, whose config changes nothing here.
ncclResult_t all_reduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                        ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  const std::size_t bytes = count * type_bytes(type);
  float scalar = 0;
  const bool premul = op >= ncclNumOps && premul_of(op, &scalar) && type == ncclFloat32;
  if (!known(comm) || type_bytes(type) == 0 || op < ncclSum || (op > ncclAvg && !premul) ||
      bytes > INT_MAX) {
    return ncclInvalidArgument;
  }
  return submit(comm, stream, [=](ncclComm& c) mutable {
    send = on_device("ncclAllReduce sendbuff", send, bytes);
    recv = on_device("ncclAllReduce recvbuff", recv, bytes);
    if (std::vector<std::byte> all; gather_all(c, send, bytes, all))
      reduce_any(type, recv, all, c.size, count, op);
  });
}

std::atomic<std::size_t> configs_received{0};
std::atomic<std::size_t> all_reduces_received{0};

struct Corruption {
  std::mutex mutex;
  bool armed = false;
  std::size_t offset = 0;
  std::uint32_t bytes = 0;
};
Corruption& corruption() {
  static Corruption c;
  return c;
}

}  // namespace

bool take_unused_corruption() {
  std::lock_guard lock(corruption().mutex);
  return std::exchange(corruption().armed, false);
}

void corrupt_next_allgather(std::size_t offset, std::uint32_t bytes) {
  std::lock_guard lock(corruption().mutex);
  corruption().armed = true;
  corruption().offset = offset;
  corruption().bytes = bytes;
}

std::size_t nccl_configs_received() { return configs_received; }
std::size_t nccl_all_reduces_received() { return all_reduces_received; }

}  // namespace slimreduce::hostsim

namespace sim = slimreduce::hostsim;

extern "C" {

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  ++sim::all_reduces_received;
  return sim::all_reduce(send, recv, count, type, op, comm, stream);
}

// The config is checked as NCCL checks it (made by NCCL_COLLCONFIG_INITIALIZER)
// and counted; its tuning means nothing on the host.
ncclResult_t ncclAllReduceConfig(const void* send, void* recv, size_t count, ncclDataType_t type,
                                 ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
                                 const ncclCollConfig_t* config) {
  if (config) {
    if (config->size != sizeof *config || config->magic != slimreduce::kNcclApiMagic)
      return ncclInvalidArgument;
    ++sim::configs_received;
  }
  ++sim::all_reduces_received;
  return sim::all_reduce(send, recv, count, type, op, comm, stream);
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t type,
                           ncclComm_t comm, cudaStream_t stream) {
  const std::size_t bytes = count * sim::type_bytes(type);
  if (!sim::known(comm) || sim::type_bytes(type) == 0 || bytes > INT_MAX)
    return ncclInvalidArgument;
  std::optional<std::pair<std::size_t, std::uint32_t>> corrupt;
  {
    std::lock_guard lock(sim::corruption().mutex);
    if (std::exchange(sim::corruption().armed, false))
      corrupt.emplace(sim::corruption().offset, sim::corruption().bytes);
  }
  return sim::submit(comm, stream, [=](ncclComm& c) mutable {
    send = sim::on_device("ncclAllGather sendbuff", send, bytes);
    recv = sim::on_device("ncclAllGather recvbuff", recv, bytes * c.size);
    if (std::vector<std::byte> all; sim::gather_all(c, send, bytes, all)) {
      if (corrupt && c.size > 1 && corrupt->first + 4 <= bytes)
        std::memcpy(all.data() + bytes + corrupt->first, &corrupt->second, 4);
      std::memcpy(recv, all.data(), all.size());
    }
  });
}

// Every rank's sendbuff holds size blocks of count elements; this rank's
// block of the sum, added in rank order as ncclAllReduce's.
ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, ncclDataType_t type,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  const std::size_t block = count * sim::type_bytes(type);
  if (!sim::known(comm) || sim::type_bytes(type) == 0 || op < ncclSum || op > ncclAvg ||
      block * comm->size > INT_MAX) {
    return ncclInvalidArgument;
  }
  return sim::submit(comm, stream, [=](ncclComm& c) mutable {
    send = sim::on_device("ncclReduceScatter sendbuff", send, block * c.size);
    recv = sim::on_device("ncclReduceScatter recvbuff", recv, block);
    std::vector<std::byte> all;
    if (!sim::gather_all(c, send, block * c.size, all)) return;
    std::vector<std::byte> mine(block * c.size);  // each rank's block for this rank
    for (int source = 0; source < c.size; ++source) {
      std::memcpy(mine.data() + source * block,
                  all.data() + (std::size_t(source) * c.size + c.rank) * block, block);
    }
    sim::reduce_any(type, recv, mine, c.size, count, op);
  });
}

ncclResult_t ncclSend(const void* send, size_t count, ncclDataType_t type, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  const std::size_t bytes = count * sim::type_bytes(type);
  if (sim::type_bytes(type) == 0) return ncclInvalidArgument;
  return sim::submit_p2p(comm, stream, {true, const_cast<void*>(send), bytes, peer});
}

ncclResult_t ncclRecv(void* recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  const std::size_t bytes = count * sim::type_bytes(type);
  if (sim::type_bytes(type) == 0) return ncclInvalidArgument;
  return sim::submit_p2p(comm, stream, {false, recv, bytes, peer});
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t type,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  if (!sim::known(comm) || type != ncclFloat32 || !scalar) return ncclInvalidArgument;
  static std::atomic<int> next{ncclNumOps};
  const bool on_device = residence == ncclScalarDevice;
  const sim::PreMulSum made{on_device ? static_cast<const float*>(scalar) : nullptr,
                            on_device ? 0.0f : *static_cast<const float*>(scalar)};
  *op = static_cast<ncclRedOp_t>(next++);
  std::lock_guard lock(sim::ops_mutex);
  sim::premul_ops.emplace(static_cast<int>(*op), made);
  return ncclSuccess;
}
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t) {
  std::lock_guard lock(sim::ops_mutex);
  return sim::premul_ops.erase(static_cast<int>(op)) ? ncclSuccess : ncclInvalidArgument;
}

ncclResult_t ncclGroupStart() {
  ++sim::group_depth;
  return ncclSuccess;
}
ncclResult_t ncclGroupEnd() {
  if (sim::group_depth == 0) return ncclInvalidUsage;
  if (--sim::group_depth > 0) return ncclSuccess;
  std::vector<sim::Pending> group = std::exchange(sim::pending, {});
  if (group.empty()) return ncclSuccess;
  std::vector<std::shared_ptr<ncclComm>> comms;
  for (sim::Pending& p : group) {
    if (!p.p2p.empty()) {
      p.work = [comm = p.comm, calls = std::move(p.p2p)] { sim::run_p2p(*comm, calls); };
    }
    comms.push_back(p.comm);
  }
  sim::launch_together(std::move(group));  // HOSTSIM_ASYNC=0: run by now
  ncclResult_t rc = ncclSuccess;
  for (const auto& comm : comms) {
    if (const ncclResult_t answer = sim::taken(comm.get());
        answer != ncclSuccess && rc == ncclSuccess)
      rc = answer;
  }
  return rc;
}
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* info) {
  if (sim::group_depth == 0) return ncclInvalidUsage;
  if (--sim::group_depth == 0) sim::pending.clear();  // estimated, never run
  if (info) info->estimatedTime = 0.0f;
  return ncclSuccess;
}

}  // extern "C"
