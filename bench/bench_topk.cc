// Top-k compress (selection, residual update, payload) and the receiver's
// scatter, at 1M/16M/64M floats and ratios 0.001/0.01/0.1, with a memcpy of the
// same input bytes in the same run as the yardstick. Bytes/s counts the input
// (n floats) for every benchmark, so the three read side by side.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/topk.h"

namespace sk = slimreduce::kernels;

namespace {

constexpr std::int64_t kMaxN = std::int64_t{64} << 20;

// Roughly Gaussian (sum of four uniforms), like a gradient; generated once at
// the largest size and shared by prefix.
std::vector<float> gaussian(std::size_t n, std::uint64_t seed, float scale) {
  std::vector<float> v(n);
  std::uint64_t s = seed;
  for (float& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const std::uint64_t r = s ^ (s >> 29);
    float sum = 0.0f;
    for (int j = 0; j < 4; ++j) sum += static_cast<float>((r >> (16 * j)) & 0xffff) / 65536.0f;
    x = (sum - 2.0f) * scale * 1.7320508f;  // Unit variance before scale.
  }
  return v;
}

const std::vector<float>& gradient() {
  static const std::vector<float> v = gaussian(kMaxN, 1, 1.0f);
  return v;
}

const std::vector<float>& initial_residual() {
  static const std::vector<float> v = gaussian(kMaxN, 2, 0.1f);
  return v;
}

std::size_t k_of(const benchmark::State& state) {
  return sk::topk_count(static_cast<std::size_t>(state.range(0)), state.range(1) / 1000.0);
}

void finish(benchmark::State& state) {
  state.SetBytesProcessed(state.iterations() * state.range(0) * std::int64_t{sizeof(float)});
}

void BM_Memcpy(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  const float* in = gradient().data();
  std::vector<float> out(n);
  for (auto _ : state) {
    std::memcpy(out.data(), in, n * sizeof(float));
    benchmark::ClobberMemory();
  }
  finish(state);
}

// Error feedback as in training: the residual carries over between calls.
void BM_TopkCompress(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  const std::size_t k = k_of(state);
  std::vector<float> residual(initial_residual().begin(), initial_residual().begin() + n);
  std::vector<std::uint8_t> payload(sk::topk_payload_bytes(k, sk::TopkValues::fp32));
  sk::TopkScratch scratch;
  for (auto _ : state) {
    sk::topk_compress(gradient().data(), residual.data(), n, k, sk::TopkValues::fp32,
                      payload.data(), scratch);
    benchmark::ClobberMemory();
  }
  state.counters["k"] = static_cast<double>(k);
  finish(state);
}

void BM_TopkAccumulate(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  const std::size_t k = k_of(state);
  std::vector<float> residual(initial_residual().begin(), initial_residual().begin() + n);
  std::vector<std::uint8_t> payload(sk::topk_payload_bytes(k, sk::TopkValues::fp32));
  sk::TopkScratch scratch;
  sk::topk_compress(gradient().data(), residual.data(), n, k, sk::TopkValues::fp32, payload.data(),
                    scratch);
  std::vector<float> dense(n);
  for (auto _ : state) {
    sk::topk_accumulate(payload.data(), k, sk::TopkValues::fp32, dense.data());
    benchmark::ClobberMemory();
  }
  state.counters["k"] = static_cast<double>(k);
  // The scatter's own work is k entries, not n floats: its rate too.
  state.counters["entries"] =
      benchmark::Counter(static_cast<double>(k) * state.iterations(), benchmark::Counter::kIsRate);
  finish(state);
}

void sizes(benchmark::internal::Benchmark* b) {
  for (std::int64_t n : {std::int64_t{1} << 20, std::int64_t{16} << 20, kMaxN}) b->Args({n, 0});
}

void sizes_and_ratios(benchmark::internal::Benchmark* b) {
  for (std::int64_t n : {std::int64_t{1} << 20, std::int64_t{16} << 20, kMaxN}) {
    for (std::int64_t permille : {1, 10, 100}) b->Args({n, permille});
  }
}

// Wall time: topk_compress runs threads of its own.
BENCHMARK(BM_Memcpy)->Apply(sizes)->ArgNames({"n", ""})->UseRealTime()->Unit(
    benchmark::kMillisecond);
BENCHMARK(BM_TopkCompress)
    ->Apply(sizes_and_ratios)
    ->ArgNames({"n", "permille"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TopkAccumulate)
    ->Apply(sizes_and_ratios)
    ->ArgNames({"n", "permille"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
