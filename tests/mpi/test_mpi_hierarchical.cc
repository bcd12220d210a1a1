// Multi-rank tests of hierarchical reduction (SLIMREDUCE_HIERARCHICAL=1) under
// LD_PRELOAD, with nodes emulated by SLIMREDUCE_LOCAL_SIZE=L (blocks of L
// world ranks). What to expect is derived from the same environment the
// library reads: SLIMREDUCE_COMPRESSOR, SLIMREDUCE_TOPK_RATIO and
// SLIMREDUCE_LOCAL_SIZE; one node (L = world size) expects the flat path.
#include <cmath>
#include <cstring>

#include "tests/mpi/mpi_helpers.h"
#include "tests/mpi/mpi_test_main.h"

namespace slimreduce::testing {
namespace {

const std::string kCompressor = env_or("SLIMREDUCE_COMPRESSOR", "none");
const double kRatio = std::stod(env_or("SLIMREDUCE_TOPK_RATIO", "0.01"));
const int kLocal = std::stoi(env_or("SLIMREDUCE_LOCAL_SIZE", "1"));
const bool kCast = kCompressor == "fp16" || kCompressor == "bf16";

int nodes_of(int ranks) { return ranks / kLocal; }
bool hierarchical(int ranks) { return nodes_of(ranks) >= 2 && kLocal >= 2; }

// Hierarchical fp16/bf16: the node's sum is fp32 (L - 1 fp32 roundings),
// rounded to 16 bits once per node (M roundings), then re-rounded at each of
// the M - 1 hops of the ring across nodes: 2M - 1 16-bit roundings instead of
// the flat ring's 2N - 1. Top-k at ratio 1 keeps every element: fp32 adds alone.
double error_bound(double sum_of_magnitudes, int ranks) {
  const double fp32_part = ranks * 0x1p-24 * sum_of_magnitudes;
  if (!kCast) return fp32_part;
  const double unit = kCompressor == "fp16" ? 0x1p-11 : 0x1p-8;
  const double subnormal_step = kCompressor == "fp16" ? 0x1p-25 : 0.0;
  const int nodes = hierarchical(ranks) ? nodes_of(ranks) : ranks;
  const int roundings = 2 * nodes - 1;
  return roundings * (unit * sum_of_magnitudes * (1 + roundings * unit) + subnormal_step) +
         fp32_part;
}

struct Reduced {
  std::vector<float> output;
  slimreduce_counters delta{};
};

Reduced reduce(const std::vector<float>& input, MPI_Comm comm, bool in_place) {
  Reduced r;
  slimreduce_counters before{}, after{};
  read_counters(&before);
  r.output = in_place ? input : std::vector<float>(input.size(), -7.0f);
  const int count = static_cast<int>(input.size());
  const int rc =
      in_place ? MPI_Allreduce(MPI_IN_PLACE, r.output.data(), count, MPI_FLOAT, MPI_SUM, comm)
               : MPI_Allreduce(input.data(), r.output.data(), count, MPI_FLOAT, MPI_SUM, comm);
  EXPECT_EQ(rc, MPI_SUCCESS);
  read_counters(&after);
  r.delta.compressed = after.compressed - before.compressed;
  r.delta.wire_sent = after.wire_sent - before.wire_sent;
  return r;
}

class HierarchicalAllreduce : public ::testing::TestWithParam<std::tuple<std::size_t, bool>> {};

TEST_P(HierarchicalAllreduce, SameBitsOnEveryRankWithinTheBound) {
  const auto [count, in_place] = GetParam();
  const int ranks = world_size();
  const std::uint64_t seed = count * 2 + in_place + 1000;
  const Reduced r = reduce(inputs_of(world_rank(), seed, count), MPI_COMM_WORLD, in_place);
  EXPECT_EQ(r.delta.compressed, 1u);
  EXPECT_TRUE(identical_on_all_ranks(r.output.data(), count * sizeof(float), MPI_COMM_WORLD));
  if (kCompressor == "topk" && kRatio < 1) {
    // Each node keeps at most ceil(ratio x shard) elements of each shard of
    // its sum (flat: each rank of its tensor).
    const bool shards = hierarchical(ranks);
    const std::size_t shard = shards ? (count + kLocal - 1) / kLocal : count;
    const std::size_t kept = static_cast<std::size_t>(std::ceil(kRatio * shard));
    const std::size_t most = shards ? kept * kLocal * nodes_of(ranks) : kept * ranks;
    std::size_t nonzero = 0;
    for (float x : r.output) nonzero += x != 0.0f;
    EXPECT_GT(nonzero, 0u);
    EXPECT_LE(nonzero, most) << "more kept than the shards allow";
    return;
  }
  const ExactSum exact = exact_sum_of(seed, count, ranks);
  const std::vector<double>& sum = exact.sum;
  const std::vector<double>& magnitude = exact.magnitude;
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    wrong += std::fabs(r.output[i] - sum[i]) > error_bound(magnitude[i], ranks);
  }
  EXPECT_EQ(wrong, 0u) << "values outside the bound";
}

// Counts that split into equal shards and counts that leave padding.
INSTANTIATE_TEST_SUITE_P(Sizes, HierarchicalAllreduce,
                         ::testing::Combine(::testing::Values<std::size_t>(1, 7, 1000, 4099,
                                                                           100003),
                                            ::testing::Bool()));

// Top-k with error feedback (its default) on one buffer, step after step:
// what a step leaves out of a shard is carried in that shard's residual, so
// the outputs' total stays within one residual of T x the sum, where without
// feedback the same elements would be dropped every step (T x what the first
// step, which has no residual yet, left out).
TEST(Hierarchical, ErrorFeedbackCarriesWhatTopkLeftOut) {
  ASSERT_TRUE(kCompressor == "topk" && kRatio < 1) << "ctest runs this test with top-k below 1";
  const std::size_t count = 4099;
  const int steps = 30;
  const std::vector<float> input = inputs_of(world_rank(), 77, count);
  std::vector<double> sum(count, 0.0), total(count, 0.0);
  for (int rank = 0; rank < world_size(); ++rank) {
    const std::vector<float> theirs = inputs_of(rank, 77, count);
    for (std::size_t i = 0; i < count; ++i) sum[i] += theirs[i];
  }
  std::vector<float> output(count);
  double dropped_first = 0, error_with_feedback = 0;
  for (int step = 0; step < steps; ++step) {
    ASSERT_EQ(MPI_Allreduce(input.data(), output.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
              MPI_SUCCESS);
    for (std::size_t i = 0; i < count; ++i) {
      total[i] += output[i];
      if (step == 0) dropped_first += std::fabs(sum[i] - output[i]);
    }
  }
  for (std::size_t i = 0; i < count; ++i)
    error_with_feedback += std::fabs(total[i] - steps * sum[i]);
  EXPECT_GT(dropped_first, 0.0) << "the first step kept everything: nothing to carry";
  EXPECT_LT(error_with_feedback, 0.25 * steps * dropped_first)
      << "the residuals did not carry what was left out";
}

// What this rank hands to the transports for a cast, by hand: a flat ring of
// the 16-bit tensor, or an fp32 reduce-scatter and allgather of (L - 1)
// shards each inside the node plus a 16-bit ring of the shard across nodes.
double cast_wire_bytes(std::size_t count, int ranks) {
  if (!hierarchical(ranks)) return 2.0 * (ranks - 1) / ranks * count * 2;
  const double shard = static_cast<double>((count + kLocal - 1) / kLocal);
  const int nodes = nodes_of(ranks);
  return 2.0 * (kLocal - 1) * shard * 4 + 2.0 * (nodes - 1) / nodes * shard * 2;
}

TEST(Hierarchical, WireBytesAreTheHandComputation) {
  ASSERT_TRUE(kCast) << "a cast's formula: ctest runs this test with fp16 or bf16 only";
  for (std::size_t count : {1000u, 4099u}) {
    const Reduced r = reduce(inputs_of(world_rank(), count, count), MPI_COMM_WORLD, false);
    // A difference of two running sums of the report: equal up to their rounding.
    const double want = cast_wire_bytes(count, world_size());
    EXPECT_NEAR(r.delta.wire_sent, want, want * 1e-9) << count;
  }
}

// A communicator within one emulated node, and one of a single rank per
// node, reduce flat: same bits on every rank, and the flat ring's bytes.
TEST(Hierarchical, CommunicatorsThatSpanOneNodeOrOneRankPerNodeReduceFlat) {
  ASSERT_TRUE(kCast) << "a cast's formula: ctest runs this test with fp16 or bf16 only";
  MPI_Comm within = MPI_COMM_NULL, across = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, world_rank() / kLocal, world_rank(), &within);
  MPI_Comm_split(MPI_COMM_WORLD, world_rank() % kLocal, world_rank(), &across);
  for (MPI_Comm comm : {within, across}) {
    int size = 0;
    MPI_Comm_size(comm, &size);
    const Reduced r = reduce(inputs_of(world_rank(), 5, 1000), comm, false);
    EXPECT_TRUE(identical_on_all_ranks(r.output.data(), r.output.size() * sizeof(float), comm));
    const double flat_ring = 2.0 * (size - 1) / size * 1000 * 2;
    if (size > 1) {
      EXPECT_NEAR(r.delta.wire_sent, flat_ring, flat_ring * 1e-9);
    }
  }
  MPI_Comm_free(&within);
  MPI_Comm_free(&across);
}

// Each communicator makes its node sub-communicators at its first call and
// frees them with itself.
TEST(Hierarchical, CommunicatorsComeAndGo) {
  for (int cycle = 0; cycle < 50; ++cycle) {
    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    const Reduced r = reduce(inputs_of(world_rank(), cycle, 999), comm, cycle % 2 == 0);
    ASSERT_EQ(r.delta.compressed, 1u);
    ASSERT_TRUE(identical_on_all_ranks(r.output.data(), r.output.size() * sizeof(float), comm));
    MPI_Comm_free(&comm);
  }
}

}  // namespace
}  // namespace slimreduce::testing

int main(int argc, char** argv) { return slimreduce::testing::run_all_tests_under_mpi(argc, argv); }
