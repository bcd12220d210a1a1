// Calls cut into partitions and pipelined (scheduler/partition.h,
// scheduler/pipeline.h), through core's host_allreduce over the real MPI
// (linked, no preload): pipelined and unpipelined runs give the same bits,
// outputs and residuals, at 1, 2 and many partitions, with counts that do not
// divide; every rank holds the same result; and no transport call ever comes
// from a thread other than the caller's. The job's thread level is the first
// argument (single, funneled, serialized, multiple): the helper thread never
// calls MPI, so every level must pass.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backends/mpi_transport.h"
#include "compressors/registry.h"
#include "core/mpi/comm_state.h"
#include "core/mpi/host_allreduce.h"
#include "scheduler/pipeline.h"
#include "tests/mpi/mpi_helpers.h"
#include "tests/mpi/mpi_test_main.h"

namespace slimreduce::testing {
namespace {

// The real transport, with a check that every call comes from the thread that made it.
class CallerThreadTransport final : public backends::Transport {
 public:
  explicit CallerThreadTransport(backends::Transport& real)
      : Transport(real.rank(), real.size(), real.memory(), real.execution()), real_(real) {}
  Status sendrecv(const void* send, std::size_t send_bytes, int dest, void* recv,
                  std::size_t recv_bytes, int source) override {
    note();
    return real_.sendrecv(send, send_bytes, dest, recv, recv_bytes, source);
  }
  Status allgather(const void* send, std::size_t bytes_per_rank, void* gathered) override {
    note();
    return real_.allgather(send, bytes_per_rank, gathered);
  }
  Status reduce_scatter_sum(const float* send, float* recv, std::size_t count) override {
    note();
    return real_.reduce_scatter_sum(send, recv, count);
  }
  Status split(int, int, std::unique_ptr<Transport>*) override { return Status::internal(); }
  std::size_t calls() const { return calls_; }
  std::size_t off_thread_calls() const { return off_thread_; }

 private:
  void note() {
    ++calls_;
    if (std::this_thread::get_id() != caller_) ++off_thread_;
  }
  backends::Transport& real_;
  std::thread::id caller_ = std::this_thread::get_id();
  std::size_t calls_ = 0;
  std::size_t off_thread_ = 0;  // counted from other threads: a data race, only ever 0 if right
};

struct Case {
  std::string compressor;
  double topk_ratio;
  bool error_feedback;
  std::size_t count;
  std::size_t pieces;  // partitions wanted: 1, 2 or many
};

void PrintTo(const Case& c, std::ostream* out) {
  *out << c.compressor << " ratio " << c.topk_ratio << (c.error_feedback ? " ef" : "") << " count "
       << c.count << " pieces " << c.pieces;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  std::string ratio = c.compressor == "topk" ? "_r" + std::to_string(int(c.topk_ratio * 1000)) : "";
  return c.compressor + ratio + (c.error_feedback ? "_ef" : "") + "_n" + std::to_string(c.count) +
         "_p" + std::to_string(c.pieces);
}

// Partition bytes that cut count floats into `pieces` (many: 4 KiB ones).
std::uint64_t partition_bytes_for(std::size_t count, std::size_t pieces) {
  if (pieces == 1) return count * sizeof(float);
  if (pieces == 2) return (count * sizeof(float) + 1) / 2 + sizeof(float);
  return 4096;
}

std::vector<float> gradient(std::size_t count, int rank, int step) {
  std::mt19937 random(1000 * rank + step);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(count);
  for (float& v : values) v = normal(random);
  return values;
}

// One run of `steps` calls, each keeping its output and residual.
struct RunResult {
  std::vector<std::vector<float>> outputs, residuals;
  std::size_t partitions = 0;
  std::size_t off_thread_calls = 0;
  bool sharded = false;  // top-k by algorithms/sharded.h (auto: at ratio 1 from 3 ranks)
};

RunResult run(const Case& c, bool pipelined, scheduler::HelperPool& pool, CommState& state) {
  compressors::CompressorOptions options;
  options.topk_ratio = c.topk_ratio;
  auto compressor = compressors::make_compressor(c.compressor, options);
  MPI_Comm wire = MPI_COMM_NULL;
  EXPECT_EQ(state.private_comm(&wire), MPI_SUCCESS);
  backends::MpiTransport mpi(wire, state.rank(), state.size());
  CallerThreadTransport transport(mpi);
  std::vector<float> residual(c.error_feedback ? c.count : 0, 0.0f);
  RunResult result;
  constexpr int kSteps = 3;
  for (int step = 0; step < kSteps; ++step) {
    const std::vector<float> input = gradient(c.count, state.rank(), step);
    std::vector<float> output(c.count, -1.0f);
    RunOptions run_options{partition_bytes_for(c.count, c.pieces), pipelined ? &pool : nullptr,
                           nullptr};
    Reduced reduced;
    const Status status = host_allreduce(
        {input.data(), output.data(), c.count, c.error_feedback ? residual.data() : nullptr},
        *compressor, transport, state, run_options, &reduced);
    EXPECT_TRUE(status.ok());
    result.outputs.push_back(output);
    result.residuals.push_back(residual);
    result.partitions = reduced.partitions;
    result.sharded = reduced.sharded;
  }
  result.off_thread_calls = transport.off_thread_calls();
  return result;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  // memcmp is not to be given the null data() of an empty vector.
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Whether every rank holds these bits (a hash compared over the ranks).
bool same_on_every_rank(const std::vector<float>& values) {
  return identical_on_all_ranks(values.data(), values.size() * sizeof(float), MPI_COMM_WORLD);
}

class Pipeline : public ::testing::TestWithParam<Case> {};

TEST_P(Pipeline, SameBitsAsUnpipelinedOnEveryRank) {
  const Case& c = GetParam();
  CommState state(1, MPI_COMM_WORLD);
  scheduler::HelperPool pool;
  const RunResult plain = run(c, false, pool, state);
  const RunResult pipelined = run(c, true, pool, state);
  ASSERT_EQ(plain.outputs.size(), pipelined.outputs.size());
  for (std::size_t step = 0; step < plain.outputs.size(); ++step) {
    EXPECT_TRUE(same_bits(plain.outputs[step], pipelined.outputs[step])) << "output, step " << step;
    EXPECT_TRUE(same_bits(plain.residuals[step], pipelined.residuals[step]))
        << "residual, step " << step;
    EXPECT_TRUE(same_on_every_rank(pipelined.outputs[step])) << "step " << step;
  }
  if (c.pieces == 1) {
    EXPECT_EQ(pipelined.partitions, 1u);
  }
  if (c.pieces == 2) {
    EXPECT_EQ(pipelined.partitions, 2u);
  }
  if (c.pieces > 2) {
    EXPECT_GT(pipelined.partitions, 10u);
  }
  // Only cut calls use a helper; none of its work is a transport call.
  EXPECT_EQ(pool.made(), c.pieces == 1 ? 0u : 1u);
  EXPECT_EQ(pipelined.off_thread_calls, 0u);
}

// The partitioned sum is still the sum: within the compressor's rounding of
// the exact one (top-k at ratio 1 sends everything: fp32 adds alone).
TEST_P(Pipeline, PipelinedResultIsTheSum) {
  const Case& c = GetParam();
  if (c.compressor == "topk" && c.topk_ratio < 1.0) GTEST_SKIP() << "a sparse sum is not the sum";
  CommState state(1, MPI_COMM_WORLD);
  scheduler::HelperPool pool;
  const RunResult pipelined = run(c, true, pool, state);
  const std::vector<float>& output = pipelined.outputs[0];
  std::vector<double> exact(c.count, 0.0);
  double bound = 0;
  for (int r = 0; r < state.size(); ++r) {
    const std::vector<float> input = gradient(c.count, r, 0);
    for (std::size_t i = 0; i < c.count; ++i) exact[i] += input[i];
  }
  // 16-bit wires: each of log-many hops rounds to 2^-8 (bf16) of the partial sum;
  // sharded top-k at ratio 1: the owners send their summed shards in fp16.
  const double relative = c.compressor == "bf16"                        ? 1.0 / 64
                          : c.compressor == "fp16" || pipelined.sharded ? 1.0 / 512
                                                                        : 1e-5;
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < c.count; ++i) {
    bound = relative * state.size() * (std::fabs(exact[i]) + 4.0);
    if (std::fabs(output[i] - exact[i]) > bound) ++wrong;
  }
  EXPECT_EQ(wrong, 0u);
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (std::size_t count : {std::size_t{100003}, std::size_t{65536}})
    for (std::size_t pieces : {1, 2, 100}) {
      all.push_back({"fp16", 0, false, count, pieces});
      all.push_back({"fp16", 0, true, count, pieces});
      all.push_back({"bf16", 0, true, count, pieces});
      all.push_back({"topk", 0.01, true, count, pieces});
      all.push_back({"topk", 1.0, false, count, pieces});
    }
  return all;
}

INSTANTIATE_TEST_SUITE_P(Partitions, Pipeline, ::testing::ValuesIn(cases()), case_name);

}  // namespace
}  // namespace slimreduce::testing

// argv[1]: the thread level to ask for (single, funneled, serialized, multiple).
int main(int argc, char** argv) {
  const std::string level = argc > 1 ? argv[1] : "single";
  const int wanted = level == "multiple"     ? MPI_THREAD_MULTIPLE
                     : level == "serialized" ? MPI_THREAD_SERIALIZED
                     : level == "funneled"   ? MPI_THREAD_FUNNELED
                                             : MPI_THREAD_SINGLE;
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, wanted, &provided);
  ::testing::InitGoogleTest(&argc, argv);
  return slimreduce::testing::run_initialized_tests();
}
