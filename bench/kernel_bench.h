// What the Google Benchmark kernel binaries (bench_cast, bench_pack) share:
// the memcpy yardstick, registration over the sizes of a binary, and main().
#pragma once

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

namespace slimreduce::bench {

// The yardstick: copying state.range(0) x elem_bytes bytes.
inline void bench_memcpy(benchmark::State& state, std::size_t elem_bytes) {
  const std::size_t bytes = static_cast<std::size_t>(state.range(0)) * elem_bytes;
  std::vector<char> src(bytes, 1), dst(bytes);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}

// Registers fn under name, once per size (in elements), timed in microseconds.
template <class Fn>
void add_benchmark(const std::string& name, std::initializer_list<std::size_t> sizes, Fn fn) {
  auto* b = benchmark::RegisterBenchmark(name.c_str(), fn);
  for (std::size_t n : sizes) b->Arg(static_cast<std::int64_t>(n));
  b->Unit(benchmark::kMicrosecond);
}

// main() of a kernel benchmark binary: register_all registers its benchmarks.
inline int run_kernel_benchmarks(int argc, char** argv, void (*register_all)()) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace slimreduce::bench
