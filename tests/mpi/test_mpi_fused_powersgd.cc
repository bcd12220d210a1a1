// PowerSGD over a fused batch (algorithms/fused_powersgd.h) against each
// tensor reduced on its own (algorithms/powersgd.h), over the real MPI, 1 to
// 4 ranks. The batch mixes every kind of tensor: compressed ones (an exact
// view and a padded one), ones summed exactly from the start (below the
// minimum compression), and one summed exactly after its P came out NaN.
// Each tensor's output, residual and Q must be its own reduction's (the same
// bits where a sum of two is the only order there is, at 1 and 2 ranks; to
// float rounding of the sums' order elsewhere), every rank must hold the
// same bits, and the batch must send each stage's summands in one sum.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "algorithms/batch.h"
#include "algorithms/fused_powersgd.h"
#include "algorithms/powersgd.h"
#include "algorithms/wire_bytes.h"
#include "backends/mpi_transport.h"
#include "compressors/registry.h"
#include "core/mpi/comm_state.h"
#include "kernels/low_rank.h"
#include "tests/mpi/mpi_helpers.h"
#include "tests/mpi/mpi_test_main.h"

namespace slimreduce::testing {
namespace {

constexpr int kRank = 4;
constexpr double kMinCompression = 2.0;

// One tensor of the batch: its input, and its residual and Q as they stand.
struct Tensor {
  std::vector<float> input, residual, q, output;
};

std::vector<float> gaussian(std::size_t n, unsigned seed) {
  std::mt19937 random(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> out(n);
  for (float& v : out) v = dist(random);
  return out;
}

class FusedPowerSgdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    compressors::CompressorOptions options;
    options.powersgd_rank = kRank;
    options.powersgd_min_compression = kMinCompression;
    owned_ = compressors::make_compressor("powersgd", options);
    compressor_ = dynamic_cast<compressors::LowRankCompressor*>(owned_.get());
    ASSERT_NE(compressor_, nullptr);
    ASSERT_EQ(state_.private_comm(&wire_), MPI_SUCCESS);
  }

  // Counts: 256 x 256 (compressed), 100 and 12 floats (below the minimum
  // compression), 100003 (a padded view; NaN on the last rank in call 1).
  std::vector<Tensor> batch(int call) const {
    const std::size_t counts[] = {65536, 100, 100003, 12};
    std::vector<Tensor> tensors;
    for (std::size_t i = 0; i < std::size(counts); ++i) {
      Tensor t;
      t.input = gaussian(counts[i], 1000 * call + 10 * i + state_.rank());
      t.residual.assign(counts[i], 0.0f);
      tensors.push_back(std::move(t));
    }
    if (call == 1 && state_.rank() == state_.size() - 1)
      tensors[2].input[7] = std::numeric_limits<float>::quiet_NaN();
    return tensors;
  }

  double fused(std::vector<Tensor>& tensors) {
    backends::MpiTransport transport(wire_, state_.rank(), state_.size());
    std::vector<algorithms::BatchTensor> batch;
    for (Tensor& t : tensors) {
      t.output.assign(t.input.size(), -7.0f);
      batch.push_back({t.input.data(), t.residual.data(), t.output.data(), t.input.size(), &t.q});
    }
    std::vector<std::byte> workspace(
        algorithms::FusedPowerSgd::workspace_bytes(*compressor_, batch, state_.size()));
    algorithms::FusedPowerSgd step(transport, *compressor_, batch, workspace.data());
    step.compress();
    EXPECT_TRUE(step.communicate().ok());
    step.finish();
    return step.wire_sent();
  }

  void one_by_one(std::vector<Tensor>& tensors) {
    backends::MpiTransport transport(wire_, state_.rank(), state_.size());
    for (Tensor& t : tensors) {
      t.output.assign(t.input.size(), -7.0f);
      std::vector<std::byte> workspace(
          algorithms::PowerSgd::workspace_bytes(*compressor_, t.input.size(), state_.size()));
      algorithms::PowerSgd step(transport, *compressor_, t.input.size(), &t.q, workspace.data());
      EXPECT_TRUE(step.run(t.input.data(), t.residual.data(), t.output.data()).ok());
    }
  }

  // This rank's bytes for a sum of n floats (algorithms::sum_over_ranks).
  double summed(std::size_t n) const {
    const auto ranks = static_cast<std::size_t>(state_.size());
    const std::size_t whole = n / ranks * ranks;
    return (whole ? algorithms::ring_allreduce_wire_bytes(whole * 4, state_.size()) : 0.0) +
           (n % ranks ? algorithms::ring_allreduce_wire_bytes(ranks * 4, state_.size()) : 0.0);
  }

  CommState state_{3, MPI_COMM_WORLD};
  MPI_Comm wire_ = MPI_COMM_NULL;
  std::unique_ptr<compressors::Compressor> owned_;
  compressors::LowRankCompressor* compressor_ = nullptr;
};

// a and b: the same bits at 1 or 2 ranks, else within float rounding of the
// sums' order (relative to the largest value).
void expect_close(const std::vector<float>& a, const std::vector<float>& b, int ranks,
                  const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  if (ranks <= 2) {
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what;
    return;
  }
  double largest = 0;
  for (float v : b)
    if (std::isfinite(v)) largest = std::max(largest, double(std::fabs(v)));
  for (std::size_t e = 0; e < a.size(); ++e) {
    if (std::isnan(b[e])) {
      ASSERT_TRUE(std::isnan(a[e])) << what << " " << e;
      continue;
    }
    ASSERT_NEAR(a[e], b[e], 1e-4 * largest + 1e-6) << what << " " << e;
  }
}

TEST_F(FusedPowerSgdTest, EachTensorGetsItsOwnReductionInOneSumPerStage) {
  std::vector<Tensor> together = batch(0), alone = batch(0);
  for (int call = 0; call < 2; ++call) {  // the second warm, with a NaN
    if (call == 1) {
      const std::vector<Tensor> next = batch(1);
      for (std::size_t i = 0; i < next.size(); ++i)
        together[i].input = alone[i].input = next[i].input;
    }
    const double sent = fused(together);
    one_by_one(alone);
    for (std::size_t i = 0; i < together.size(); ++i) {
      SCOPED_TRACE(::testing::Message() << "call " << call << ", tensor " << i);
      expect_close(together[i].output, alone[i].output, state_.size(), "output");
      expect_close(together[i].residual, alone[i].residual, state_.size(), "residual");
      expect_close(together[i].q, alone[i].q, state_.size(), "Q");
      EXPECT_TRUE(identical_on_all_ranks(
          together[i].output.data(), together[i].output.size() * sizeof(float), MPI_COMM_WORLD));
    }
    // NaN where a plain sum has it, the tensor summed exactly, its residual gone.
    if (call == 1) {
      EXPECT_TRUE(std::isnan(together[2].output[7]));
      for (float r : together[2].residual) ASSERT_EQ(r, 0.0f);
    }
    // The stages: every compressed tensor's P in one sum, the Q of those
    // whose P came out finite in one more, every exactly summed M in a third.
    std::size_t p = 0, q = 0, exact = 0;
    for (std::size_t i = 0; i < together.size(); ++i) {
      const std::size_t count = together[i].input.size();
      const auto shape = kernels::low_rank_shape(count, kRank, kMinCompression);
      const bool nan_after_p = call == 1 && i == 2;
      if (shape.rank > 0) p += shape.p_floats();
      if (shape.rank > 0 && !nan_after_p) q += shape.q_floats();
      if (shape.rank == 0 || nan_after_p) exact += count;
    }
    EXPECT_DOUBLE_EQ(sent, summed(p) + summed(q) + summed(exact));
  }
  EXPECT_FALSE(together[0].q.empty());
  EXPECT_TRUE(together[1].q.empty()) << "summed exactly: no factors, no Q";
}

}  // namespace
}  // namespace slimreduce::testing

int main(int argc, char** argv) { return slimreduce::testing::run_all_tests_under_mpi(argc, argv); }
