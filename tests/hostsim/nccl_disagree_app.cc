// The ranks' agreement on what shapes the wire, on the NCCL side
// (core/nccl/wire_check.h), on the host simulation under mpirun: a
// communicator's first compressed ncclAllReduce compares the ranks'
// settings. With WIRE_EXPECT=disagree (ranks launched with other settings,
// mpirun's `-np 1 ... : -np 1 ...`) that call and the next fail with
// ncclInvalidUsage on every rank, and rank 0 prints the line naming the
// setting (the test greps it); with WIRE_EXPECT=agree both are taken and
// checked against the model. A hang (a rank left in a collective) fails by
// the test's timeout. Exit 0: all passed; 1: a check failed.
#include <string>

#include "tests/hostsim/nccl_ranks_job.h"

using namespace ranks_job;

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  const bool disagree = sim::env_or("WIRE_EXPECT", "agree") == "disagree";
  constexpr std::size_t kCount = 262144;  // 1 MiB of floats: compressed (SLIMREDUCE_MIN_BYTES=64K)
  Comm world = make_world_comm();
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float *send = nullptr, *recv = nullptr;
  CUDA_OK(cudaMalloc(&send, kCount * 4));
  CUDA_OK(cudaMalloc(&recv, kCount * 4));
  for (const char* which : {"first", "second"}) {
    const std::string what = std::string("the ") + which + " compressed call";
    if (disagree) {
      const ncclResult_t rc =
          ncclAllReduce(send, recv, kCount, ncclFloat32, ncclSum, world.nccl, stream);
      expect(rc == ncclInvalidUsage,
             what + " fails with ncclInvalidUsage (rc " + std::to_string(rc) + ")");
    } else {
      reduce_on(world, what, send, recv, kCount, stream);
    }
  }
  CUDA_OK(cudaStreamSynchronize(stream));
  NCCL_OK(ncclCommDestroy(world.nccl));
  CUDA_OK(cudaFree(send));
  CUDA_OK(cudaFree(recv));
  return finish_job();
}
