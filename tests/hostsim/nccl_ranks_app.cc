// A job of several ranks (under mpirun) that calls ncclAllReduce as training
// frameworks do, on the host simulation of the GPU path: a few steps of
// gradient buckets in groups (sum and average), calls on two communicators in
// one group, a split communicator of another size, communicators made by
// scalable init, shrink and grow, graph capture and replay,
// calls that must pass through, and a communicator destroyed and made again.
// Every rank can make every rank's inputs (seeded by call and rank), so each
// checks its result bit for bit against the model of reference_model.h.
// Exit 0: all passed; 1: a check failed.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backends/nccl_compat.h"
#include "interpose/slimreduce.h"
#include "kernels/element_rules.h"
#include "tests/hostsim/reference_model.h"
#include "tests/hostsim/sim.h"

namespace {

namespace k = slimreduce::kernels;

#define CHECK(ok, what)                                         \
  do {                                                          \
    if (!(ok)) {                                                \
      std::printf("FAIL %s:%d %s\n", __FILE__, __LINE__, what); \
      MPI_Abort(MPI_COMM_WORLD, 1);                             \
    }                                                           \
  } while (0)
#define CUDA_OK(x) CHECK((x) == cudaSuccess, #x)
#define NCCL_OK(x) CHECK((x) == ncclSuccess, #x)

namespace sim = slimreduce::hostsim;

const sim::Mode mode;
sim::Model model(mode);
int failures = 0;
int checks = 0;
int world_rank = 0;

// A communicator as the job and the model see it.
struct Comm {
  ncclComm_t nccl = nullptr;
  int rank = 0;
  int size = 1;
  int id = 0;  // the model's name for it: a new one for each made
};

// One call: where it goes, and every rank's input (in the communicator's rank order).
struct Call {
  Comm* comm;
  float* send;
  float* recv;
  cudaStream_t stream;
  sim::ModelCall model;
};

// ---- the job ---------------------------------------------------------------------------

unsigned next_call = 0;

// Writes this rank's input for the call into c.send (as the call's type).
Call prepare(Comm& comm, float* send, float* recv, std::size_t n, ncclDataType_t type,
             ncclRedOp_t op, cudaStream_t stream) {
  Call c{&comm, send, recv, stream, {comm.id, comm.size, recv, n, type, op, {}}};
  const unsigned call = next_call++;
  for (int r = 0; r < comm.size; ++r) c.model.inputs.push_back(sim::values_for(call, r, n, type));
  const std::vector<float>& mine = c.model.inputs[comm.rank];
  if (type == ncclFloat32) {
    CUDA_OK(cudaMemcpyAsync(send, mine.data(), n * 4, cudaMemcpyHostToDevice, stream));
  } else {
    std::vector<std::uint16_t> half(n);
    for (std::size_t i = 0; i < n; ++i)
      half[i] =
          type == ncclFloat16 ? k::float_to_fp16_bits(mine[i]) : k::float_to_bf16_bits(mine[i]);
    CUDA_OK(cudaMemcpyAsync(send, half.data(), n * 2, cudaMemcpyHostToDevice, stream));
  }
  return c;
}

void issue(const Call& c) {
  NCCL_OK(
      ncclAllReduce(c.send, c.recv, c.model.n, c.model.type, c.model.op, c.comm->nccl, c.stream));
}

// Reads what came back (widened from a 16-bit type) into fp32.
std::vector<float> read_back(const Call& c) {
  const std::size_t n = c.model.n;
  std::vector<float> got(n);
  if (c.model.type == ncclFloat32) {
    CUDA_OK(cudaMemcpyAsync(got.data(), c.recv, n * 4, cudaMemcpyDeviceToHost, c.stream));
    CUDA_OK(cudaStreamSynchronize(c.stream));
    return got;
  }
  std::vector<std::uint16_t> half(n);
  CUDA_OK(cudaMemcpyAsync(half.data(), c.recv, n * 2, cudaMemcpyDeviceToHost, c.stream));
  CUDA_OK(cudaStreamSynchronize(c.stream));
  for (std::size_t i = 0; i < n; ++i) {
    got[i] = c.model.type == ncclFloat16 ? k::fp16_bits_to_float(half[i])
                                         : k::bf16_bits_to_float(half[i]);
  }
  return got;
}

// One check: counted, and printed by rank 0, or by any rank where it failed.
void expect(bool ok, const std::string& what) {
  ++checks;
  failures += !ok;
  if (!ok || world_rank == 0)
    std::printf("%s rank %d: %s\n", ok ? "ok  " : "FAIL", world_rank, what.c_str());
}

void verify(const char* what, const Call& c) {
  const std::vector<float> got = read_back(c);
  const std::vector<float> want = model.expected(c.model);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    wrong += k::float_bits(got[i]) != k::float_bits(want[i]);
  expect(wrong == 0, std::string(what) + " (n " + std::to_string(got.size()) +
                         "): " + std::to_string(wrong) + " values differ");
}

// The library's NCCL counters now.
slimreduce_counters counters_now() {
  slimreduce_counters c{};
  CHECK(slimreduce_nccl_get_counters(&c) == 0, "slimreduce_nccl_get_counters");
  return c;
}

// Polls a non-blocking communicator until its work is taken, as NCCL asks.
void wait_ready(ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  while (state == ncclInProgress) NCCL_OK(ncclCommGetAsyncError(comm, &state));
  CHECK(state == ncclSuccess, "the communicator's async state");
}

// A call that may answer ncclInProgress (a non-blocking communicator's).
void may_progress(ncclResult_t rc, const char* what) {
  CHECK(rc == ncclSuccess || rc == ncclInProgress, what);
}

// ncclGroupSimulateEnd runs nothing: no buffer changes, nothing is counted.
void check_simulated_group(Comm& world, float* send, float* recv, cudaStream_t stream) {
  const std::size_t n = 100000;
  const std::vector<float> before = sim::values_for(next_call++, world.rank, n, ncclFloat32);
  CUDA_OK(cudaMemcpyAsync(send, before.data(), n * 4, cudaMemcpyHostToDevice, stream));
  CUDA_OK(cudaMemcpyAsync(recv, before.data(), n * 4, cudaMemcpyHostToDevice, stream));
  const slimreduce_counters counted_before = counters_now();
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclAllReduce(send, recv, n, ncclFloat32, ncclSum, world.nccl, stream));  // eligible
  NCCL_OK(ncclAllReduce(send, recv, n, ncclFloat32, ncclMax, world.nccl, stream));  // passed
  NCCL_OK(ncclGroupSimulateEnd(&info));
  const slimreduce_counters counted_after = counters_now();
  std::vector<float> got(n);
  CUDA_OK(cudaMemcpyAsync(got.data(), recv, n * 4, cudaMemcpyDeviceToHost, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  const bool untouched = std::memcmp(got.data(), before.data(), n * 4) == 0;
  const bool uncounted = counted_after.intercepted == counted_before.intercepted;
  expect(untouched, "a simulated group runs nothing");
  expect(uncounted, "a simulated group counts nothing");
}

// The compressor switched at run time through the C API (as slimreduce-bench
// does between rounds): residuals and warm-up counts start again under it.
void check_switch(Comm& world, float* const send[3], float* const recv[3],
                  const std::size_t sizes[3], cudaStream_t stream) {
  sim::Mode next = mode;
  next.compressor = mode.topk ? "fp16" : "topk";
  next.topk = !mode.topk;
  next.ef = sim::env_or("SLIMREDUCE_ERROR_FEEDBACK", next.topk ? "1" : "0") == "1";
  next.format = slimreduce::kernels::HalfFormat::fp16;
  CHECK(slimreduce_set_compressor(next.compressor.c_str()) == 0, "slimreduce_set_compressor");
  model = sim::Model(next);
  for (int step = 0; step < 3; ++step) {
    Call c = prepare(world, send[0], recv[0], sizes[0], ncclFloat32, ncclSum, stream);
    issue(c);
    verify(next.topk ? "after a switch to topk" : "after a switch to fp16", c);
  }
  CHECK(slimreduce_set_compressor(mode.compressor.c_str()) == 0, "slimreduce_set_compressor");
  model = sim::Model(mode);
}

int next_comm_id = 0;
Comm make_world_comm(bool blocking = true) {
  Comm comm;
  MPI_Comm_rank(MPI_COMM_WORLD, &comm.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &comm.size);
  ncclUniqueId id;
  if (comm.rank == 0) NCCL_OK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  if (blocking) {
    NCCL_OK(ncclCommInitRank(&comm.nccl, comm.size, id, comm.rank));
  } else {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    may_progress(ncclCommInitRankConfig(&comm.nccl, comm.size, id, comm.rank, &config),
                 "ncclCommInitRankConfig, non-blocking");
    wait_ready(comm.nccl);
  }
  comm.id = next_comm_id++;
  return comm;
}

// A non-blocking communicator: its calls pass through, and so do the others
// of a group that holds one. The caller's own call on it (an allgather) in a
// group with an eligible call: that call is compressed, and the group end
// still answers ncclInProgress for the caller to poll.
void check_non_blocking(Comm& world, float* const send[3], float* const recv[3],
                        const std::size_t sizes[3], cudaStream_t stream) {
  Comm quick = make_world_comm(false);
  Call alone = prepare(quick, send[0], recv[0], sizes[0], ncclFloat32, ncclSum, stream);
  alone.model.passes_through = true;
  may_progress(ncclAllReduce(send[0], recv[0], sizes[0], ncclFloat32, ncclSum, quick.nccl, stream),
               "ncclAllReduce, non-blocking");
  wait_ready(quick.nccl);
  verify("non-blocking communicator: passed through", alone);

  Call a = prepare(quick, send[0], recv[0], sizes[0], ncclFloat32, ncclAvg, stream);
  Call b = prepare(world, send[1], recv[1], sizes[1], ncclFloat32, ncclSum, stream);
  a.model.passes_through = b.model.passes_through = true;
  NCCL_OK(ncclGroupStart());
  issue(a);
  issue(b);
  may_progress(ncclGroupEnd(), "ncclGroupEnd, non-blocking in the group");
  wait_ready(quick.nccl);
  verify("group with a non-blocking call: passed through", a);
  verify("its blocking neighbour: passed through", b);

  const std::size_t gathered = 1000;
  const std::vector<float> mine = sim::values_for(next_call++, world.rank, gathered, ncclFloat32);
  CUDA_OK(cudaMemcpyAsync(send[2], mine.data(), gathered * 4, cudaMemcpyHostToDevice, stream));
  Call c = prepare(world, send[1], recv[1], sizes[1], ncclFloat32, ncclSum, stream);
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclAllGather(send[2], recv[2], gathered, ncclFloat32, quick.nccl, stream));
  issue(c);
  const ncclResult_t end = ncclGroupEnd();
  CHECK(end == ncclInProgress, "the end in progress reaches the caller");
  wait_ready(quick.nccl);
  verify("group with the caller's non-blocking allgather: compressed", c);
  std::vector<float> all(gathered * quick.size);
  CUDA_OK(cudaMemcpyAsync(all.data(), recv[2], all.size() * 4, cudaMemcpyDeviceToHost, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  const bool mine_in_place =
      std::memcmp(all.data() + gathered * quick.rank, mine.data(), gathered * 4) == 0;
  expect(mine_in_place, "the allgather beside it");
  NCCL_OK(ncclCommDestroy(quick.nccl));
}

// Taken as eligible: compressed, or held back only by warm-up or the residual
// cap. A call on a communicator the library never saw made counts none of these.
std::uint64_t eligible_count() {
  const slimreduce_counters c = counters_now();
  return c.compressed + c.warmup + c.ef_cap_fallback;
}

void reduce_on(Comm& comm, const std::string& what, float* send, float* recv, std::size_t n,
               cudaStream_t stream) {
  const std::uint64_t before = eligible_count();
  Call c = prepare(comm, send, recv, n, ncclFloat32, ncclSum, stream);
  issue(c);
  verify(what.c_str(), c);
  if (mode.compressor != "none") expect(eligible_count() > before, what + ": taken as eligible");
}

// Communicators made by ncclCommInitRankScalable (PyTorch's init past 128
// ranks), ncclCommShrink and ncclCommGrow (fault tolerance, elastic jobs):
// their calls are compressed like any other's, and each is forgotten at destroy.
void check_other_makers(const Comm& world, float* send, float* recv, std::size_t n,
                        cudaStream_t stream) {
  Comm scalable{nullptr, world.rank, world.size, next_comm_id++};
  ncclUniqueId ids[2];
  if (world.rank == 0)
    for (ncclUniqueId& id : ids) NCCL_OK(ncclGetUniqueId(&id));
  MPI_Bcast(ids, sizeof ids, MPI_BYTE, 0, MPI_COMM_WORLD);
  NCCL_OK(ncclCommInitRankScalable(&scalable.nccl, world.size, world.rank, 2, ids, nullptr));
  for (int step = 0; step < 2; ++step)
    reduce_on(scalable, "ncclCommInitRankScalable communicator", send, recv, n, stream);
  NCCL_OK(ncclCommDestroy(scalable.nccl));
  model.forget(scalable.id);
  if (world.size < 2) return;

  // The last rank leaves (it makes no call meanwhile), then joins again.
  const int leaving = world.size - 1;
  const bool left = world.rank == leaving;
  const int calls = 2;
  Comm shrunk{nullptr, world.rank, world.size - 1, next_comm_id++};
  if (!left) {
    int exclude[1] = {leaving};
    NCCL_OK(ncclCommShrink(world.nccl, exclude, 1, &shrunk.nccl, nullptr, NCCL_SHRINK_DEFAULT));
    for (int step = 0; step < calls; ++step)
      reduce_on(shrunk, "ncclCommShrink communicator", send, recv, n, stream);
  } else {
    next_call += calls;  // the inputs' seeds stay aligned on every rank
  }
  ncclUniqueId grow_id{};
  if (world.rank == 0) NCCL_OK(ncclCommGetUniqueId(shrunk.nccl, &grow_id));
  MPI_Bcast(&grow_id, sizeof grow_id, MPI_BYTE, 0, MPI_COMM_WORLD);  // handed out of band
  Comm grown{nullptr, world.rank, world.size, next_comm_id++};
  NCCL_OK(ncclCommGrow(shrunk.nccl, world.size, world.rank == 0 || left ? &grow_id : nullptr,
                       left ? leaving : -1, &grown.nccl, nullptr));
  if (!left) {
    NCCL_OK(ncclCommDestroy(shrunk.nccl));
    model.forget(shrunk.id);
  }
  for (int step = 0; step < calls; ++step)
    reduce_on(grown, left ? "ncclCommGrow, the rank that joined" : "ncclCommGrow communicator",
              send, recv, n, stream);
  NCCL_OK(ncclCommDestroy(grown.nccl));
  model.forget(grown.id);
}

}  // namespace

int main(int argc, char** argv) {
  // Threads: with HOSTSIM_ASYNC=1 the simulated NCCL's collectives run on the
  // streams' threads while this one makes communicators.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  CHECK(provided == MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE");
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  Comm world = make_world_comm();
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const std::size_t sizes[3] = {70001, 262144, 1000};  // the last passes through (MIN_BYTES)
  float *send = nullptr, *recv = nullptr;
  CUDA_OK(cudaMalloc(&send, 4u << 20));
  CUDA_OK(cudaMalloc(&recv, 4u << 20));
  float* bucket_send[3] = {send, send + 80000, send + 400000};
  float* bucket_recv[3] = {recv, recv + 80000, recv + 400000};
  if (world_rank == 0)
    std::printf("compressor %s, error feedback %d, warm-up %u, %d ranks\n", mode.compressor.c_str(),
                mode.ef, mode.warmup, world.size);

  // Steps of three buckets in one group, sum then average: residuals carry over.
  for (int step = 0; step < 4; ++step) {
    const ncclRedOp_t op = step % 2 ? ncclAvg : ncclSum;
    std::vector<Call> calls;
    for (int b = 0; b < 3; ++b)
      calls.push_back(
          prepare(world, bucket_send[b], bucket_recv[b], sizes[b], ncclFloat32, op, stream));
    const std::size_t work_before = sim::work_enqueued(stream);
    const std::size_t syncs_before = sim::host_syncs();
    NCCL_OK(ncclGroupStart());
    for (const Call& c : calls) issue(c);
    CHECK(sim::work_enqueued(stream) == work_before,
          "nothing is enqueued before the outermost ncclGroupEnd");
    NCCL_OK(ncclGroupEnd());
    CHECK(sim::host_syncs() == syncs_before, "no host synchronization, workspace growth included");
    for (const Call& c : calls) verify(op == ncclAvg ? "bucket, avg" : "bucket, sum", c);
  }

  // Alone, in place and out of place; a 16-bit tensor; calls that pass through.
  for (ncclDataType_t type : {ncclFloat32, ncclFloat16, ncclBfloat16}) {
    Call c = prepare(world, send, type == ncclFloat32 ? send : recv, 100000, type, ncclSum, stream);
    issue(c);
    verify(type == ncclFloat32 ? "alone, in place" : "16-bit tensor", c);
  }
  Call max = prepare(world, send, recv, 100000, ncclFloat32, ncclMax, stream);
  issue(max);
  verify("max passes through", max);
  float one_half = 0.5f;
  ncclRedOp_t half_sum;
  NCCL_OK(ncclRedOpCreatePreMulSum(&half_sum, &one_half, ncclFloat32, ncclScalarHostImmediate,
                                   world.nccl));
  Call premul = prepare(world, send, recv, 100000, ncclFloat32, half_sum, stream);
  premul.model.premul = one_half;
  issue(premul);
  verify("a PreMulSum op passes through", premul);
  NCCL_OK(ncclRedOpDestroy(half_sum, world.nccl));

  check_simulated_group(world, send, recv, stream);

  // A split communicator (even and odd world ranks) and the world in one group.
  Comm half;
  NCCL_OK(ncclCommSplit(world.nccl, world.rank % 2, world.rank, &half.nccl, nullptr));
  NCCL_OK(ncclCommCount(half.nccl, &half.size));
  NCCL_OK(ncclCommUserRank(half.nccl, &half.rank));
  half.id = next_comm_id++ + 100 * (world.rank % 2);  // the two halves are different communicators
  for (int step = 0; step < 2; ++step) {
    // Both halves make the same number of calls, so the inputs' seeds stay aligned.
    Call a = prepare(half, bucket_send[0], bucket_recv[0], sizes[0], ncclFloat32, ncclAvg, stream);
    Call b = prepare(world, bucket_send[1], bucket_recv[1], sizes[1], ncclFloat32, ncclSum, stream);
    NCCL_OK(ncclGroupStart());
    issue(a);
    issue(b);
    NCCL_OK(ncclGroupEnd());
    verify("split communicator, avg", a);
    verify("world beside it, sum", b);
  }
  NCCL_OK(ncclCommDestroy(half.nccl));
  model.forget(half.id);

  // Graph capture of a call whose workspace exists: replays, each with fresh inputs.
  Call warm =
      prepare(world, bucket_send[1], bucket_recv[1], sizes[1], ncclFloat32, ncclSum, stream);
  issue(warm);
  verify("before capture", warm);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  NCCL_OK(ncclAllReduce(bucket_send[1], bucket_recv[1], sizes[1], ncclFloat32, ncclSum, world.nccl,
                        stream));
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 2; ++replay) {
    Call c = prepare(world, bucket_send[1], bucket_recv[1], sizes[1], ncclFloat32, ncclSum, stream);
    c.model.captured = true;
    CUDA_OK(cudaGraphLaunch(exec, stream));
    verify("graph replay", c);
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));

  // A receive buffer never reduced before, captured: no residual can be made
  // during capture, so the graph reduces it compressed without error feedback
  // (the same path on every rank, whatever each rank's buffers held before).
  float* new_send = send + 700000;
  float* new_recv = recv + 700000;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  NCCL_OK(ncclAllReduce(new_send, new_recv, sizes[1], ncclFloat32, ncclSum, world.nccl, stream));
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 2; ++replay) {
    Call c = prepare(world, new_send, new_recv, sizes[1], ncclFloat32, ncclSum, stream);
    c.model.captured = true;
    CUDA_OK(cudaGraphLaunch(exec, stream));
    verify("graph replay, receive buffer new in capture", c);
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));

  check_non_blocking(world, bucket_send, bucket_recv, sizes, stream);

  check_other_makers(world, bucket_send[0], bucket_recv[0], sizes[0], stream);

  check_switch(world, bucket_send, bucket_recv, sizes, stream);

  // Destroyed and made again: nothing of the old communicator's residuals remains.
  NCCL_OK(ncclCommDestroy(world.nccl));
  model.forget(world.id);
  world = make_world_comm();
  Call again =
      prepare(world, bucket_send[0], bucket_recv[0], sizes[0], ncclFloat32, ncclSum, stream);
  issue(again);
  verify("communicator made again", again);
  NCCL_OK(ncclCommDestroy(world.nccl));

  CUDA_OK(cudaFree(send));
  CUDA_OK(cudaFree(recv));
  // Every workspace and residual went with its communicator.
  const std::size_t live = sim::device_bytes_live();
  expect(live == 0, "device bytes left after every communicator went: " + std::to_string(live));
  int all_failures = 0;
  MPI_Allreduce(&failures, &all_failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (world_rank == 0)
    std::printf("%s: %d checks per rank, %d failed in all\n", all_failures ? "FAILED" : "PASSED",
                checks, all_failures);
  MPI_Finalize();
  return all_failures ? 1 : 0;
}
