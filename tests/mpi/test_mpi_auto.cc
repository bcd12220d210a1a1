// SLIMREDUCE_COMPRESSOR=auto under LD_PRELOAD: every rank sends every call
// with the same candidate (also with one rank much slower than the others),
// the probe round tries the candidates in turn, and each call's result has
// the bits its candidate gives. Which candidate a call went with is read from
// the bytes it sent (slimreduce_get_counters): a pass-through sends fp32's
// bytes, fp16 half of them, int8 about a quarter.
//
// Environment: SLIMREDUCE_COMPRESSOR, SLIMREDUCE_AUTO_CANDIDATES and
// SLIMREDUCE_HIERARCHICAL (the library's), and AUTO_TEST_SLOW_RANK=r: rank r
// sleeps AUTO_TEST_SLOW_US microseconds (3000 unless set) before each call. A fixed compressor
// (with SLIMREDUCE_HIERARCHICAL=auto) is the one candidate. Under SLIMREDUCE_HIERARCHICAL=auto the
// candidates are followed by the two-level twins of the compressing ones; a call went two-level
// where it sent bytes both inside and across nodes (a flat call's bytes are counted on one side:
// where this rank's ring hop goes).
//
// Built with AUTO_TEST_DEVICE_BUFFERS over the host simulation
// (tests/hostsim/CMakeLists.txt), every call reduces device buffers (the MPI
// device path: its choice is the host path's, CommState's, timed the same way).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "tests/mpi/mpi_helpers.h"
#include "tests/mpi/mpi_test_main.h"
#ifdef AUTO_TEST_DEVICE_BUFFERS
#include <cuda_runtime.h>
#endif

namespace slimreduce::testing {
namespace {

const bool kChoosesLevels = env_or("SLIMREDUCE_HIERARCHICAL", "0") == "auto";
const std::string kCompressor = env_or("SLIMREDUCE_COMPRESSOR", "auto");

std::vector<std::string> candidates() {
  std::vector<std::string> names;
  std::stringstream list(
      kCompressor == "auto" ? env_or("SLIMREDUCE_AUTO_CANDIDATES", "none,fp16,int8") : kCompressor);
  for (std::string name; std::getline(list, name, ',');) names.push_back(name);
  const std::size_t flat = names.size();
  for (std::size_t c = 0; kChoosesLevels && c < flat; ++c) {
    if (names[c] != "none") names.push_back(names[c] + "/two-level");
  }
  return names;
}

constexpr const char* kTwoLevel = "/two-level";

// The compressor a candidate's name names (its twin's, without the suffix).
std::string compressor_of(const std::string& candidate) {
  return candidate.substr(0, candidate.find('/'));
}

const int kSlowRank = std::stoi(env_or("AUTO_TEST_SLOW_RANK", "-1"));
const useconds_t kSlowUs = static_cast<useconds_t>(std::stoul(env_or("AUTO_TEST_SLOW_US", "3000")));
// Hierarchical: fp32 inside a node, so the bytes sent name no candidate; the
// result does (fp16: every value a 16-bit number; none: the plain sum).
const bool kHierarchical = env_or("SLIMREDUCE_HIERARCHICAL", "0") == "1";
constexpr std::size_t kCount = 1 << 16;  // 256 KiB: eligible (SLIMREDUCE_MIN_BYTES 64 KiB)
constexpr int kProbes = 3;               // AutoChooser::Schedule's default

// The candidate a call's wire bytes name: sent / fp32 baseline.
std::string sent_as(double ratio) {
  if (ratio > 0.9) return "none";
  if (ratio > 0.4) return "fp16";  // the cast ring sends exactly half
  return "int8";                   // a quarter plus a scale per bucket
}

// Whether out is what `candidate` gives for these inputs: a plain sum within
// fp32's rounding, fp16's 16-bit values within its ring's bound, int8 within
// a step of its buckets per rank.
::testing::AssertionResult has_the_bits_of(const std::string& candidate,
                                           const std::vector<float>& out, std::uint64_t seed) {
  const int ranks = world_size();
  const ExactSum exact = exact_sum_of(seed, out.size(), ranks);
  const std::string compressor = compressor_of(candidate);
  const double unit = compressor == "none" ? 0x1p-23 : compressor == "fp16" ? 0x1p-10 : 0x1p-6;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (compressor == "fp16" && static_cast<float>(static_cast<_Float16>(out[i])) != out[i])
      return ::testing::AssertionFailure() << "value " << i << " did not travel as fp16";
    const double bound = 2 * ranks * unit * exact.magnitude[i] + (compressor == "int8" ? 0.05 : 0);
    if (std::fabs(out[i] - exact.sum[i]) > bound)
      return ::testing::AssertionFailure()
             << candidate << ": value " << i << " is " << out[i] << ", the sum " << exact.sum[i];
  }
  return ::testing::AssertionSuccess();
}

// The candidate a hierarchical call's result names.
std::string result_of(const std::vector<float>& out, std::uint64_t seed) {
  if (has_the_bits_of("fp16", out, seed)) return "fp16";
  return has_the_bits_of("none", out, seed) ? "none" : "int8";
}

// The sum of `in` over the ranks into `out`: host buffers, or device
// buffers the inputs are copied to and the result from.
int allreduce(const std::vector<float>& in, std::vector<float>& out) {
#ifdef AUTO_TEST_DEVICE_BUFFERS
  struct DeviceBuffers {
    float* in = nullptr;
    float* out = nullptr;
    DeviceBuffers() {
      if (cudaMalloc(&in, kCount * sizeof(float)) != cudaSuccess ||
          cudaMalloc(&out, kCount * sizeof(float)) != cudaSuccess)
        in = out = nullptr;
    }
  };
  static const DeviceBuffers device;  // the job's whole life: one pair, as a framework's
  if (!device.in || in.size() != kCount) return MPI_ERR_BUFFER;
  const std::size_t bytes = kCount * sizeof(float);
  if (cudaMemcpy(device.in, in.data(), bytes, cudaMemcpyHostToDevice) != cudaSuccess)
    return MPI_ERR_BUFFER;
  const int rc = MPI_Allreduce(device.in, device.out, kCount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  if (cudaMemcpy(out.data(), device.out, bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
    return MPI_ERR_BUFFER;
  return rc;
#else
  return MPI_Allreduce(in.data(), out.data(), static_cast<int>(in.size()), MPI_FLOAT, MPI_SUM,
                       MPI_COMM_WORLD);
#endif
}

// One blocking call; returns the candidate it was sent with.
std::string one_call(std::uint64_t seed, std::vector<float>& out) {
  const std::vector<float> in = inputs_of(world_rank(), seed, kCount);
  out.assign(kCount, 0.0f);
  slimreduce_counters before{}, after{};
  EXPECT_TRUE(read_counters(&before));
  const double inter_before = counter("bytes.inter_node_sent"),
               intra_before = counter("bytes.intra_node_sent");
  if (world_rank() == kSlowRank) usleep(kSlowUs);
  EXPECT_EQ(allreduce(in, out), MPI_SUCCESS);
  EXPECT_TRUE(read_counters(&after));
  EXPECT_EQ(after.intercepted - before.intercepted, 1u);
  if (kHierarchical) return result_of(out, seed);
  if (kChoosesLevels && counter("bytes.inter_node_sent") > inter_before &&
      counter("bytes.intra_node_sent") > intra_before)
    return result_of(out, seed) + kTwoLevel;
  return sent_as((after.wire_sent - before.wire_sent) /
                 (after.wire_baseline - before.wire_baseline));
}

TEST(Auto, EveryRankSendsEveryCallWithTheSameCandidateAndItsBits) {
  const std::vector<std::string> names = candidates();
  const int calls = 120;
  std::vector<float> out;
  for (int call = 0; call < calls; ++call) {
    const std::uint64_t seed = 1000 + call;
    const std::string sent = one_call(seed, out);
    // The candidate's index, the same on every rank.
    int mine = -1;
    for (std::size_t c = 0; c < names.size(); ++c) {
      if (names[c] == sent) mine = static_cast<int>(c);
    }
    ASSERT_GE(mine, 0) << "call " << call << " went as " << sent << ", not a candidate";
    int low = 0, high = 0;
    MPI_Allreduce(&mine, &low, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&mine, &high, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    ASSERT_EQ(low, high) << "call " << call << ": the ranks sent it with different candidates";
    ASSERT_TRUE(identical_on_all_ranks(out.data(), out.size() * sizeof(float), MPI_COMM_WORLD))
        << "call " << call;
    ASSERT_TRUE(has_the_bits_of(sent, out, seed)) << "call " << call;
    if (call < static_cast<int>(names.size())) {
      EXPECT_EQ(sent, names[call]) << "the probe round's first pass, call " << call;
    }
  }
  // The report counts this rank's probe calls: the first round's at least
  // (its pass, and the other probes of one candidate that it kept at least).
  const double probes = counter("auto.probe_calls");
  EXPECT_GE(probes, static_cast<double>(names.size() + kProbes - 1));
  EXPECT_LE(probes, static_cast<double>(calls));
}

// Candidates topk,none (gathered; error feedback: top-k's default), one
// buffer, one input call after call: the probe round opens with its first
// pass, topk then none, and goes on with both in turn (or, where the pass
// cut one as hopeless, with the other). What top-k left behind (its
// residual) goes out with the next none call (input + residual in fp32), so
// the results of the calls up to the last one sent with none add up to as
// many plain sums, to fp32's rounding; a residual left in its slot would be
// missing from them (99% of the values of a call).
TEST(Auto, NoneSendsWhatTopkLeftBehind) {
  ASSERT_EQ(candidates(), (std::vector<std::string>{"topk", "none"})) << "run with topk,none";
  const int ranks = world_size();
  const std::vector<float> in = inputs_of(world_rank(), 77, kCount);
  const ExactSum exact = exact_sum_of(77, kCount, ranks);
  std::vector<float> out(kCount);
  std::vector<double> total(kCount, 0.0), upto_none(kCount, 0.0);
  int calls = 0, topk_calls = 0, topk_so_far = 0;  // calls up to the last none call
  for (int call = 0; call < 6; ++call) {
    out = in;
    slimreduce_counters before{}, after{};
    ASSERT_TRUE(read_counters(&before));
    ASSERT_EQ(MPI_Allreduce(MPI_IN_PLACE, out.data(), kCount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
              MPI_SUCCESS);
    ASSERT_TRUE(read_counters(&after));
    for (std::size_t i = 0; i < kCount; ++i) total[i] += out[i];
    const bool none = sent_as((after.wire_sent - before.wire_sent) /
                              (after.wire_baseline - before.wire_baseline)) == "none";
    topk_so_far += none ? 0 : 1;
    if (none) {
      upto_none = total;
      calls = call + 1;
      topk_calls = topk_so_far;
    }
  }
  ASSERT_GE(calls, 2) << "the first pass is topk, then none";
  ASSERT_GE(topk_calls, 1) << "top-k left something behind for none to carry";
  double worst = 0;
  for (std::size_t i = 0; i < kCount; ++i) {
    const double bound = calls * 4 * ranks * 0x1p-23 * (exact.magnitude[i] + 0.1);
    worst = std::max(worst, std::fabs(upto_none[i] - calls * exact.sum[i]) / bound);
  }
  EXPECT_LE(worst, 1.0) << "the " << calls << " results miss what top-k carried (worst at " << worst
                        << " times fp32's bound)";
}

// A queued MPI_Iallreduce follows its class's choice, untimed: the same on every rank.
TEST(Auto, QueuedCallsFollowTheChoice) {
  const std::vector<float> in = inputs_of(world_rank(), 7, kCount);
  std::vector<float> out(kCount);
  MPI_Request request;
  ASSERT_EQ(
      MPI_Iallreduce(in.data(), out.data(), kCount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request),
      MPI_SUCCESS);
  ASSERT_EQ(MPI_Wait(&request, MPI_STATUS_IGNORE), MPI_SUCCESS);
  EXPECT_TRUE(identical_on_all_ranks(out.data(), out.size() * sizeof(float), MPI_COMM_WORLD));
}

// The user's word wins: a compressor set through the C API ends the choice
// (of the compressor, and of flat or two-level).
TEST(Auto, ACompressorSetThroughTheApiEndsTheChoice) {
  using Set = int (*)(const char*);
  using Get = const char* (*)();
  auto set = reinterpret_cast<Set>(dlsym(RTLD_DEFAULT, "slimreduce_set_compressor"));
  auto get = reinterpret_cast<Get>(dlsym(RTLD_DEFAULT, "slimreduce_compressor"));
  ASSERT_TRUE(set && get) << "libslimreduce.so is not preloaded";
  EXPECT_EQ(std::string(get()), kCompressor);
  ASSERT_EQ(set("fp16"), 0);
  EXPECT_STREQ(get(), "fp16");
  std::vector<float> out;
  // Under SLIMREDUCE_HIERARCHICAL=auto the fixed compressor runs two-level,
  // as under SLIMREDUCE_HIERARCHICAL=1: the choice of levels ends with it.
  const std::string expected = kChoosesLevels ? std::string("fp16") + kTwoLevel : "fp16";
  for (int call = 0; call < 8; ++call) {
    EXPECT_EQ(one_call(2000 + call, out), expected) << "call " << call;
    EXPECT_TRUE(has_the_bits_of("fp16", out, 2000 + call));
  }
}

}  // namespace
}  // namespace slimreduce::testing

int main(int argc, char** argv) { return slimreduce::testing::run_all_tests_under_mpi(argc, argv); }
