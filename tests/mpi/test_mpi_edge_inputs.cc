// Inputs at the edges, under the preloaded library with each compressor
// (SLIMREDUCE_COMPRESSOR; SLIMREDUCE_MIN_BYTES=4, so that every float call
// is eligible): count 0, all zeros (+0 and -0), subnormal floats, one
// element. Each must come out as a plain sum would have it, within the
// compressor's bound where it has one, finite, the same bits on every rank,
// and counted as the library says.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tests/mpi/mpi_helpers.h"
#include "tests/mpi/mpi_test_main.h"

namespace slimreduce::testing {
namespace {

const std::string kCompressor = env_or("SLIMREDUCE_COMPRESSOR", "");

bool same_on_every_rank(const std::vector<float>& values) {
  return identical_on_all_ranks(values.data(), values.size() * sizeof(float), MPI_COMM_WORLD);
}

std::vector<float> allreduce(const std::vector<float>& input) {
  std::vector<float> output(input.size(), 12345.0f);
  EXPECT_EQ(MPI_Allreduce(input.data(), output.data(), static_cast<int>(input.size()), MPI_FLOAT,
                          MPI_SUM, MPI_COMM_WORLD),
            MPI_SUCCESS);
  return output;
}

TEST(EdgeInputs, LibraryIsPreloadedWithTheCompressorAsked) {
  slimreduce_counters counters{};
  ASSERT_TRUE(read_counters(&counters)) << "libslimreduce.so is preloaded";
  ASSERT_FALSE(kCompressor.empty());
}

// Nothing to reduce: the call succeeds and writes nothing, blocking or queued.
TEST(EdgeInputs, CountZeroWritesNothing) {
  float in = 1.0f, out = 7.0f;
  EXPECT_EQ(MPI_Allreduce(&in, &out, 0, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(out, 7.0f);
  MPI_Request request = MPI_REQUEST_NULL;
  ASSERT_EQ(MPI_Iallreduce(&in, &out, 0, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request),
            MPI_SUCCESS);
  EXPECT_EQ(MPI_Wait(&request, MPI_STATUS_IGNORE), MPI_SUCCESS);
  EXPECT_EQ(out, 7.0f);
}

// Zeros in, zeros out, exactly, call after call (a residual of zeros stays zero).
TEST(EdgeInputs, AllZerosGiveZeros) {
  for (const std::size_t count :
       {std::size_t{1}, std::size_t{7}, std::size_t{1000}, std::size_t{65537}}) {
    std::vector<float> zeros(count, 0.0f);
    for (std::size_t i = 0; i < count; i += 2) zeros[i] = -0.0f;
    for (int call = 0; call < 2; ++call) {
      const std::vector<float> output = allreduce(zeros);
      for (std::size_t i = 0; i < count; ++i)
        ASSERT_EQ(output[i], 0.0f) << "count " << count << ", element " << i << ", call " << call;
      EXPECT_TRUE(same_on_every_rank(output));
    }
  }
}

// Subnormal floats (2^-149 to 2^-127): finite, within a subnormal step per
// rank of the sum (fp16 has no such values and makes them 0), every rank alike.
TEST(EdgeInputs, SubnormalsStayTinyAndFinite) {
  const std::size_t count = 4099;
  std::vector<float> input(count);
  for (std::size_t i = 0; i < count; ++i) {
    const float magnitude = std::ldexp(1.0f + float(i % 64) / 64, -127 - int(i % 23));
    input[i] = (i + world_rank()) % 3 == 0 ? -magnitude : magnitude;
  }
  ASSERT_EQ(std::fpclassify(input[0]), FP_SUBNORMAL);
  std::vector<double> exact(input.begin(), input.end()), sum(count);
  PMPI_Allreduce(exact.data(), sum.data(), int(count), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  for (int call = 0; call < 2; ++call) {
    const std::vector<float> output = allreduce(input);
    for (std::size_t i = 0; i < count; ++i) {
      ASSERT_TRUE(std::isfinite(output[i])) << i;
      ASSERT_LE(std::fabs(output[i] - sum[i]), world_size() * std::ldexp(1.0, -126)) << i;
    }
    EXPECT_TRUE(same_on_every_rank(output));
  }
}

// One element, eligible at SLIMREDUCE_MIN_BYTES=4: the exact sum for the
// casts, top-k (its one value) and PowerSGD (too small: summed exactly);
// within int8's step for int8; exact for int4, int2 and quant at 4 or 2 bits
// (a bucket of one value decodes to itself, kernels/quant_packed.h).
TEST(EdgeInputs, OneElement) {
  const float mine = 1.5f + float(world_rank());
  float sum = 0;
  for (int r = 0; r < world_size(); ++r) sum += 1.5f + float(r);
  slimreduce_counters before{}, after{};
  ASSERT_TRUE(read_counters(&before));
  const std::vector<float> output = allreduce({mine});
  ASSERT_TRUE(read_counters(&after));
  EXPECT_EQ(after.compressed - before.compressed, 1u) << "one element is eligible here";
  const double bound = kCompressor == "int8" ? std::fabs(sum) / 127 : 0.0;
  EXPECT_LE(std::fabs(output[0] - sum), bound) << output[0] << " against " << sum;
  EXPECT_TRUE(same_on_every_rank(output));
}

// A communicator of one rank (MPI_COMM_SELF) sends nothing: the call passes
// through, and its sum is the input, bit for bit.
TEST(EdgeInputs, OneRankCommunicatorPassesThrough) {
  std::vector<float> input(65537);
  for (std::size_t i = 0; i < input.size(); ++i) input[i] = std::sin(float(i)) * 1.2345f;
  std::vector<float> output(input.size(), 0.0f);
  slimreduce_counters before{}, after{};
  ASSERT_TRUE(read_counters(&before));
  ASSERT_EQ(MPI_Allreduce(input.data(), output.data(), int(input.size()), MPI_FLOAT, MPI_SUM,
                          MPI_COMM_SELF),
            MPI_SUCCESS);
  ASSERT_TRUE(read_counters(&after));
  EXPECT_EQ(std::memcmp(input.data(), output.data(), input.size() * sizeof(float)), 0);
  EXPECT_EQ(after.compressed - before.compressed, 0u);
  EXPECT_EQ(after.passed_through - before.passed_through, 1u);
}

}  // namespace
}  // namespace slimreduce::testing

int main(int argc, char** argv) { return slimreduce::testing::run_all_tests_under_mpi(argc, argv); }
