// The job's helpers and bookkeeping (nccl_ranks_job.h).
#include "tests/hostsim/nccl_ranks_job.h"

#include "kernels/element_rules.h"

namespace ranks_job {

namespace k = slimreduce::kernels;

const sim::Mode mode;
sim::Model model(mode);
int failures = 0;
int checks = 0;
int world_rank = 0;
unsigned next_call = 0;
int next_comm_id = 0;

// Writes this rank's input for the call into c.send (as the call's type).
Call prepare(Comm& comm, float* send, float* recv, std::size_t n, ncclDataType_t type,
             ncclRedOp_t op, cudaStream_t stream) {
  Call c{&comm, send, recv, stream, {comm.id, comm.size, recv, n, type, op, {}}};
  const unsigned call = next_call++;
  if (comm.mpi != MPI_COMM_NULL) {
    // Each rank makes its own input and gathers the others' (SlimReduce
    // passes MPI_Allgather by): making every rank's on each took 14% to 44%
    // of these programs' CPU time at 3 to 8 ranks.
    const std::vector<float> own = sim::values_for(call, comm.rank, n, type);
    std::vector<float> all(n * static_cast<std::size_t>(comm.size));
    CHECK(MPI_Allgather(own.data(), static_cast<int>(n), MPI_FLOAT, all.data(), static_cast<int>(n),
                        MPI_FLOAT, comm.mpi) == MPI_SUCCESS,
          "MPI_Allgather of the inputs");
    for (int r = 0; r < comm.size; ++r) {
      const auto first = all.begin() + static_cast<std::ptrdiff_t>(n) * r;
      c.model.inputs.emplace_back(first, first + static_cast<std::ptrdiff_t>(n));
    }
  } else {
    for (int r = 0; r < comm.size; ++r) c.model.inputs.push_back(sim::values_for(call, r, n, type));
  }
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

Comm make_world_comm(bool blocking) {
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
  comm.mpi = MPI_COMM_WORLD;
  return comm;
}

// Taken as eligible: compressed, or held back only by warm-up or the residual
// cap. A call on a communicator the library never saw made counts none of these.
std::uint64_t eligible_count() {
  const slimreduce_counters c = counters_now();
  return c.compressed + c.warmup + c.ef_cap_fallback;
}

void start_job(int* argc, char*** argv) {
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  CHECK(provided == MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE");
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
}

void expect_no_device_bytes_left() {
  const std::size_t live = sim::device_bytes_live();
  expect(live == 0, "device bytes left after every communicator went: " + std::to_string(live));
}

Comm split_comm(const Comm& parent, int color) {
  Comm made;
  NCCL_OK(ncclCommSplit(parent.nccl, color, parent.rank, &made.nccl, nullptr));
  NCCL_OK(ncclCommCount(made.nccl, &made.size));
  NCCL_OK(ncclCommUserRank(made.nccl, &made.rank));
  made.id = next_comm_id++ + 100 * color;
  return made;
}

bool on_legacy_stream() { return sim::env_or("HOSTSIM_APP_STREAM", "") == "legacy"; }

cudaStream_t make_job_stream() {
  if (on_legacy_stream()) return cudaStreamLegacy;
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return stream;
}

int end_job(Comm& world, float* send, float* recv, cudaStream_t stream) {
  NCCL_OK(ncclCommDestroy(world.nccl));
  CUDA_OK(cudaFree(send));
  CUDA_OK(cudaFree(recv));
  if (!on_legacy_stream()) CUDA_OK(cudaStreamDestroy(stream));
  expect_no_device_bytes_left();
  return finish_job();
}

int finish_job() {
  int all_failures = 0;
  MPI_Allreduce(&failures, &all_failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (world_rank == 0)
    std::printf("%s: %d checks per rank, %d failed in all\n", all_failures ? "FAILED" : "PASSED",
                checks, all_failures);
  MPI_Finalize();
  return all_failures ? 1 : 0;
}

void reduce_on(Comm& comm, const std::string& what, float* send, float* recv, std::size_t n,
               cudaStream_t stream) {
  const std::uint64_t before = eligible_count();
  Call c = prepare(comm, send, recv, n, ncclFloat32, ncclSum, stream);
  issue(c);
  verify(what.c_str(), c);
  if (mode.compressor != "none") expect(eligible_count() > before, what + ": taken as eligible");
}

}  // namespace ranks_job
