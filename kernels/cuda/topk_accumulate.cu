// Dense sum of gathered top-k payloads on the GPU: the twin of the CPU's
// zero-fill then topk_accumulate per rank, in rank order, so every rank gets
// the same bits. Each block owns a segment of the output in shared memory and
// adds rank 0's entries for it, then rank 1's, ...: within one payload the
// indices are distinct, so the adds of one rank run in parallel and only the
// order across ranks is fixed. Where each rank's entries for a segment start
// is found first, by a binary search per (rank, segment). The payloads came
// from other ranks and are checked first, on the device (the host has let go
// of the call): one index out of order or past n in any of them sets a flag,
// and then every output is NaN instead of a sum (kernels::topk_accumulate_gathered,
// the CPU twin): the scatter never writes outside its segment.
#include "kernels/cuda/device_util.cuh"

namespace slimreduce::kernels::cuda {
namespace {

using namespace detail;

constexpr std::size_t kSegment = 2048;  // output elements per block: 8 KiB of fp32 sums

__host__ __device__ constexpr std::size_t segments_of(std::size_t n) {
  return (n + kSegment - 1) / kSegment;
}

// starts[r * (segments + 1) + s] = the first entry of rank r with index >= s * kSegment.
__global__ void __launch_bounds__(kBlock)
    segment_starts_kernel(const std::uint8_t* gathered, std::size_t stride, int ranks,
                          std::uint32_t k, std::size_t segments, std::uint32_t* starts) {
  const std::size_t total = static_cast<std::size_t>(ranks) * (segments + 1);
  const std::size_t step = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t g = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; g < total;
       g += step) {
    const std::size_t rank = g / (segments + 1);
    const std::size_t target = (g % (segments + 1)) * kSegment;
    const auto* index = reinterpret_cast<const std::uint32_t*>(gathered + rank * stride);
    starts[g] = index_lower_bound(index, k, target);
  }
}

// *corrupt = 1 when an index of some rank's payload is not above the one
// before it or not below n (kernels::topk_payload_valid's rule).
__global__ void __launch_bounds__(kBlock)
    check_payloads_kernel(const std::uint8_t* gathered, std::size_t stride, int ranks,
                          std::uint32_t k, std::size_t n, unsigned* corrupt) {
  const std::size_t total = static_cast<std::size_t>(ranks) * k;
  const std::size_t step = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t g = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; g < total;
       g += step) {
    const std::size_t e = g % k;
    const auto* index = reinterpret_cast<const std::uint32_t*>(gathered + (g / k) * stride);
    if (index[e] >= n || (e > 0 && index[e - 1] >= index[e])) atomicOr(corrupt, 1u);
  }
}

template <Elem Out>
__global__ void __launch_bounds__(kBlock)
    scatter_kernel(const std::uint8_t* gathered, std::size_t stride, int ranks, std::uint32_t k,
                   bool fp16_values, std::size_t n, const std::uint32_t* starts,
                   const unsigned* corrupt, void* out, int divisor) {
  __shared__ float sum[kSegment];
  const std::size_t segments = segments_of(n);
  if (*corrupt) {  // the CPU twin's NaN, every value, no payload read
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
      store1<Out>(out, i, divide_keeping_nan(__int_as_float(0x7fc00000), divisor));
    return;
  }
  for (std::size_t seg = blockIdx.x; seg < segments; seg += gridDim.x) {
    const std::size_t base = seg * kSegment;
    for (std::size_t j = threadIdx.x; j < kSegment; j += blockDim.x) sum[j] = 0.0f;
    __syncthreads();
    for (int r = 0; r < ranks; ++r) {
      const std::uint8_t* payload = gathered + static_cast<std::size_t>(r) * stride;
      const auto* index = reinterpret_cast<const std::uint32_t*>(payload);
      const std::uint8_t* values = payload + std::size_t{k} * sizeof(std::uint32_t);
      const std::uint32_t* bounds = starts + static_cast<std::size_t>(r) * (segments + 1) + seg;
      for (std::size_t e = std::size_t{bounds[0]} + threadIdx.x; e < bounds[1]; e += blockDim.x) {
        const float v =
            fp16_values ? fast_fp16_bits_to_float(reinterpret_cast<const std::uint16_t*>(values)[e])
                        : reinterpret_cast<const float*>(values)[e];
        float& slot = sum[index[e] - base];
        slot = add_nan_first(slot, v);  // dense[i] += v, the CPU's operand order
      }
      __syncthreads();  // rank r's adds land before rank r + 1's
    }
    for (std::size_t j = threadIdx.x; j < kSegment && base + j < n; j += blockDim.x) {
      const float v = divide_keeping_nan(sum[j], divisor);
      store1<Out>(out, base + j, v);
    }
    __syncthreads();
  }
}

// The segment starts, then the corrupt flag.
std::size_t starts_bytes(std::size_t n, int ranks) {
  return round256(static_cast<std::size_t>(ranks) * (segments_of(n) + 1) * 4);
}

}  // namespace

std::size_t topk_accumulate_scratch_bytes(std::size_t n, int ranks) {
  return starts_bytes(n, ranks) + round256(sizeof(unsigned));
}

cudaError_t topk_accumulate(const void* gathered, std::size_t payload_stride, int ranks,
                            std::size_t k, bool fp16_values, std::size_t n, Elem out_type,
                            void* out, int divisor, void* scratch, cudaStream_t stream) {
  if (ranks < 1 || divisor < 1 || k > n || n > 0xffffffffull) return cudaErrorInvalidValue;
  // A stride shorter than a payload would read the next rank's, and past the end.
  if (payload_stride < k * (sizeof(std::uint32_t) + (fp16_values ? 2 : 4)))
    return cudaErrorInvalidValue;
  if (out_type != Elem::fp32 && out_type != Elem::fp16 && out_type != Elem::bf16)
    return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const auto* bytes = static_cast<const std::uint8_t*>(gathered);
  auto* starts = static_cast<std::uint32_t*>(scratch);
  auto* corrupt =
      reinterpret_cast<unsigned*>(static_cast<std::uint8_t*>(scratch) + starts_bytes(n, ranks));
  const std::size_t segments = segments_of(n);
  const auto k32 = static_cast<std::uint32_t>(k);
  if (const cudaError_t rc = cudaMemsetAsync(corrupt, 0, sizeof *corrupt, stream);
      rc != cudaSuccess)
    return rc;
  if (k > 0) {
    check_payloads_kernel<<<grid_for(static_cast<std::size_t>(ranks) * k), kBlock, 0, stream>>>(
        bytes, payload_stride, ranks, k32, n, corrupt);
  }
  const int search_grid = grid_for(static_cast<std::size_t>(ranks) * (segments + 1));
  segment_starts_kernel<<<search_grid, kBlock, 0, stream>>>(bytes, payload_stride, ranks, k32,
                                                            segments, starts);
  const int grid = static_cast<int>(std::min<std::size_t>(segments, grid_for(n / kVec) * 2u));
  switch (out_type) {
    case Elem::fp32:
      scatter_kernel<Elem::fp32><<<grid, kBlock, 0, stream>>>(
          bytes, payload_stride, ranks, k32, fp16_values, n, starts, corrupt, out, divisor);
      break;
    case Elem::fp16:
      scatter_kernel<Elem::fp16><<<grid, kBlock, 0, stream>>>(
          bytes, payload_stride, ranks, k32, fp16_values, n, starts, corrupt, out, divisor);
      break;
    case Elem::bf16:
      scatter_kernel<Elem::bf16><<<grid, kBlock, 0, stream>>>(
          bytes, payload_stride, ranks, k32, fp16_values, n, starts, corrupt, out, divisor);
      break;
  }
  return cudaGetLastError();
}

}  // namespace slimreduce::kernels::cuda
