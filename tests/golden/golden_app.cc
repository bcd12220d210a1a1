// Golden outputs: a fixed sequence of allreduces whose results (hashed) and
// counters must stay bit for bit the same while the code under them is
// restructured. tests/golden/check_golden.py runs it under every compressor
// and setting it lists, on 2 to 4 ranks, and compares with the recorded files.
//
// Usage: mpirun -np N golden_app host|device|nccl
//   host:   MPI_Allreduce on host buffers (run with LD_PRELOAD=libslimreduce.so);
//   device: MPI_Allreduce on device buffers (the host simulation of the GPU);
//   nccl:   ncclAllReduce, alone, in a group, sum and average (host simulation).
// A compressed call's result is printed as a hash: SlimReduce's algorithms
// fix every rounding and every order of adding. A call MPI sums itself
// (passed through) is compared with PMPI_Allreduce on the same inputs instead,
// bit for bit: its bits depend on the MPI's own choice of algorithm, which
// another MPI version may make otherwise, and what matters is that SlimReduce
// left it alone. (The simulated NCCL sums in one fixed order: hashed.)
// Prints "golden ..." lines on rank 0; exit 0, or 1 when a check failed.
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tests/golden/paths.h"

#ifdef GOLDEN_SIM
#include "kernels/element_rules.h"
#endif

namespace {

using namespace golden;

int failures = 0;

// splitmix64: the same numbers from any compiler and library.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Rank r's input of call `call`: full fp32 precision over twelve binades, so
// that every order of adding gives other bits (top-k's accumulation included),
// with a few exact zeros and ties (equal magnitudes) for top-k's tie rule.
std::vector<float> input_of(unsigned call, int r, std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t h = mix((std::uint64_t{call} << 40) ^ (std::uint64_t(r) << 32) ^ i);
    const double unit = static_cast<double>(h >> 11) * 0x1p-53 - 0.5;  // [-0.5, 0.5)
    const int binade = static_cast<int>(h % 12) - 6;
    const unsigned pick = static_cast<unsigned>((h >> 20) % 100);
    v[i] = pick == 0   ? 0.0f
           : pick == 1 ? ((h >> 30) & 1 ? 0.75f : -0.75f)
                       : static_cast<float>(unit * static_cast<double>(1 << (binade + 6)) / 64.0);
  }
  return v;
}

std::uint64_t hash_bytes(const void* data, std::size_t bytes) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// Prints the result's hash (rank 0) after checking that every rank holds the same bits.
void report(const std::string& what, const void* data, std::size_t bytes) {
  const std::uint64_t h = hash_bytes(data, bytes);
  std::uint64_t pair[2] = {h, ~h};
  PMPI_Allreduce(MPI_IN_PLACE, pair, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  const bool same = pair[0] == h && pair[1] == ~h;
  if (!same) {
    ++failures;
    std::printf("FAIL rank %d: %s differs between ranks\n", rank, what.c_str());
  }
  if (rank == 0) std::printf("golden %s %016llx\n", what.c_str(), (unsigned long long)h);
}

void print_counters(const char* side, const slimreduce_counters& c) {
  if (rank != 0) return;
  std::printf(
      "golden counters %s intercepted %llu compressed %llu passed %llu warmup %llu cap %llu "
      "input %llu baseline %.17g sent %.17g resets %llu\n",
      side, (unsigned long long)c.intercepted, (unsigned long long)c.compressed,
      (unsigned long long)c.passed_through, (unsigned long long)c.warmup,
      (unsigned long long)c.ef_cap_fallback, (unsigned long long)c.input_bytes, c.wire_baseline,
      c.wire_sent, (unsigned long long)c.ef_resets);
}

// Sizes of the repeated calls: not divisible by 2, 3 or 4 ranks, a power of
// two, and one above SLIMREDUCE_MIN_BYTES by a few bytes (16411 x 4 = 65644).
constexpr std::size_t kSizes[3] = {16411, 65536, 100003};
constexpr int kSteps = 3;

// Passed through: the result must be what the real MPI gives for the same inputs.
// A handed-over call (nonblocking) is compared with PMPI_Iallreduce: Open MPI
// sums those by another algorithm than blocking ones, with other bits.
void check_same_as_mpi(const std::string& what, const void* got, const void* input, int count,
                       MPI_Datatype type, MPI_Op op, bool nonblocking = false) {
  int type_size = 0;
  MPI_Type_size(type, &type_size);
  const std::size_t bytes = static_cast<std::size_t>(count) * type_size;
  std::vector<std::byte> want(bytes);
  if (nonblocking) {
    MPI_Request request;
    PMPI_Iallreduce(input, want.data(), count, type, op, MPI_COMM_WORLD, &request);
    PMPI_Wait(&request, MPI_STATUS_IGNORE);
  } else {
    PMPI_Allreduce(input, want.data(), count, type, op, MPI_COMM_WORLD);
  }
  const bool same = std::memcmp(got, want.data(), bytes) == 0;
  failures += !same;
  if (!same) std::printf("FAIL rank %d: %s differs from MPI's own sum\n", rank, what.c_str());
  if (rank == 0) std::printf("golden %s passed through, as MPI sums it\n", what.c_str());
}

// A call of `n` floats on (send, recv), every rank's input made here: a
// compressed one's result hashed, a passed-through one's checked against MPI.
void one_call(Path& path, const std::string& what, unsigned call, void* send, void* recv,
              std::size_t n) {
  const std::vector<float> mine = input_of(call, rank, n);
  path.put(send, mine.data(), n * sizeof(float));
  const std::uint64_t compressed_before = path.compressed_so_far();
  path.sum(send, recv, n);
  std::vector<float> got(n);
  path.get(got.data(), recv, n * sizeof(float));
  if (path.mpi_sums() && path.compressed_so_far() == compressed_before) {
    check_same_as_mpi(what, got.data(), mine.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM);
  } else {
    report(what, got.data(), n * sizeof(float));
  }
}

// The calls every path makes: steps of three tensors with stable buffers
// (residuals carry over), one in place, one below SLIMREDUCE_MIN_BYTES.
void common_calls(Path& path) {
  unsigned call = 0;
  void* send[3];
  void* recv[3];
  for (int t = 0; t < 3; ++t) {
    send[t] = path.alloc(kSizes[t] * sizeof(float));
    recv[t] = path.alloc(kSizes[t] * sizeof(float));
  }
  for (int step = 0; step < kSteps; ++step) {
    for (int t = 0; t < 3; ++t) {
      one_call(path, "step " + std::to_string(step) + " n " + std::to_string(kSizes[t]), call++,
               send[t], recv[t], kSizes[t]);
    }
  }
  void* in_place = path.alloc(65536 * sizeof(float));
  for (int step = 0; step < 2; ++step)
    one_call(path, "in place step " + std::to_string(step), call++, in_place, in_place, 65536);
  void* small_send = path.alloc(100 * sizeof(float));
  void* small_recv = path.alloc(100 * sizeof(float));
  one_call(path, "small", call++, small_send, small_recv, 100);
}

// MPI_Iallreduce batches: three tensors handed over before one wait (fused
// on host buffers; device buffers are reduced as each is handed over), two
// steps on the same buffers. Hashed when the batch was compressed, checked
// against MPI when it passed through.
void iallreduce_calls(Path& path) {
  constexpr std::size_t kBatch[3] = {20000, 16411, 40000};
  unsigned call = 700;
  void* send[3];
  void* recv[3];
  for (int t = 0; t < 3; ++t) {
    send[t] = path.alloc(kBatch[t] * sizeof(float));
    recv[t] = path.alloc(kBatch[t] * sizeof(float));
  }
  for (int step = 0; step < 2; ++step) {
    std::vector<std::vector<float>> mine;
    for (int t = 0; t < 3; ++t) {
      mine.push_back(input_of(call++, rank, kBatch[t]));
      path.put(send[t], mine[t].data(), kBatch[t] * sizeof(float));
    }
    const std::uint64_t compressed_before = path.compressed_so_far();
    MPI_Request requests[3];
    for (int t = 0; t < 3; ++t) mpi_start_sum(send[t], recv[t], kBatch[t], &requests[t]);
    MPI_Waitall(3, requests, MPI_STATUSES_IGNORE);
    const bool passed = path.compressed_so_far() == compressed_before;
    for (int t = 0; t < 3; ++t) {
      const std::string what =
          "batch step " + std::to_string(step) + " tensor " + std::to_string(t);
      std::vector<float> got(kBatch[t]);
      path.get(got.data(), recv[t], kBatch[t] * sizeof(float));
      if (passed) {
        check_same_as_mpi(what, got.data(), mine[t].data(), static_cast<int>(kBatch[t]), MPI_FLOAT,
                          MPI_SUM, true);
      } else {
        report(what, got.data(), kBatch[t] * sizeof(float));
      }
    }
  }
}

// Calls that pass through on any compressor: integers and MAX (host buffers).
void host_only_calls() {
  std::vector<int> ints(20000);
  for (std::size_t i = 0; i < ints.size(); ++i) ints[i] = static_cast<int>(mix(i + rank) % 1000);
  std::vector<int> int_sum(ints.size());
  MPI_Allreduce(ints.data(), int_sum.data(), 20000, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  check_same_as_mpi("int sum", int_sum.data(), ints.data(), 20000, MPI_INT, MPI_SUM);
  const std::vector<float> floats = input_of(999, rank, 20000);
  std::vector<float> max(floats.size());
  MPI_Allreduce(floats.data(), max.data(), 20000, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
  check_same_as_mpi("float max", max.data(), floats.data(), 20000, MPI_FLOAT, MPI_MAX);
}

#ifdef GOLDEN_SIM

// Beyond the common calls: average, a group of two (fused casts), a 16-bit
// tensor, and an integer call that passes through.
void nccl_calls(Nccl& nccl) {
  unsigned call = 500;
  for (int step = 0; step < 2; ++step) {
    void* a_send = nccl.alloc(65536 * 4);
    void* a_recv = nccl.alloc(65536 * 4);
    const std::vector<float> mine = input_of(call++, rank, 65536);
    nccl.put(a_send, mine.data(), mine.size() * 4);
    nccl.issue(a_send, a_recv, 65536, ncclAvg);
    std::vector<float> got(65536);
    nccl.get(got.data(), a_recv, got.size() * 4);
    report("avg step " + std::to_string(step), got.data(), got.size() * 4);
  }
  const std::size_t group_sizes[2] = {16411, 30001};
  void* g_send[2];
  void* g_recv[2];
  for (int t = 0; t < 2; ++t) {
    g_send[t] = nccl.alloc(group_sizes[t] * 4);
    g_recv[t] = nccl.alloc(group_sizes[t] * 4);
  }
  for (int step = 0; step < 2; ++step) {
    for (int t = 0; t < 2; ++t) {
      const std::vector<float> mine = input_of(call++, rank, group_sizes[t]);
      nccl.put(g_send[t], mine.data(), mine.size() * 4);
    }
    NCCL_OK(ncclGroupStart());
    for (int t = 0; t < 2; ++t) nccl.issue(g_send[t], g_recv[t], group_sizes[t], ncclSum);
    NCCL_OK(ncclGroupEnd());
    for (int t = 0; t < 2; ++t) {
      std::vector<float> got(group_sizes[t]);
      nccl.get(got.data(), g_recv[t], got.size() * 4);
      report("group step " + std::to_string(step) + " tensor " + std::to_string(t), got.data(),
             got.size() * 4);
    }
  }
  // fp16 input: multiples of 1/16 below 8, so that sums of four are exact in fp16 too.
  std::vector<std::uint16_t> half(65536);
  const std::vector<float> mine = input_of(call++, rank, half.size());
  for (std::size_t i = 0; i < half.size(); ++i) {
    const float coarse = static_cast<float>(static_cast<int>(mine[i] * 16.0f)) / 16.0f;
    half[i] = slimreduce::kernels::float_to_fp16_bits(coarse);
  }
  void* h_buf = nccl.alloc(half.size() * 2);
  nccl.put(h_buf, half.data(), half.size() * 2);
  nccl.issue(h_buf, h_buf, half.size(), ncclSum, ncclFloat16);
  nccl.get(half.data(), h_buf, half.size() * 2);
  report("fp16 tensor", half.data(), half.size() * 2);
  std::vector<int> ints(20000);
  for (std::size_t i = 0; i < ints.size(); ++i) ints[i] = static_cast<int>(mix(i + rank) % 1000);
  void* i_buf = nccl.alloc(ints.size() * 4);
  nccl.put(i_buf, ints.data(), ints.size() * 4);
  nccl.issue(i_buf, i_buf, ints.size(), ncclSum, ncclInt32);
  nccl.get(ints.data(), i_buf, ints.size() * 4);
  report("int sum", ints.data(), ints.size() * 4);
}

#endif  // GOLDEN_SIM

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const std::string path = argc > 1 ? argv[1] : "";
  slimreduce_counters counters{};
  if (path == "host") {
    HostMpi host;
    common_calls(host);
    host_only_calls();
    iallreduce_calls(host);
    if (!counters_of("slimreduce_get_counters", &counters)) ++failures;
    print_counters("mpi", counters);
#ifdef GOLDEN_SIM
  } else if (path == "device") {
    DeviceMpi device;
    common_calls(device);
    iallreduce_calls(device);
    if (!counters_of("slimreduce_get_counters", &counters)) ++failures;
    print_counters("mpi", counters);
  } else if (path == "nccl") {
    {
      Nccl nccl;
      common_calls(nccl);
      nccl_calls(nccl);
    }
    if (!counters_of("slimreduce_nccl_get_counters", &counters)) ++failures;
    print_counters("nccl", counters);
#endif
  } else {
    if (rank == 0) std::fprintf(stderr, "usage: golden_app host|device|nccl\n");
    MPI_Finalize();
    return 2;
  }
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
