// Multi-rank tests of top-k under LD_PRELOAD. Each rank computes, with a
// sort-based reference written here, what it should send; the ranks gather
// those references and every rank checks the library's output bit for bit.
// Expectations follow the environment the library reads:
// SLIMREDUCE_TOPK_RATIO, SLIMREDUCE_TOPK_VALUES, SLIMREDUCE_ERROR_FEEDBACK,
// SLIMREDUCE_WARMUP_STEPS, SLIMREDUCE_EF_MAX_BYTES, SLIMREDUCE_PARTITION_BYTES
// (plain bytes here: a call above it is cut into the fewest near-equal
// pieces within it, and each piece is its own top-k).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "tests/mpi/mpi_helpers.h"
#include "tests/mpi/mpi_test_main.h"

namespace slimreduce::testing {
namespace {

const double kRatio = std::stod(env_or("SLIMREDUCE_TOPK_RATIO", "0.01"));
const bool kFp16Values = env_or("SLIMREDUCE_TOPK_VALUES", "fp32") == "fp16";
const bool kErrorFeedback = env_or("SLIMREDUCE_ERROR_FEEDBACK", "1") == "1";
const std::uint64_t kWarmup = std::stoull(env_or("SLIMREDUCE_WARMUP_STEPS", "0"));
const std::uint64_t kMaxResidualBytes =
    std::stoull(env_or("SLIMREDUCE_EF_MAX_BYTES", "4294967296"));
const std::uint64_t kPartitionBytes = std::stoull(env_or("SLIMREDUCE_PARTITION_BYTES", "4194304"));

// The pieces' lengths a call of n floats is cut into (written here from the
// rule, not taken from the library).
std::vector<std::size_t> piece_lengths(std::size_t n) {
  const std::size_t per_piece = std::max<std::size_t>(1, kPartitionBytes / sizeof(float));
  const std::size_t pieces = (n + per_piece - 1) / per_piece;
  std::vector<std::size_t> lengths(pieces, n / pieces);
  for (std::size_t i = 0; i < n % pieces; ++i) ++lengths[i];
  return lengths;
}

std::size_t k_of(std::size_t n) {
  const double exact = kRatio * static_cast<double>(n);
  return std::clamp<std::size_t>(static_cast<std::size_t>(std::ceil(exact - exact * 1e-12)), 1, n);
}

// One rank's step: what it sends (dense, zero where nothing is sent) and the
// residual it keeps, from acc = input + residual.
struct Step {
  std::vector<float> sent;
  std::vector<float> residual;
};

Step reference_piece(const std::vector<float>& input, const std::vector<float>& old_residual) {
  const std::size_t n = input.size();
  std::vector<float> acc(n);
  for (std::size_t i = 0; i < n; ++i) acc[i] = input[i] + old_residual[i];
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  auto key = [&](std::uint32_t i) { return float_bits(acc[i]) & 0x7fffffffu; };
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return key(a) > key(b); });
  Step step{std::vector<float>(n, 0.0f), acc};
  for (std::size_t rank_in_order = 0; rank_in_order < k_of(n); ++rank_in_order) {
    const std::uint32_t i = order[rank_in_order];
    const float sent = kFp16Values ? static_cast<float>(static_cast<_Float16>(acc[i])) : acc[i];
    step.sent[i] = sent;
    step.residual[i] = std::isfinite(sent) ? acc[i] - sent : 0.0f;
  }
  return step;
}

// The call's step: each piece's top-k, side by side.
Step reference_step(const std::vector<float>& input, const std::vector<float>& old_residual) {
  Step step;
  std::size_t begin = 0;
  for (std::size_t length : piece_lengths(input.size())) {
    const auto at = [begin](const std::vector<float>& v, std::size_t n) {
      return std::vector<float>(v.begin() + begin, v.begin() + begin + n);
    };
    const Step piece = reference_piece(at(input, length), at(old_residual, length));
    step.sent.insert(step.sent.end(), piece.sent.begin(), piece.sent.end());
    step.residual.insert(step.residual.end(), piece.residual.begin(), piece.residual.end());
    begin += length;
  }
  return step;
}

// The pairs a call sends: each piece's k.
std::size_t pairs_of(std::size_t n) {
  std::size_t pairs = 0;
  for (std::size_t length : piece_lengths(n)) pairs += k_of(length);
  return pairs;
}

// Every rank's `sent`, gathered, summed in rank order into zeros.
std::vector<float> sum_in_rank_order(const std::vector<float>& mine) {
  const std::size_t n = mine.size();
  std::vector<float> all(n * world_size());
  PMPI_Allgather(mine.data(), n, MPI_FLOAT, all.data(), n, MPI_FLOAT, MPI_COMM_WORLD);
  std::vector<float> sum(n, 0.0f);
  for (int rank = 0; rank < world_size(); ++rank) {
    for (std::size_t i = 0; i < n; ++i) sum[i] += all[rank * n + i];
  }
  return sum;
}

std::size_t mismatches(const std::vector<float>& got, const std::vector<float>& want) {
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i) wrong += float_bits(got[i]) != float_bits(want[i]);
  return wrong;
}

class TopkAllreduce : public ::testing::TestWithParam<std::size_t> {};

// Three calls on one persistent buffer: warm-up calls are dense, then each
// compressed call must equal the gathered references, residual included.
TEST_P(TopkAllreduce, FollowsTheReferenceCallAfterCall) {
  const std::size_t n = GetParam();
  const bool over_cap = kErrorFeedback && n * sizeof(float) > kMaxResidualBytes;
  std::vector<float> buffer(n);
  std::vector<float> residual(n, 0.0f);
  for (std::uint64_t call = 0; call < kWarmup + 3; ++call) {
    const std::vector<float> input = inputs_of(world_rank(), n * 31 + call, n);
    buffer = input;
    slimreduce_counters before{}, after{};
    read_counters(&before);
    ASSERT_EQ(MPI_Allreduce(MPI_IN_PLACE, buffer.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
              MPI_SUCCESS);
    read_counters(&after);
    EXPECT_TRUE(identical_on_all_ranks(buffer.data(), n * sizeof(float), MPI_COMM_WORLD));
    const bool dense = call < kWarmup || over_cap;
    EXPECT_EQ(after.compressed - before.compressed, dense ? 0u : 1u) << "call " << call;
    EXPECT_EQ(after.warmup - before.warmup, call < kWarmup && !over_cap ? 1u : 0u);
    EXPECT_EQ(after.ef_cap_fallback - before.ef_cap_fallback, over_cap ? 1u : 0u);
    if (dense) {
      std::vector<float> direct(n);
      PMPI_Allreduce(input.data(), direct.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      EXPECT_EQ(mismatches(buffer, direct), 0u) << "call " << call << " should pass through";
      continue;
    }
    const Step step = reference_step(input, residual);
    EXPECT_EQ(mismatches(buffer, sum_in_rank_order(step.sent)), 0u) << "call " << call;
    if (kErrorFeedback) residual = step.residual;
    const double wire = (world_size() - 1.0) * pairs_of(n) * (kFp16Values ? 6 : 8);
    EXPECT_NEAR(after.wire_sent - before.wire_sent, wire, 1.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, TopkAllreduce,
                         ::testing::Values<std::size_t>(16384, 16387, 100003, 1 << 20));

// NaN counts as the largest magnitude: it is always sent, never dropped.
TEST(TopkAllreduce, NanIsNeverDropped) {
  constexpr std::size_t kCount = 1 << 16;
  std::vector<float> buffer = inputs_of(world_rank(), 99, kCount);
  buffer[1234] = std::nanf("");
  ASSERT_EQ(MPI_Allreduce(MPI_IN_PLACE, buffer.data(), kCount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
            MPI_SUCCESS);
  EXPECT_TRUE(std::isnan(buffer[1234]));
}

// One buffer reduced with another count is another tensor: its residual is
// dropped, and the report counts it (Horovod's fusion buffer does this). The
// counts are ones no other test uses: a later buffer at the same address with
// the same count would inherit the residual, by design. Warm-up calls (each
// shape's first kWarmup) hold no residual, so each count is called past them.
TEST(TopkAllreduce, ANewCountOnTheSameBufferResetsTheResidual) {
  std::vector<float> buffer = inputs_of(world_rank(), 98, 20000);
  slimreduce_counters before{}, after{};
  for (std::uint64_t call = 0; call <= kWarmup; ++call) {
    MPI_Allreduce(MPI_IN_PLACE, buffer.data(), 20000, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }
  read_counters(&before);
  for (std::uint64_t call = 0; call <= kWarmup; ++call) {
    MPI_Allreduce(MPI_IN_PLACE, buffer.data(), 18000, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }
  read_counters(&after);
  EXPECT_EQ(after.ef_resets - before.ef_resets, kErrorFeedback ? 1u : 0u);
}

}  // namespace
}  // namespace slimreduce::testing

int main(int argc, char** argv) { return slimreduce::testing::run_all_tests_under_mpi(argc, argv); }
