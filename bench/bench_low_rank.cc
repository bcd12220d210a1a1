// PowerSGD's CPU steps (kernels/low_rank.h) on a tensor of n floats viewed
// as its most square matrix, at ranks 1, 4 and 16, scalar and with the best
// ISA, with a memcpy of the same input bytes in the same run as the
// yardstick: the products read M once each, so for small r they should run
// near memory speed. The two products also through cblas_sgemm of the
// process's private OpenBLAS (kernels/blas_loader.h; skipped with an error
// when it is not installed), in the same binary, to keep the faster.
// Bytes/s counts the input (n floats) for every benchmark.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/blas_loader.h"
#include "kernels/low_rank.h"

namespace sk = slimreduce::kernels;

namespace {

constexpr std::int64_t kMaxN = std::int64_t{16} << 20;

std::vector<float> uniform(std::size_t n, std::uint64_t seed) {
  std::vector<float> v(n);
  std::uint64_t s = seed;
  for (float& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<float>(static_cast<double>(s >> 40) / 8388608.0 - 1.0);
  }
  return v;
}

const std::vector<float>& matrix() {
  static const std::vector<float> v = uniform(kMaxN, 1);
  return v;
}

struct Fixture {
  sk::LowRankShape shape;
  std::vector<float> p, q, q2, out, residual;
  explicit Fixture(const benchmark::State& state)
      : shape(sk::low_rank_shape(static_cast<std::size_t>(state.range(0)),
                                 static_cast<std::size_t>(state.range(1)), 1.0)),
        p(uniform(shape.p_floats(), 2)),
        q(uniform(shape.q_floats(), 3)),
        q2(uniform(shape.q_floats(), 4)),
        out(shape.count),
        residual(shape.count) {}
};

sk::Isa isa_of(const benchmark::State& state) {
  return state.range(2) ? sk::best_isa() : sk::Isa::scalar;
}

void finish(benchmark::State& state) {
  state.SetBytesProcessed(state.iterations() * state.range(0) * std::int64_t{sizeof(float)});
  state.SetLabel(sk::isa_name(isa_of(state)));
}

void BM_Memcpy(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  std::vector<float> out(n);
  for (auto _ : state) {
    std::memcpy(out.data(), matrix().data(), n * sizeof(float));
    benchmark::ClobberMemory();
  }
  finish(state);
}

void BM_Project(benchmark::State& state) {  // P = M Q
  Fixture f(state);
  for (auto _ : state) {
    sk::low_rank_project(matrix().data(), f.shape, f.q.data(), f.p.data(), isa_of(state));
    benchmark::ClobberMemory();
  }
  finish(state);
}

void BM_BackProject(benchmark::State& state) {  // Q = M^T P
  Fixture f(state);
  for (auto _ : state) {
    sk::low_rank_back_project(matrix().data(), f.shape, f.p.data(), f.q.data(), isa_of(state));
    benchmark::ClobberMemory();
  }
  finish(state);
}

// The same products through the private OpenBLAS (range(2) unused).
const sk::PrivateBlas* blas_or_skip(benchmark::State& state) {
  const sk::PrivateBlas* blas = sk::PrivateBlas::process();
  if (!blas) state.SkipWithError("no private OpenBLAS (libopenblas0-serial not installed?)");
  return blas;
}

void BM_ProjectBlas(benchmark::State& state) {
  Fixture f(state);
  const sk::PrivateBlas* blas = blas_or_skip(state);
  if (!blas) return;
  for (auto _ : state) {
    sk::low_rank_project_blas(*blas, matrix().data(), f.shape, f.q.data(), f.p.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * std::int64_t{sizeof(float)});
  state.SetLabel("openblas");
}

void BM_BackProjectBlas(benchmark::State& state) {
  Fixture f(state);
  const sk::PrivateBlas* blas = blas_or_skip(state);
  if (!blas) return;
  for (auto _ : state) {
    sk::low_rank_back_project_blas(*blas, matrix().data(), f.shape, f.p.data(), f.q.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * std::int64_t{sizeof(float)});
  state.SetLabel("openblas");
}

void BM_Finish(benchmark::State& state) {  // out = P Q^T, residual = M - P Q_local^T
  Fixture f(state);
  for (auto _ : state) {
    sk::low_rank_finish(matrix().data(), f.shape, f.p.data(), f.q.data(), f.q2.data(), f.out.data(),
                        f.residual.data(), isa_of(state));
    benchmark::ClobberMemory();
  }
  finish(state);
}

constexpr std::int64_t kSizes[] = {std::int64_t{1} << 16, std::int64_t{1} << 20, kMaxN};

void sizes(benchmark::internal::Benchmark* b) {
  for (std::int64_t n : kSizes)
    for (std::int64_t r : {1, 4, 16})
      for (std::int64_t vector : {0, 1}) b->Args({n, r, vector});
}

void blas_sizes(benchmark::internal::Benchmark* b) {
  for (std::int64_t n : kSizes)
    for (std::int64_t r : {1, 4, 16}) b->Args({n, r, 0});
}

BENCHMARK(BM_Memcpy)
    ->Args({1 << 16, 0, 0})
    ->Args({1 << 20, 0, 0})
    ->Args({kMaxN, 0, 0})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Project)->Apply(sizes)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ProjectBlas)->Apply(blas_sizes)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_BackProject)->Apply(sizes)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_BackProjectBlas)->Apply(blas_sizes)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Finish)->Apply(sizes)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
