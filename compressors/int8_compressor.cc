// int8: 8-bit quantization with an fp32 scale per bucket of
// SLIMREDUCE_QUANT_BUCKET values (kernels/quant8.h), or with
// SLIMREDUCE_QUANT_CODES=minmax a step and an offset per bucket
// (kernels/quant8_minmax.h), over the sharded
// algorithm (algorithms/sharded.h; its side in compressors/bucketed_quantizer.h),
// as Bagua's ByteGrad and CGX do: each
// rank quantizes its tensor, each owner dequantizes its shard's parts, sums
// them in fp32 in rank order and quantizes the sum again for the allgather.
// A quarter of fp32's bytes (plus a scale per bucket) each way.
#include <algorithm>
#include <memory>

#include "compressors/bucketed_quantizer.h"
#include "compressors/registry.h"
#include "kernels/device.h"
#include "kernels/quant8.h"
#include "kernels/quant8_minmax.h"

namespace slimreduce::compressors {
namespace {

class Int8Compressor final : public BucketedQuantizer {
 public:
  explicit Int8Compressor(const CompressorOptions& options)
      : BucketedQuantizer(std::max<std::size_t>(options.quant_bucket, 1), options),
        minmax_(codes_at(options.quant_codes, 8) == QuantCodes::minmax) {}

  std::string_view name() const override { return "int8"; }
  // A value below half its bucket's step codes 0 on every call: without
  // error feedback a small gradient next to a large one is never sent.
  bool default_error_feedback() const override { return true; }

 private:
  // The kernels of the codes chosen (kernels/quant8.h or quant8_minmax.h).
  std::size_t block_bytes(std::size_t n) const override {
    return minmax_ ? kernels::quant8_minmax_bytes(n, bucket()) : kernels::quant8_bytes(n, bucket());
  }
  std::size_t buckets(std::size_t n) const override { return kernels::quant8_buckets(n, bucket()); }
  void encode(const float* in, float* residual, std::size_t n, void* out,
              const kernels::Rounding& rounding) const override {
    const kernels::Isa isa = kernels::best_isa();
    minmax_ ? kernels::quant8_minmax_compress(in, residual, n, bucket(), out, isa, rounding)
            : kernels::quant8_compress(in, residual, n, bucket(), out, isa, rounding);
  }
  void decode(const void* block, std::size_t n, float* out) const override {
    minmax_ ? kernels::quant8_minmax_decompress(block, n, bucket(), out)
            : kernels::quant8_decompress(block, n, bucket(), out);
  }
  void add_block(const void* block, std::size_t n, float* dense) const override {
    minmax_ ? kernels::quant8_minmax_accumulate(block, n, bucket(), dense)
            : kernels::quant8_accumulate(block, n, bucket(), dense);
  }
  bool block_valid(const void* block, std::size_t n) const override {
    return minmax_ ? kernels::quant8_minmax_valid(block, n, bucket())
                   : kernels::quant8_valid(block, n, bucket());
  }
  int device_encode(const float* in, float* residual, std::size_t n, void* out,
                    const kernels::Rounding& rounding, void* stream) const override {
    namespace device = kernels::device;
    return minmax_
               ? device::quant8_minmax_compress(in, residual, n, bucket(), out, stream, rounding)
               : device::quant8_compress(in, residual, n, bucket(), out, stream, rounding);
  }
  int device_decode(const void* block, std::size_t n, float* out, int divisor,
                    void* stream) const override {
    namespace device = kernels::device;
    return minmax_ ? device::quant8_minmax_decompress(block, n, bucket(), out, divisor, stream)
                   : device::quant8_decompress(block, n, bucket(), out, divisor, stream);
  }
  int device_add(const void* block, std::size_t n, float* dense, void* stream) const override {
    namespace device = kernels::device;
    return minmax_ ? device::quant8_minmax_accumulate(block, n, bucket(), dense, stream)
                   : device::quant8_accumulate(block, n, bucket(), dense, stream);
  }

  bool minmax_;  // SLIMREDUCE_QUANT_CODES=minmax (width and absmax: absmax)
};

}  // namespace

std::unique_ptr<Compressor> make_int8_compressor(const CompressorOptions& options) {
  return std::make_unique<Int8Compressor>(options);
}

}  // namespace slimreduce::compressors
