// A job that reduces into a new receive buffer every step, with heaps that
// drift apart between ranks (here rank 0 keeps every other buffer): residual
// keys are buffer addresses, so the ranks hold different keys and reach the
// residual cap at different calls. Whether a call is compressed must still be
// the same on every rank, call by call (a rank that passed a call through
// while the others compressed it would hang the job), and the sums right.
// Run with SLIMREDUCE_COMPRESSOR=fp16, error feedback on, SLIMREDUCE_EF_MAX_BYTES
// of a few tensors and SLIMREDUCE_WARMUP_STEPS=2.
#include <cstdlib>
#include <memory>

#include "tests/mpi/mpi_helpers.h"
#include "tests/mpi/mpi_test_main.h"

namespace slimreduce::testing {
namespace {

constexpr int kCount = 1 << 18;  // 1 MiB of residual per key
constexpr int kSteps = 12;
const std::uint64_t kWarmup = std::stoull(env_or("SLIMREDUCE_WARMUP_STEPS", "0"));

bool same_on_every_rank(std::uint64_t value) {
  std::uint64_t low = 0, high = 0;
  PMPI_Allreduce(&value, &low, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  PMPI_Allreduce(&value, &high, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  return low == high;
}

TEST(FreshBuffers, EveryRankTakesTheSamePathCallByCall) {
  slimreduce_counters first{};
  ASSERT_TRUE(read_counters(&first)) << "libslimreduce.so is not preloaded";
  // Small integers: every sum is exact in fp16, error feedback or not.
  const std::vector<float> gradient(kCount, static_cast<float>(world_rank() + 1));
  const float sum = static_cast<float>(world_size() * (world_size() + 1) / 2);
  std::vector<std::unique_ptr<float[]>> kept;
  for (int step = 0; step < kSteps; ++step) {
    auto reduced = std::make_unique<float[]>(kCount);
    slimreduce_counters before{}, after{};
    read_counters(&before);
    ASSERT_EQ(
        MPI_Allreduce(gradient.data(), reduced.get(), kCount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
        MPI_SUCCESS);
    read_counters(&after);
    const std::uint64_t compressed = after.compressed - before.compressed;
    EXPECT_EQ(compressed, step < static_cast<int>(kWarmup) ? 0u : 1u) << "step " << step;
    EXPECT_TRUE(same_on_every_rank(compressed)) << "step " << step;
    std::size_t wrong = 0;
    for (int i = 0; i < kCount; ++i) wrong += reduced[i] != sum;
    EXPECT_EQ(wrong, 0u) << "step " << step;
    if (world_rank() == 0 && step % 2 == 0) kept.push_back(std::move(reduced));
  }
  slimreduce_counters last{};
  read_counters(&last);
  if (world_rank() == 0) {
    EXPECT_GT(last.ef_cap_fallback - first.ef_cap_fallback, 0u)
        << "rank 0 should have run out of residual room (the case under test)";
  }
}

// Every step a new receive buffer, all kept alive (so every key is new), under
// a cap of 8 keys: with SLIMREDUCE_EF_EVICT_CALLS below the step count the
// keys no step uses again are freed and the cap is never reached; with the
// default (10000) they stay and the cap turns error feedback off.
TEST(FreshBuffers, UnusedKeysAreEvictedBeforeTheCapFills) {
  constexpr int kManySteps = 40;
  const std::uint64_t limit = std::stoull(env_or("SLIMREDUCE_EF_EVICT_CALLS", "10000"));
  ASSERT_EQ(env_or("SLIMREDUCE_EF_MAX_BYTES", ""), "8M") << "run with a cap of 8 keys";
  const std::vector<float> gradient(kCount, static_cast<float>(world_rank() + 1));
  slimreduce_counters first{}, last{};
  ASSERT_TRUE(read_counters(&first));
  const double evicted_before = counter("calls.ef_evicted");
  std::vector<std::unique_ptr<float[]>> alive;
  for (int step = 0; step < kManySteps; ++step) {
    alive.push_back(std::make_unique<float[]>(kCount));
    ASSERT_EQ(MPI_Allreduce(gradient.data(), alive.back().get(), kCount, MPI_FLOAT, MPI_SUM,
                            MPI_COMM_WORLD),
              MPI_SUCCESS);
  }
  read_counters(&last);
  const auto evicted = static_cast<std::uint64_t>(counter("calls.ef_evicted") - evicted_before);
  const std::uint64_t fallbacks = last.ef_cap_fallback - first.ef_cap_fallback;
  EXPECT_TRUE(same_on_every_rank(evicted));
  if (limit < kManySteps) {
    EXPECT_GE(evicted, kManySteps - 8u) << "keys no call uses again";
    EXPECT_EQ(fallbacks, 0u) << "the cap never filled";
  } else {
    EXPECT_EQ(evicted, 0u);
    EXPECT_GT(fallbacks, 0u) << "without eviction the cap fills (the case eviction is for)";
  }
}

}  // namespace
}  // namespace slimreduce::testing

int main(int argc, char** argv) { return slimreduce::testing::run_all_tests_under_mpi(argc, argv); }
