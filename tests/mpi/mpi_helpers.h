// Shared helpers of the multi-rank tests: world facts, reproducible inputs,
// the library's counters (read through its C API when it is preloaded).
#pragma once

#include <dlfcn.h>
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "interpose/slimreduce.h"

namespace slimreduce::testing {

inline int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

inline int world_size() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

inline std::string env_or(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value ? value : fallback;
}

// The inputs rank `rank` uses in test `seed`: any rank can rebuild any other's.
inline std::vector<float> inputs_of(int rank, std::uint64_t seed, std::size_t count) {
  std::mt19937_64 generator(seed * 1000003u + static_cast<std::uint64_t>(rank));
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> data(count);
  for (auto& x : data) x = value(generator);
  return data;
}

// Every rank's inputs_of(seed, count), summed exactly enough (in double), and
// the sums of their magnitudes: what rounding bounds are measured against.
struct ExactSum {
  std::vector<double> sum;
  std::vector<double> magnitude;
};
inline ExactSum exact_sum_of(std::uint64_t seed, std::size_t count, int ranks) {
  ExactSum exact{std::vector<double>(count, 0.0), std::vector<double>(count, 0.0)};
  for (int rank = 0; rank < ranks; ++rank) {
    const std::vector<float> theirs = inputs_of(rank, seed, count);
    for (std::size_t i = 0; i < count; ++i) {
      exact.sum[i] += theirs[i];
      exact.magnitude[i] += std::fabs(theirs[i]);
    }
  }
  return exact;
}

// The library's counters, or nothing when it is not loaded.
inline bool read_counters(slimreduce_counters* out) {
  using Fn = int (*)(slimreduce_counters*);
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "slimreduce_get_counters"));
  return fn && fn(out) == 0;
}

// One report key's value (slimreduce_get_counter), or -1 where it cannot be read.
inline double counter(const char* key) {
  using Fn = int (*)(const char*, double*);
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "slimreduce_get_counter"));
  double value = -1;
  return fn && fn(key, &value) == 0 ? value : -1;
}

inline std::uint64_t fnv1a(const void* data, std::size_t bytes) {
  std::uint64_t hash = 1469598103934665603ull;
  const auto* at = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) hash = (hash ^ at[i]) * 1099511628211ull;
  return hash;
}

// True when every rank of comm holds the same bytes.
inline bool identical_on_all_ranks(const void* data, std::size_t bytes, MPI_Comm comm) {
  const std::uint64_t mine = fnv1a(data, bytes);
  std::uint64_t low = 0, high = 0;
  PMPI_Allreduce(&mine, &low, 1, MPI_UINT64_T, MPI_MIN, comm);
  PMPI_Allreduce(&mine, &high, 1, MPI_UINT64_T, MPI_MAX, comm);
  return low == high;
}

inline std::uint64_t float_bits(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return bits;
}

}  // namespace slimreduce::testing
