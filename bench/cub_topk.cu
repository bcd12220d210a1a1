// cub::DeviceTopK (CCCL 3.5 and later) against SlimReduce's topk_select, on a
// GPU, for bench/device_check.sh: the same n and k, the median of many runs
// timed with CUDA events, and whether both chose the same entries (every
// input's magnitude is different, so no tie decides and the sets must agree).
//
// CUB's top-k cannot take topk_select's place whatever its speed: CCCL 3.5
// runs it only with determinism not guaranteed and unsorted output ("if
// multiple items tie at the K-th position, the subset of tied elements
// returned is not uniquely defined and may vary between runs"), while every
// rank must choose alike, the lower index first among equal magnitudes, and
// send its indices ascending. This measures what those rules cost. It times
// selection only: topk_select also writes the payload's values, which CUB's
// key output (magnitudes) is not.
//
// Exit 0: timed, the same entries; 1: the entries differ; 77: no GPU, or no
// DeviceTopK of that API in the CCCL it was built with (the toolkit's, or a
// newer one bench/device_deps.sh brings: SLIMREDUCE_CCCL_INCLUDE_DIR).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cuda/version>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "bench/device_check_util.cuh"

#if CCCL_VERSION >= 3005000 && __has_include(<cub/device/device_topk.cuh>)
#define SLIMREDUCE_HAVE_DEVICE_TOPK 1
#include <cub/device/device_topk.cuh>
#include <cuda/iterator>
#else
#define SLIMREDUCE_HAVE_DEVICE_TOPK 0
#endif

namespace {

#if SLIMREDUCE_HAVE_DEVICE_TOPK
using namespace slimreduce::device_check;  // CK, dev, median_ms, cu, k

// Magnitudes 1..n (exact in fp32 up to 2^24), shuffled, with random signs.
std::vector<float> distinct_magnitudes(std::size_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 1.0f);
  std::mt19937_64 rng(12345);
  std::shuffle(v.begin(), v.end(), rng);
  for (float& x : v) x = rng() & 1 ? -x : x;
  return v;
}

// topk_select's own ordering key (kernels/element_rules.h).
struct MagnitudeBits {
  __device__ std::uint32_t operator()(float x) const { return k::magnitude_key(x); }
};

int compare(std::size_t n, std::size_t kk) {
  const std::vector<float> host = distinct_magnitudes(n);
  Dev in = dev(n * 4);
  CK(cudaMemcpy(in.get(), host.data(), n * 4, cudaMemcpyHostToDevice));
  const auto* fin = reinterpret_cast<const float*>(in.get());

  // Ours: fp32 in, no residual, fp32 values.
  const std::size_t stride =
      cu::topk_payload_stride(k::topk_payload_bytes(kk, k::TopkValues::fp32));
  Dev payload = dev(stride), scratch = dev(cu::topk_select_scratch_bytes(n));
  const float ours = median_ms([&] {
    CK(cu::topk_select(cu::Elem::fp32, fin, nullptr, n, kk, false, payload.get(), stride,
                       scratch.get(), nullptr));
  });

  // CUB's: the largest magnitude keys, paired with their indices.
  auto keys = cuda::make_transform_iterator(fin, MagnitudeBits{});
  auto indices = cuda::counting_iterator<std::uint32_t>(0);
  Dev keys_out = dev(kk * 4), indices_out = dev(kk * 4);
  auto* kout = reinterpret_cast<std::uint32_t*>(keys_out.get());
  auto* iout = reinterpret_cast<std::uint32_t*>(indices_out.get());
  const auto env = cuda::execution::require(cuda::execution::determinism::not_guaranteed,
                                            cuda::execution::output_ordering::unsorted);
  std::size_t temp_bytes = 0;
  // 32-bit counts, as topk_select's (n < 2^32): a 64-bit count would give CUB 64-bit offsets.
  const auto items = static_cast<std::uint32_t>(n), wanted = static_cast<std::uint32_t>(kk);
  CK(cub::DeviceTopK::MaxPairs(nullptr, temp_bytes, keys, kout, indices, iout, items, wanted, env));
  Dev temp = dev(temp_bytes);
  const float cub_ms = median_ms([&] {
    CK(cub::DeviceTopK::MaxPairs(temp.get(), temp_bytes, keys, kout, indices, iout, items, wanted,
                                 env));
  });

  CK(cudaDeviceSynchronize());
  std::vector<std::uint32_t> ours_idx(kk), cub_idx(kk);
  CK(cudaMemcpy(ours_idx.data(), payload.get(), kk * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(cub_idx.data(), iout, kk * 4, cudaMemcpyDeviceToHost));
  std::sort(cub_idx.begin(), cub_idx.end());  // ours are ascending already
  const bool same = ours_idx == cub_idx;
  std::printf(
      "cub_topk n %zu k %zu: topk_select %.3f ms, cub::DeviceTopK %.3f ms (%.2fx); "
      "%s entries (CCCL %d.%d.%d)\n",
      n, kk, ours, cub_ms, ours / cub_ms, same ? "the same" : "DIFFERENT", CCCL_MAJOR_VERSION,
      CCCL_MINOR_VERSION, CCCL_PATCH_VERSION);
  // Neither may have written past its buffers (the checker's canaries).
  const std::string past = overrun();
  if (!past.empty()) std::printf("cub_topk n %zu k %zu: %s\n", n, kk, past.c_str());
  return same && past.empty() ? 0 : 1;
}
#endif

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("cub_topk: no GPU: skipped\n");
    return 77;
  }
#if SLIMREDUCE_HAVE_DEVICE_TOPK
  const std::size_t n = std::size_t{1} << 24;  // 64 MiB of fp32, all magnitudes exact
  int rc = 0;
  for (double ratio : {0.01, 0.001}) rc |= compare(n, k::topk_count(n, ratio));
  return rc;
#else
  std::printf("cub_topk: CCCL %d.%d.%d has no cub::DeviceTopK with the 3.5 API: skipped\n",
              CCCL_MAJOR_VERSION, CCCL_MINOR_VERSION, CCCL_PATCH_VERSION);
  return 77;
#endif
}
