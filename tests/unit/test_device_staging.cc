// The arithmetic of the GPU top-k route, checked on the CPU: the payload a
// device-buffer rank hands to MPI is the host path's compressed_bytes exactly
// (host- and device-buffer ranks gather each other's bytes), the compressor's
// device slot keeps every rank's indices 16-byte aligned, and the gathered
// payloads reach the device with a copy the driver accepts at any size.
#include <gtest/gtest.h>

#include <memory>

#include "compressors/registry.h"
#include "core/mpi/device_staging.h"
#include "kernels/topk.h"
#ifdef SLIMREDUCE_HAVE_CUDA
#include "kernels/cuda/kernels.h"
#endif

namespace slimreduce {
namespace {

using device_staging::gather_copy_for;
using device_staging::GatherCopy;

std::unique_ptr<compressors::GatheredCompressor> topk(double ratio, bool fp16) {
  compressors::CompressorOptions options;
  options.topk_ratio = ratio;
  options.topk_values_fp16 = fp16;
  std::unique_ptr<compressors::Compressor> made = compressors::make_compressor("topk", options);
  return std::unique_ptr<compressors::GatheredCompressor>(
      static_cast<compressors::GatheredCompressor*>(made.release()));
}

TEST(DeviceStagingTopk, SlotsHoldTheHostPathsBytesAligned) {
  for (const double ratio : {1e-9, 0.001, 0.01, 0.07, 0.3333, 0.5, 1.0}) {
    for (const bool fp16 : {false, true}) {
      const auto host = topk(ratio, fp16);
      ASSERT_TRUE(host);
      for (const std::size_t n :
           {std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{100}, std::size_t{100003},
            std::size_t{1} << 20, std::size_t{0x7fffffff}}) {
        const std::size_t k = kernels::topk_count(n, ratio);
        EXPECT_GE(k, 1u);
        EXPECT_LE(k, n);
        const std::size_t payload = host->compressed_bytes(n);
        EXPECT_EQ(payload, k * (4 + (fp16 ? 2 : 4))) << n << " " << ratio << " " << fp16;
        const std::size_t slot = host->device_slot_bytes(n);
        EXPECT_EQ(slot % 16, 0u);
        EXPECT_GE(slot, payload);
        EXPECT_LT(slot - payload, 16u);
#ifdef SLIMREDUCE_HAVE_CUDA
        EXPECT_EQ(slot, kernels::cuda::topk_payload_stride(payload));
#endif
      }
    }
  }
}

TEST(DeviceStagingTopk, GatheredCopyFitsThePitchLimit) {
  constexpr std::size_t kPitch = 2147483647;  // an H100's cudaDevAttrMaxPitch
  // k = 4: 32 bytes (fp32 values) need no padding; 24 bytes (fp16) do.
  EXPECT_EQ(gather_copy_for(32, 32, kPitch), GatherCopy::contiguous);
  EXPECT_EQ(gather_copy_for(24, 32, kPitch), GatherCopy::pitched);
  // k = 2^29 + 1 with fp16 values: 3 GiB payloads, padded, past any pitch.
  const std::size_t big_n = (std::size_t{1} << 30) + 2;
  const auto big = topk(0.5, true);
  const std::size_t payload = big->compressed_bytes(big_n), slot = big->device_slot_bytes(big_n);
  ASSERT_NE(payload, slot);
  EXPECT_GT(slot, kPitch);
  EXPECT_EQ(gather_copy_for(payload, slot, kPitch), GatherCopy::per_rank);
  // A pitch the device did not tell: one copy per rank.
  EXPECT_EQ(gather_copy_for(24, 32, 0), GatherCopy::per_rank);
  EXPECT_EQ(gather_copy_for(32, 32, 0), GatherCopy::contiguous);
}

}  // namespace
}  // namespace slimreduce
