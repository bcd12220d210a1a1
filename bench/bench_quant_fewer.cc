// Throughput of the fewer-bit codecs per ISA: the 4- and 2-bit codes
// (kernels/quant_packed.h absmax, kernels/quant_packed_minmax.h min-max) and
// the block-scaled fp8 (kernels/quant_fp8.h), at 1 MiB and 16 MiB of fp32
// (256 Ki and 4 Mi floats) in buckets of 512 (the SLIMREDUCE_QUANT_BUCKET
// default), next to a memcpy of the same fp32 bytes. As bench_quant8, bytes
// per second count the fp32 tensor's bytes (n x 4) on every row, so each row
// reads directly against the memcpy row (issue's aim: compress at 80% of it).
// Names: <codec>_<kernel>[_stochastic]/<isa>, codec int4, int2 (min-max,
// their defaults), int4_absmax, int2_absmax or fp8.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bench/kernel_bench.h"
#include "kernels/quant_fp8.h"
#include "kernels/quant_packed.h"
#include "kernels/quant_packed_minmax.h"
#include "tests/reference/value_stream.h"

namespace {

using slimreduce::kernels::Isa;
namespace k = slimreduce::kernels;

constexpr std::size_t kSizes[] = {std::size_t{1} << 18, std::size_t{1} << 22};
constexpr std::size_t kBucket = 512;

// Gradient-like values: small, zero-centred, all finite (no path takes a special case).
std::vector<float> gradients(std::size_t n) {
  slimreduce::reference::ValueStream stream(1);
  std::vector<float> v(n);
  for (float& x : v) x = 0.01f * stream.bell();
  return v;
}

// One codec's three entry points, bound to its width.
struct Codec {
  std::string name;
  std::size_t (*bytes)(std::size_t n);
  void (*compress)(const float* in, float* res, std::size_t n, void* out, Isa isa,
                   const k::Rounding& rounding);
  void (*decode)(const void* block, std::size_t n, float* out, Isa isa, bool add);
};

template <int Bits>
Codec absmax_codec() {
  return {"int" + std::to_string(Bits) + "_absmax",
          [](std::size_t n) { return k::quant_packed_bytes(n, kBucket, Bits); },
          [](const float* in, float* res, std::size_t n, void* out, Isa isa,
             const k::Rounding& rounding) {
            k::quant_packed_compress(in, res, n, kBucket, Bits, out, isa, rounding);
          },
          [](const void* block, std::size_t n, float* out, Isa isa, bool add) {
            add ? k::quant_packed_accumulate(block, n, kBucket, Bits, out, isa)
                : k::quant_packed_decompress(block, n, kBucket, Bits, out, isa);
          }};
}

template <int Bits>
Codec minmax_codec() {
  return {"int" + std::to_string(Bits),
          [](std::size_t n) { return k::quant_packed_minmax_bytes(n, kBucket, Bits); },
          [](const float* in, float* res, std::size_t n, void* out, Isa isa,
             const k::Rounding& rounding) {
            k::quant_packed_minmax_compress(in, res, n, kBucket, Bits, out, isa, rounding);
          },
          [](const void* block, std::size_t n, float* out, Isa isa, bool add) {
            add ? k::quant_packed_minmax_accumulate(block, n, kBucket, Bits, out, isa)
                : k::quant_packed_minmax_decompress(block, n, kBucket, Bits, out, isa);
          }};
}

Codec fp8_codec() {
  return {"fp8", [](std::size_t n) { return k::quant_fp8_bytes(n, kBucket); },
          [](const float* in, float* res, std::size_t n, void* out, Isa isa, const k::Rounding&) {
            k::quant_fp8_compress(in, res, n, kBucket, out, isa);
          },
          [](const void* block, std::size_t n, float* out, Isa isa, bool add) {
            add ? k::quant_fp8_accumulate(block, n, kBucket, out, isa)
                : k::quant_fp8_decompress(block, n, kBucket, out, isa);
          }};
}

// A key as one call of a stochastic run draws with.
const k::Rounding kStochastic = k::rounding_key(1, 0, 0, 0);

void set_bytes(benchmark::State& state, std::size_t n) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n * sizeof(float)));
}

void bench_compress(benchmark::State& state, const Codec& codec, Isa isa, bool residual,
                    const k::Rounding& rounding) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  const std::vector<float> in = gradients(n);
  std::vector<float> res(residual ? n : 0, 0.0f);
  std::vector<std::uint8_t> out(codec.bytes(n));
  for (auto _ : state) {
    codec.compress(in.data(), residual ? res.data() : nullptr, n, out.data(), isa, rounding);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, n);
}

// add: accumulate into a buffer whose sums grow (no path's speed depends on
// the values), else decompress.
void bench_decode(benchmark::State& state, const Codec& codec, Isa isa, bool add) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  std::vector<std::uint8_t> block(codec.bytes(n));
  codec.compress(gradients(n).data(), nullptr, n, block.data(), Isa::scalar, {});
  std::vector<float> dense = gradients(n);
  for (auto _ : state) {
    codec.decode(block.data(), n, dense.data(), isa, add);
    benchmark::DoNotOptimize(dense.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, n);
}

template <class Fn>
void add(const std::string& name, Fn fn) {
  slimreduce::bench::add_benchmark(name, {kSizes[0], kSizes[1]}, fn);
}

void register_codec(const Codec& codec, Isa isa, bool stochastic) {
  const std::string tag = std::string("/") + k::isa_name(isa);
  add(codec.name + "_compress" + tag,
      [=](benchmark::State& s) { bench_compress(s, codec, isa, false, {}); });
  add(codec.name + "_compress_residual" + tag,
      [=](benchmark::State& s) { bench_compress(s, codec, isa, true, {}); });
  if (stochastic) {
    add(codec.name + "_compress_stochastic" + tag,
        [=](benchmark::State& s) { bench_compress(s, codec, isa, false, kStochastic); });
  }
  add(codec.name + "_decompress" + tag,
      [=](benchmark::State& s) { bench_decode(s, codec, isa, false); });
  add(codec.name + "_accumulate" + tag,
      [=](benchmark::State& s) { bench_decode(s, codec, isa, true); });
}

void register_all() {
  add("memcpy/fp32_bytes", [](benchmark::State& s) { slimreduce::bench::bench_memcpy(s, 4); });
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    if (static_cast<int>(isa) > static_cast<int>(k::best_isa())) continue;
    register_codec(minmax_codec<4>(), isa, true);
    register_codec(minmax_codec<2>(), isa, true);
    register_codec(absmax_codec<4>(), isa, true);
    register_codec(absmax_codec<2>(), isa, true);
    register_codec(fp8_codec(), isa, false);
  }
}

}  // namespace

int main(int argc, char** argv) {
  return slimreduce::bench::run_kernel_benchmarks(argc, argv, register_all);
}
