// Throughput of the batched pack / unpack of fusion buffers (kernels/pack.h)
// at 1M and 16M floats in all, split into 64 tensors of uneven sizes, next to
// a memcpy of the same fp32 bytes in the same run. Bytes per second count the
// fp32 side (the tensors' bytes) for every benchmark, so all read against the
// memcpy directly.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/kernel_bench.h"
#include "kernels/pack.h"

namespace {

namespace k = slimreduce::kernels;

constexpr std::size_t kSizes[] = {std::size_t{1} << 20, std::size_t{1} << 24};
constexpr int kTensors = 64;

// 64 tensors of uneven sizes (a model's layers are), n floats in all, with
// gradient-like values and small residuals.
struct Tensors {
  std::vector<std::vector<float>> values, residuals;
  std::vector<k::PackItem> items;
  std::vector<k::UnpackItem> outs;
  std::vector<std::vector<float>> unpacked;
  std::size_t elements = 0;

  Tensors(std::size_t n, bool error_feedback) {
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 0.01f);
    std::vector<std::size_t> sizes(kTensors);
    std::size_t left = n;
    for (int t = 0; t < kTensors; ++t) {  // each takes 1/32 to 1/16 of what is left...
      sizes[t] = t + 1 == kTensors ? left : left / (16 + rng() % 17);
      left -= sizes[t];  // ...and the last takes the rest
    }
    for (int t = 0; t < kTensors; ++t) {
      values.emplace_back(sizes[t]);
      for (float& x : values.back()) x = normal(rng);
      residuals.emplace_back(error_feedback ? sizes[t] : 0, 0.0f);
      unpacked.emplace_back(sizes[t]);
    }
    for (int t = 0; t < kTensors; ++t) {
      const std::size_t count = sizes[t];
      items.push_back({values[t].data(), error_feedback ? residuals[t].data() : nullptr, count,
                       elements, k::fusion_align(count) - count});
      outs.push_back({unpacked[t].data(), count, elements});
      elements += k::fusion_align(count);
    }
  }
};

std::size_t width_of(k::FusedType type) { return type == k::FusedType::fp32 ? 4 : 2; }

void bench_pack(benchmark::State& state, k::FusedType type, bool error_feedback) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  Tensors tensors(n, error_feedback);
  std::vector<std::uint8_t> fused(tensors.elements * width_of(type));
  for (auto _ : state) {
    k::pack_batch(type, tensors.items.data(), tensors.items.size(), fused.data());
    benchmark::DoNotOptimize(fused.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n * sizeof(float)));
}

void bench_unpack(benchmark::State& state, k::FusedType type, int divisor) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  Tensors tensors(n, false);
  std::vector<std::uint8_t> fused(tensors.elements * width_of(type));
  k::pack_batch(type, tensors.items.data(), tensors.items.size(), fused.data());
  for (auto _ : state) {
    k::unpack_batch(type, fused.data(), tensors.outs.data(), tensors.outs.size(), divisor);
    benchmark::DoNotOptimize(tensors.unpacked.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n * sizeof(float)));
}

template <class Fn>
void add(const std::string& name, Fn fn) {
  slimreduce::bench::add_benchmark(name, {kSizes[0], kSizes[1]}, fn);
}

void register_all() {
  add("memcpy/fp32_bytes", [](benchmark::State& s) { slimreduce::bench::bench_memcpy(s, 4); });
  add("pack64/fp32", [](benchmark::State& s) { bench_pack(s, k::FusedType::fp32, false); });
  add("pack64/fp16", [](benchmark::State& s) { bench_pack(s, k::FusedType::fp16, false); });
  add("pack64/fp16_residual", [](benchmark::State& s) { bench_pack(s, k::FusedType::fp16, true); });
  add("pack64/bf16_residual", [](benchmark::State& s) { bench_pack(s, k::FusedType::bf16, true); });
  add("unpack64/fp32", [](benchmark::State& s) { bench_unpack(s, k::FusedType::fp32, 1); });
  add("unpack64/fp16", [](benchmark::State& s) { bench_unpack(s, k::FusedType::fp16, 1); });
  add("unpack64/fp16_divide", [](benchmark::State& s) { bench_unpack(s, k::FusedType::fp16, 4); });
}

}  // namespace

int main(int argc, char** argv) {
  return slimreduce::bench::run_kernel_benchmarks(argc, argv, register_all);
}
