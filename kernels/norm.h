// The L2 norm of a reduced tensor, summed in one fixed order, so that every
// rank, every ISA and (later) the GPU give the same bits: adaptive levels
// (core/runtime/adaptive_levels.h) decide from it on every rank alike, with
// no message, because every rank holds the same reduced bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cast.h"

namespace slimreduce::kernels {

// Values per block of the fixed order: a block's squares are summed in
// kNormLanes interleaved lanes (value i into lane i % kNormLanes) in double,
// the lanes then added in lane order; the blocks' sums are added in block order.
inline constexpr std::size_t kNormBlock = 4096;
inline constexpr std::size_t kNormLanes = 8;

// sqrt(sum of v[i]^2) in that order, in double (no fused multiply-add: the
// build turns contraction off). NaN or inf where a value is not finite or
// the sum overflows.
double fixed_order_norm(const float* v, std::size_t n);
// The same of 16-bit floats (NCCL's fp16 and bf16 calls), each value widened
// to fp32 (exact) and then taken as above: the norm of the widened tensor.
double fixed_order_norm(HalfFormat format, const std::uint16_t* v, std::size_t n);

}  // namespace slimreduce::kernels
