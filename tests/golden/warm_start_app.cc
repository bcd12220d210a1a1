// PowerSGD's warm start, end to end through the library: the key's Q is kept
// from call to call, so the same sum reduced again and again on one buffer
// (error feedback off) is one more step of subspace iteration each call, and
// its error falls from the first call's toward the best rank-r error
// (Eckart-Young: the root of the sum of the squared singular values past r).
// A library that starts every call from the seeded Q stays at the first
// call's error; a Q kept per buffer address rather than per key, or lost, shows too.
//
// Usage: mpirun -np N warm_start_app host|device|nccl   (as golden_app, tests/golden/paths.h)
// with SLIMREDUCE_COMPRESSOR=powersgd, SLIMREDUCE_ERROR_FEEDBACK=0; rank r from
// SLIMREDUCE_POWERSGD_RANK (default 4). Prints each call's error on rank 0; exit 0 or 1.
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "tests/golden/paths.h"

namespace {

using namespace golden;

// The tensor seen as the library views it: 131072 floats as 256 x 512
// (kernels::low_rank_shape's most square exact view), of rank kTerms with
// singular values kDecay^i: slowly decaying, so one step is far from the best.
constexpr std::size_t kRows = 256, kCols = 512, kCount = kRows * kCols;
constexpr int kTerms = 48;
constexpr double kDecay = 0.85;
constexpr int kCalls = 40;

// Columns of a (rows x terms, column after column) made orthonormal, Gram-Schmidt twice.
std::vector<double> orthonormal_columns(std::size_t rows, std::mt19937_64& random) {
  std::normal_distribution<double> normal;
  std::vector<double> a(rows * kTerms);
  for (double& v : a) v = normal(random);
  for (int k = 0; k < kTerms; ++k) {
    double* col = &a[k * rows];
    for (int pass = 0; pass < 2; ++pass) {
      for (int l = 0; l < k; ++l) {
        const double* other = &a[l * rows];
        double along = 0;
        for (std::size_t i = 0; i < rows; ++i) along += col[i] * other[i];
        for (std::size_t i = 0; i < rows; ++i) col[i] -= along * other[i];
      }
    }
    double norm = 0;
    for (std::size_t i = 0; i < rows; ++i) norm += col[i] * col[i];
    for (std::size_t i = 0; i < rows; ++i) col[i] /= std::sqrt(norm);
  }
  return a;
}

// M = U diag(s) V^T, row-major, the same on every rank (a fixed seed).
std::vector<double> the_matrix() {
  std::mt19937_64 random(20261205);
  const std::vector<double> u = orthonormal_columns(kRows, random);
  const std::vector<double> v = orthonormal_columns(kCols, random);
  std::vector<double> m(kCount, 0.0);
  for (int k = 0; k < kTerms; ++k) {
    const double s = std::pow(kDecay, k);
    for (std::size_t i = 0; i < kRows; ++i) {
      const double us = u[k * kRows + i] * s;
      for (std::size_t j = 0; j < kCols; ++j) m[i * kCols + j] += us * v[k * kCols + j];
    }
  }
  return m;
}

// Rank r's share of M: weight (r + 1) / (1 + ... + ranks), rounded to float.
std::vector<float> share_of(const std::vector<double>& m, int r) {
  const double weight = 2.0 * (r + 1) / (static_cast<double>(ranks) * (ranks + 1));
  std::vector<float> share(kCount);
  for (std::size_t e = 0; e < kCount; ++e) share[e] = static_cast<float>(m[e] * weight);
  return share;
}

double relative_error(const std::vector<float>& got, const std::vector<double>& want) {
  double diff = 0, norm = 0;
  for (std::size_t e = 0; e < kCount; ++e) {
    diff += (got[e] - want[e]) * (got[e] - want[e]);
    norm += want[e] * want[e];
  }
  return std::sqrt(diff / norm);
}

// Whether every rank holds the bits rank 0 holds.
bool same_on_every_rank(const std::vector<float>& v) {
  std::uint64_t h = 1469598103934665603ull;
  const auto* p = reinterpret_cast<const unsigned char*>(v.data());
  for (std::size_t i = 0; i < v.size() * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ull;
  std::uint64_t pair[2] = {h, ~h};
  PMPI_Allreduce(MPI_IN_PLACE, pair, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  return pair[0] == h && pair[1] == ~h;
}

int failures = 0;

void expect(bool good, const std::string& what) {
  if (good) return;
  ++failures;
  if (rank == 0) std::printf("FAIL: %s\n", what.c_str());
}

// kCalls calls on one buffer; returns each call's relative error.
std::vector<double> errors_on_one_buffer(Path& path, const std::vector<float>& mine,
                                         const std::vector<double>& sum, int calls) {
  void* buffer = path.alloc(kCount * sizeof(float));
  std::vector<double> errors;
  std::vector<float> got(kCount);
  for (int call = 0; call < calls; ++call) {
    path.put(buffer, mine.data(), kCount * sizeof(float));
    path.sum(buffer, buffer, kCount);
    path.get(got.data(), buffer, kCount * sizeof(float));
    expect(same_on_every_rank(got), "call " + std::to_string(call) + " differs between ranks");
    errors.push_back(relative_error(got, sum));
  }
  return errors;
}

int powersgd_rank() {
  const char* given = std::getenv("SLIMREDUCE_POWERSGD_RANK");
  return given ? std::atoi(given) : 4;
}

void check_warm_start(Path& path) {
  const std::vector<double> m = the_matrix();
  std::vector<double> sum(kCount, 0.0);
  for (int r = 0; r < ranks; ++r) {
    const std::vector<float> share = share_of(m, r);
    for (std::size_t e = 0; e < kCount; ++e) sum[e] += share[e];
  }
  double past_r = 0, all = 0;
  for (int k = 0; k < kTerms; ++k) {
    const double s2 = std::pow(kDecay, 2 * k);
    all += s2;
    if (k >= powersgd_rank()) past_r += s2;
  }
  const double best = std::sqrt(past_r / all);
  const std::vector<float> mine = share_of(m, rank);
  const std::vector<double> warm = errors_on_one_buffer(path, mine, sum, kCalls);
  for (int call = 0; call < kCalls && rank == 0; ++call)
    std::printf("warm_start call %d error %.6f (%.4f x best %.6f)\n", call, warm[call],
                warm[call] / best, best);
  // The premise: one step from the seeded Q is well off the best, or this shows nothing.
  expect(warm.front() > 1.05 * best, "the first call is already within 5% of the best error");
  for (int call = 1; call < kCalls; ++call)
    expect(warm[call] <= warm[call - 1] * 1.001,
           "the error rose at call " + std::to_string(call) + ": no warm start");
  expect(warm.back() < 1.02 * best,
         "after " + std::to_string(kCalls) + " calls the error is not within 2% of the best");
  // Another buffer is another key: it starts from the seeded Q again.
  const std::vector<double> fresh = errors_on_one_buffer(path, mine, sum, 1);
  if (rank == 0) std::printf("warm_start fresh buffer error %.6f\n", fresh.front());
  expect(std::fabs(fresh.front() - warm.front()) <= 1e-4 * warm.front(),
         "a fresh buffer's first call does not start where the first buffer's did");
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const std::string where = argc > 1 ? argv[1] : "";
  const char* counters_symbol = "slimreduce_get_counters";
  if (where == "host") {
    HostMpi host;
    check_warm_start(host);
#ifdef GOLDEN_SIM
  } else if (where == "device") {
    DeviceMpi device;
    check_warm_start(device);
  } else if (where == "nccl") {
    Nccl nccl;
    check_warm_start(nccl);
    counters_symbol = "slimreduce_nccl_get_counters";
#endif
  } else {
    if (rank == 0) std::fprintf(stderr, "usage: warm_start_app host|device|nccl\n");
    MPI_Finalize();
    return 2;
  }
  slimreduce_counters counters{};
  expect(counters_of(counters_symbol, &counters), "no SlimReduce counters");
  expect(counters.compressed == kCalls + 1, "compressed " + std::to_string(counters.compressed) +
                                                " calls, not " + std::to_string(kCalls + 1));
  if (rank == 0) std::printf("warm_start %s: %s\n", where.c_str(), failures ? "FAILED" : "PASSED");
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
