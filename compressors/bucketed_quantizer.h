// The sharded side of a bucketed quantizer, written once for every width
// (int8 and its min-max codes, kernels/quant8*.h; int4 and int2,
// kernels/quant_packed.h): shards of whole buckets, one block per part
// padded to 4 bytes, the owner's step (its shard's parts added in rank order
// into zeros, the sum quantized again), each step's device twin, and the
// rounding (SLIMREDUCE_QUANT_ROUNDING): stochastic rounding draws from the
// call's CallDraw, phase 0 for a rank's own parts and 1 for an owner's sum,
// so that the two quantizations of a value draw independently. A quantizer
// supplies its block codec alone: bytes, buckets, encode, decode, add, the
// validity check of a block from another rank, and the device's encode,
// decode and add.
#pragma once

#include <cstddef>

#include "compressors/compressor.h"
#include "kernels/rounding.h"

namespace slimreduce::compressors {

class BucketedQuantizer : public ShardedCompressor {
 public:
  BucketedQuantizer(std::size_t bucket, const CompressorOptions& options)
      : bucket_(bucket),
        stochastic_(options.quant_rounding == QuantRounding::stochastic),
        seed_(options.quant_seed) {}

  DeviceKernels device_kernels() const final { return DeviceKernels::sharded; }
  std::size_t compressed_bytes(std::size_t n) const final { return block_bytes(n); }

  void shard_bounds(std::size_t n, int ranks, std::size_t* bounds) const final;
  bool part_sizes_vary() const final { return false; }
  std::size_t part_capacity(std::size_t count, std::size_t) const final {
    return padded_part(block_bytes(count));
  }
  std::size_t parts_capacity(std::size_t n, int ranks) const final {
    return block_bytes(n) + 3 * static_cast<std::size_t>(ranks);
  }
  void compress_parts(const float* in, float* residual, std::size_t n, const std::size_t* bounds,
                      int ranks, std::byte* out, std::size_t* part_bytes,
                      const CallDraw& draw) final;
  int device_compress_parts(const float* in, float* residual, std::size_t n,
                            const std::size_t* bounds, int ranks, std::byte* out,
                            std::uint64_t* part_bytes, void* scratch, void* stream,
                            const CallDraw& draw) const final;
  int device_decode_results(const std::byte* gathered, std::size_t slot_bytes, std::size_t n,
                            const std::size_t* bounds, int ranks, float* out, int divisor,
                            void* scratch, void* stream) const final;
  int device_owner_step(const std::byte* parts, const std::size_t* part_bytes, int ranks,
                        std::size_t owned, std::size_t n, float* shard, float* owner_residual,
                        std::byte* result, std::size_t slot_bytes, void* scratch, void* stream,
                        const CallDraw& draw) const final;
  bool part_valid(const std::byte* part, std::size_t bytes, std::size_t count,
                  std::size_t n) const final {
    return bytes == part_capacity(count, n) && block_valid(part, count);
  }
  void accumulate_part(const std::byte* part, std::size_t, std::size_t count, std::size_t,
                       float* shard) const final {
    add_block(part, count, shard);
  }
  std::size_t owner_bytes(std::size_t count, std::size_t) const final { return block_bytes(count); }
  void owner_compress(float* sum, float* owner_residual, std::size_t count, std::size_t,
                      std::byte* out, const CallDraw& draw) final {
    encode(sum, owner_residual, count, out, rounding(draw, kOwnerPhase));
  }
  bool owner_valid(const std::byte* result, std::size_t count, std::size_t) const final {
    return block_valid(result, count);
  }
  void owner_decode(const std::byte* result, std::size_t count, std::size_t,
                    float* out) const final {
    decode(result, count, out);
  }

 protected:
  // The rounding of values from draw.first on, quantized in `phase`
  // (kernels/rounding_key): nearest unless SLIMREDUCE_QUANT_ROUNDING=stochastic.
  static constexpr int kRankPhase = 0, kOwnerPhase = 1;
  kernels::Rounding rounding(const CallDraw& draw, int phase) const {
    if (!stochastic_) return {};
    return kernels::rounding_key(seed_, draw.rank, draw.call, phase, draw.first);
  }

  // The block codec, over buckets of bucket() values.
  std::size_t bucket() const { return bucket_; }
  virtual std::size_t block_bytes(std::size_t n) const = 0;
  virtual std::size_t buckets(std::size_t n) const = 0;
  virtual void encode(const float* in, float* residual, std::size_t n, void* out,
                      const kernels::Rounding& rounding) const = 0;
  virtual void decode(const void* block, std::size_t n, float* out) const = 0;
  virtual void add_block(const void* block, std::size_t n, float* dense) const = 0;
  virtual bool block_valid(const void* block, std::size_t n) const = 0;
  virtual int device_encode(const float* in, float* residual, std::size_t n, void* out,
                            const kernels::Rounding& rounding, void* stream) const = 0;
  virtual int device_decode(const void* block, std::size_t n, float* out, int divisor,
                            void* stream) const = 0;
  virtual int device_add(const void* block, std::size_t n, float* dense, void* stream) const = 0;

 private:
  std::size_t bucket_;
  bool stochastic_;     // SLIMREDUCE_QUANT_ROUNDING=stochastic
  std::uint64_t seed_;  // SLIMREDUCE_QUANT_SEED
};

}  // namespace slimreduce::compressors
