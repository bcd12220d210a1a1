// Top-k's side of the sharded algorithm (algorithms/sharded.h): the parts a
// rank's top-k payload splits into, one per shard, and the owner's second
// compression of its summed shard. Used by compressors/topk_compressor.cc.
//
// A part is a top-k payload (kernels/topk.h's layout) of the m selected values
// that fall in the shard, with shard-relative indices, padded with zero
// bytes to a multiple of 4 (the next part's indices stay aligned). An owner's result is a
// 4-byte format tag and then either a top-k payload of k_o =
// topk_count(count, ratio) values of the shard's sum, or the whole shard in
// 16 bits, whichever is smaller (the choice depends on the sizes alone): fp16,
// or bf16 when a finite value of the sum is beyond fp16's range (an overflow
// would turn it into inf on every rank).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/topk.h"

namespace slimreduce::compressors {

enum class OwnerFormat : std::uint32_t { topk = 0, fp16 = 1, bf16 = 2 };

class TopkShards {
 public:
  TopkShards(double ratio, kernels::TopkValues values) : ratio_(ratio), values_(values) {}

  // Even shards: shard s begins at floor(s n / ranks).
  static void shard_bounds(std::size_t n, int ranks, std::size_t* bounds);
  std::size_t part_capacity(std::size_t count, std::size_t n) const;
  // Room for the parts and, behind them, the whole payload they are cut from.
  std::size_t parts_capacity(std::size_t n, int ranks) const;
  // in's top-k (kernels::topk_compress, with residual), cut into parts by
  // shard_bounds (kernels::topk_split_parts).
  void compress_parts(const float* in, float* residual, std::size_t n, int ranks, std::byte* out,
                      std::size_t* part_bytes, kernels::TopkScratch& scratch) const;
  bool part_valid(const std::byte* part, std::size_t bytes, std::size_t count, std::size_t n) const;
  void accumulate_part(const std::byte* part, std::size_t bytes, float* shard) const;

  // Whether the owner's result for a shard of `count` values is dense 16-bit.
  bool owner_dense(std::size_t count) const;
  std::size_t owner_bytes(std::size_t count) const;
  void owner_compress(const float* sum, float* owner_residual, std::size_t count, std::byte* out,
                      kernels::TopkScratch& scratch) const;
  bool owner_valid(const std::byte* result, std::size_t count) const;
  void owner_decode(const std::byte* result, std::size_t count, float* out) const;

  // The device's twins of compress_parts, of the owner's step and of
  // owner_decode over every shard (ShardedCodec's device_* say what each
  // does), with device scratch of device_scratch_bytes(n, ranks).
  std::size_t device_scratch_bytes(std::size_t n, int ranks) const;
  int device_compress_parts(const float* in, float* residual, std::size_t n, int ranks,
                            std::byte* out, std::uint64_t* part_bytes, void* scratch,
                            void* stream) const;
  int device_owner_step(const std::byte* parts, const std::size_t* part_bytes, int ranks,
                        std::size_t owned, float* shard, float* owner_residual, std::byte* result,
                        std::size_t slot_bytes, void* scratch, void* stream) const;
  int device_decode_results(const std::byte* gathered, std::size_t slot_bytes,
                            const std::size_t* bounds, int ranks, float* out, int divisor,
                            void* scratch, void* stream) const;

  // Bytes a rank sends for n values over `ranks`: gathered (a ring
  // allgather of its payload) and sharded (about 1/ranks of its payload
  // stays home; part sizes; the owners' results allgathered).
  double gathered_wire_bytes(std::size_t n, int ranks) const;
  double sharded_wire_bytes(std::size_t n, int ranks) const;

 private:
  std::size_t value_bytes() const { return values_ == kernels::TopkValues::fp16 ? 2 : 4; }

  double ratio_;
  kernels::TopkValues values_;
};

}  // namespace slimreduce::compressors
