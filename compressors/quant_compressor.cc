// quant: bucketed absmax quantization at SLIMREDUCE_QUANT_BITS = 8, 4 or 2
// bits; int4 and int2 are its shorthands at 4 and 2 bits (int8, its own file,
// is quant at 8). At 4 and 2 bits the codes are packed two or four to a byte
// with an fp32 scale per bucket (kernels/quant_packed.h), over the sharded
// algorithm as int8 (algorithms/sharded.h): each rank quantizes its tensor,
// each owner sums its shard's parts in rank order in fp32 and quantizes the
// sum again for the allgather. Device entry points as int8's
// (DeviceKernels::sharded) over kernels/cuda/quant_packed.cu, the CPU twins'
// bits: MPI device buffers and NCCL calls are coded on the GPU.
#include <algorithm>
#include <cstring>
#include <memory>

#include "compressors/registry.h"
#include "kernels/device.h"
#include "kernels/quant_packed.h"

namespace slimreduce::compressors {
namespace {

class PackedQuantCompressor final : public ShardedCompressor {
 public:
  PackedQuantCompressor(const CompressorOptions& options, int bits)
      : bucket_(std::max<std::size_t>(options.quant_bucket, 1)), bits_(bits) {}

  std::string_view name() const override { return bits_ == 4 ? "int4" : "int2"; }
  // Half a step is 1/14 of a bucket's largest value at 4 bits and half of it
  // at 2: without error feedback most small values would never be sent.
  bool default_error_feedback() const override { return true; }
  DeviceKernels device_kernels() const override { return DeviceKernels::sharded; }
  std::size_t compressed_bytes(std::size_t n) const override { return block_bytes(n); }

  void shard_bounds(std::size_t n, int ranks, std::size_t* bounds) const override {
    whole_bucket_bounds(n, bucket_, kernels::quant_packed_buckets(n, bucket_), ranks, bounds);
  }
  bool part_sizes_vary() const override { return false; }
  std::size_t part_capacity(std::size_t count, std::size_t) const override {
    return padded_part(block_bytes(count));
  }
  std::size_t parts_capacity(std::size_t n, int ranks) const override {
    return block_bytes(n) + 3 * static_cast<std::size_t>(ranks);
  }
  void compress_parts(const float* in, float* residual, std::size_t n, const std::size_t* bounds,
                      int ranks, std::byte* out, std::size_t* part_bytes) override {
    for (int s = 0; s < ranks; ++s) {
      const std::size_t count = bounds[s + 1] - bounds[s];
      const std::size_t bytes = block_bytes(count);
      kernels::quant_packed_compress(in + bounds[s], residual ? residual + bounds[s] : nullptr,
                                     count, bucket_, bits_, out);
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
      const std::size_t bytes = block_bytes(count);
      const std::size_t part = part_capacity(count, n);
      if (const int rc = kernels::device::quant_packed_compress(
              in + bounds[s], residual ? residual + bounds[s] : nullptr, count, bucket_, bits_, out,
              stream))
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
      if (const int rc = kernels::device::quant_packed_decompress(
              gathered + slot_bytes * s, count, bucket_, bits_, out + bounds[s], divisor, stream))
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
      if (const int rc =
              device::quant_packed_accumulate(parts, owned, bucket_, bits_, shard, stream))
        return rc;
      parts += part_bytes[r];
    }
    if (slot_bytes > result_bytes) {
      if (const int rc =
              device::zero_bytes(result + result_bytes, slot_bytes - result_bytes, stream))
        return rc;
    }
    return device::quant_packed_compress(shard, owner_residual, owned, bucket_, bits_, result,
                                         stream);
  }
  bool part_valid(const std::byte* part, std::size_t bytes, std::size_t count,
                  std::size_t n) const override {
    return bytes == part_capacity(count, n) &&
           kernels::quant_packed_valid(part, count, bucket_, bits_);
  }
  void accumulate_part(const std::byte* part, std::size_t, std::size_t count, std::size_t,
                       float* shard) const override {
    kernels::quant_packed_accumulate(part, count, bucket_, bits_, shard);
  }
  std::size_t owner_bytes(std::size_t count, std::size_t) const override {
    return block_bytes(count);
  }
  void owner_compress(float* sum, float* owner_residual, std::size_t count, std::size_t,
                      std::byte* out) override {
    kernels::quant_packed_compress(sum, owner_residual, count, bucket_, bits_, out);
  }
  bool owner_valid(const std::byte* result, std::size_t count, std::size_t) const override {
    return kernels::quant_packed_valid(result, count, bucket_, bits_);
  }
  void owner_decode(const std::byte* result, std::size_t count, std::size_t,
                    float* out) const override {
    kernels::quant_packed_decompress(result, count, bucket_, bits_, out);
  }

 private:
  std::size_t block_bytes(std::size_t n) const {
    return kernels::quant_packed_bytes(n, bucket_, bits_);
  }

  std::size_t bucket_;
  int bits_;  // 4 or 2
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
