// slimreduce_enqueue_matrix under the preloaded library with
// SLIMREDUCE_COMPRESSOR=powersgd (rank 4): a tensor's real shape is the
// view PowerSGD compresses. Every rank's 96 x 320 layer is U V_i^T with U
// shared (rank 2), so their sum has rank 2: seen as 96 x 320 one call
// recovers it to float rounding, while the same floats handed over flat are
// viewed as the most square factorisation of 30720 (160 x 192), where the
// rows mix and the rank is higher: far from the sum. Also: every rank the
// same bits, and a zero dimension refused with MPI_ERR_COUNT on the
// caller's error handler.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tests/mpi/mpi_helpers.h"
#include "tests/mpi/mpi_test_main.h"

namespace slimreduce::testing {
namespace {

constexpr std::size_t kRows = 96, kCols = 320, kRank = 2;

using EnqueueMatrix = int (*)(const char*, float*, size_t, size_t, MPI_Comm, int);
using Enqueue = int (*)(const char*, float*, size_t, MPI_Comm, int);
using Synchronize = int (*)(MPI_Comm);

template <typename F>
F symbol(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_DEFAULT, name));
}

std::vector<double> gaussian(std::size_t n, unsigned seed) {
  std::mt19937 random(seed);
  std::normal_distribution<double> dist(0.0, 1.0);
  std::vector<double> out(n);
  for (double& v : out) v = dist(random);
  return out;
}

// Rank `rank`'s layer U V_rank^T, row-major, U shared by every rank.
std::vector<float> layer_of(int rank) {
  const auto u = gaussian(kRows * kRank, 7);
  const auto v = gaussian(kCols * kRank, 100 + rank);
  std::vector<float> m(kRows * kCols);
  for (std::size_t i = 0; i < kRows; ++i)
    for (std::size_t j = 0; j < kCols; ++j) {
      double sum = 0;
      for (std::size_t k = 0; k < kRank; ++k) sum += u[i * kRank + k] * v[j * kRank + k];
      m[i * kCols + j] = static_cast<float>(sum);
    }
  return m;
}

// The largest error against the float64 sum of every rank's layer, relative
// to the sum's largest value.
double relative_error(const std::vector<float>& got) {
  std::vector<double> sum(got.size(), 0.0);
  for (int r = 0; r < world_size(); ++r) {
    const auto layer = layer_of(r);
    for (std::size_t e = 0; e < got.size(); ++e) sum[e] += layer[e];
  }
  double worst = 0, largest = 0;
  for (std::size_t e = 0; e < got.size(); ++e) {
    worst = std::max(worst, std::fabs(got[e] - sum[e]));
    largest = std::max(largest, std::fabs(sum[e]));
  }
  return worst / largest;
}

class NativeMatrix : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(enqueue_matrix_, nullptr) << "libslimreduce.so is preloaded";
    ASSERT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), MPI_SUCCESS);
  }
  void TearDown() override { MPI_Comm_free(&comm_); }

  EnqueueMatrix enqueue_matrix_ = symbol<EnqueueMatrix>("slimreduce_enqueue_matrix");
  Enqueue enqueue_ = symbol<Enqueue>("slimreduce_enqueue");
  Synchronize synchronize_ = symbol<Synchronize>("slimreduce_synchronize");
  MPI_Comm comm_ = MPI_COMM_NULL;
};

TEST_F(NativeMatrix, TheRealShapeIsTheViewPowerSgdCompresses) {
  ASSERT_EQ(env_or("SLIMREDUCE_COMPRESSOR", ""), "powersgd");
  std::vector<float> shaped = layer_of(world_rank()), flat = shaped;
  ASSERT_EQ(enqueue_matrix_("fc.weight", shaped.data(), kRows, kCols, comm_, 0), MPI_SUCCESS);
  ASSERT_EQ(enqueue_("fc.weight.flat", flat.data(), kRows * kCols, comm_, 0), MPI_SUCCESS);
  ASSERT_EQ(synchronize_(comm_), MPI_SUCCESS);
  const double shaped_error = relative_error(shaped), flat_error = relative_error(flat);
  EXPECT_LT(shaped_error, 1e-4) << "96 x 320 of rank 2, compressed at rank 4";
  if (world_size() > 1) {
    EXPECT_GT(flat_error, 1e-2) << "viewed as 160 x 192";
  }
  EXPECT_TRUE(identical_on_all_ranks(shaped.data(), shaped.size() * sizeof(float), comm_));
  EXPECT_TRUE(identical_on_all_ranks(flat.data(), flat.size() * sizeof(float), comm_));
}

TEST_F(NativeMatrix, AZeroDimensionIsRefusedOnTheCallersHandler) {
  ASSERT_EQ(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), MPI_SUCCESS);
  std::vector<float> buffer(kCols, 1.0f);
  int error_class = MPI_SUCCESS;
  MPI_Error_class(enqueue_matrix_("empty", buffer.data(), 0, kCols, comm_, 0), &error_class);
  EXPECT_EQ(error_class, MPI_ERR_COUNT);
  MPI_Error_class(enqueue_matrix_("empty", buffer.data(), kCols, 0, comm_, 0), &error_class);
  EXPECT_EQ(error_class, MPI_ERR_COUNT);
  EXPECT_EQ(synchronize_(comm_), MPI_SUCCESS) << "nothing was queued";
  EXPECT_EQ(buffer, std::vector<float>(kCols, 1.0f));
}

}  // namespace
}  // namespace slimreduce::testing

int main(int argc, char** argv) { return slimreduce::testing::run_all_tests_under_mpi(argc, argv); }
