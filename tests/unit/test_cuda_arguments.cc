// The CUDA kernels' entry points refuse bad arguments with
// cudaErrorInvalidValue before they launch anything, as their CPU twins
// refuse them: no GPU is needed to see that (the checks run on the host).
#include <gtest/gtest.h>

#ifdef SLIMREDUCE_HAVE_CUDA

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/kernels.h"
#include "kernels/topk.h"

namespace slimreduce::kernels::cuda {
namespace {

// Never dereferenced: each call below must return before it would be.
void* const kNowhere = reinterpret_cast<void*>(std::uintptr_t{0x1000});

std::size_t stride_for(std::size_t k, bool fp16_values) {
  return topk_payload_stride(
      kernels::topk_payload_bytes(k, fp16_values ? TopkValues::fp16 : TopkValues::fp32));
}

TEST(CudaArguments, UnpackRefusesADivisorBelowOne) {
  const UnpackItem item{static_cast<float*>(kNowhere), 16, 0};
  for (const int divisor : {0, -1}) {
    EXPECT_EQ(unpack_batch(Elem::fp16, kNowhere, &item, 1, divisor, nullptr), cudaErrorInvalidValue)
        << divisor;
  }
}

TEST(CudaArguments, TopkAccumulateRefusesAShortStride) {
  const std::size_t n = 1000, k = 10;
  for (const bool fp16_values : {false, true}) {
    const std::size_t payload = k * (4 + (fp16_values ? 2 : 4));
    EXPECT_EQ(topk_accumulate(kNowhere, payload - 1, 2, k, fp16_values, n, Elem::fp32, kNowhere, 1,
                              kNowhere, nullptr),
              cudaErrorInvalidValue)
        << "fp16 values " << fp16_values;
  }
}

TEST(CudaArguments, TopkAccumulateRefusesBadCountsAndTypes) {
  const std::size_t n = 1000, k = 10, stride = stride_for(k, false);
  auto call = [&](int ranks, std::size_t kk, std::size_t nn, Elem out, int divisor) {
    return topk_accumulate(kNowhere, stride, ranks, kk, false, nn, out, kNowhere, divisor, kNowhere,
                           nullptr);
  };
  EXPECT_EQ(call(0, k, n, Elem::fp32, 1), cudaErrorInvalidValue);
  EXPECT_EQ(call(2, k, n, Elem::fp32, 0), cudaErrorInvalidValue);
  EXPECT_EQ(call(2, n + 1, n, Elem::fp32, 1), cudaErrorInvalidValue);
  EXPECT_EQ(call(2, k, std::size_t{1} << 32, Elem::fp32, 1), cudaErrorInvalidValue);
  EXPECT_EQ(call(2, k, n, static_cast<Elem>(7), 1), cudaErrorInvalidValue);
}

TEST(CudaArguments, TopkSelectRefusesBadCountsAndAShortStride) {
  const std::size_t n = 1000, k = 10;
  auto call = [&](std::size_t kk, std::size_t nn, std::size_t stride) {
    return topk_select(Elem::fp32, kNowhere, nullptr, nn, kk, false, kNowhere, stride, kNowhere,
                       nullptr);
  };
  EXPECT_EQ(call(0, n, stride_for(1, false)), cudaErrorInvalidValue);
  EXPECT_EQ(call(n + 1, n, stride_for(n + 1, false)), cudaErrorInvalidValue);
  EXPECT_EQ(call(k, n, k * 8 - 1), cudaErrorInvalidValue);
}

TEST(CudaArguments, LowRankRefusesRankZeroAndPast64) {
  auto* f = static_cast<float*>(kNowhere);
  LowRankShape shape{1000, 10, 100, 0};
  EXPECT_EQ(low_rank_finish(f, shape, f, f, f, f, f, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(low_rank_project(f, shape, f, f, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(low_rank_back_project(f, shape, f, f, nullptr), cudaErrorInvalidValue);
  shape.rank = 65;
  EXPECT_EQ(low_rank_finish(f, shape, f, f, f, f, f, nullptr), cudaErrorInvalidValue);
}

// cuBLAS is looked up at run time: without it, or without a GPU (as here),
// the answer is no with a reason, never a crash.
TEST(CudaArguments, CublasAvailableAnswersWithAReason) {
  std::string why;
  if (!cublas_available(&why)) {
    EXPECT_FALSE(why.empty());
  }
}

}  // namespace
}  // namespace slimreduce::kernels::cuda
#else
// A CPU-only build has no CUDA entry points: reported as skipped, never as passed.
TEST(CudaArguments, NeedTheCudaBuild) { GTEST_SKIP() << "CPU-only build: no CUDA kernels"; }
#endif  // SLIMREDUCE_HAVE_CUDA
