// fp8: block-scaled e4m3 codes (kernels/quant_fp8.h): one byte per value and
// a power-of-two scale per bucket of SLIMREDUCE_QUANT_BUCKET values (one
// byte), as MXFP8 scales blocks of 32; over the sharded algorithm as int8
// (algorithms/sharded.h, compressors/bucketed_quantizer.h): each rank codes
// its tensor, each owner sums its shard's parts in rank order in fp32 and
// codes the sum again. int8's bytes, but an error relative to each value (3
// significand bits) where int8's is absolute (a step of the bucket's
// largest). Device entry points over kernels/cuda/quant_fp8.cu, the CPU
// twins' bits. Rounds to nearest only (stochastic rounding is refused with
// it: core/runtime/setting_checks.cc).
#include <algorithm>
#include <memory>

#include "compressors/bucketed_quantizer.h"
#include "compressors/registry.h"
#include "kernels/device.h"
#include "kernels/quant_fp8.h"

namespace slimreduce::compressors {
namespace {

class Fp8Compressor final : public BucketedQuantizer {
 public:
  explicit Fp8Compressor(const CompressorOptions& options)
      : BucketedQuantizer(std::max<std::size_t>(options.quant_bucket, 1), options) {}

  std::string_view name() const override { return "fp8"; }
  // Each value's error is up to a sixteenth of it: error feedback carries it
  // to the next call, as for the other quantizers.
  bool default_error_feedback() const override { return true; }

 private:
  std::size_t block_bytes(std::size_t n) const override {
    return kernels::quant_fp8_bytes(n, bucket());
  }
  std::size_t buckets(std::size_t n) const override {
    return kernels::quant_fp8_buckets(n, bucket());
  }
  void encode(const float* in, float* residual, std::size_t n, void* out,
              const kernels::Rounding&) const override {
    kernels::quant_fp8_compress(in, residual, n, bucket(), out);
  }
  void decode(const void* block, std::size_t n, float* out) const override {
    kernels::quant_fp8_decompress(block, n, bucket(), out);
  }
  void add_block(const void* block, std::size_t n, float* dense) const override {
    kernels::quant_fp8_accumulate(block, n, bucket(), dense);
  }
  bool block_valid(const void* block, std::size_t n) const override {
    return kernels::quant_fp8_valid(block, n, bucket());
  }
  int device_encode(const float* in, float* residual, std::size_t n, void* out,
                    const kernels::Rounding&, void* stream) const override {
    return kernels::device::quant_fp8_compress(in, residual, n, bucket(), out, stream);
  }
  int device_decode(const void* block, std::size_t n, float* out, int divisor,
                    void* stream) const override {
    return kernels::device::quant_fp8_decompress(block, n, bucket(), out, divisor, stream);
  }
  int device_add(const void* block, std::size_t n, float* dense, void* stream) const override {
    return kernels::device::quant_fp8_accumulate(block, n, bucket(), dense, stream);
  }
};

}  // namespace

std::unique_ptr<Compressor> make_fp8_compressor(const CompressorOptions& options) {
  return std::make_unique<Fp8Compressor>(options);
}

}  // namespace slimreduce::compressors
