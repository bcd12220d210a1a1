// fp32 <-> fp16/bf16 on the GPU: the twin of kernels/cast.cc, bit for bit.
// Every cast is a batch (pack/unpack of a fusion buffer); a single tensor is
// a batch of one, so the fused and unfused paths run the same code.
#include <algorithm>
#include <atomic>
#include <type_traits>

#include "kernels/cuda/device_util.cuh"

namespace slimreduce::kernels::cuda {
namespace detail {

int grid_for(std::size_t steps) {
  // The multiprocessor count, read once per device (the call is cheap but not free).
  static std::atomic<int> cached[64] = {};
  int device = 0;
  int sms = 132;
  if (cudaGetDevice(&device) == cudaSuccess && device >= 0 && device < 64) {
    sms = cached[device].load(std::memory_order_relaxed);
    if (sms == 0) {
      if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
        sms = 132;
      }
      cached[device].store(sms, std::memory_order_relaxed);
    }
  }
  const std::size_t wanted = (steps + kBlock - 1) / kBlock;
  const std::size_t most = static_cast<std::size_t>(sms) * 8;  // 8 blocks of 256 per SM
  return static_cast<int>(std::max<std::size_t>(1, std::min(wanted, most)));
}

}  // namespace detail

namespace {

using namespace detail;

constexpr int kMaxBatch = 64;  // 64 items of 40 bytes: well inside the 4 KiB of kernel parameters

// Item i owns blocks [first_block[i], first_block[i + 1]): blocks in
// proportion to its size, so one large tensor among small ones is not starved.
template <class Item>
struct Batch {
  Item items[kMaxBatch];
  unsigned first_block[kMaxBatch + 1];
  int count;
};
using PackBatch = Batch<PackItem>;
using UnpackBatch = Batch<UnpackItem>;

// The item this block works on, and the block's place among the item's blocks.
template <class Item>
__device__ inline int item_of_block(const Batch<Item>& batch, unsigned* block, unsigned* blocks) {
  int lo = 0, hi = batch.count - 1;
  while (lo < hi) {  // the last item whose first block is <= blockIdx.x
    const int mid = (lo + hi + 1) / 2;
    if (batch.first_block[mid] <= blockIdx.x)
      lo = mid;
    else
      hi = mid - 1;
  }
  *block = blockIdx.x - batch.first_block[lo];
  *blocks = batch.first_block[lo + 1] - batch.first_block[lo];
  return lo;
}

// The CPU twin's rule (kernels/element_rules.h): divisor 1 divides nothing,
// and a NaN keeps its payload instead of becoming the GPU's canonical NaN.
__device__ inline float scaled(float x, int divisor) { return divide_keeping_nan(x, divisor); }

template <Elem F>
__global__ void __launch_bounds__(kBlock)
    pack_kernel(const __grid_constant__ PackBatch batch, void* fused) {
  unsigned block = 0, blocks = 1;
  const PackItem& it = batch.items[item_of_block(batch, &block, &blocks)];
  if constexpr (F == Elem::fp32) {
    float* out = static_cast<float*>(fused) + it.offset;
    const bool vector = aligned16(it.in) && aligned16(out);
    for_each_element(
        it.count, vector, block, blocks,
        [&](std::size_t i) {
          float v[kVec];
          load8(it.in + i, v);
          store8(out + i, v);
        },
        [&](std::size_t i) { out[i] = it.in[i]; });
    if (block == 0) {
      for (std::size_t j = threadIdx.x; j < it.pad; j += blockDim.x) out[it.count + j] = 0.0f;
    }
  } else {
    std::uint16_t* out = static_cast<std::uint16_t*>(fused) + it.offset;
    float* res = it.residual;
    const bool vector = aligned16(it.in) && aligned16(out) && (!res || aligned16(res));
    for_each_element(
        it.count, vector, block, blocks,
        [&](std::size_t i) {
          float v[kVec], r[kVec];
          std::uint16_t h[kVec];
          load8(it.in + i, v);
          if (res) load8(res + i, r);
          for (int j = 0; j < kVec; ++j) h[j] = compress1<F>(v[j], res ? &r[j] : nullptr);
          store8(out + i, h);
          if (res) store8(res + i, r);
        },
        [&](std::size_t i) { out[i] = compress1<F>(it.in[i], res ? res + i : nullptr); });
    if (block == 0) {
      for (std::size_t j = threadIdx.x; j < it.pad; j += blockDim.x) out[it.count + j] = 0;
    }
  }
}

template <Elem F>
__global__ void __launch_bounds__(kBlock)
    unpack_kernel(const __grid_constant__ UnpackBatch batch, const void* fused, int divisor) {
  unsigned block = 0, blocks = 1;
  const UnpackItem& it = batch.items[item_of_block(batch, &block, &blocks)];
  if constexpr (F == Elem::fp32) {
    const float* in = static_cast<const float*>(fused) + it.offset;
    for_each_element(
        it.count, aligned16(in) && aligned16(it.out), block, blocks,
        [&](std::size_t i) {
          float v[kVec];
          load8(in + i, v);
          for (int j = 0; j < kVec; ++j) v[j] = scaled(v[j], divisor);
          store8(it.out + i, v);
        },
        [&](std::size_t i) { it.out[i] = scaled(in[i], divisor); });
  } else {
    const std::uint16_t* in = static_cast<const std::uint16_t*>(fused) + it.offset;
    for_each_element4(
        it.count, aligned16(in) && aligned16(it.out), block, blocks,
        [&](std::size_t i) {
          const uint2 h = *reinterpret_cast<const uint2*>(in + i);
          float4 v;
          v.x = scaled(widen<F>(static_cast<std::uint16_t>(h.x & 0xffffu)), divisor);
          v.y = scaled(widen<F>(static_cast<std::uint16_t>(h.x >> 16)), divisor);
          v.z = scaled(widen<F>(static_cast<std::uint16_t>(h.y & 0xffffu)), divisor);
          v.w = scaled(widen<F>(static_cast<std::uint16_t>(h.y >> 16)), divisor);
          *reinterpret_cast<float4*>(it.out + i) = v;
        },
        [&](std::size_t i) { it.out[i] = scaled(widen<F>(in[i]), divisor); });
  }
}

template <Elem F>
__global__ void __launch_bounds__(kBlock)
    accumulate_kernel(const std::uint16_t* in, std::uint16_t* inout, std::size_t n) {
  for_each_element(
      n, aligned16(in) && aligned16(inout),
      [&](std::size_t i) {
        std::uint16_t a[kVec], b[kVec];
        load8(in + i, a);
        load8(inout + i, b);
        for (int j = 0; j < kVec; ++j)
          b[j] = narrow<F>(add_nan_first(widen<F>(a[j]), widen<F>(b[j])));
        store8(inout + i, b);
      },
      [&](std::size_t i) {
        inout[i] = narrow<F>(add_nan_first(widen<F>(in[i]), widen<F>(inout[i])));
      });
}

template <class Item>
unsigned plan_blocks(Batch<Item>& batch) {
  unsigned total = 0;
  for (int i = 0; i < batch.count; ++i) {
    batch.first_block[i] = total;
    const std::size_t pad = [&] {
      if constexpr (std::is_same_v<Item, PackItem>) return batch.items[i].pad;
      return std::size_t{0};
    }();
    total += static_cast<unsigned>(grid_for((batch.items[i].count + pad + kVec - 1) / kVec));
  }
  batch.first_block[batch.count] = total;
  return total;
}

template <class Item, class Kernel, class... Args>
cudaError_t launch_batches(Kernel kernel, const Item* items, int count, cudaStream_t stream,
                           Args... args) {
  for (int first = 0; first < count; first += kMaxBatch) {
    Batch<Item> batch{};
    batch.count = std::min(kMaxBatch, count - first);
    std::copy(items + first, items + first + batch.count, batch.items);
    const unsigned blocks = plan_blocks(batch);
    kernel<<<blocks, kBlock, 0, stream>>>(batch, args...);
    if (const cudaError_t rc = cudaGetLastError(); rc != cudaSuccess) return rc;
  }
  return cudaSuccess;
}

}  // namespace

cudaError_t pack_batch(Elem fused_type, const PackItem* items, int count, void* fused,
                       cudaStream_t stream) {
  switch (fused_type) {
    case Elem::fp32:
      return launch_batches<PackItem>(pack_kernel<Elem::fp32>, items, count, stream, fused);
    case Elem::fp16:
      return launch_batches<PackItem>(pack_kernel<Elem::fp16>, items, count, stream, fused);
    case Elem::bf16:
      return launch_batches<PackItem>(pack_kernel<Elem::bf16>, items, count, stream, fused);
  }
  return cudaErrorInvalidValue;
}

cudaError_t unpack_batch(Elem fused_type, const void* fused, const UnpackItem* items, int count,
                         int divisor, cudaStream_t stream) {
  if (divisor < 1) return cudaErrorInvalidValue;  // the CPU twin refuses it too
  switch (fused_type) {
    case Elem::fp32:
      return launch_batches<UnpackItem>(unpack_kernel<Elem::fp32>, items, count, stream, fused,
                                        divisor);
    case Elem::fp16:
      return launch_batches<UnpackItem>(unpack_kernel<Elem::fp16>, items, count, stream, fused,
                                        divisor);
    case Elem::bf16:
      return launch_batches<UnpackItem>(unpack_kernel<Elem::bf16>, items, count, stream, fused,
                                        divisor);
  }
  return cudaErrorInvalidValue;
}

cudaError_t cast_compress(Elem format, const float* in, float* residual, std::uint16_t* out,
                          std::size_t n, cudaStream_t stream) {
  if (format == Elem::fp32) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const PackItem item{in, residual, n, 0, 0};
  return pack_batch(format, &item, 1, out, stream);
}

cudaError_t cast_decompress(Elem format, const std::uint16_t* in, float* out, std::size_t n,
                            int divisor, cudaStream_t stream) {
  if (format == Elem::fp32 || divisor < 1) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const UnpackItem item{out, n, 0};
  return unpack_batch(format, in, &item, 1, divisor, stream);
}

cudaError_t cast_accumulate(Elem format, const std::uint16_t* in, std::uint16_t* inout,
                            std::size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const int grid = grid_for((n + kVec - 1) / kVec);
  switch (format) {
    case Elem::fp16:
      accumulate_kernel<Elem::fp16><<<grid, kBlock, 0, stream>>>(in, inout, n);
      return cudaGetLastError();
    case Elem::bf16:
      accumulate_kernel<Elem::bf16><<<grid, kBlock, 0, stream>>>(in, inout, n);
      return cudaGetLastError();
    case Elem::fp32:
      break;
  }
  return cudaErrorInvalidValue;
}

}  // namespace slimreduce::kernels::cuda
