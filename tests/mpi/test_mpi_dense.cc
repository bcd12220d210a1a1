// Multi-rank tests of the dense path (none, fp16, bf16) under LD_PRELOAD.
// What to expect is derived from the same environment the library reads:
// SLIMREDUCE_COMPRESSOR, SLIMREDUCE_MIN_BYTES (plain bytes here) and
// SLIMREDUCE_ERROR_FEEDBACK.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <numeric>

#include "tests/mpi/mpi_helpers.h"
#include "tests/mpi/mpi_test_main.h"

namespace slimreduce::testing {
namespace {

const std::string kCompressor = env_or("SLIMREDUCE_COMPRESSOR", "none");
const std::uint64_t kMinBytes = std::stoull(env_or("SLIMREDUCE_MIN_BYTES", "65536"));
const bool kCast = kCompressor == "fp16" || kCompressor == "bf16";
const bool kErrorFeedback = env_or("SLIMREDUCE_ERROR_FEEDBACK", "0") == "1";

bool expect_compressed(std::size_t count) { return kCast && count * sizeof(float) >= kMinBytes; }

// A value that travelled as 16 bits decodes to a 16-bit number exactly.
bool representable(float x) {
  if (kCompressor == "fp16")
    return std::isnan(x) || static_cast<float>(static_cast<_Float16>(x)) == x;
  return (float_bits(x) & 0xffffu) == 0;
}

// The ring rounds each rank's input once and each partial sum once per hop:
// 2n - 1 roundings, each at most one unit roundoff of the running sum, which
// never exceeds the sum of magnitudes (plus fp16's absolute subnormal step).
double error_bound(double sum_of_magnitudes, int ranks) {
  const double unit = kCompressor == "fp16" ? 0x1p-11 : 0x1p-8;
  const double subnormal_step = kCompressor == "fp16" ? 0x1p-25 : 0.0;
  const int roundings = 2 * ranks - 1;
  return roundings * (unit * sum_of_magnitudes * (1 + roundings * unit) + subnormal_step);
}

struct Delta {
  slimreduce_counters before{};
  Delta() { read_counters(&before); }
  slimreduce_counters now() const {
    slimreduce_counters after{};
    read_counters(&after);
    return after;
  }
};

TEST(Preload, LibraryIsLoadedWithTheCompressorAsked) {
  slimreduce_counters counters{};
  ASSERT_TRUE(read_counters(&counters)) << "libslimreduce.so is not preloaded";
  using Fn = const char* (*)();
  auto compressor = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "slimreduce_compressor"));
  ASSERT_NE(compressor, nullptr);
  EXPECT_EQ(std::string(compressor()), kCompressor);
}

class DenseAllreduce : public ::testing::TestWithParam<std::tuple<std::size_t, bool>> {};

TEST_P(DenseAllreduce, MatchesReferenceAndIsIdenticalOnEveryRank) {
  const auto [count, in_place] = GetParam();
  const int ranks = world_size();
  const std::uint64_t seed = count * 2 + in_place;
  std::vector<float> input = inputs_of(world_rank(), seed, count);
  std::vector<float> output(count, -7.0f);
  Delta delta;
  if (in_place) {
    output = input;
    ASSERT_EQ(MPI_Allreduce(MPI_IN_PLACE, output.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
              MPI_SUCCESS);
  } else {
    ASSERT_EQ(MPI_Allreduce(input.data(), output.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
              MPI_SUCCESS);
  }
  const slimreduce_counters after = delta.now();
  EXPECT_EQ(after.intercepted - delta.before.intercepted, 1u);
  EXPECT_EQ(after.compressed - delta.before.compressed, expect_compressed(count) ? 1u : 0u);
  EXPECT_TRUE(identical_on_all_ranks(output.data(), count * sizeof(float), MPI_COMM_WORLD));

  if (!expect_compressed(count)) {
    std::vector<float> direct(count);
    PMPI_Allreduce(input.data(), direct.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    EXPECT_EQ(std::memcmp(direct.data(), output.data(), count * sizeof(float)), 0);
    return;
  }
  const ExactSum exact = exact_sum_of(seed, count, ranks);
  const std::vector<double>& sum = exact.sum;
  const std::vector<double>& magnitude = exact.magnitude;
  std::size_t wrong = 0, unrepresentable = 0;
  for (std::size_t i = 0; i < count; ++i) {
    wrong += std::fabs(output[i] - sum[i]) > error_bound(magnitude[i], ranks);
    unrepresentable += !representable(output[i]);
  }
  EXPECT_EQ(wrong, 0u) << "values outside the ring's rounding bound";
  EXPECT_EQ(unrepresentable, 0u) << "the output did not travel as " << kCompressor;
}

INSTANTIATE_TEST_SUITE_P(Sizes, DenseAllreduce,
                         ::testing::Combine(::testing::Values<std::size_t>(1, 2, 3, 5, 1000, 1024,
                                                                           1027, 4099, 100003,
                                                                           1 << 20),
                                            ::testing::Bool()));

// Calls that must reach the real MPI untouched: compare with PMPI directly.
template <typename T>
void expect_pass_through(std::vector<T> input, MPI_Datatype datatype, MPI_Op op, int count) {
  std::vector<T> through(input.size()), direct(input.size());
  Delta delta;
  ASSERT_EQ(MPI_Allreduce(input.data(), through.data(), count, datatype, op, MPI_COMM_WORLD),
            MPI_SUCCESS);
  const slimreduce_counters after = delta.now();
  PMPI_Allreduce(input.data(), direct.data(), count, datatype, op, MPI_COMM_WORLD);
  EXPECT_EQ(std::memcmp(through.data(), direct.data(), input.size() * sizeof(T)), 0);
  EXPECT_EQ(after.passed_through - delta.before.passed_through, 1u);
  EXPECT_EQ(after.compressed - delta.before.compressed, 0u);
}

constexpr std::size_t kLarge = 1 << 18;  // above any threshold the tests set

TEST(PassThrough, Int32Sum) {
  std::vector<std::int32_t> input(kLarge);
  std::iota(input.begin(), input.end(), world_rank() * 7);
  expect_pass_through(input, MPI_INT32_T, MPI_SUM, kLarge);
}

TEST(PassThrough, FloatMax) {
  expect_pass_through(inputs_of(world_rank(), 11, kLarge), MPI_FLOAT, MPI_MAX, kLarge);
}

TEST(PassThrough, DoubleSum) {
  std::vector<double> input(kLarge, 0.1 * (world_rank() + 1));
  expect_pass_through(input, MPI_DOUBLE, MPI_SUM, kLarge);
}

void user_sum(void* in, void* inout, int* count, MPI_Datatype*) {
  auto* a = static_cast<float*>(in);
  auto* b = static_cast<float*>(inout);
  for (int i = 0; i < *count; ++i) b[i] = a[i] + 2.0f * b[i];  // deliberately not a sum
}

TEST(PassThrough, UserDefinedOpOnFloats) {
  MPI_Op op;
  MPI_Op_create(user_sum, 0, &op);
  expect_pass_through(inputs_of(world_rank(), 12, kLarge), MPI_FLOAT, op, kLarge);
  MPI_Op_free(&op);
}

void user_sum_blocks(void* in, void* inout, int* count, MPI_Datatype*) {
  int four = *count * 4;
  user_sum(in, inout, &four, nullptr);
}

TEST(PassThrough, DerivedDatatypeWithUserOp) {
  MPI_Datatype four_floats;
  MPI_Type_contiguous(4, MPI_FLOAT, &four_floats);
  MPI_Type_commit(&four_floats);
  MPI_Op op;
  MPI_Op_create(user_sum_blocks, 0, &op);
  expect_pass_through(inputs_of(world_rank(), 13, kLarge), four_floats, op, kLarge / 4);
  MPI_Op_free(&op);
  MPI_Type_free(&four_floats);
}

TEST(SubCommunicator, SplitCommunicatorsReduceWithinThemselves) {
  MPI_Comm half;
  const int color = world_rank() % 2;
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, color, world_rank(), &half), MPI_SUCCESS);
  constexpr std::size_t kCount = 50001;
  std::vector<float> output = inputs_of(world_rank(), 14, kCount);
  int members = 0;
  MPI_Comm_size(half, &members);
  Delta delta;
  ASSERT_EQ(MPI_Allreduce(MPI_IN_PLACE, output.data(), kCount, MPI_FLOAT, MPI_SUM, half),
            MPI_SUCCESS);
  // A half of one rank sends nothing: passed through, its sum the input.
  EXPECT_EQ(delta.now().compressed - delta.before.compressed,
            expect_compressed(kCount) && members > 1 ? 1u : 0u);
  EXPECT_TRUE(identical_on_all_ranks(output.data(), kCount * sizeof(float), half));
  std::vector<double> sum(kCount, 0.0), magnitude(kCount, 0.0);
  for (int rank = color; rank < world_size(); rank += 2) {
    const std::vector<float> theirs = inputs_of(rank, 14, kCount);
    for (std::size_t i = 0; i < kCount; ++i) {
      sum[i] += theirs[i];
      magnitude[i] += std::fabs(theirs[i]);
    }
  }
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < kCount; ++i) {
    const double bound = kCast ? error_bound(magnitude[i], members) : 1e-5 * magnitude[i];
    wrong += std::fabs(output[i] - sum[i]) > bound;
  }
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(MPI_Comm_free(&half), MPI_SUCCESS);
}

TEST(Accounting, CountersFollowTheBytesSent) {
  const int ranks = world_size();
  constexpr std::size_t kCount = 1 << 17;
  std::vector<float> floats = inputs_of(world_rank(), 15, kCount);
  std::vector<std::int32_t> ints(kCount, 1);
  Delta delta;
  MPI_Allreduce(MPI_IN_PLACE, floats.data(), kCount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, ints.data(), kCount, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
  const slimreduce_counters after = delta.now();
  const double ring = 2.0 * (ranks - 1) / ranks;
  const double bytes = kCount * 4.0;
  EXPECT_EQ(after.input_bytes - delta.before.input_bytes, 2 * kCount * 4);
  // Within a byte: the counters are running sums in double.
  EXPECT_NEAR(after.wire_baseline - delta.before.wire_baseline, 2 * ring * bytes, 1.0);
  const double float_wire = expect_compressed(kCount) ? ring * bytes / 2 : ring * bytes;
  EXPECT_NEAR(after.wire_sent - delta.before.wire_sent, float_wire + ring * bytes, 1.0);
}

// The hot path remembers each thread's last communicator, with what may be
// compressed on it and its ring factor: moving between communicators of
// different sizes, freeing one and making another (whose handle MPI may
// reuse), every call must still be decided and counted as on a fresh lookup.
TEST(HotPath, DecisionsAndCountsFollowTheCommunicatorInUse) {
  const int ranks = world_size();
  MPI_Comm half;
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, world_rank() % 2, world_rank(), &half), MPI_SUCCESS);
  int half_ranks = 1;
  MPI_Comm_size(half, &half_ranks);
  auto ring = [](int n) { return n > 1 ? 2.0 * (n - 1) / n : 0.0; };
  constexpr std::size_t kSmall = 8, kLarge = 1 << 14;
  std::vector<float> small(kSmall), large(kLarge);
  Delta delta;
  double baseline = 0;
  std::uint64_t compressed = 0;
  for (int round = 0; round < 3; ++round) {
    for (MPI_Comm comm : {MPI_COMM_WORLD, half, half, MPI_COMM_WORLD}) {
      const int n = comm == half ? half_ranks : ranks;
      for (std::size_t count : {kSmall, kLarge}) {
        std::vector<float>& buffer = count == kSmall ? small : large;
        std::fill(buffer.begin(), buffer.end(), 1.0f);
        ASSERT_EQ(MPI_Allreduce(MPI_IN_PLACE, buffer.data(), count, MPI_FLOAT, MPI_SUM, comm),
                  MPI_SUCCESS);
        EXPECT_EQ(buffer[count / 2], float(n)) << "a sum of ones is exact in every format";
        baseline += ring(n) * count * sizeof(float);
        compressed += expect_compressed(count) && n > 1 ? 1 : 0;  // one rank: nothing to save
      }
    }
  }
  const slimreduce_counters after = delta.now();
  EXPECT_EQ(after.intercepted - delta.before.intercepted, 24u);
  EXPECT_EQ(after.compressed - delta.before.compressed, compressed);
  EXPECT_NEAR(after.wire_baseline - delta.before.wire_baseline, baseline, 1.0);

  // A new communicator, perhaps on the freed one's handle, of another size.
  ASSERT_EQ(MPI_Comm_free(&half), MPI_SUCCESS);
  MPI_Comm whole;
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, 0, ranks - world_rank(), &whole), MPI_SUCCESS);
  Delta again;
  std::fill(large.begin(), large.end(), 1.0f);
  ASSERT_EQ(MPI_Allreduce(MPI_IN_PLACE, large.data(), kLarge, MPI_FLOAT, MPI_SUM, whole),
            MPI_SUCCESS);
  EXPECT_EQ(large[0], float(ranks));
  const slimreduce_counters last = again.now();
  EXPECT_EQ(last.compressed - again.before.compressed, expect_compressed(kLarge) ? 1u : 0u);
  EXPECT_NEAR(last.wire_baseline - again.before.wire_baseline, ring(ranks) * kLarge * sizeof(float),
              1.0);
  EXPECT_EQ(MPI_Comm_free(&whole), MPI_SUCCESS);
}

// MPI_Iallreduce is compressed like MPI_Allreduce (queued, then reduced when
// the caller waits: tests/mpi/test_mpi_iallreduce.cc), on whichever
// communicator it uses; with `none` it passes through. Both are counted.
TEST(Iallreduce, IsCompressedOrPassedThroughAsAllreduceIsAndCounted) {
  MPI_Comm half;
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, world_rank() % 2, world_rank(), &half), MPI_SUCCESS);
  int half_ranks = 1;
  MPI_Comm_size(half, &half_ranks);
  auto ring = [](int n) { return n > 1 ? 2.0 * (n - 1) / n : 0.0; };
  constexpr std::size_t kCount = 1 << 15;
  std::vector<float> world_sum(kCount, 1.0f), half_sum(kCount, 1.0f);
  Delta delta;
  const double iallreduce_before = counter("calls.iallreduce");
  MPI_Request requests[2];
  ASSERT_EQ(MPI_Iallreduce(MPI_IN_PLACE, world_sum.data(), kCount, MPI_FLOAT, MPI_SUM,
                           MPI_COMM_WORLD, &requests[0]),
            MPI_SUCCESS);
  ASSERT_EQ(
      MPI_Iallreduce(MPI_IN_PLACE, half_sum.data(), kCount, MPI_FLOAT, MPI_SUM, half, &requests[1]),
      MPI_SUCCESS);
  ASSERT_EQ(MPI_Waitall(2, requests, MPI_STATUSES_IGNORE), MPI_SUCCESS);
  EXPECT_EQ(requests[0], MPI_REQUEST_NULL);
  EXPECT_EQ(requests[1], MPI_REQUEST_NULL);
  EXPECT_EQ(world_sum[kCount - 1], float(world_size()));  // small integers: exact in 16 bits
  EXPECT_EQ(half_sum[0], float(half_ranks));
  const slimreduce_counters after = delta.now();
  // A half of one rank passes through (nothing to save).
  const std::uint64_t compressed = kCompressor == "none" ? 0 : half_ranks > 1 ? 2 : 1;
  EXPECT_EQ(after.intercepted - delta.before.intercepted, 2u);
  EXPECT_EQ(after.compressed - delta.before.compressed, compressed);
  EXPECT_EQ(after.passed_through - delta.before.passed_through, 2u - compressed);
  EXPECT_EQ(counter("calls.iallreduce") - iallreduce_before, 2.0);
  EXPECT_EQ(after.input_bytes - delta.before.input_bytes, 2 * kCount * sizeof(float));
  const double wire = (ring(world_size()) + ring(half_ranks)) * kCount * sizeof(float);
  EXPECT_NEAR(after.wire_baseline - delta.before.wire_baseline, wire, 1.0);
  EXPECT_NEAR(after.wire_sent - delta.before.wire_sent, compressed ? wire / 2 : wire, 1.0);
  EXPECT_EQ(MPI_Comm_free(&half), MPI_SUCCESS);
}

// slimreduce_set_compressor between calls changes the very next decision,
// also for a communicator the hot path already remembers.
TEST(HotPath, SwitchingTheCompressorTakesEffectOnTheNextCall) {
  using SetFn = int (*)(const char*);
  auto set_compressor = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "slimreduce_set_compressor"));
  ASSERT_NE(set_compressor, nullptr);
  constexpr std::size_t kCount = 1 << 14;
  std::vector<float> buffer(kCount, 1.0f);
  auto compressed_by_one_call = [&] {
    Delta delta;
    std::fill(buffer.begin(), buffer.end(), 1.0f);
    MPI_Allreduce(MPI_IN_PLACE, buffer.data(), kCount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    EXPECT_EQ(buffer[0], float(world_size()));
    return delta.now().compressed - delta.before.compressed;
  };
  compressed_by_one_call();  // MPI_COMM_WORLD is now this thread's last communicator
  ASSERT_EQ(set_compressor("none"), 0);
  EXPECT_EQ(compressed_by_one_call(), 0u);
  ASSERT_EQ(set_compressor("fp16"), 0);
  EXPECT_EQ(compressed_by_one_call(), kCount * sizeof(float) >= kMinBytes ? 1u : 0u);
  ASSERT_EQ(set_compressor(kCompressor.c_str()), 0);
  EXPECT_EQ(compressed_by_one_call(), expect_compressed(kCount) ? 1u : 0u);
}

// Only rank 0 contributes, so every sum is exact and only rank 0's own
// rounding shows: with error feedback it is carried and the running total
// tracks the input's; without, the error grows with every call.
// A receive buffer reduced with a count that changes every call (as a
// framework's fusion buffer whose tensors change is) resets its residual each
// time: with error feedback on, one warning while the job runs, naming the
// remedy; with it off, none (there is nothing to lose).
TEST(ErrorFeedback, WarnsOnceWhileRunningWhenABufferKeepsChangingItsCount) {
  std::vector<float> input(50000, 0.5f), output(50000);
  std::fflush(stderr);
  std::FILE* capture = std::tmpfile();
  ASSERT_NE(capture, nullptr);
  const int saved = dup(2);
  dup2(fileno(capture), 2);
  for (int call = 0; call < 40; ++call) {
    MPI_Allreduce(input.data(), output.data(), call % 2 ? 40000 : 50000, MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
  }
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::string said;
  std::rewind(capture);
  for (int c; (c = std::fgetc(capture)) != EOF;) said.push_back(char(c));
  std::fclose(capture);
  std::size_t warnings = 0;
  for (std::size_t at = said.find("were reset"); at != std::string::npos;
       at = said.find("were reset", at + 1)) {
    ++warnings;
  }
  EXPECT_EQ(warnings, kErrorFeedback ? 1u : 0u) << said;
  if (kErrorFeedback) {
    EXPECT_NE(said.find("groups=1"), std::string::npos) << said;
  }
}

TEST(ErrorFeedback, CarriesTheRoundingErrorIntoTheNextCall) {
  if (!expect_compressed(1 << 16)) GTEST_FAIL() << "run this test with a cast compressor";
  constexpr std::size_t kCount = 1 << 16;
  constexpr int kCalls = 64;
  const float value = world_rank() == 0 ? 1.0f / 3.0f : 0.0f;
  std::vector<float> buffer(kCount);
  double total = 0;
  for (int call = 0; call < kCalls; ++call) {
    std::fill(buffer.begin(), buffer.end(), value);
    MPI_Allreduce(MPI_IN_PLACE, buffer.data(), kCount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    total += buffer[kCount / 2];
  }
  const double drift = std::fabs(total - kCalls * (1.0 / 3.0));
  const double ulp = kCompressor == "fp16" ? 0x1p-12 : 0x1p-9;  // spacing of 16-bit values near 1/3
  if (kErrorFeedback) {
    EXPECT_LE(drift, ulp) << "the residual was not carried";
  } else {
    EXPECT_GT(drift, 8 * ulp) << "error feedback is off, yet the error did not grow";
  }
}

}  // namespace
}  // namespace slimreduce::testing

int main(int argc, char** argv) { return slimreduce::testing::run_all_tests_under_mpi(argc, argv); }
