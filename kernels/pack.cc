#include "kernels/pack.h"

#include <cstring>
#include <span>
#include <stdexcept>

#include "kernels/element_rules.h"

namespace slimreduce::kernels {
namespace {

HalfFormat half_of(FusedType type) {
  return type == FusedType::fp16 ? HalfFormat::fp16 : HalfFormat::bf16;
}

// The GPU twin's rule (kernels/element_rules.h, divide_keeping_nan): divisor 1
// divides nothing, a NaN keeps its payload.
void divide(float* values, std::size_t n, int divisor) {
  if (divisor == 1) return;
  if ((divisor & (divisor - 1)) == 0) {
    // A power of two: x * (1/d) is the same real number as x / d, so it rounds
    // to the same bits, and a multiply is several times cheaper than a divide.
    const float inverse = 1.0f / static_cast<float>(divisor);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t bits = float_bits(values[i]);
      values[i] = is_nan_bits(bits) ? bits_float(bits | 0x400000u) : values[i] * inverse;
    }
    return;
  }
  for (std::size_t i = 0; i < n; ++i) values[i] = divide_keeping_nan(values[i], divisor);
}

}  // namespace

void pack_batch(FusedType fused_type, const PackItem* items, std::size_t count, void* fused,
                Isa isa) {
  for (const PackItem& item : std::span(items, count)) {
    if (fused_type == FusedType::fp32) {
      float* out = static_cast<float*>(fused) + item.offset;
      if (item.count) std::memcpy(out, item.in, item.count * sizeof(float));
      std::memset(out + item.count, 0, item.pad * sizeof(float));
    } else {
      std::uint16_t* out = static_cast<std::uint16_t*>(fused) + item.offset;
      compress(half_of(fused_type), item.in, item.residual, out, item.count, isa);
      std::memset(out + item.count, 0, item.pad * sizeof(std::uint16_t));  // +0 in both formats
    }
  }
}

void unpack_batch(FusedType fused_type, const void* fused, const UnpackItem* items,
                  std::size_t count, int divisor, Isa isa) {
  if (divisor < 1) throw std::invalid_argument("unpack_batch: divisor must be at least 1");
  for (const UnpackItem& item : std::span(items, count)) {
    if (fused_type == FusedType::fp32) {
      const float* in = static_cast<const float*>(fused) + item.offset;
      if (item.count) std::memcpy(item.out, in, item.count * sizeof(float));
    } else {
      const std::uint16_t* in = static_cast<const std::uint16_t*>(fused) + item.offset;
      decompress(half_of(fused_type), in, item.out, item.count, isa);
    }
    divide(item.out, item.count, divisor);
  }
}

}  // namespace slimreduce::kernels
