// The arithmetic of core/device_staging's GPU top-k route, checked on the CPU:
// the payload a device-buffer rank hands to MPI must be exactly the host
// path's (host- and device-buffer ranks gather each other's bytes), the device
// stride keeps every rank's indices 16-byte aligned, and the gathered payloads
// reach the device with a copy the driver accepts at any size.
#include <gtest/gtest.h>

#include <memory>

#include "compressors/registry.h"
#include "core/device_staging.h"
#include "kernels/topk.h"
#ifdef SLIMREDUCE_HAVE_CUDA
#include "kernels/cuda/kernels.h"
#endif

namespace slimreduce {
namespace {

using device_staging::gather_copy_for;
using device_staging::GatherCopy;
using device_staging::topk_wire;

TEST(DeviceStagingTopk, PayloadIsTheHostPathsBytes) {
  for (const double ratio : {1e-9, 0.001, 0.01, 0.07, 0.3333, 0.5, 1.0}) {
    for (const bool fp16 : {false, true}) {
      compressors::CompressorOptions options;
      options.topk_ratio = ratio;
      options.topk_values_fp16 = fp16;
      const std::unique_ptr<compressors::Compressor> host =
          compressors::make_compressor("topk", options);
      ASSERT_TRUE(host);
      for (const std::size_t n :
           {std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{100}, std::size_t{100003},
            std::size_t{1} << 20, std::size_t{0x7fffffff}}) {
        const auto wire = topk_wire(n, ratio, fp16);
        EXPECT_EQ(wire.k, kernels::topk_count(n, ratio)) << n << " " << ratio;
        EXPECT_GE(wire.k, 1u);
        EXPECT_LE(wire.k, n);
        EXPECT_EQ(wire.payload, host->compressed_bytes(n)) << n << " " << ratio << " " << fp16;
        EXPECT_EQ(wire.stride % 16, 0u);
        EXPECT_GE(wire.stride, wire.payload);
        EXPECT_LT(wire.stride - wire.payload, 16u);
#ifdef SLIMREDUCE_HAVE_CUDA
        EXPECT_EQ(wire.stride, kernels::cuda::topk_payload_stride(wire.payload));
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
  const auto big = topk_wire((std::size_t{1} << 30) + 2, 0.5, true);
  ASSERT_NE(big.payload, big.stride);
  EXPECT_GT(big.stride, kPitch);
  EXPECT_EQ(gather_copy_for(big.payload, big.stride, kPitch), GatherCopy::per_rank);
  // A pitch the device did not tell: one copy per rank.
  EXPECT_EQ(gather_copy_for(24, 32, 0), GatherCopy::per_rank);
  EXPECT_EQ(gather_copy_for(32, 32, 0), GatherCopy::contiguous);
}

}  // namespace
}  // namespace slimreduce
