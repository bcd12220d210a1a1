// Throughput of the 8-bit quantization (kernels/quant8.h), per ISA, at 1 MiB
// and 16 MiB of fp32 (256 Ki and 4 Mi floats) in buckets of 512 (the
// SLIMREDUCE_QUANT_BUCKET default), next to a memcpy of the same fp32 bytes.
// Bytes per second count the fp32 tensor's bytes (n x 4) on every row, the
// side a compress reads and a decompress or accumulate writes, so each row
// reads directly against the memcpy row. The quant8_minmax rows time the
// min-max codes (kernels/quant8_minmax.h, SLIMREDUCE_QUANT_CODES=minmax);
// the _stochastic rows round stochastically (SLIMREDUCE_QUANT_ROUNDING,
// kernels/rounding.h), next to their nearest twins; the int4 rows are the
// 4-bit min-max codes (kernels/quant_packed_minmax.h), int4's default.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "bench/kernel_bench.h"
#include "kernels/quant8.h"
#include "kernels/quant8_minmax.h"
#include "kernels/quant_packed_minmax.h"

namespace {

using slimreduce::kernels::Isa;
namespace k = slimreduce::kernels;

constexpr std::size_t kSizes[] = {std::size_t{1} << 18, std::size_t{1} << 22};
constexpr std::size_t kBucket = 512;

// Realistic gradients: small normal values, so no path takes a special case.
std::vector<float> gradients(std::size_t n) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 0.01f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

std::vector<std::uint8_t> block_of(std::size_t n) {
  std::vector<std::uint8_t> block(k::quant8_bytes(n, kBucket));
  k::quant8_compress(gradients(n).data(), nullptr, n, kBucket, block.data(), Isa::scalar);
  return block;
}

// A key as one call of a stochastic run draws with.
const k::Rounding kStochastic = k::rounding_key(1, 0, 0, 0);

void bench_compress(benchmark::State& state, Isa isa, bool residual,
                    const k::Rounding& rounding = {}) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  const std::vector<float> in = gradients(n);
  std::vector<float> res(residual ? n : 0, 0.0f);
  std::vector<std::uint8_t> out(k::quant8_bytes(n, kBucket));
  for (auto _ : state) {
    k::quant8_compress(in.data(), residual ? res.data() : nullptr, n, kBucket, out.data(), isa,
                       rounding);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n * sizeof(float)));
}

void bench_decompress(benchmark::State& state, Isa isa) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  const std::vector<std::uint8_t> block = block_of(n);
  std::vector<float> out(n);
  for (auto _ : state) {
    k::quant8_decompress(block.data(), n, kBucket, out.data(), isa);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n * sizeof(float)));
}

// Re-adding into the same buffer lets the sums grow; no path's speed depends
// on the values.
void bench_accumulate(benchmark::State& state, Isa isa) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  const std::vector<std::uint8_t> block = block_of(n);
  std::vector<float> dense = gradients(n);
  for (auto _ : state) {
    k::quant8_accumulate(block.data(), n, kBucket, dense.data(), isa);
    benchmark::DoNotOptimize(dense.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n * sizeof(float)));
}

void bench_minmax_compress(benchmark::State& state, Isa isa, bool residual) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  const std::vector<float> in = gradients(n);
  std::vector<float> res(residual ? n : 0, 0.0f);
  std::vector<std::uint8_t> out(k::quant8_minmax_bytes(n, kBucket));
  for (auto _ : state) {
    k::quant8_minmax_compress(in.data(), residual ? res.data() : nullptr, n, kBucket, out.data(),
                              isa);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n * sizeof(float)));
}

void bench_minmax_decompress(benchmark::State& state, Isa isa) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  std::vector<std::uint8_t> block(k::quant8_minmax_bytes(n, kBucket));
  k::quant8_minmax_compress(gradients(n).data(), nullptr, n, kBucket, block.data(), Isa::scalar);
  std::vector<float> out(n);
  for (auto _ : state) {
    k::quant8_minmax_decompress(block.data(), n, kBucket, out.data(), isa);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n * sizeof(float)));
}

void bench_int4_compress(benchmark::State& state, Isa isa, const k::Rounding& rounding) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  const std::vector<float> in = gradients(n);
  std::vector<std::uint8_t> out(k::quant_packed_minmax_bytes(n, kBucket, 4));
  for (auto _ : state) {
    k::quant_packed_minmax_compress(in.data(), nullptr, n, kBucket, 4, out.data(), isa, rounding);
    benchmark::DoNotOptimize(out.data());
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
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    if (static_cast<int>(isa) > static_cast<int>(k::best_isa())) continue;
    const std::string tag = std::string("/") + k::isa_name(isa);
    add("quant8_compress" + tag, [=](benchmark::State& s) { bench_compress(s, isa, false); });
    add("quant8_compress_residual" + tag,
        [=](benchmark::State& s) { bench_compress(s, isa, true); });
    add("quant8_compress_stochastic" + tag,
        [=](benchmark::State& s) { bench_compress(s, isa, false, kStochastic); });
    add("int4_compress" + tag, [=](benchmark::State& s) { bench_int4_compress(s, isa, {}); });
    add("int4_compress_stochastic" + tag,
        [=](benchmark::State& s) { bench_int4_compress(s, isa, kStochastic); });
    add("quant8_decompress" + tag, [=](benchmark::State& s) { bench_decompress(s, isa); });
    add("quant8_accumulate" + tag, [=](benchmark::State& s) { bench_accumulate(s, isa); });
    add("quant8_minmax_compress" + tag,
        [=](benchmark::State& s) { bench_minmax_compress(s, isa, false); });
    add("quant8_minmax_compress_residual" + tag,
        [=](benchmark::State& s) { bench_minmax_compress(s, isa, true); });
    add("quant8_minmax_decompress" + tag,
        [=](benchmark::State& s) { bench_minmax_decompress(s, isa); });
  }
}

}  // namespace

int main(int argc, char** argv) {
  return slimreduce::bench::run_kernel_benchmarks(argc, argv, register_all);
}
