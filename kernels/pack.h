// Batched pack / unpack of fusion buffers on the CPU: the twin of
// kernels::cuda::pack_batch / unpack_batch, bit for bit. Many tensors go into
// one contiguous buffer (fp32, or compressed to fp16/bf16 with optional error
// feedback) and come back out of it, widened and optionally divided. Callers:
// the host simulation's kernels, the tests and bench_pack; the CPU path packs
// through its compressors instead.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cast.h"

namespace slimreduce::kernels {

// The element type of a fusion buffer.
enum class FusedType { fp32, fp16, bf16 };

// Tensor i lands at element offset `offset` of the fusion buffer; `pad` more
// elements after it are zeroed (so a collective never reads stale bytes).
struct PackItem {
  const float* in;
  float* residual;  // nullptr: no error feedback (ignored for an fp32 buffer)
  std::size_t count;
  std::size_t offset;
  std::size_t pad;
};
struct UnpackItem {
  float* out;
  std::size_t count;
  std::size_t offset;
};

// The element offset where the next tensor starts: 16-byte aligned for every
// element type, so each tensor gets the vector path.
constexpr std::size_t fusion_align(std::size_t elements) { return (elements + 7) / 8 * 8; }

// Packs (and, for a 16-bit buffer, compresses with kernels::compress's rule)
// the tensors into `fused`. Tensors must not overlap the buffer.
void pack_batch(FusedType fused_type, const PackItem* items, std::size_t count, void* fused,
                Isa isa = best_isa());

// Unpacks (widens) the tensors from `fused`, each value divided by `divisor`
// (>= 1); divisor 1 divides nothing, so every bit, NaN payloads included, comes back.
// Throws std::invalid_argument for a divisor below 1.
void unpack_batch(FusedType fused_type, const void* fused, const UnpackItem* items,
                  std::size_t count, int divisor, Isa isa = best_isa());

}  // namespace slimreduce::kernels
