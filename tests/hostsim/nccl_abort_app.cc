// ncclCommAbort from another thread while a compressed ncclAllReduce is in
// flight (docs/reliability.md), on the host simulation, several ranks under
// mpirun. Every rank has two communicators, A and B, and makes a compressed
// call on each, checked. Then rank 0 alone calls on A (the others never
// will): its call waits for them, inside ncclAllReduce (streams run in
// place) or on the stream's thread (the default, as on a GPU; HOSTSIM_ASYNC=0: in place). A
// watchdog thread of rank 0 sees the simulated collective waiting and aborts
// A. The call must end: in place, with NCCL's error for an abort
// (ncclInternalError) coming back through SlimReduce; on the stream, the call
// returned (ncclSuccess, or an error where the abort came while SlimReduce was
// still issuing its collectives) and the stream's later work (SlimReduce's
// kernels after the collective, which read its workspace of A) ends, with that
// memory still there (a simulated kernel aborts the process on memory that is
// not live device memory). The other ranks abort A too, unused; then every
// rank reduces on B and on a communicator made after the abort, checked bit
// for bit against the model, and compressed. A hang fails by the test's timeout.
// With SLIMREDUCE_HIERARCHICAL=1 and SLIMREDUCE_LOCAL_SIZE (emulated nodes)
// every communicator reduces hierarchically: the aborted call then waits in
// its node's step, and the abort must end the node and cross-node
// sub-communicators SlimReduce split from A as well.
// Exit 0: all passed; 1: a check failed.
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "tests/hostsim/nccl_ranks_job.h"

using namespace ranks_job;

namespace {

// The emulated node size where SLIMREDUCE_HIERARCHICAL=1 splits a
// communicator of `size` ranks into nodes (several, of more than one rank
// each: core/runtime/node_split.h), else 0: the model's local_size.
int hierarchical_local_size(int size) {
  if (sim::env_or("SLIMREDUCE_HIERARCHICAL", "0") != "1") return 0;
  const int local = std::atoi(sim::env_or("SLIMREDUCE_LOCAL_SIZE", "0").c_str());
  return local > 1 && size % local == 0 && size / local > 1 ? local : 0;
}

// One fp32 sum on comm, checked against the model (hierarchical where the
// library reduces so), and taken as eligible.
void reduce_checked(Comm& comm, const std::string& what, float* send, float* recv, std::size_t n,
                    cudaStream_t stream) {
  const std::uint64_t before = eligible_count();
  Call c = prepare(comm, send, recv, n, ncclFloat32, ncclSum, stream);
  c.model.local_size = hierarchical_local_size(comm.size);
  issue(c);
  verify(what.c_str(), c);
  expect(eligible_count() > before, what + ": taken as eligible");
}

constexpr std::size_t kCount = 262144;  // 1 MiB of floats: compressed (SLIMREDUCE_MIN_BYTES=64K)

// Rank 0's call on A that no other rank joins, aborted by a watchdog thread.
void call_aborted(Comm& a, float* send, float* recv, cudaStream_t stream) {
  Call c = prepare(a, send, recv, kCount, ncclFloat32, ncclSum, stream);  // every rank: the seeds
  if (world_rank != 0) return;
  const std::uint64_t compressed_before = counters_now().compressed;
  // The call cannot end before the abort: no other rank ever joins it.
  ncclResult_t abort_rc = ncclSuccess;
  std::thread watchdog([&] {
    while (sim::nccl_collectives_waiting() == 0) std::this_thread::yield();
    abort_rc = ncclCommAbort(a.nccl);
  });
  const ncclResult_t rc =
      ncclAllReduce(c.send, c.recv, kCount, ncclFloat32, ncclSum, a.nccl, stream);
  const bool in_place = sim::env_or("HOSTSIM_ASYNC", "1") == "0";
  if (in_place) {
    expect(rc == ncclInternalError,
           "the call in flight when A was aborted returns ncclInternalError (rc " +
               std::to_string(rc) + ")");
  } else {
    // Taken, or (the abort came while SlimReduce was still issuing the call's
    // collectives) the simulated NCCL's error for an aborted or unknown communicator.
    expect(rc == ncclSuccess || rc == ncclInternalError || rc == ncclInvalidArgument,
           "the call on A was taken, or ended by the abort (rc " + std::to_string(rc) + ")");
    expect(cudaStreamSynchronize(stream) == cudaSuccess,
           "the stream's work after the aborted collective ends");
  }
  watchdog.join();
  expect(abort_rc == ncclSuccess, "ncclCommAbort from the watchdog thread");
  expect(counters_now().compressed == compressed_before + 1, "the aborted call was compressed");
  a.nccl = nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  // Threads: the watchdog, and unless HOSTSIM_ASYNC=0 the streams' threads.
  start_job(&argc, &argv);
  CHECK(mode.compressor != "none", "a compressor");
  Comm a = make_world_comm();
  Comm b = make_world_comm();
  cudaStream_t stream = nullptr, other = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  float *send = nullptr, *recv = nullptr;
  CUDA_OK(cudaMalloc(&send, kCount * 4));
  CUDA_OK(cudaMalloc(&recv, kCount * 4));
  if (world_rank == 0)
    std::printf("compressor %s, %d ranks, streams %s, %s\n", mode.compressor.c_str(), a.size,
                sim::env_or("HOSTSIM_ASYNC", "1") == "0" ? "in place" : "on threads",
                hierarchical_local_size(a.size) ? "hierarchical" : "flat");

  reduce_checked(a, "A before the abort", send, recv, kCount, stream);
  reduce_checked(b, "B before the abort", send, recv, kCount, other);
  const auto started = std::chrono::steady_clock::now();
  call_aborted(a, send, recv, stream);
  if (a.nccl) NCCL_OK(ncclCommAbort(a.nccl));  // the other ranks: A unused since
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank == 0) std::printf("rank 0: the aborted call ended after %.3f s\n", took);

  reduce_checked(b, "B after the abort", send, recv, kCount, other);
  reduce_checked(b, "B after the abort, on A's stream", send, recv, kCount, stream);
  Comm c = make_world_comm();
  reduce_checked(c, "a communicator made after the abort", send, recv, kCount, stream);
  NCCL_OK(ncclCommDestroy(c.nccl));
  NCCL_OK(ncclCommDestroy(b.nccl));
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaFree(send));
  CUDA_OK(cudaFree(recv));
  return finish_job();
}
