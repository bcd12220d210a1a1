// Exact top-k by magnitude on the CPU: the reference twin of the CUDA kernel.
// Rules (shared with the GPU): |NaN| is larger than every number, so a NaN is
// never silently dropped; equal magnitudes are broken by the lower index.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cast.h"
#include "kernels/element_rules.h"

namespace slimreduce::kernels {

// How payload values travel.
enum class TopkValues { fp32, fp16 };

// k = ceil(ratio * n), at least 1 and at most n (0 when n == 0).
std::size_t topk_count(std::size_t n, double ratio);

// Payload layout: k uint32 indices (ascending), then k values (fp32 or fp16 bits).
std::size_t topk_payload_bytes(std::size_t k, TopkValues values);

// The stride payloads travel at on the GPU paths: the layout padded with zero
// bytes to a multiple of 16, so every rank's indices in a gathered buffer are
// aligned. Here, not in kernels/cuda/, because the MPI device path sizes its
// wire with it in every build.
inline std::size_t topk_payload_stride(std::size_t payload_bytes) {
  return (payload_bytes + 15) / 16 * 16;
}

// Scratch memory reused across calls; grows as needed, never shrinks.
struct TopkScratch {
  std::vector<std::uint32_t> hist;        // Per-thread sub-histograms.
  std::vector<std::uint64_t> counts;      // Merged histogram, per-thread counts and offsets.
  std::vector<std::uint32_t> cand_index;  // Entries of the threshold bucket, in index order,
  std::vector<float> cand_value;          // and their acc values.
  std::vector<std::uint32_t> sample;      // Keys of a sample of acc.
};

// How topk_compress runs; every setting gives the same bytes.
struct TopkTuning {
  Isa isa = best_isa();  // Lowered to what this CPU has.
  unsigned threads = 0;  // 0: from n (one below 1M elements) and the CPUs we may use.
  // Pass 1 histograms only the keys in level-0 bins (top 11 key bits) >= this;
  // -1: a floor estimated from a sample. Too high a floor costs a pass.
  int pass1_floor_bin = -1;
};

// acc[i] = in[i] + residual[i] (add_nan_first from element_rules.h; in[i] when
// residual == nullptr), in fp32. Selects the k entries of acc with the largest
// key bits(acc) & 0x7fffffff (unsigned; equal keys: lower index first) and
// writes them to payload (indices ascending). sent = the value as it travels
// (fp32, or fp32 rounded to fp16 and widened). With residual: residual[i] =
// acc[i] - sent[i] for selected entries (0 when sent is not finite), acc[i] for
// the rest. Without: nothing but payload is written. Needs n < 2^32 (uint32
// indices) and k <= n; k == 0 or n == 0 writes nothing.
void topk_compress(const float* in, float* residual, std::size_t n, std::size_t k,
                   TopkValues values, void* payload, TopkScratch& scratch);
void topk_compress(const float* in, float* residual, std::size_t n, std::size_t k,
                   TopkValues values, void* payload, TopkScratch& scratch,
                   const TopkTuning& tuning);

// Whether a payload of k entries, as it arrived from another rank, may be
// accumulated into n values: its indices ascend strictly and lie below n, as
// topk_compress writes them (a value may be any bits). A corrupt payload would
// otherwise make topk_accumulate write out of bounds.
bool topk_payload_valid(const void* payload, std::size_t k, std::size_t n);

// dense[index] += value for each of the k entries of one payload, in payload order.
void topk_accumulate(const void* payload, std::size_t k, TopkValues values, float* dense);

// The gathered sum as the device computes it (the CPU twin of
// kernels::device::topk_accumulate before its divide): dense[0..n) = 0, then
// the `ranks` payloads of k entries, `stride` bytes apart, added in rank
// order (topk_accumulate). Where the device cannot stop the call, it checks
// the payloads itself: if any is not valid (topk_payload_valid), every value
// of dense is the quiet NaN 0x7fc00000 instead, on every rank alike (they
// gathered the same bytes): nothing is written out of bounds, and a sum that
// cannot be trusted is never returned as if it could.
void topk_accumulate_gathered(const void* gathered, std::size_t stride, int ranks, std::size_t k,
                              TopkValues values, std::size_t n, float* dense);

// The sharded algorithm's even shards (compressors/topk_shards.h): shard s
// of n values over `ranks` begins at floor(s n / ranks), computed without an
// n * s that could overflow. Host and device.
SR_HD inline std::size_t topk_shard_begin(std::size_t n, int ranks, int s) {
  const auto shards = static_cast<std::size_t>(ranks);
  const auto at = static_cast<std::size_t>(s);
  return n / shards * at + n % shards * at / shards;
}

// A payload of k entries cut by those shards into one part per shard: the m
// entries in shard s as m shard-relative uint32 indices, then their m values,
// zero-padded to a multiple of 4 bytes; the parts back to back at out,
// part_bytes[s] the size of part s (at most the payload's bytes plus 3 a
// part, in all). out and payload do not overlap. The twin of kernels/cuda's
// topk_split_parts.
void topk_split_parts(const void* payload, std::size_t k, TopkValues values, std::size_t n,
                      int ranks, void* out, std::uint64_t* part_bytes);

}  // namespace slimreduce::kernels
