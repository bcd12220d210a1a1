// Throughput of the fp32 <-> fp16/bf16 casts, per ISA, at 1M and 16M floats,
// next to a memcpy of the same input bytes. Bytes per second count the bytes of
// the `in` array only (fp32 for compress, 16-bit for decompress/accumulate),
// so a number can be read directly against the memcpy of that many bytes.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/kernel_bench.h"
#include "kernels/cast.h"

namespace {

using slimreduce::kernels::HalfFormat;
using slimreduce::kernels::Isa;
namespace k = slimreduce::kernels;

constexpr std::size_t kSizes[] = {std::size_t{1} << 20, std::size_t{1} << 24};

// Realistic gradients: small normal values, so no path takes a special case.
std::vector<float> gradients(std::size_t n) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 0.01f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

std::vector<std::uint16_t> halves(HalfFormat f, std::size_t n) {
  std::vector<std::uint16_t> h(n);
  const std::vector<float> g = gradients(n);
  k::compress(f, g.data(), nullptr, h.data(), n, Isa::scalar);
  return h;
}

void bench_compress(benchmark::State& state, HalfFormat f, Isa isa, bool residual) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  const std::vector<float> in = gradients(n);
  std::vector<float> res(residual ? n : 0, 0.0f);
  std::vector<std::uint16_t> out(n);
  for (auto _ : state) {
    k::compress(f, in.data(), residual ? res.data() : nullptr, out.data(), n, isa);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n * sizeof(float)));
}

void bench_decompress(benchmark::State& state, HalfFormat f, Isa isa) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  const std::vector<std::uint16_t> in = halves(f, n);
  std::vector<float> out(n);
  for (auto _ : state) {
    k::decompress(f, in.data(), out.data(), n, isa);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n * 2));
}

// Re-adding into the same buffer lets values grow (some reach inf); that is
// harmless here, as no path's speed depends on the values.
void bench_accumulate(benchmark::State& state, HalfFormat f, Isa isa) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  const std::vector<std::uint16_t> in = halves(f, n);
  std::vector<std::uint16_t> inout = halves(f, n);
  for (auto _ : state) {
    k::accumulate(f, in.data(), inout.data(), n, isa);
    benchmark::DoNotOptimize(inout.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n * 2));
}

template <class Fn>
void add(const std::string& name, Fn fn) {
  slimreduce::bench::add_benchmark(name, {kSizes[0], kSizes[1]}, fn);
}

void register_all() {
  add("memcpy/fp32_bytes", [](benchmark::State& s) { slimreduce::bench::bench_memcpy(s, 4); });
  add("memcpy/16bit_bytes", [](benchmark::State& s) { slimreduce::bench::bench_memcpy(s, 2); });
  for (HalfFormat f : {HalfFormat::fp16, HalfFormat::bf16}) {
    const std::string fmt = f == HalfFormat::fp16 ? "fp16" : "bf16";
    for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
      if (static_cast<int>(isa) > static_cast<int>(k::best_isa())) continue;
      const std::string tag = fmt + "/" + k::isa_name(isa);
      add("compress/" + tag, [=](benchmark::State& s) { bench_compress(s, f, isa, false); });
      add("compress_residual/" + tag,
          [=](benchmark::State& s) { bench_compress(s, f, isa, true); });
      add("decompress/" + tag, [=](benchmark::State& s) { bench_decompress(s, f, isa); });
      add("accumulate/" + tag, [=](benchmark::State& s) { bench_accumulate(s, f, isa); });
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  return slimreduce::bench::run_kernel_benchmarks(argc, argv, register_all);
}
