// What bench/device_check.cu's checks and bench/device_timing.cu's timings
// share: device memory, random inputs, bit comparison and the pass/fail tally.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cast.h"
#include "kernels/cuda/kernels.h"
#include "kernels/element_rules.h"
#include "kernels/pack.h"
#include "kernels/quant8.h"
#include "kernels/rounding.h"
#include "kernels/topk.h"
#include "tests/reference/value_stream.h"

namespace slimreduce::device_check {

namespace k = slimreduce::kernels;
namespace cu = slimreduce::kernels::cuda;
using u16 = std::uint16_t;

#define CK(x)                                                                               \
  do {                                                                                      \
    const cudaError_t rc_ = (x);                                                            \
    if (rc_ != cudaSuccess) {                                                               \
      std::printf("fatal %s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(rc_)); \
      std::exit(2);                                                                         \
    }                                                                                       \
  } while (0)

// Seeded from SLIMREDUCE_CHECK_SEED when set (to replay a failure), else at
// random; device_check prints the seed.
// A stochastic rounding (kernels/rounding.h) whose element numbers carry
// past 2^32 inside a call: the quantizers' kernels draw as their CPU twins.
inline k::Rounding stochastic_key() {
  return k::rounding_key(7, 2, 5, 0, (std::uint64_t{1} << 32) - 100);
}
inline std::string rounding_suffix(const k::Rounding& rounding) {
  return rounding.stochastic ? " stochastic" : "";
}

inline const std::uint64_t seed = [] {
  const char* given = std::getenv("SLIMREDUCE_CHECK_SEED");
  return given ? std::strtoull(given, nullptr, 0)
               : (std::uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
}();
// splitmix64 (tests/reference/value_stream.h): std::mt19937_64's draws were
// a quarter of the host simulation's run of these checks.
inline slimreduce::reference::ValueStream rng(seed);
inline int passed = 0, failed = 0;

// Every device buffer has 64 bytes of slack (at least 16 bytes in all)
// after what was asked for, filled with a canary: a kernel that writes past a
// buffer's end changes it, which memcheck would not see inside the allocation.
constexpr std::size_t kSlack = 64;
constexpr unsigned char kCanary = 0x3C;
struct Canary {
  const std::byte* buffer;
  std::byte* at;
  std::size_t bytes;
};
inline std::vector<Canary> canaries;  // the slack of each live buffer

// "" while every live buffer's slack holds the canary; else where it does not
// (and the canary is laid again, so that one overrun fails one check).
inline std::string overrun() {
  if (cudaDeviceSynchronize() != cudaSuccess) return "";  // the check's own CK reports it
  for (const Canary& c : canaries) {
    std::vector<unsigned char> slack(c.bytes);
    if (cudaMemcpy(slack.data(), c.at, c.bytes, cudaMemcpyDeviceToHost) != cudaSuccess) return "";
    for (std::size_t i = 0; i < c.bytes; ++i) {
      if (slack[i] != kCanary) {
        cudaMemset(c.at, kCanary, c.bytes);
        return "wrote past the end of a buffer (first changed byte: end + " + std::to_string(i) +
               ")";
      }
    }
  }
  return "";
}

inline void report(const std::string& what, bool ok, const std::string& detail = "") {
  const std::string past = overrun();
  ok = ok && past.empty();
  const std::string why = past.empty() ? detail : detail.empty() ? past : detail + "; " + past;
  std::printf("check %-44s %s %s\n", what.c_str(), ok ? "PASS" : "FAIL", why.c_str());
  (ok ? passed : failed)++;
}

// Device memory with its canary, freed at scope end.
struct DevFree {
  void operator()(std::byte* p) const {
    canaries.erase(std::remove_if(canaries.begin(), canaries.end(),
                                  [p](const Canary& c) { return c.buffer == p; }),
                   canaries.end());
    cudaFree(p);
  }
};
using Dev = std::unique_ptr<std::byte, DevFree>;
inline Dev dev(std::size_t bytes) {
  const std::size_t total = std::max<std::size_t>(bytes, 16) + kSlack;
  void* p = nullptr;
  CK(cudaMalloc(&p, total));
  CK(cudaMemset(p, kCanary, total));
  auto* base = static_cast<std::byte*>(p);
  canaries.push_back({base, base + bytes, total - bytes});
  return Dev(base);
}
template <class T>
inline void put(void* d, const std::vector<T>& h) {
  CK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
}
template <class T>
std::vector<T> get(const void* d, std::size_t n) {
  CK(cudaDeviceSynchronize());
  CK(cudaGetLastError());
  std::vector<T> h(n);
  CK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}
inline void poison(void* d, std::size_t bytes) { CK(cudaMemset(d, 0xA5, bytes)); }

template <class T>
inline bool same_bits(const std::vector<T>& a, const std::vector<T>& b, std::string* where) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) {
      *where = "first difference at " + std::to_string(i) + " of " + std::to_string(a.size());
      return false;
    }
  }
  return a.size() == b.size();
}

// Gradient-like values: normals over many magnitudes, ties, zeros, and (with
// specials) NaNs with payloads, infinities, subnormals, values past fp16's range.
// The normals are a sum of four 16-bit uniforms (mean 0, variance 1, within
// +-3.47), from one draw: std::normal_distribution took two thirds of the host
// simulation's run of this program.
inline float bell(std::uint64_t u) {
  float sum = 0.0f;
  for (int i = 0; i < 4; ++i) sum += static_cast<float>((u >> (16 * i)) & 0xffffu);
  return (sum / 65536.0f - 2.0f) * 1.7320508f;
}

inline std::vector<float> values(std::size_t n, bool specials) {
  std::vector<float> v(n);
  for (auto& x : v) {
    const std::uint64_t r = rng();
    const unsigned pick = static_cast<unsigned>(r % 1000);
    const bool odd = (r >> 40) & 1;
    if (specials && pick < 4) {
      const std::uint32_t s[4] = {0x7fc12345u, 0xffa00001u, 0x7f800000u, 0x00000abcu};
      x = k::bits_float(s[pick] ^ (odd ? 0x80000000u : 0));
    } else if (specials && pick < 8) {
      x = (odd ? 1 : -1) * 65520.0f * (1.0f + (pick - 4) * 0.5f);
    } else if (pick < 20) {
      x = pick < 12 ? 0.0f : (odd ? 3.0f : -3.0f);
    } else {
      x = bell(rng()) * std::ldexp(1.0f, static_cast<int>((r >> 48) % 40) - 20);
    }
  }
  return v;
}

inline std::vector<u16> halves(std::size_t n) {
  std::vector<u16> h(n);
  for (auto& x : h) x = static_cast<u16>(rng());
  return h;
}

inline k::HalfFormat host_format(cu::Elem e) {
  return e == cu::Elem::bf16 ? k::HalfFormat::bf16 : k::HalfFormat::fp16;
}
inline const char* name_of(cu::Elem e) {
  return e == cu::Elem::bf16 ? "bf16" : e == cu::Elem::fp16 ? "fp16" : "fp32";
}
inline float widen(cu::Elem e, u16 h) {
  return e == cu::Elem::bf16 ? k::bf16_bits_to_float(h) : k::fp16_bits_to_float(h);
}
inline u16 narrow(cu::Elem e, float f) {
  return e == cu::Elem::bf16 ? k::float_to_bf16_bits(f) : k::float_to_fp16_bits(f);
}

// The median time of `launch` over `runs` runs (after 3 to warm up), by CUDA
// events on the default stream.
template <class Launch>
inline float median_ms(Launch launch, int runs = 25) {
  cudaEvent_t start, stop;
  CK(cudaEventCreate(&start));
  CK(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i) launch();
  std::vector<float> ms;
  for (int i = 0; i < runs; ++i) {
    CK(cudaEventRecord(start));
    launch();
    CK(cudaEventRecord(stop));
    CK(cudaEventSynchronize(stop));
    float t = 0;
    CK(cudaEventElapsedTime(&t, start, stop));
    ms.push_back(t);
  }
  CK(cudaGetLastError());
  CK(cudaEventDestroy(start));
  CK(cudaEventDestroy(stop));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// The kernels' timings against a device-to-device copy (bench/device_timing.cu).
// n floats (at least 64: 64 tensors are packed).
void time_all(std::size_t n);

// The PowerSGD steps (bench/device_check_low_rank.cu): their checks, and
// their timings on the most square view of n floats at rank 4, against a copy
// of copy_gbs (called by time_all).
void check_low_rank();
void time_low_rank(std::size_t n, double copy_gbs);

// Top-k's sharded steps (bench/device_check_topk_shards.cu): their checks.
void check_topk_shards();

// The fixed-order norm of adaptive levels (bench/device_check_norm.cu): its checks.
void check_fixed_order_norm();

// int8's min-max codes (bench/device_check_minmax.cu): their checks.
void check_quant8_minmax();

// The 4- and 2-bit packed codes (bench/device_check_quant_packed.cu): their checks.
void check_quant_packed();
void check_quant_fp8();

}  // namespace slimreduce::device_check
