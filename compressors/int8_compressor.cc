// int8: 8-bit quantization with an fp32 scale per bucket of
// SLIMREDUCE_QUANT_BUCKET values (kernels/quant8.h), or with
// SLIMREDUCE_QUANT_CODES=minmax a step and an offset per bucket
// (kernels/quant8_minmax.h), over the sharded
// algorithm (algorithms/sharded.h), as Bagua's ByteGrad and CGX do: each
// rank quantizes its tensor, each owner dequantizes its shard's parts, sums
// them in fp32 in rank order and quantizes the sum again for the allgather.
// A quarter of fp32's bytes (plus a scale per bucket) each way.
#include <algorithm>
#include <cstring>
#include <memory>

#include "compressors/registry.h"
#include "kernels/device.h"
#include "kernels/quant8.h"
#include "kernels/quant8_minmax.h"

namespace slimreduce::compressors {
namespace {

class Int8Compressor final : public ShardedCompressor {
 public:
  explicit Int8Compressor(const CompressorOptions& options)
      : bucket_(std::max<std::size_t>(options.quant_bucket, 1)),
        minmax_(options.quant_codes == QuantCodes::minmax) {}

  std::string_view name() const override { return "int8"; }
  // A value below half its bucket's step codes 0 on every call: without
  // error feedback a small gradient next to a large one is never sent.
  bool default_error_feedback() const override { return true; }
  DeviceKernels device_kernels() const override { return DeviceKernels::sharded; }
  std::size_t compressed_bytes(std::size_t n) const override { return block_bytes(n, bucket_); }

  void shard_bounds(std::size_t n, int ranks, std::size_t* bounds) const override {
    whole_bucket_bounds(n, bucket_, kernels::quant8_buckets(n, bucket_), ranks, bounds);
  }
  bool part_sizes_vary() const override { return false; }
  std::size_t part_capacity(std::size_t count, std::size_t) const override {
    return padded_part(block_bytes(count, bucket_));
  }
  std::size_t parts_capacity(std::size_t n, int ranks) const override {
    return block_bytes(n, bucket_) + 3 * static_cast<std::size_t>(ranks);
  }
  void compress_parts(const float* in, float* residual, std::size_t n, const std::size_t* bounds,
                      int ranks, std::byte* out, std::size_t* part_bytes) override {
    for (int s = 0; s < ranks; ++s) {
      const std::size_t count = bounds[s + 1] - bounds[s];
      const std::size_t bytes = block_bytes(count, bucket_);
      encode(in + bounds[s], residual ? residual + bounds[s] : nullptr, count, bucket_, out);
      part_bytes[s] = part_capacity(count, n);
      std::memset(out + bytes, 0, part_bytes[s] - bytes);
      out += part_bytes[s];
    }
  }
  int device_compress_parts(const float* in, float* residual, std::size_t n,
                            const std::size_t* bounds, int ranks, std::byte* out,
                            std::uint64_t* part_bytes, void* scratch, void* stream) const override {
    (void)part_bytes, (void)scratch;  // sizes do not vary; no scratch
    for (int s = 0; s < ranks; ++s) {
      const std::size_t count = bounds[s + 1] - bounds[s];
      const std::size_t bytes = block_bytes(count, bucket_);
      const std::size_t part = part_capacity(count, n);
      if (const int rc = device_encode(in + bounds[s], residual ? residual + bounds[s] : nullptr,
                                       count, bucket_, out, stream))
        return rc;
      if (part > bytes) {
        if (const int rc = kernels::device::zero_bytes(out + bytes, part - bytes, stream))
          return rc;
      }
      out += part;
    }
    return 0;
  }
  int device_decode_results(const std::byte* gathered, std::size_t slot_bytes, std::size_t n,
                            const std::size_t* bounds, int ranks, float* out, int divisor,
                            void* scratch, void* stream) const override {
    (void)n, (void)scratch;
    for (int s = 0; s < ranks; ++s) {
      const std::size_t count = bounds[s + 1] - bounds[s];
      if (const int rc = device_decode(gathered + slot_bytes * s, count, bucket_, out + bounds[s],
                                       divisor, stream))
        return rc;
    }
    return 0;
  }
  int device_owner_step(const std::byte* parts, const std::size_t* part_bytes, int ranks,
                        std::size_t owned, std::size_t n, float* shard, float* owner_residual,
                        std::byte* result, std::size_t slot_bytes, void* scratch,
                        void* stream) const override {
    namespace device = kernels::device;
    (void)scratch;
    const std::size_t result_bytes = owner_bytes(owned, n);
    if (const int rc = device::zero_bytes(shard, owned * sizeof(float), stream)) return rc;
    for (int r = 0; r < ranks; ++r) {  // in rank order: the same adds on every owner
      if (const int rc = device_add(parts, owned, bucket_, shard, stream)) return rc;
      parts += part_bytes[r];
    }
    if (slot_bytes > result_bytes) {
      if (const int rc =
              device::zero_bytes(result + result_bytes, slot_bytes - result_bytes, stream))
        return rc;
    }
    return device_encode(shard, owner_residual, owned, bucket_, result, stream);
  }
  bool part_valid(const std::byte* part, std::size_t bytes, std::size_t count,
                  std::size_t n) const override {
    return bytes == part_capacity(count, n) && block_valid(part, count, bucket_);
  }
  void accumulate_part(const std::byte* part, std::size_t, std::size_t count, std::size_t,
                       float* shard) const override {
    add_block(part, count, bucket_, shard);
  }
  std::size_t owner_bytes(std::size_t count, std::size_t) const override {
    return block_bytes(count, bucket_);
  }
  void owner_compress(float* sum, float* owner_residual, std::size_t count, std::size_t,
                      std::byte* out) override {
    encode(sum, owner_residual, count, bucket_, out);
  }
  bool owner_valid(const std::byte* result, std::size_t count, std::size_t) const override {
    return block_valid(result, count, bucket_);
  }
  void owner_decode(const std::byte* result, std::size_t count, std::size_t,
                    float* out) const override {
    decode(result, count, bucket_, out);
  }

 private:
  // The kernels of the codes chosen (kernels/quant8.h or quant8_minmax.h).
  std::size_t block_bytes(std::size_t n, std::size_t bucket) const {
    return minmax_ ? kernels::quant8_minmax_bytes(n, bucket) : kernels::quant8_bytes(n, bucket);
  }
  void encode(const float* in, float* residual, std::size_t n, std::size_t bucket,
              void* out) const {
    minmax_ ? kernels::quant8_minmax_compress(in, residual, n, bucket, out)
            : kernels::quant8_compress(in, residual, n, bucket, out);
  }
  void decode(const void* block, std::size_t n, std::size_t bucket, float* out) const {
    minmax_ ? kernels::quant8_minmax_decompress(block, n, bucket, out)
            : kernels::quant8_decompress(block, n, bucket, out);
  }
  void add_block(const void* block, std::size_t n, std::size_t bucket, float* dense) const {
    minmax_ ? kernels::quant8_minmax_accumulate(block, n, bucket, dense)
            : kernels::quant8_accumulate(block, n, bucket, dense);
  }
  bool block_valid(const void* block, std::size_t n, std::size_t bucket) const {
    return minmax_ ? kernels::quant8_minmax_valid(block, n, bucket)
                   : kernels::quant8_valid(block, n, bucket);
  }
  int device_encode(const float* in, float* residual, std::size_t n, std::size_t bucket, void* out,
                    void* stream) const {
    namespace device = kernels::device;
    return minmax_ ? device::quant8_minmax_compress(in, residual, n, bucket, out, stream)
                   : device::quant8_compress(in, residual, n, bucket, out, stream);
  }
  int device_decode(const void* block, std::size_t n, std::size_t bucket, float* out, int divisor,
                    void* stream) const {
    namespace device = kernels::device;
    return minmax_ ? device::quant8_minmax_decompress(block, n, bucket, out, divisor, stream)
                   : device::quant8_decompress(block, n, bucket, out, divisor, stream);
  }
  int device_add(const void* block, std::size_t n, std::size_t bucket, float* dense,
                 void* stream) const {
    namespace device = kernels::device;
    return minmax_ ? device::quant8_minmax_accumulate(block, n, bucket, dense, stream)
                   : device::quant8_accumulate(block, n, bucket, dense, stream);
  }

  std::size_t bucket_;
  bool minmax_;  // SLIMREDUCE_QUANT_CODES=minmax
};

}  // namespace

std::unique_ptr<Compressor> make_int8_compressor(const CompressorOptions& options) {
  return std::make_unique<Int8Compressor>(options);
}

}  // namespace slimreduce::compressors
