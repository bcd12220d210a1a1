// Exact top-k by magnitude on the GPU: the twin of kernels/topk.cc, the same
// payload and residual bits. Radix select on the 31-bit key |x| as bits, with
// the CPU's levels (11 + 10 + 10 bits), then a compaction in index order:
//   hist0     acc = in + residual (stored back to residual), level-0 histogram
//   descend   one block picks the bin holding the k-th largest key: keys above
//             it are selected, `need` more come from the band (the bin)
//   hist1/2   histogram of the next bits of the keys in the band, unless the
//             band is already exact (taken whole, or a single key)
//   count     per 4096-element tile: keys above the band, keys in it
//   scan      exclusive sums of both over the tiles (one block)
//   compact   each tile writes its winners at their final payload positions:
//             above-before + min(band-before, need); ties thus go to the lowest
//             indices, as on the CPU, and the residual update is fused in.
// Every decision lives in device memory, so nothing waits for the host.
#include <cub/block/block_load.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "kernels/cuda/device_util.cuh"
#include "kernels/topk.h"

namespace slimreduce::kernels::cuda {
namespace {

using namespace detail;
using u64 = unsigned long long;

constexpr int kTileThreads = 256;
constexpr int kTileItems = 16;
constexpr std::size_t kTile = kTileThreads * kTileItems;
constexpr int kScanThreads = 1024;

// Radix levels over the 31 key bits, as on the CPU: 11 + 10 + 10.
__host__ __device__ constexpr int level_shift(int level) {
  return level == 0 ? 20 : level == 1 ? 10 : 0;
}
__host__ __device__ constexpr std::uint32_t level_bins(int level) {
  return level == 0 ? 2048 : 1024;
}
constexpr std::size_t kHistWords = 2048 + 1024 + 1024;

struct SelectState {
  std::uint32_t lo;  // keys in [lo, hi] are the band; above hi: selected
  std::uint32_t hi;
  u64 need;     // how many more come from the band
  u64 in_band;  // keys in the band
  int exact;    // the band is taken whole or is a single key
};

struct Scratch {
  std::uint32_t* hist[3];
  SelectState* state;
  u64* tile_above;
  u64* tile_band;
};

__host__ __device__ constexpr std::size_t tiles_of(std::size_t n) {
  return (n + kTile - 1) / kTile;
}

Scratch carve(void* base, std::size_t n) {
  auto* p = static_cast<std::byte*>(base);
  Scratch s;
  s.hist[0] = reinterpret_cast<std::uint32_t*>(p);
  s.hist[1] = s.hist[0] + level_bins(0);
  s.hist[2] = s.hist[1] + level_bins(1);
  p += round256(kHistWords * sizeof(std::uint32_t));
  s.state = reinterpret_cast<SelectState*>(p);
  p += round256(sizeof(SelectState));
  s.tile_above = reinterpret_cast<u64*>(p);
  p += round256(tiles_of(n) * sizeof(u64));
  s.tile_band = reinterpret_cast<u64*>(p);
  return s;
}

__device__ inline std::uint32_t key_of(float x) { return magnitude_key(x); }

// Adds the block's shared histogram to the global one.
__device__ inline void flush(const std::uint32_t* local, std::uint32_t* global,
                             std::uint32_t bins) {
  __syncthreads();
  for (std::uint32_t b = threadIdx.x; b < bins; b += blockDim.x) {
    if (local[b]) atomicAdd(global + b, local[b]);
  }
}

// Pass 1: acc into residual (with error feedback) and the level-0 histogram.
template <Elem E, bool EF>
__global__ void __launch_bounds__(kBlock)
    hist0_kernel(const void* in, float* residual, std::size_t n, std::uint32_t* hist) {
  __shared__ std::uint32_t h[2048];
  for (int b = threadIdx.x; b < 2048; b += blockDim.x) h[b] = 0;
  __syncthreads();
  const bool vector = aligned16(in) && (!EF || aligned16(residual));
  for_each_element(
      n, vector,
      [&](std::size_t i) {
        float v[kVec];
        load8_as_float<E>(in, i, v);
        if constexpr (EF) {
          float r[kVec];
          load8(residual + i, r);
          for (int j = 0; j < kVec; ++j) v[j] = add_nan_first(v[j], r[j]);
          store8(residual + i, v);
        }
        for (int j = 0; j < kVec; ++j) atomicAdd(&h[key_of(v[j]) >> 20], 1u);
      },
      [&](std::size_t i) {
        float acc = load1<E>(in, i);
        if constexpr (EF) residual[i] = acc = add_nan_first(acc, residual[i]);
        atomicAdd(&h[key_of(acc) >> 20], 1u);
      });
  flush(h, hist, 2048);
}

// Levels 1 and 2: the next 10 bits of the keys in the band.
template <Elem E>
__global__ void __launch_bounds__(kBlock)
    hist_level_kernel(const void* src, std::size_t n, const SelectState* state, int level,
                      std::uint32_t* hist) {
  __shared__ std::uint32_t h[1024];
  const SelectState st = *state;
  if (st.exact) return;  // the same answer for every block: no barrier is skipped unevenly
  for (int b = threadIdx.x; b < 1024; b += blockDim.x) h[b] = 0;
  __syncthreads();
  const int shift = level_shift(level);
  auto count = [&](float x) {
    const std::uint32_t key = key_of(x);
    if (key >= st.lo && key <= st.hi) atomicAdd(&h[(key >> shift) & 1023u], 1u);
  };
  for_each_element(
      n, aligned16(src),
      [&](std::size_t i) {
        float v[kVec];
        load8_as_float<E>(src, i, v);
        for (int j = 0; j < kVec; ++j) count(v[j]);
      },
      [&](std::size_t i) { count(load1<E>(src, i)); });
  flush(h, hist, 1024);
}

// One block: the bin holding the need-th largest key of the band, from the
// top. Bins are visited high to low as a scan over reversed positions.
__global__ void __launch_bounds__(kScanThreads)
    descend_kernel(const std::uint32_t* hist, int level, u64 k, u64 n, SelectState* state) {
  using Scan = cub::BlockScan<u64, kScanThreads>;
  __shared__ typename Scan::TempStorage temp;
  SelectState st = level == 0 ? SelectState{0u, 0x7fffffffu, k, n, 0} : *state;
  if (st.exact) return;
  const std::uint32_t bins = level_bins(level);
  const int shift = level_shift(level);
  u64 count[2], through[2];
  std::uint32_t bin[2];
  for (int j = 0; j < 2; ++j) {
    const std::uint32_t pos = 2 * threadIdx.x + j;  // reversed position
    bin[j] = bins - 1 - pos;
    count[j] = pos < bins ? hist[bin[j]] : 0;
  }
  Scan(temp).InclusiveSum(count, through);  // through = keys in bins >= bin
  for (int j = 0; j < 2; ++j) {
    const u64 above = through[j] - count[j];
    if (count[j] && above < st.need && st.need <= through[j]) {
      SelectState next = st;
      next.need = st.need - above;
      next.in_band = count[j];
      next.lo = st.lo | (bin[j] << shift);
      next.hi = next.lo | ((1u << shift) - 1u);
      next.exact = next.need == next.in_band || shift == 0;
      *state = next;
    }
  }
}

// Loads a tile of acc (blocked: thread t holds elements t*16 .. t*16+15).
template <Elem E>
struct TileLoader {
  using Raw = std::conditional_t<E == Elem::fp32, float, std::uint16_t>;
  using Load = cub::BlockLoad<Raw, kTileThreads, kTileItems, cub::BLOCK_LOAD_WARP_TRANSPOSE>;
  using TempStorage = typename Load::TempStorage;

  __device__ static void load(TempStorage& temp, const void* src, std::size_t tile, std::size_t n,
                              float v[kTileItems]) {
    const Raw* base = static_cast<const Raw*>(src) + tile * kTile;
    const std::size_t left = n - tile * kTile;
    Raw raw[kTileItems];
    if (left >= kTile) {
      Load(temp).Load(base, raw);
    } else {
      Load(temp).Load(base, raw, static_cast<int>(left), Raw{});
    }
    for (int j = 0; j < kTileItems; ++j) {
      if constexpr (E == Elem::fp32) {
        v[j] = raw[j];
      } else {
        v[j] = widen<E>(raw[j]);
      }
    }
  }
};

// This thread's valid items of a tile: keys above the band in the high 32
// bits, keys in it in the low ones (a tile holds far fewer than 2^32). The
// count and compact passes share it, so they cannot disagree.
__device__ inline u64 count_items(const float v[kTileItems], std::size_t first, std::size_t n,
                                  const SelectState& st) {
  u64 packed = 0;
  for (int j = 0; j < kTileItems; ++j) {
    const std::uint32_t key = key_of(v[j]);
    const bool valid = first + j < n;
    packed += valid && key > st.hi ? (u64{1} << 32) : 0;
    packed += valid && key >= st.lo && key <= st.hi ? 1 : 0;
  }
  return packed;
}

template <Elem E>
__global__ void __launch_bounds__(kTileThreads)
    count_kernel(const void* src, std::size_t n, const SelectState* state, u64* tile_above,
                 u64* tile_band) {
  using Loader = TileLoader<E>;
  using Reduce = cub::BlockReduce<u64, kTileThreads>;
  __shared__ union {
    typename Loader::TempStorage load;
    typename Reduce::TempStorage reduce;
  } temp;
  const SelectState st = *state;
  for (std::size_t tile = blockIdx.x; tile < tiles_of(n); tile += gridDim.x) {
    float v[kTileItems];
    Loader::load(temp.load, src, tile, n, v);
    const u64 packed = count_items(v, tile * kTile + threadIdx.x * kTileItems, n, st);
    __syncthreads();
    const u64 sum = Reduce(temp.reduce).Sum(packed);
    if (threadIdx.x == 0) {
      tile_above[tile] = sum >> 32;
      tile_band[tile] = sum & 0xffffffffu;
    }
    __syncthreads();
  }
}

struct RunningTotal {
  u64 total;
  __device__ u64 operator()(u64 block_sum) {
    const u64 before = total;
    total += block_sum;
    return before;
  }
};

// One block: exclusive sums over the tiles, in place; also zeroes the payload's padding.
__global__ void __launch_bounds__(kScanThreads)
    scan_kernel(u64* tile_above, u64* tile_band, std::size_t tiles, std::uint8_t* payload,
                std::size_t payload_bytes, std::size_t stride) {
  using Scan = cub::BlockScan<u64, kScanThreads>;
  __shared__ typename Scan::TempStorage temp;
  u64* const arrays[2] = {tile_above, tile_band};
  for (u64* counts : arrays) {
    RunningTotal running{0};
    for (std::size_t base = 0; base < tiles; base += kScanThreads) {
      const std::size_t i = base + threadIdx.x;
      u64 v = i < tiles ? counts[i] : 0;
      Scan(temp).ExclusiveSum(v, v, running);
      if (i < tiles) counts[i] = v;
      __syncthreads();
    }
  }
  for (std::size_t b = payload_bytes + threadIdx.x; b < stride; b += blockDim.x) payload[b] = 0;
}

template <Elem E, bool EF>
__global__ void __launch_bounds__(kTileThreads)
    compact_kernel(const void* src, float* residual, std::size_t n, const SelectState* state,
                   const u64* tile_above, const u64* tile_band, std::uint8_t* payload,
                   std::size_t k, bool fp16_values) {
  using Loader = TileLoader<E>;
  using Scan = cub::BlockScan<u64, kTileThreads>;
  __shared__ union {
    typename Loader::TempStorage load;
    typename Scan::TempStorage scan;
  } temp;
  const SelectState st = *state;
  auto* index_out = reinterpret_cast<std::uint32_t*>(payload);
  std::uint8_t* value_out = payload + k * sizeof(std::uint32_t);
  for (std::size_t tile = blockIdx.x; tile < tiles_of(n); tile += gridDim.x) {
    float v[kTileItems];
    Loader::load(temp.load, src, tile, n, v);
    const std::size_t first = tile * kTile + threadIdx.x * kTileItems;
    u64 packed = count_items(v, first, n, st);
    __syncthreads();
    Scan(temp.scan).ExclusiveSum(packed, packed);
    u64 above = tile_above[tile] + (packed >> 32);
    u64 band = tile_band[tile] + (packed & 0xffffffffu);
    for (int j = 0; j < kTileItems && first + j < n; ++j) {
      const std::uint32_t key = key_of(v[j]);
      const bool is_above = key > st.hi;
      const bool is_band = key >= st.lo && key <= st.hi;
      if (is_above || (is_band && band < st.need)) {
        const u64 pos = above + (band < st.need ? band : st.need);
        const float acc = v[j];
        index_out[pos] = static_cast<std::uint32_t>(first + j);
        float sent = acc;
        if (fp16_values) {
          const std::uint16_t h = fast_float_to_fp16_bits(acc);
          reinterpret_cast<std::uint16_t*>(value_out)[pos] = h;
          sent = fast_fp16_bits_to_float(h);
        } else {
          reinterpret_cast<float*>(value_out)[pos] = acc;
        }
        if constexpr (EF) residual[first + j] = residual_after(acc, sent);
      }
      above += is_above;
      band += is_band;
    }
    __syncthreads();
  }
}

int tile_grid(std::size_t n) {
  return static_cast<int>(std::min<std::size_t>(tiles_of(n), grid_for(n / kVec) * 2u));
}

// The passes after the first read acc from `src` of type E.
template <Elem E, bool EF>
cudaError_t select_rest(const void* src, float* residual, std::size_t n, std::size_t k,
                        bool fp16_values, void* payload, std::size_t stride, const Scratch& s,
                        cudaStream_t stream) {
  const int grid = grid_for((n + kVec - 1) / kVec);
  for (int level = 1; level < 3; ++level) {
    hist_level_kernel<E><<<grid, kBlock, 0, stream>>>(src, n, s.state, level, s.hist[level]);
    descend_kernel<<<1, kScanThreads, 0, stream>>>(s.hist[level], level, k, n, s.state);
  }
  const int tiles = tile_grid(n);
  count_kernel<E><<<tiles, kTileThreads, 0, stream>>>(src, n, s.state, s.tile_above, s.tile_band);
  const std::size_t payload_bytes = k * (sizeof(std::uint32_t) + (fp16_values ? 2 : 4));
  auto* bytes = static_cast<std::uint8_t*>(payload);
  scan_kernel<<<1, kScanThreads, 0, stream>>>(s.tile_above, s.tile_band, tiles_of(n), bytes,
                                              payload_bytes, stride);
  compact_kernel<E, EF><<<tiles, kTileThreads, 0, stream>>>(src, residual, n, s.state, s.tile_above,
                                                            s.tile_band, bytes, k, fp16_values);
  return cudaGetLastError();
}

template <Elem E, bool EF>
cudaError_t select(const void* in, float* residual, std::size_t n, std::size_t k, bool fp16_values,
                   void* payload, std::size_t stride, const Scratch& s, cudaStream_t stream) {
  const int grid = grid_for((n + kVec - 1) / kVec);
  hist0_kernel<E, EF><<<grid, kBlock, 0, stream>>>(in, residual, n, s.hist[0]);
  descend_kernel<<<1, kScanThreads, 0, stream>>>(s.hist[0], 0, k, n, s.state);
  if (const cudaError_t rc = cudaGetLastError(); rc != cudaSuccess) return rc;
  // With error feedback acc now lives in residual, as fp32.
  if constexpr (EF) {
    return select_rest<Elem::fp32, true>(residual, residual, n, k, fp16_values, payload, stride, s,
                                         stream);
  } else {
    return select_rest<E, false>(in, nullptr, n, k, fp16_values, payload, stride, s, stream);
  }
}

template <Elem E>
cudaError_t select_for(const void* in, float* residual, std::size_t n, std::size_t k,
                       bool fp16_values, void* payload, std::size_t stride, const Scratch& s,
                       cudaStream_t stream) {
  return residual ? select<E, true>(in, residual, n, k, fp16_values, payload, stride, s, stream)
                  : select<E, false>(in, nullptr, n, k, fp16_values, payload, stride, s, stream);
}

}  // namespace

std::size_t topk_payload_stride(std::size_t payload_bytes) {
  return kernels::topk_payload_stride(payload_bytes);
}

std::size_t topk_select_scratch_bytes(std::size_t n) {
  return round256(kHistWords * sizeof(std::uint32_t)) + round256(sizeof(SelectState)) +
         2 * round256(tiles_of(n) * sizeof(u64));
}

cudaError_t topk_select(Elem in_type, const void* in, float* residual, std::size_t n, std::size_t k,
                        bool fp16_values, void* payload, std::size_t payload_stride, void* scratch,
                        cudaStream_t stream) {
  const std::size_t payload_bytes = k * (sizeof(std::uint32_t) + (fp16_values ? 2 : 4));
  if (k == 0 || k > n || n > 0xffffffffull || payload_stride < payload_bytes) {
    return cudaErrorInvalidValue;
  }
  const Scratch s = carve(scratch, n);
  if (const cudaError_t rc = cudaMemsetAsync(s.hist[0], 0, kHistWords * 4, stream); rc) {
    // Our private runtime keeps the error as its last one: clear it, or a
    // later cudaGetLastError() (after a good launch) would report it again.
    cudaGetLastError();
    return rc;
  }
  switch (in_type) {
    case Elem::fp32:
      return select_for<Elem::fp32>(in, residual, n, k, fp16_values, payload, payload_stride, s,
                                    stream);
    case Elem::fp16:
      return select_for<Elem::fp16>(in, residual, n, k, fp16_values, payload, payload_stride, s,
                                    stream);
    case Elem::bf16:
      return select_for<Elem::bf16>(in, residual, n, k, fp16_values, payload, payload_stride, s,
                                    stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace slimreduce::kernels::cuda
