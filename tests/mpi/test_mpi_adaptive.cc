// SLIMREDUCE_ADAPTIVE=accordion under LD_PRELOAD: every rank sends each call
// at the same level, also when the ranks' own gradients differ a thousandfold
// (the level is read from the reduced result, which every rank holds alike);
// the first windows go gentle, a quiet phase goes hard, a jump in the
// gradients' size brings the gentle level back; queued calls decide per
// shape; the residual is kept across switches. The level of a call is read
// from the report's adaptive.* counters around it.
//
// Environment: the library's (SLIMREDUCE_COMPRESSOR, SLIMREDUCE_ADAPTIVE,
// the two levels, SLIMREDUCE_ADAPTIVE_WINDOW).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tests/mpi/mpi_helpers.h"
#include "tests/mpi/mpi_test_main.h"

namespace slimreduce::testing {
namespace {

constexpr std::size_t kCount = 1 << 16;  // 256 KiB: eligible (SLIMREDUCE_MIN_BYTES 64 KiB)
const std::uint64_t kWindow = std::stoull(env_or("SLIMREDUCE_ADAPTIVE_WINDOW", "10"));
constexpr int kGentle = 0, kHard = 1;
// With error feedback the first windows' reduced norms still grow as the
// residual fills, so the quiet phase may start a window or two later.
const bool kFeedback = env_or("SLIMREDUCE_ERROR_FEEDBACK", "1") != "0";

// Rank r's gradient at a call: seeded values, `scale` times, and 1000^r
// times more on rank r than on rank 0 (the sum is rank 2's, mostly).
std::vector<float> gradient(std::uint64_t call, double scale, std::size_t count = kCount) {
  std::vector<float> values = inputs_of(world_rank(), 1000 + call, count);
  const double factor = scale * std::pow(1000.0, world_rank());
  for (float& v : values) v = static_cast<float>(v * factor);
  return values;
}

bool same_on_every_rank(int value) {
  int least = 0, most = 0;
  MPI_Allreduce(&value, &least, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&value, &most, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return least == most;
}

// One blocking call; the level it was sent at.
int one_call(const std::vector<float>& in, std::vector<float>& out) {
  const double hard = counter("adaptive.calls_hard"), gentle = counter("adaptive.calls_gentle");
  out.assign(in.size(), 0.0f);
  EXPECT_EQ(MPI_Allreduce(in.data(), out.data(), static_cast<int>(in.size()), MPI_FLOAT, MPI_SUM,
                          MPI_COMM_WORLD),
            MPI_SUCCESS);
  const double hard_calls = counter("adaptive.calls_hard") - hard;
  EXPECT_EQ(hard_calls + counter("adaptive.calls_gentle") - gentle, 1.0)
      << "every compressed call is counted at one level";
  return hard_calls > 0 ? kHard : kGentle;
}

// The levels of `calls` calls with gradients of `scale`, each checked alike on every rank.
std::vector<int> phase(std::uint64_t& call, int calls, double scale) {
  std::vector<int> levels;
  std::vector<float> out;
  for (int i = 0; i < calls; ++i, ++call) {
    const int level = one_call(gradient(call, scale), out);
    EXPECT_TRUE(same_on_every_rank(level)) << "call " << call << " was sent at other levels";
    EXPECT_TRUE(identical_on_all_ranks(out.data(), out.size() * sizeof(float), MPI_COMM_WORLD))
        << "call " << call;
    levels.push_back(level);
  }
  return levels;
}

std::string text(const std::vector<int>& levels) {
  std::string s;
  for (int level : levels) s += level == kHard ? 'H' : 'g';
  return s;
}

TEST(Adaptive, EveryRankSendsEachCallAtTheSameLevel) {
  const double resets_before = counter("calls.ef_resets");
  std::uint64_t call = 0;
  const int window = static_cast<int>(kWindow);
  const std::vector<int> quiet = phase(call, 8 * window, 1.0);
  SCOPED_TRACE("quiet phase: " + text(quiet));
  // The first two windows go gentle: the first has nothing to compare with.
  EXPECT_TRUE(std::all_of(quiet.begin(), quiet.begin() + 2 * window,
                          [](int level) { return level == kGentle; }));
  if (!kFeedback) {
    EXPECT_EQ(quiet[2 * window], kHard) << "a quiet second window sends the third hard";
  }
  EXPECT_GE(std::count(quiet.begin(), quiet.end(), kHard), 4 * window) << "a quiet phase goes hard";
  EXPECT_EQ(quiet.back(), kHard) << "and stays hard";
  // The gradients grow 50 times: the window that sees it is critical.
  const std::vector<int> jump = phase(call, 6 * window, 50.0);
  SCOPED_TRACE("after the jump: " + text(jump));
  EXPECT_TRUE(std::count(jump.begin(), jump.begin() + 2 * window, kGentle) >= window)
      << "the gentle level comes back within two windows";
  EXPECT_EQ(jump.back(), kHard) << "and goes once the new size is quiet";
  EXPECT_EQ(counter("calls.ef_resets"), resets_before) << "a switch keeps the key's residual";
  EXPECT_GE(counter("adaptive.switches"), 3.0);
}

// MPI_Iallreduce of two shapes: each decides by its own windows, at its flush.
TEST(Adaptive, QueuedCallsDecidePerShape) {
  std::vector<float> big, small;
  std::vector<float> big_out(kCount), small_out(kCount / 2);
  const double hard_before = counter("adaptive.calls_hard");
  for (std::uint64_t step = 0; step < 8 * kWindow; ++step) {
    big = gradient(5000 + step, 1.0);
    small = gradient(9000 + step, 1.0, kCount / 2);
    MPI_Request requests[2];
    ASSERT_EQ(MPI_Iallreduce(big.data(), big_out.data(), kCount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                             &requests[0]),
              MPI_SUCCESS);
    ASSERT_EQ(MPI_Iallreduce(small.data(), small_out.data(), kCount / 2, MPI_FLOAT, MPI_SUM,
                             MPI_COMM_WORLD, &requests[1]),
              MPI_SUCCESS);
    ASSERT_EQ(MPI_Waitall(2, requests, MPI_STATUSES_IGNORE), MPI_SUCCESS);
    EXPECT_TRUE(identical_on_all_ranks(big_out.data(), kCount * sizeof(float), MPI_COMM_WORLD));
    EXPECT_TRUE(
        identical_on_all_ranks(small_out.data(), kCount / 2 * sizeof(float), MPI_COMM_WORLD));
  }
  const int hard_calls = static_cast<int>(counter("adaptive.calls_hard") - hard_before);
  EXPECT_TRUE(same_on_every_rank(hard_calls));
  // Each shape: two gentle windows, then hard for the rest of its 8 (with
  // error feedback, at least the last 4).
  if (kFeedback) {
    EXPECT_GE(hard_calls, static_cast<int>(2 * 4 * kWindow));
    EXPECT_LE(hard_calls, static_cast<int>(2 * 6 * kWindow));
  } else {
    EXPECT_EQ(hard_calls, static_cast<int>(2 * 6 * kWindow));
  }
}

}  // namespace
}  // namespace slimreduce::testing

int main(int argc, char** argv) { return slimreduce::testing::run_all_tests_under_mpi(argc, argv); }
