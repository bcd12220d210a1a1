// What the CUDA kernels share: 16-byte vector loads and stores, the element
// rules applied per type, and grid-stride loops with a vector body.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/kernels.h"
#include "kernels/device.h"
#include "kernels/element_rules.h"

namespace slimreduce::kernels::cuda {
using device::round256;
}  // namespace slimreduce::kernels::cuda

namespace slimreduce::kernels::cuda::detail {

// Element-wise kernels handle 8 elements per step: 16 bytes of 16-bit values,
// two 16-byte vectors of fp32.
inline constexpr int kVec = 8;
inline constexpr int kBlock = 256;

// Blocks for `steps` grid-stride steps of one thread each: enough to fill the
// device (a few waves), never more than the work.
int grid_for(std::size_t steps);

__host__ __device__ inline bool aligned16(const void* p) {
  return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0;
}

// fp16 <-> fp32 through the hardware's conversions (one cvt each), which
// round as IEEE 754 says (nearest even, subnormals kept, overflow to inf) and
// so give the shared rules' bits for every value but NaN: there the hardware
// makes its canonical NaN, while the rules keep the payload as F16C does, so a
// NaN takes the rules' path. The rules' branchy bit arithmetic made the fp16
// casts compute-bound on an H200 (60% of copy against bf16's 84%, 2026-12-04).
__device__ inline std::uint16_t fast_float_to_fp16_bits(float f) {
  if (f != f) return float_to_fp16_bits(f);
  return __half_as_ushort(__float2half_rn(f));
}

__device__ inline float fast_fp16_bits_to_float(std::uint16_t h) {
  if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu)) return fp16_bits_to_float(h);
  return __half2float(__ushort_as_half(h));
}

template <Elem E>
__device__ inline float widen(std::uint16_t h) {
  return E == Elem::fp16 ? fast_fp16_bits_to_float(h) : bf16_bits_to_float(h);
}

template <Elem E>
__device__ inline std::uint16_t narrow(float f) {
  return E == Elem::fp16 ? fast_float_to_fp16_bits(f) : float_to_bf16_bits(f);
}

// One value through the CPU twin's rule: acc = in + residual (NaN of in
// first), out = round16(acc), residual = acc - widen(out) or 0 if not finite.
template <Elem F>
__device__ inline std::uint16_t compress1(float x, float* r) {
  if (!r) return narrow<F>(x);
  const float acc = add_nan_first(x, *r);
  const std::uint16_t h = narrow<F>(acc);
  const float back = widen<F>(h);
  *r = residual_after(acc, back);
  return h;
}

// The first of k ascending indices at or past target (k when none is).
__device__ inline std::uint32_t index_lower_bound(const std::uint32_t* index, std::uint32_t k,
                                                  std::size_t target) {
  std::uint32_t lo = 0, hi = k;
  while (lo < hi) {
    const std::uint32_t mid = lo + (hi - lo) / 2;
    if (index[mid] < target)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// Element i of a tensor of type E, as fp32 (exact).
template <Elem E>
__device__ inline float load1(const void* base, std::size_t i) {
  if constexpr (E == Elem::fp32) {
    return static_cast<const float*>(base)[i];
  } else {
    return widen<E>(static_cast<const std::uint16_t*>(base)[i]);
  }
}

// Writes v (rounded to nearest even for 16-bit types) as element i.
template <Elem E>
__device__ inline void store1(void* base, std::size_t i, float v) {
  if constexpr (E == Elem::fp32) {
    static_cast<float*>(base)[i] = v;
  } else {
    static_cast<std::uint16_t*>(base)[i] = narrow<E>(v);
  }
}

__device__ inline void load8(const float* p, float v[kVec]) {
  const float4 a = reinterpret_cast<const float4*>(p)[0];
  const float4 b = reinterpret_cast<const float4*>(p)[1];
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
  v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

__device__ inline void store8(float* p, const float v[kVec]) {
  reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
  reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}

__device__ inline void load8(const std::uint16_t* p, std::uint16_t h[kVec]) {
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  const std::uint32_t w[4] = {u.x, u.y, u.z, u.w};
  for (int j = 0; j < 4; ++j) {
    h[2 * j] = static_cast<std::uint16_t>(w[j] & 0xffffu);
    h[2 * j + 1] = static_cast<std::uint16_t>(w[j] >> 16);
  }
}

__device__ inline void store8(std::uint16_t* p, const std::uint16_t h[kVec]) {
  uint4 u;
  u.x = h[0] | (std::uint32_t{h[1]} << 16);
  u.y = h[2] | (std::uint32_t{h[3]} << 16);
  u.z = h[4] | (std::uint32_t{h[5]} << 16);
  u.w = h[6] | (std::uint32_t{h[7]} << 16);
  *reinterpret_cast<uint4*>(p) = u;
}

// Eight elements of type E from base + i (16-byte aligned), widened.
template <Elem E>
__device__ inline void load8_as_float(const void* base, std::size_t i, float v[kVec]) {
  if constexpr (E == Elem::fp32) {
    load8(static_cast<const float*>(base) + i, v);
  } else {
    std::uint16_t h[kVec];
    load8(static_cast<const std::uint16_t*>(base) + i, h);
    for (int j = 0; j < kVec; ++j) v[j] = widen<E>(h[j]);
  }
}

// Grid-stride loop over [0, count) of one tensor by `blocks` blocks, this one
// being `block`: whole 8-element steps through vec8(i) when `vector` (every
// pointer 16-byte aligned), the rest one element at a time through one(i).
template <class Vec8, class One>
__device__ inline void for_each_element(std::size_t count, bool vector, unsigned block,
                                        unsigned blocks, Vec8 vec8, One one) {
  const std::size_t stride = static_cast<std::size_t>(blocks) * blockDim.x;
  const std::size_t first = static_cast<std::size_t>(block) * blockDim.x + threadIdx.x;
  const std::size_t steps = vector ? count / kVec : 0;
  for (std::size_t s = first; s < steps; s += stride) vec8(s * kVec);
  for (std::size_t i = steps * kVec + first; i < count; i += stride) one(i);
}

// The same, four elements a step: vec4(i) loads 8 bytes of 16-bit elements
// and stores 16 bytes of floats, so that each of a warp's loads and stores
// is one contiguous run (with eight a step, each 16-byte store of a warp
// strides 32 bytes). For widening 16-bit elements, which ran at 62% of copy
// on the H200 (2026-12-04) eight a step, and 67% two such steps a pass.
template <class Vec4, class One>
__device__ inline void for_each_element4(std::size_t count, bool vector, unsigned block,
                                         unsigned blocks, Vec4 vec4, One one) {
  const std::size_t stride = static_cast<std::size_t>(blocks) * blockDim.x;
  const std::size_t first = static_cast<std::size_t>(block) * blockDim.x + threadIdx.x;
  const std::size_t steps = vector ? count / 4 : 0;
  for (std::size_t s = first; s < steps; s += stride) vec4(s * 4);
  for (std::size_t i = steps * 4 + first; i < count; i += stride) one(i);
}

// The same over the whole grid (x only).
template <class Vec8, class One>
__device__ inline void for_each_element(std::size_t count, bool vector, Vec8 vec8, One one) {
  for_each_element(count, vector, blockIdx.x, gridDim.x, vec8, one);
}

}  // namespace slimreduce::kernels::cuda::detail
