// Top-k's side of the sharded algorithm on the GPU (compressors/topk_shards.h
// says what the bytes are): a payload cut into one part per shard, a part
// added into an owner's shard, and the owner's dense 16-bit result written
// and read with its format tag. Twins of TopkShards' host steps, the same
// bytes; nothing here waits for the device.
#include <algorithm>

#include "kernels/cuda/device_util.cuh"
#include "kernels/topk.h"

namespace slimreduce::kernels::cuda {
namespace {

using namespace detail;

// starts[s]: the payload's first entry in shard s (starts[ranks] = k);
// part_bytes[s]: part s's padded size; offsets[s]: where it begins.
__global__ void __launch_bounds__(kBlock)
    split_sizes_kernel(const std::uint32_t* index, std::uint32_t k, std::size_t value_bytes,
                       std::size_t n, int ranks, std::uint32_t* starts, std::uint64_t* part_bytes,
                       std::uint64_t* offsets) {
  for (int s = threadIdx.x; s < ranks; s += blockDim.x) {
    const std::uint32_t first = index_lower_bound(index, k, topk_shard_begin(n, ranks, s));
    const std::uint32_t end = index_lower_bound(index, k, topk_shard_begin(n, ranks, s + 1));
    starts[s] = first;
    const std::uint64_t raw = std::uint64_t{end - first} * (sizeof(std::uint32_t) + value_bytes);
    part_bytes[s] = (raw + 3) / 4 * 4;
  }
  if (threadIdx.x == 0) starts[ranks] = k;
  __syncthreads();
  if (threadIdx.x == 0) {  // ranks are few: one thread's prefix sum
    std::uint64_t at = 0;
    for (int s = 0; s < ranks; ++s) {
      offsets[s] = at;
      at += part_bytes[s];
    }
  }
}

// Entry e of the payload into its part: the shard-relative index, the value,
// and (the part's last entry) the zero padding behind them.
__global__ void __launch_bounds__(kBlock)
    split_copy_kernel(const std::uint8_t* payload, std::uint32_t k, std::size_t value_bytes,
                      std::size_t n, int ranks, const std::uint32_t* starts,
                      const std::uint64_t* part_bytes, const std::uint64_t* offsets,
                      std::uint8_t* out) {
  const auto* index = reinterpret_cast<const std::uint32_t*>(payload);
  const std::uint8_t* values = payload + std::size_t{k} * sizeof(std::uint32_t);
  const std::size_t step = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t e = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; e < k;
       e += step) {
    int lo = 0, hi = ranks - 1;  // the last shard whose first entry is at or before e
    while (lo < hi) {
      const int mid = lo + (hi - lo + 1) / 2;
      if (starts[mid] <= e)
        lo = mid;
      else
        hi = mid - 1;
    }
    const int s = lo;
    const std::size_t j = e - starts[s];
    const std::size_t m = starts[s + 1] - starts[s];
    std::uint8_t* part = out + offsets[s];
    reinterpret_cast<std::uint32_t*>(part)[j] =
        index[e] - static_cast<std::uint32_t>(topk_shard_begin(n, ranks, s));
    std::uint8_t* value = part + m * sizeof(std::uint32_t) + j * value_bytes;
    for (std::size_t b = 0; b < value_bytes; ++b) value[b] = values[e * value_bytes + b];
    if (j + 1 == m) {
      for (std::size_t b = m * (sizeof(std::uint32_t) + value_bytes); b < part_bytes[s]; ++b)
        part[b] = 0;
    }
  }
}

// dense[index] = add_nan_first(dense[index], value): a part's indices are
// distinct, so its adds run in parallel; an index past count is skipped.
__global__ void __launch_bounds__(kBlock)
    add_part_kernel(const std::uint8_t* part, std::size_t m, bool fp16_values, std::size_t count,
                    float* dense) {
  const auto* index = reinterpret_cast<const std::uint32_t*>(part);
  const std::uint8_t* values = part + m * sizeof(std::uint32_t);
  const std::size_t step = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t e = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; e < m;
       e += step) {
    if (index[e] >= count) continue;
    const float v = fp16_values
                        ? fast_fp16_bits_to_float(reinterpret_cast<const std::uint16_t*>(values)[e])
                        : reinterpret_cast<const float*>(values)[e];
    dense[index[e]] = add_nan_first(dense[index[e]], v);
  }
}

// *wide = 1 when a finite acc = sum (+ residual) is beyond fp16's range
// (kernels::any_beyond_fp16's test).
__global__ void __launch_bounds__(kBlock)
    beyond_fp16_kernel(const float* sum, const float* residual, std::size_t n, unsigned* wide) {
  const std::size_t step = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  bool beyond = false;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += step) {
    const float acc = residual ? sum[i] + residual[i] : sum[i];
    beyond = beyond || beyond_fp16(acc);
  }
  if (beyond) atomicOr(wide, 1u);
}

// The tag, then every value through the cast's rule in the format *wide chose.
__global__ void __launch_bounds__(kBlock)
    owner_cast_kernel(const float* sum, float* residual, std::size_t n, std::uint8_t* result,
                      const unsigned* wide, std::uint32_t fp16_tag, std::uint32_t bf16_tag) {
  const bool bf16 = *wide != 0;
  if (blockIdx.x == 0 && threadIdx.x == 0)
    *reinterpret_cast<std::uint32_t*>(result) = bf16 ? bf16_tag : fp16_tag;
  auto* out = reinterpret_cast<std::uint16_t*>(result + sizeof(std::uint32_t));
  const std::size_t step = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += step) {
    float* r = residual ? residual + i : nullptr;
    out[i] = bf16 ? compress1<Elem::bf16>(sum[i], r) : compress1<Elem::fp16>(sum[i], r);
  }
}

__global__ void __launch_bounds__(kBlock)
    owner_decode_kernel(const std::uint8_t* result, std::size_t n, float* out, int divisor,
                        std::uint32_t bf16_tag) {
  const bool bf16 = *reinterpret_cast<const std::uint32_t*>(result) == bf16_tag;
  const auto* in = reinterpret_cast<const std::uint16_t*>(result + sizeof(std::uint32_t));
  const std::size_t step = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += step) {
    const float v = bf16 ? widen<Elem::bf16>(in[i]) : widen<Elem::fp16>(in[i]);
    out[i] = divide_keeping_nan(v, divisor);
  }
}

}  // namespace

std::size_t topk_split_scratch_bytes(int ranks) {
  const auto shards = static_cast<std::size_t>(ranks) + 1;
  return round256(shards * sizeof(std::uint32_t)) + round256(shards * sizeof(std::uint64_t));
}

cudaError_t topk_split_parts(const void* payload, std::size_t k, bool fp16_values, std::size_t n,
                             int ranks, void* out, std::uint64_t* part_bytes, void* scratch,
                             cudaStream_t stream) {
  if (ranks < 1 || k > n || n > 0xffffffffull) return cudaErrorInvalidValue;
  const std::size_t value_bytes = fp16_values ? 2 : 4;
  auto* starts = static_cast<std::uint32_t*>(scratch);
  auto* offsets = reinterpret_cast<std::uint64_t*>(
      static_cast<std::uint8_t*>(scratch) +
      round256((static_cast<std::size_t>(ranks) + 1) * sizeof(std::uint32_t)));
  const auto k32 = static_cast<std::uint32_t>(k);
  const auto* index = static_cast<const std::uint32_t*>(payload);
  split_sizes_kernel<<<1, kBlock, 0, stream>>>(index, k32, value_bytes, n, ranks, starts,
                                               part_bytes, offsets);
  if (k > 0) {
    split_copy_kernel<<<grid_for(k), kBlock, 0, stream>>>(
        static_cast<const std::uint8_t*>(payload), k32, value_bytes, n, ranks, starts, part_bytes,
        offsets, static_cast<std::uint8_t*>(out));
  }
  return cudaGetLastError();
}

cudaError_t topk_add_part(const void* part, std::size_t m, bool fp16_values, std::size_t count,
                          float* dense, cudaStream_t stream) {
  if (m == 0) return cudaSuccess;
  add_part_kernel<<<grid_for(m), kBlock, 0, stream>>>(static_cast<const std::uint8_t*>(part), m,
                                                      fp16_values, count, dense);
  return cudaGetLastError();
}

cudaError_t owner_cast16(const float* sum, float* residual, std::size_t n, void* result,
                         unsigned* wide, std::uint32_t fp16_tag, std::uint32_t bf16_tag,
                         cudaStream_t stream) {
  if (const cudaError_t rc = cudaMemsetAsync(wide, 0, sizeof(unsigned), stream); rc) {
    cudaGetLastError();  // not left as the runtime's last error
    return rc;
  }
  const int grid = grid_for(std::max<std::size_t>(n, 1));
  if (n > 0) beyond_fp16_kernel<<<grid, kBlock, 0, stream>>>(sum, residual, n, wide);
  owner_cast_kernel<<<grid, kBlock, 0, stream>>>(
      sum, residual, n, static_cast<std::uint8_t*>(result), wide, fp16_tag, bf16_tag);
  return cudaGetLastError();
}

cudaError_t owner_decode16(const void* result, std::size_t n, float* out, int divisor,
                           std::uint32_t bf16_tag, cudaStream_t stream) {
  if (divisor < 1) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  owner_decode_kernel<<<grid_for(n), kBlock, 0, stream>>>(static_cast<const std::uint8_t*>(result),
                                                          n, out, divisor, bf16_tag);
  return cudaGetLastError();
}

}  // namespace slimreduce::kernels::cuda
