// The residual cap (SLIMREDUCE_EF_MAX_BYTES) counts everything a key keeps
// for error feedback, a sharded call's owner-side residual too: each owner
// keeps a 1/ranks share of the tensor besides the tensor's own residual.
// Run with SLIMREDUCE_COMPRESSOR=topk, SLIMREDUCE_TOPK_ALGORITHM=sharded on 3
// ranks and a cap (kCap, below) that holds key A and key B's residuals but
// not those and A's owner share as well: B must go without error feedback.
#include "tests/mpi/mpi_helpers.h"
#include "tests/mpi/mpi_test_main.h"

namespace slimreduce::testing {
namespace {

constexpr std::size_t kCountA = 3 << 16;  // 768 KiB of residual, a 256 KiB share per owner
constexpr std::size_t kCountB = 1 << 15;  // 128 KiB of residual
const std::uint64_t kCap = std::stoull(env_or("SLIMREDUCE_EF_MAX_BYTES", "0"));

// One compressed call into `out` (its own key); how many went without error feedback.
std::uint64_t without_feedback(std::vector<float>& out, std::uint64_t seed) {
  const std::vector<float> in = inputs_of(world_rank(), seed, out.size());
  slimreduce_counters before{}, after{};
  read_counters(&before);
  EXPECT_EQ(MPI_Allreduce(in.data(), out.data(), static_cast<int>(out.size()), MPI_FLOAT, MPI_SUM,
                          MPI_COMM_WORLD),
            MPI_SUCCESS);
  read_counters(&after);
  EXPECT_EQ(after.compressed - before.compressed, 1u);
  EXPECT_TRUE(identical_on_all_ranks(out.data(), out.size() * sizeof(float), MPI_COMM_WORLD));
  return after.ef_cap_fallback - before.ef_cap_fallback;
}

TEST(OwnerResidualCap, TheOwnerShareCountsAgainstTheCap) {
  slimreduce_counters first{};
  ASSERT_TRUE(read_counters(&first)) << "libslimreduce.so is not preloaded";
  ASSERT_EQ(world_size(), 3);
  const std::uint64_t residuals = (kCountA + kCountB) * sizeof(float);
  const std::uint64_t share = kCountA / 3 * sizeof(float);
  ASSERT_GE(kCap, residuals) << "the cap must hold both residuals";
  ASSERT_LT(kCap, residuals + share) << "the cap must not hold A's owner share as well";
  std::vector<float> a(kCountA), b(kCountB);
  EXPECT_EQ(without_feedback(a, 1), 0u) << "A fits under the cap";
  EXPECT_EQ(without_feedback(b, 2), 1u) << "A's owner share took B's room";
  EXPECT_EQ(without_feedback(a, 3), 0u) << "A keeps its residual";
}

}  // namespace
}  // namespace slimreduce::testing

int main(int argc, char** argv) { return slimreduce::testing::run_all_tests_under_mpi(argc, argv); }
