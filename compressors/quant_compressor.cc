// quant: bucketed quantization at SLIMREDUCE_QUANT_BITS = 8, 4 or 2 bits;
// int4 and int2 are its shorthands at 4 and 2 bits (int8, its own file, is
// quant at 8). At 4 and 2 bits the codes are packed two or four to a byte
// with the bucket's smallest and largest values (min-max, their default:
// kernels/quant_packed_minmax.h) or one fp32 scale (SLIMREDUCE_QUANT_CODES=absmax,
// kernels/quant_packed.h), over the sharded
// algorithm as int8 (algorithms/sharded.h): each rank quantizes its tensor,
// each owner sums its shard's parts in rank order in fp32 and quantizes the
// sum again for the allgather. Device entry points as int8's
// (DeviceKernels::sharded) over kernels/cuda/quant_packed.cu, the CPU twins'
// bits: MPI device buffers and NCCL calls are coded on the GPU.
#include <algorithm>
#include <memory>

#include "compressors/bucketed_quantizer.h"
#include "compressors/registry.h"
#include "kernels/device.h"
#include "kernels/quant_packed.h"
#include "kernels/quant_packed_minmax.h"

namespace slimreduce::compressors {
namespace {

class PackedQuantCompressor final : public BucketedQuantizer {
 public:
  PackedQuantCompressor(const CompressorOptions& options, int bits)
      : BucketedQuantizer(std::max<std::size_t>(options.quant_bucket, 1), options),
        bits_(bits),
        minmax_(codes_at(options.quant_codes, bits) == QuantCodes::minmax) {}

  std::string_view name() const override { return bits_ == 4 ? "int4" : "int2"; }
  // Half a step is 1/14 of a bucket's largest value at 4 bits and half of it
  // at 2 (of its range / 2 with min-max codes): without error feedback most
  // small values would never be sent.
  bool default_error_feedback() const override { return true; }

 private:
  // The kernels of the codes chosen (kernels/quant_packed.h or quant_packed_minmax.h).
  std::size_t block_bytes(std::size_t n) const override {
    return minmax_ ? kernels::quant_packed_minmax_bytes(n, bucket(), bits_)
                   : kernels::quant_packed_bytes(n, bucket(), bits_);
  }
  std::size_t buckets(std::size_t n) const override {
    return kernels::quant_packed_buckets(n, bucket());
  }
  void encode(const float* in, float* residual, std::size_t n, void* out,
              const kernels::Rounding& rounding) const override {
    const kernels::Isa isa = kernels::best_isa();
    minmax_ ? kernels::quant_packed_minmax_compress(in, residual, n, bucket(), bits_, out, isa,
                                                    rounding)
            : kernels::quant_packed_compress(in, residual, n, bucket(), bits_, out, isa, rounding);
  }
  void decode(const void* block, std::size_t n, float* out) const override {
    minmax_ ? kernels::quant_packed_minmax_decompress(block, n, bucket(), bits_, out)
            : kernels::quant_packed_decompress(block, n, bucket(), bits_, out);
  }
  void add_block(const void* block, std::size_t n, float* dense) const override {
    minmax_ ? kernels::quant_packed_minmax_accumulate(block, n, bucket(), bits_, dense)
            : kernels::quant_packed_accumulate(block, n, bucket(), bits_, dense);
  }
  bool block_valid(const void* block, std::size_t n) const override {
    return minmax_ ? kernels::quant_packed_minmax_valid(block, n, bucket(), bits_)
                   : kernels::quant_packed_valid(block, n, bucket(), bits_);
  }
  int device_encode(const float* in, float* residual, std::size_t n, void* out,
                    const kernels::Rounding& rounding, void* stream) const override {
    namespace device = kernels::device;
    return minmax_ ? device::quant_packed_minmax_compress(in, residual, n, bucket(), bits_, out,
                                                          stream, rounding)
                   : device::quant_packed_compress(in, residual, n, bucket(), bits_, out, stream,
                                                   rounding);
  }
  int device_decode(const void* block, std::size_t n, float* out, int divisor,
                    void* stream) const override {
    namespace device = kernels::device;
    return minmax_
               ? device::quant_packed_minmax_decompress(block, n, bucket(), bits_, out, divisor,
                                                        stream)
               : device::quant_packed_decompress(block, n, bucket(), bits_, out, divisor, stream);
  }
  int device_add(const void* block, std::size_t n, float* dense, void* stream) const override {
    namespace device = kernels::device;
    return minmax_
               ? device::quant_packed_minmax_accumulate(block, n, bucket(), bits_, dense, stream)
               : device::quant_packed_accumulate(block, n, bucket(), bits_, dense, stream);
  }

  int bits_;     // 4 or 2
  bool minmax_;  // codes_at(SLIMREDUCE_QUANT_CODES, bits_): min-max unless absmax is asked for
};

}  // namespace

std::unique_ptr<Compressor> make_int4_compressor(const CompressorOptions& options) {
  return std::make_unique<PackedQuantCompressor>(options, 4);
}

std::unique_ptr<Compressor> make_int2_compressor(const CompressorOptions& options) {
  return std::make_unique<PackedQuantCompressor>(options, 2);
}

// The width from SLIMREDUCE_QUANT_BITS; the compressor's name says which
// (int8, int4, int2), so reports and the ranks' agreement see the width.
std::unique_ptr<Compressor> make_quant_compressor(const CompressorOptions& options) {
  if (kernels::quant_packed_width(options.quant_bits))
    return std::make_unique<PackedQuantCompressor>(options, options.quant_bits);
  return make_int8_compressor(options);
}

}  // namespace slimreduce::compressors
