// The algorithm suite (tests/mpi/algorithm_suite.h) on the host simulation:
// NcclTransport on a simulated NCCL communicator (device memory, a stream,
// 16-bit sums done by the "NCCL" itself, rank after rank), and MpiTransport's
// staged_host on the simulated runtime's pinned memory.
#include <cuda_runtime.h>
#include <nccl.h>

#include "backends/nccl_transport.h"
#include "tests/mpi/algorithm_suite.h"
#include "tests/mpi/transport_suite.h"

namespace slimreduce::testing {
namespace {

// Aborts the job: a path that cannot be made leaves every test meaningless.
void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "test_algorithms_nccl: %s failed\n", what);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

class NcclPath final : public Path {
 public:
  NcclPath() {
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ncclUniqueId id{};
    if (rank == 0) require(ncclGetUniqueId(&id) == ncclSuccess, "ncclGetUniqueId");
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    require(ncclCommInitRank(&comm_, size, id, rank) == ncclSuccess, "ncclCommInitRank");
    require(cudaStreamCreate(&stream_) == cudaSuccess, "cudaStreamCreate");
    transport_.emplace(comm_, rank, size, stream_);
  }
  ~NcclPath() override {
    transport_.reset();
    cudaStreamDestroy(stream_);
    ncclCommDestroy(comm_);
  }
  backends::Transport& transport() override { return *transport_; }
  std::byte* allocate(std::size_t bytes) override {
    void* buffer = nullptr;
    require(cudaMalloc(&buffer, bytes) == cudaSuccess, "cudaMalloc");
    return static_cast<std::byte*>(buffer);
  }
  void release(std::byte* buffer) override { cudaFree(buffer); }
  bool device_memory() const override { return true; }
  void to_device(std::byte* to, const std::byte* from, std::size_t bytes) override {
    EXPECT_EQ(cudaMemcpyAsync(to, from, bytes, cudaMemcpyHostToDevice, stream_), cudaSuccess);
  }
  void to_host(std::byte* to, const std::byte* from, std::size_t bytes) override {
    EXPECT_EQ(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToHost, stream_), cudaSuccess);
  }
  void synchronize() override { EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess); }
  // nccl_sim.cc adds rank 0's value, then rank 1's, ..., rounding each step to 16 bits.
  ref::SumOrder sum_order() const override { return ref::SumOrder::rank_order; }

 private:
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::optional<backends::NcclTransport> transport_;
};

std::unique_ptr<Path> pinned_mpi_path() {
  return std::make_unique<MpiPath>(
      backends::MemoryKind::staged_host,
      [](std::size_t bytes) {
        void* buffer = nullptr;
        require(cudaMallocHost(&buffer, bytes) == cudaSuccess, "cudaMallocHost");
        return static_cast<std::byte*>(buffer);
      },
      [](std::byte* buffer) { cudaFreeHost(buffer); });
}

INSTANTIATE_TEST_SUITE_P(Hostsim, AlgorithmSuite,
                         ::testing::ValuesIn(cases_on({"nccl", "mpi_staged_pinned"})),
                         [](const auto& info) { return case_name(info.param); });

INSTANTIATE_TEST_SUITE_P(Hostsim, TransportSuite, transport_cases({"nccl", "mpi_staged_pinned"}),
                         transport_case_name);
INSTANTIATE_TEST_SUITE_P(Hostsim, TransportSplit, ::testing::Values("nccl", "mpi_staged_pinned"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace slimreduce::testing

int main(int argc, char** argv) {
  using namespace slimreduce::testing;
  return run_algorithm_suite(argc, argv,
                             {{"nccl", [] { return std::make_unique<NcclPath>(); }},
                              {"mpi_staged_pinned", pinned_mpi_path}});
}
