// Managed memory (cudaMallocManaged) is device memory on both sides, one rule
// (docs/architecture.md, "Managed memory"): an MPI_Allreduce of a managed
// buffer takes the device route (its kernels and staging on the GPU, so the
// host waits for the device; the host route would touch no CUDA call) and
// gives the bits the same call on cudaMalloc memory gives; an ncclAllReduce of
// managed buffers is compressed, as of device buffers.
//
// Usage: mpirun -np N -x SLIMREDUCE_COMPRESSOR=fp16 managed_memory_app
// (linked with the simulated CUDA runtime and NCCL). Exit 0, or 1 with FAIL lines.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "interpose/slimreduce.h"
#include "tests/hostsim/sim.h"

namespace {

int rank = 0, ranks = 1, failures = 0;
constexpr std::size_t kCount = 100003;  // 400 KB: above SLIMREDUCE_MIN_BYTES

void expect(bool good, const std::string& what) {
  if (good) return;
  ++failures;
  std::printf("FAIL rank %d: %s\n", rank, what.c_str());
}

std::vector<float> input() {
  std::vector<float> v(kCount);
  for (std::size_t i = 0; i < kCount; ++i)
    v[i] = static_cast<float>((i * 7919 + rank * 104729) % 2001) / 1000.0f - 1.0f;
  return v;
}

// MPI_Allreduce in place on `buffer` (device or managed), its result read back.
std::vector<float> mpi_sum(void* buffer) {
  const std::vector<float> mine = input();
  cudaMemcpy(buffer, mine.data(), kCount * 4, cudaMemcpyHostToDevice);
  MPI_Allreduce(MPI_IN_PLACE, buffer, static_cast<int>(kCount), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  std::vector<float> got(kCount);
  cudaMemcpy(got.data(), buffer, kCount * 4, cudaMemcpyDeviceToHost);
  return got;
}

void mpi_side() {
  void* device = nullptr;
  void* managed = nullptr;
  expect(cudaMalloc(&device, kCount * 4) == cudaSuccess, "cudaMalloc");
  expect(cudaMallocManaged(&managed, kCount * 4, cudaMemAttachGlobal) == cudaSuccess,
         "cudaMallocManaged");
  const std::vector<float> on_device = mpi_sum(device);
  const std::size_t waits_before = slimreduce::hostsim::host_syncs();
  const std::vector<float> on_managed = mpi_sum(managed);
  // The two copies of mpi_sum are host waits of their own: the route adds more.
  const std::size_t route_waits = slimreduce::hostsim::host_syncs() - waits_before - 2;
  expect(route_waits > 0, "an MPI_Allreduce of managed memory took the host route");
  expect(std::memcmp(on_device.data(), on_managed.data(), kCount * 4) == 0,
         "managed memory's result differs from device memory's");
  slimreduce_counters counters{};
  expect(slimreduce_get_counters(&counters) == 0 && counters.compressed == 2,
         "MPI compressed " + std::to_string(counters.compressed) + " calls, not 2");
  cudaFree(device);
  cudaFree(managed);
  if (rank == 0)
    std::printf("managed MPI: device route (%zu host waits), same bits\n", route_waits);
}

void nccl_side() {
  ncclUniqueId id;
  if (rank == 0) ncclGetUniqueId(&id);
  PMPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm = nullptr;
  expect(ncclCommInitRank(&comm, ranks, id, rank) == ncclSuccess, "ncclCommInitRank");
  void* managed = nullptr;
  cudaMallocManaged(&managed, kCount * 4, cudaMemAttachGlobal);
  const std::vector<float> mine = input();
  std::memcpy(managed, mine.data(), kCount * 4);  // the host may write managed memory
  slimreduce_counters before{}, after{};
  slimreduce_nccl_get_counters(&before);
  expect(
      ncclAllReduce(managed, managed, kCount, ncclFloat32, ncclSum, comm, nullptr) == ncclSuccess,
      "ncclAllReduce");
  cudaDeviceSynchronize();
  slimreduce_nccl_get_counters(&after);
  expect(after.compressed == before.compressed + 1, "NCCL did not compress managed buffers");
  ncclCommDestroy(comm);
  cudaFree(managed);
  if (rank == 0) std::printf("managed NCCL: compressed\n");
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  mpi_side();
  nccl_side();
  int any = failures;
  PMPI_Allreduce(&failures, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) std::printf("managed_memory_app: %s\n", any ? "FAILED" : "PASSED");
  MPI_Finalize();
  return any ? 1 : 0;
}
