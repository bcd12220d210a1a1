// The algorithm suite (tests/mpi/algorithm_suite.h) on the host simulation:
// NcclTransport on a simulated NCCL communicator (device memory, a stream,
// 16-bit sums done by the "NCCL" itself, rank after rank), and MpiTransport's
// staged_host on the simulated runtime's pinned memory.
#include <cuda_runtime.h>
#include <nccl.h>

#include "algorithms/cast_ring.h"
#include "backends/nccl_transport.h"
#include "compressors/registry.h"
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

// NCCL without its native 16-bit sum, for the transport suite: sendrecv over
// ncclSend/ncclRecv. (The cast ring refuses it: its adds run on the host.)
class WithoutNativeSum final : public backends::Transport {
 public:
  explicit WithoutNativeSum(backends::Transport& nccl)
      : Transport(nccl.rank(), nccl.size(), nccl.memory(), nccl.execution()), nccl_(nccl) {}
  Status sendrecv(const void* send, std::size_t send_bytes, int dest, void* recv,
                  std::size_t recv_bytes, int source) override {
    return nccl_.sendrecv(send, send_bytes, dest, recv, recv_bytes, source);
  }
  Status allgather(const void* send, std::size_t bytes_per_rank, void* gathered) override {
    return nccl_.allgather(send, bytes_per_rank, gathered);
  }
  Status reduce_scatter_sum(const float* send, float* recv, std::size_t count_per_rank) override {
    return nccl_.reduce_scatter_sum(send, recv, count_per_rank);
  }
  Status split(int color, int key, std::unique_ptr<Transport>* sub) override {
    return nccl_.split(color, key, sub);
  }

 private:
  backends::Transport& nccl_;
};

class NcclPath final : public Path {
 public:
  explicit NcclPath(bool native_sum) : native_sum_(native_sum) {
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ncclUniqueId id{};
    if (rank == 0) require(ncclGetUniqueId(&id) == ncclSuccess, "ncclGetUniqueId");
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    require(ncclCommInitRank(&comm_, size, id, rank) == ncclSuccess, "ncclCommInitRank");
    require(cudaStreamCreate(&stream_) == cudaSuccess, "cudaStreamCreate");
    transport_.emplace(comm_, rank, size, stream_);
    ring_only_.emplace(*transport_);
  }
  ~NcclPath() override {
    ring_only_.reset();
    transport_.reset();
    cudaStreamDestroy(stream_);
    ncclCommDestroy(comm_);
  }
  backends::Transport& transport() override {
    return native_sum_ ? static_cast<backends::Transport&>(*transport_) : *ring_only_;
  }
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
  // nccl_sim.cc adds rank 0's value, then rank 1's, ..., rounding each step to
  // 16 bits; without it, the cast ring's order.
  ref::SumOrder sum_order() const override {
    return native_sum_ ? ref::SumOrder::rank_order : ref::SumOrder::ring;
  }

 private:
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  bool native_sum_;
  std::optional<backends::NcclTransport> transport_;
  std::optional<WithoutNativeSum> ring_only_;
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

// The cast ring's adds run on the host between its steps: over a
// stream-ordered transport without a native 16-bit sum it would add chunks
// that are not there yet, so it refuses.
TEST(CastRingOnNccl, RefusesAStreamOrderedRingWithoutNativeSum) {
  auto compressor = compressors::make_compressor("fp16", compressors::CompressorOptions{});
  auto& summable = static_cast<compressors::SummableCompressor&>(*compressor);
  Path& path = *paths().at("nccl_ring");
  constexpr std::size_t kCount = 64;
  const int ranks = path.transport().size();
  PathBuffer wire(path, algorithms::CastRing::wire_bytes(summable, kCount));
  PathBuffer scratch(path, algorithms::CastRing::scratch_bytes(summable, kCount, ranks));
  algorithms::CastRing ring(path.transport(), summable, kCount, wire.get(), scratch.get());
  EXPECT_EQ(ring.communicate(), Status::internal());
}

INSTANTIATE_TEST_SUITE_P(Hostsim, AlgorithmSuite,
                         ::testing::ValuesIn(cases_on({"nccl", "mpi_staged_pinned"})),
                         [](const auto& info) { return case_name(info.param); });

INSTANTIATE_TEST_SUITE_P(Hostsim, TransportSuite,
                         transport_cases({"nccl", "nccl_ring", "mpi_staged_pinned"}),
                         transport_case_name);
INSTANTIATE_TEST_SUITE_P(Hostsim, TransportSplit, ::testing::Values("nccl", "mpi_staged_pinned"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace slimreduce::testing

int main(int argc, char** argv) {
  using namespace slimreduce::testing;
  return run_algorithm_suite(argc, argv,
                             {{"nccl", [] { return std::make_unique<NcclPath>(true); }},
                              {"nccl_ring", [] { return std::make_unique<NcclPath>(false); }},
                              {"mpi_staged_pinned", pinned_mpi_path}});
}
