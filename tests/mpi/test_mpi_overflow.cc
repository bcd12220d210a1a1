// Numbers that go wrong, under LD_PRELOAD, for the compressor in
// SLIMREDUCE_COMPRESSOR: a finite float32 sum beyond fp16's range never comes
// back as inf (fp16 reruns with bf16, counted as calls.overflow_rescued), and
// an inf or a NaN in the input comes out where a plain sum has it.
#include <cmath>
#include <cstring>

#include "tests/mpi/mpi_helpers.h"
#include "tests/mpi/mpi_test_main.h"

namespace slimreduce::testing {
namespace {

const std::string kCompressor = env_or("SLIMREDUCE_COMPRESSOR", "none");
const bool kErrorFeedback = env_or("SLIMREDUCE_ERROR_FEEDBACK", "0") == "1";
const bool kHierarchical = env_or("SLIMREDUCE_HIERARCHICAL", "0") == "1";

// The rescue of one call, as the ranks counted it: flat, every rank reruns
// (each counts 1); hierarchical, the ranks of each shard whose sum across
// nodes overflowed (at least one shard's).
void expect_rescued_once(double rescued_here) {
  double everywhere = 0;
  PMPI_Allreduce(&rescued_here, &everywhere, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  if (kCompressor != "fp16" || world_size() == 1) {
    EXPECT_EQ(everywhere, 0.0) << "only fp16 overflows, and only with a sum";
  } else if (kHierarchical) {
    EXPECT_GE(everywhere, 1.0);
    EXPECT_LE(everywhere, world_size());
  } else {
    EXPECT_EQ(everywhere, world_size()) << "every rank reruns the call";
  }
}

double counter(const char* key) {
  using Get = int (*)(const char*, double*);
  static const auto get = reinterpret_cast<Get>(dlsym(RTLD_DEFAULT, "slimreduce_get_counter"));
  double value = -1;
  EXPECT_NE(get, nullptr) << "libslimreduce.so is not preloaded";
  if (get) {
    EXPECT_EQ(get(key, &value), 0) << key;
  }
  return value;
}

std::vector<double> exact_sum(const std::vector<std::vector<float>>& inputs) {
  std::vector<double> sum(inputs[0].size(), 0.0);
  for (const auto& theirs : inputs) {
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += theirs[i];
  }
  return sum;
}

// Every rank's input: 40000 give or take, so that 2 or more ranks sum past
// 65504 while float32 holds the sum easily.
std::vector<float> large_input(int rank, std::size_t count) {
  std::vector<float> input = inputs_of(rank, 99, count);
  for (float& x : input) x = 40000.0f + 1000.0f * x;
  return input;
}

class Overflow : public ::testing::TestWithParam<std::size_t> {};

TEST_P(Overflow, AFiniteSumBeyondFp16sRangeComesBackFinite) {
  const std::size_t count = GetParam();
  const int ranks = world_size();
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < ranks; ++r) inputs.push_back(large_input(r, count));
  std::vector<float> output(count);
  const double rescued_before = counter("calls.overflow_rescued");
  ASSERT_EQ(MPI_Allreduce(inputs[world_rank()].data(), output.data(), static_cast<int>(count),
                          MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
            MPI_SUCCESS);
  EXPECT_TRUE(identical_on_all_ranks(output.data(), count * sizeof(float), MPI_COMM_WORLD));
  const std::vector<double> sum = exact_sum(inputs);
  // bf16 (the rescue) rounds each input and each of the ring's partial sums:
  // 2n - 1 roundings of at most 2^-8 of the sum of magnitudes.
  const double unit = kCompressor == "fp16" || kCompressor == "bf16" ? 0x1p-8 : 0x1p-20;
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    wrong += !std::isfinite(output[i]) ||
             std::fabs(output[i] - sum[i]) > (2 * ranks - 1) * unit * std::fabs(sum[i]) * 1.01;
  }
  EXPECT_EQ(wrong, 0u) << "values not finite or outside the bound";
  expect_rescued_once(counter("calls.overflow_rescued") - rescued_before);
}

INSTANTIATE_TEST_SUITE_P(Sizes, Overflow, ::testing::Values<std::size_t>(1, 1000, 100003));

// One element past the range is enough: the whole call reruns, every rank alike.
TEST(Overflow, OneElementIsEnough) {
  const std::size_t count = 4099;
  std::vector<float> input = inputs_of(world_rank(), 5, count);
  input[count / 3] = 60000.0f;
  std::vector<float> output(count);
  const double rescued_before = counter("calls.overflow_rescued");
  ASSERT_EQ(MPI_Allreduce(input.data(), output.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                          MPI_COMM_WORLD),
            MPI_SUCCESS);
  EXPECT_TRUE(std::isfinite(output[count / 3]));
  EXPECT_NEAR(output[count / 3], 60000.0 * world_size(), 60000.0 * world_size() * 0x1p-6);
  expect_rescued_once(counter("calls.overflow_rescued") - rescued_before);
}

// A sum that fits is not rerun: the common case costs one scan of the wire.
TEST(Overflow, ASumThatFitsIsNotRerun) {
  const std::size_t count = 4099;
  const std::vector<float> input = inputs_of(world_rank(), 6, count);
  std::vector<float> output(count);
  const double rescued_before = counter("calls.overflow_rescued");
  ASSERT_EQ(MPI_Allreduce(input.data(), output.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                          MPI_COMM_WORLD),
            MPI_SUCCESS);
  EXPECT_EQ(counter("calls.overflow_rescued"), rescued_before);
}

// With error feedback, the rescued call's residual restarts from zero: the
// calls after it on the same buffer are as a first call is (finite, near the sum).
TEST(Overflow, TheResidualRestartsAfterARescue) {
  const std::size_t count = 1000;
  std::vector<float> buffer(count);
  const std::vector<float> large = large_input(world_rank(), count);
  std::memcpy(buffer.data(), large.data(), count * sizeof(float));
  ASSERT_EQ(MPI_Allreduce(MPI_IN_PLACE, buffer.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                          MPI_COMM_WORLD),
            MPI_SUCCESS);
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < world_size(); ++r) inputs.push_back(inputs_of(r, 8, count));
  std::memcpy(buffer.data(), inputs[world_rank()].data(), count * sizeof(float));
  ASSERT_EQ(MPI_Allreduce(MPI_IN_PLACE, buffer.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                          MPI_COMM_WORLD),
            MPI_SUCCESS);
  const std::vector<double> sum = exact_sum(inputs);
  double worst = 0;
  for (std::size_t i = 0; i < count; ++i) {
    ASSERT_TRUE(std::isfinite(buffer[i])) << i;
    worst = std::max(worst, std::fabs(buffer[i] - sum[i]));
  }
  // The inputs are below 1 in magnitude: a carried-over residual of the
  // 40000-sized call (rounding errors of up to 16) would show here.
  EXPECT_LT(worst, 0.5) << (kErrorFeedback ? "with" : "without") << " error feedback";
}

// inf, -inf and NaN in the inputs come out where a plain sum has them.
TEST(NonFinite, ComeOutWhereAPlainSumHasThem) {
  const std::size_t count = 1000;
  const int rank = world_rank();
  std::vector<float> input = inputs_of(rank, 9, count);
  const float inf = INFINITY;
  if (rank == 0) input[10] = inf, input[20] = inf, input[30] = -inf;
  if (rank == world_size() - 1) input[20] = -inf, input[40] = NAN, input[50] = inf;
  std::vector<float> through(count), plain(count);
  ASSERT_EQ(MPI_Allreduce(input.data(), through.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                          MPI_COMM_WORLD),
            MPI_SUCCESS);
  PMPI_Allreduce(input.data(), plain.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                 MPI_COMM_WORLD);
  for (std::size_t i = 0; i < count; ++i) {
    EXPECT_EQ(std::isnan(through[i]), std::isnan(plain[i])) << i;
    EXPECT_EQ(std::isinf(through[i]), std::isinf(plain[i])) << i;
    if (std::isinf(plain[i])) {
      EXPECT_EQ(std::signbit(through[i]), std::signbit(plain[i])) << i;
    }
  }
}

}  // namespace
}  // namespace slimreduce::testing

int main(int argc, char** argv) { return slimreduce::testing::run_all_tests_under_mpi(argc, argv); }
