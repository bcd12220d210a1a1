// A job of several ranks (under mpirun) that calls ncclAllReduce as training
// frameworks do, on the host simulation of the GPU path: a few steps of
// gradient buckets in groups (sum and average), calls on two communicators in
// one group, a split communicator of another size, communicators made by
// scalable init, shrink and grow, graph capture and replay, per-call configs
// (ncclAllReduceConfig), calls that must pass through, and a communicator
// destroyed and made again. Every rank can make every rank's inputs (seeded
// by call and rank), so each checks its result bit for bit against the model
// of reference_model.h. The helpers and the other checks are in
// nccl_ranks_job.cc and nccl_ranks_checks.cc. With HOSTSIM_APP_STREAM=legacy
// every call goes on the legacy default stream, and the captures are left out.
// Exit 0: all passed; 1: a check failed.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/hostsim/nccl_ranks_job.h"

using namespace ranks_job;

namespace {

// One fp32 sum on (send, recv) captured, and the graph replayed twice, each
// time with fresh inputs, checked as `what`.
void capture_and_replay(Comm& world, float* send, float* recv, std::size_t n, cudaStream_t stream,
                        const char* what) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  NCCL_OK(ncclAllReduce(send, recv, n, ncclFloat32, ncclSum, world.nccl, stream));
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 2; ++replay) {
    Call c = prepare(world, send, recv, n, ncclFloat32, ncclSum, stream);
    c.model.captured = true;
    CUDA_OK(cudaGraphLaunch(exec, stream));
    verify(what, c);
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
}

// Graph capture: of a call whose workspace exists, and of one whose receive
// buffer is new in the capture.
void check_captures(Comm& world, float* send, float* recv, float* bucket_send, float* bucket_recv,
                    std::size_t n, cudaStream_t stream) {
  Call warm = prepare(world, bucket_send, bucket_recv, n, ncclFloat32, ncclSum, stream);
  issue(warm);
  verify("before capture", warm);
  capture_and_replay(world, bucket_send, bucket_recv, n, stream, "graph replay");
  // A receive buffer never reduced before, captured: no residual can be made
  // during capture, so the graph reduces it compressed without error feedback
  // (the same path on every rank, whatever each rank's buffers held before).
  capture_and_replay(world, send + 700000, recv + 700000, n, stream,
                     "graph replay, receive buffer new in capture");
}

}  // namespace

int main(int argc, char** argv) {
  // Threads: unless HOSTSIM_ASYNC=0 the simulated NCCL's collectives run on the
  // streams' threads while this one makes communicators.
  start_job(&argc, &argv);
  Comm world = make_world_comm();
  cudaStream_t stream = make_job_stream();
  const std::size_t sizes[3] = {70001, 262144, 1000};  // the last passes through (MIN_BYTES)
  float *send = nullptr, *recv = nullptr;
  CUDA_OK(cudaMalloc(&send, 4u << 20));
  CUDA_OK(cudaMalloc(&recv, 4u << 20));
  float* bucket_send[3] = {send, send + 80000, send + 400000};
  float* bucket_recv[3] = {recv, recv + 80000, recv + 400000};
  if (world_rank == 0)
    std::printf("compressor %s, error feedback %d, warm-up %u, %d ranks, stream %s\n",
                mode.compressor.c_str(), mode.ef, mode.warmup, world.size,
                on_legacy_stream() ? "legacy" : "non-blocking");

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
    // SLIMREDUCE_TIMELINE ties the GPU's clock to the host's once, at the first timed group.
    const std::size_t timeline_syncs = step == 0 && std::getenv("SLIMREDUCE_TIMELINE") ? 1 : 0;
    // Sharded top-k reads its part sizes back, a wait per call (of the two
    // buckets above MIN_BYTES; its runs have no warm-up).
    std::size_t read_backs = 0;
    for (int b = 0; b < 2; ++b) read_backs += sim::shards_topk(mode, sizes[b], world.size);
    CHECK(sim::host_syncs() == syncs_before + timeline_syncs + read_backs,
          "no host synchronization but sharded top-k's, workspace growth included");
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
  check_opposite_orders(world, bucket_send, bucket_recv, sizes[0], stream);

  // A split communicator (even and odd world ranks) and the world in one group.
  Comm half = split_comm(world, world.rank % 2);
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

  if (!on_legacy_stream())
    check_captures(world, send, recv, bucket_send[1], bucket_recv[1], sizes[1], stream);

  check_non_blocking(world, bucket_send, bucket_recv, sizes, stream);

  check_other_makers(world, bucket_send[0], bucket_recv[0], sizes[0], stream);

  check_not_finite(world, bucket_send[1], bucket_recv[1], sizes[1], stream);
  check_fp16_overflow(world, bucket_send[1], bucket_recv[1], sizes[1], stream);
  check_corrupt_payload(world, bucket_send[1], bucket_recv[1], sizes[1], stream);
  check_int8_bytes(world, bucket_send[0], bucket_recv[0], sizes[0], stream);
  check_topk_sharded_bytes(world, bucket_send[0], sizes[0], stream);
  check_switch(world, bucket_send, bucket_recv, sizes, stream);
  check_switch_in_group(world, bucket_send[0], bucket_recv[0], sizes[0], stream);

  check_coll_config(world, bucket_send[0], bucket_recv[0], sizes[0], stream);

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
  expect_no_device_bytes_left();
  return finish_job();
}
