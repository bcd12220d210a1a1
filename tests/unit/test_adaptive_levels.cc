// SLIMREDUCE_ADAPTIVE=accordion: the fixed-order norm every rank reads from
// its reduced result, and the window rule against hand-made norm sequences.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "compressors/compressor.h"
#include "core/runtime/adaptive_levels.h"
#include "core/runtime/compressor_choice.h"
#include "core/runtime/runtime.h"
#include "kernels/norm.h"

namespace slimreduce {
namespace {

// The documented order, written again from the header's words.
double norm_as_documented(const std::vector<float>& v) {
  double total = 0.0;
  for (std::size_t begin = 0; begin < v.size(); begin += kernels::kNormBlock) {
    double lanes[kernels::kNormLanes] = {};
    const std::size_t end = std::min(v.size(), begin + kernels::kNormBlock);
    for (std::size_t i = begin; i < end; ++i) {
      const double x = v[i];
      lanes[(i - begin) % kernels::kNormLanes] += x * x;
    }
    double block = 0.0;
    for (double lane : lanes) block += lane;
    total += block;
  }
  return std::sqrt(total);
}

std::vector<float> random_values(std::size_t n, unsigned seed) {
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(generator);
  return v;
}

class NormSizes : public ::testing::TestWithParam<std::size_t> {};

TEST_P(NormSizes, GivesTheDocumentedOrdersBitsAtAnyAlignment) {
  const std::size_t n = GetParam();
  const std::vector<float> v = random_values(n, static_cast<unsigned>(n) + 1);
  const double expected = norm_as_documented(v);
  EXPECT_EQ(kernels::fixed_order_norm(v.data(), n), expected);
  // The same values one float further on: an address is never part of the order.
  std::vector<float> shifted(n + 1);
  std::copy(v.begin(), v.end(), shifted.begin() + 1);
  EXPECT_EQ(kernels::fixed_order_norm(shifted.data() + 1, n), expected);
  long double reference = 0;
  for (float x : v) reference += static_cast<long double>(x) * x;
  EXPECT_NEAR(expected, std::sqrt(static_cast<double>(reference)), 1e-12 * (1 + expected));
}

// 16-bit floats (NCCL's fp16 and bf16 calls): the documented order over the
// values widened to fp32, from a widening written here (not element_rules').
float widened(std::uint16_t bits, bool bf16) {
  if (bf16) {
    const std::uint32_t wide = std::uint32_t{bits} << 16;
    float f;
    std::memcpy(&f, &wide, 4);
    return f;
  }
  const int exponent = (bits >> 10) & 31, mantissa = bits & 1023;
  const float sign = bits >> 15 ? -1.0f : 1.0f;
  if (exponent == 31)
    return mantissa ? std::numeric_limits<float>::quiet_NaN()
                    : sign * std::numeric_limits<float>::infinity();
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -24);
  return sign * std::ldexp(static_cast<float>(1024 + mantissa), exponent - 25);
}

TEST_P(NormSizes, SixteenBitValuesGiveTheOrdersBitsOfTheirWidenedValues) {
  const std::size_t n = GetParam();
  std::mt19937 generator(static_cast<unsigned>(n) + 7);
  for (const bool bf16 : {false, true}) {
    std::vector<std::uint16_t> bits(n);
    std::vector<float> wide(n);
    for (std::size_t i = 0; i < n; ++i) {
      do {
        bits[i] = static_cast<std::uint16_t>(generator());
        wide[i] = widened(bits[i], bf16);
      } while (!std::isfinite(wide[i]) || std::fabs(wide[i]) > 1e4f);  // finite, squares summable
    }
    const kernels::HalfFormat format = bf16 ? kernels::HalfFormat::bf16 : kernels::HalfFormat::fp16;
    EXPECT_EQ(kernels::fixed_order_norm(format, bits.data(), n), norm_as_documented(wide))
        << (bf16 ? "bf16" : "fp16");
  }
}

INSTANTIATE_TEST_SUITE_P(Counts, NormSizes,
                         ::testing::Values(0, 1, 7, 8, 9, 4095, 4096, 4097, 100003, 524288));

TEST(Norm, IsNotFiniteWhereAValueIsNot) {
  std::vector<float> v(100, 1.0f);
  EXPECT_DOUBLE_EQ(kernels::fixed_order_norm(v.data(), v.size()), 10.0);
  v[57] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(kernels::fixed_order_norm(v.data(), v.size())));
  v[57] = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isinf(kernels::fixed_order_norm(v.data(), v.size())));
}

constexpr int kGentle = LevelSchedule::kGentle;
constexpr int kHard = LevelSchedule::kHard;

// Feeds one window of `norm` at the shape's current level; returns the level after it.
int window_of(LevelSchedule& schedule, const CallShape& shape, double norm) {
  const int level = schedule.level(shape);
  for (std::uint64_t i = 0; i < schedule.rule().window; ++i) schedule.record(shape, level, norm);
  return schedule.level(shape);
}

TEST(LevelSchedule, FirstTwoWindowsGoGentleThenAQuietOneGoesHard) {
  LevelSchedule schedule({3, 0.5});
  const CallShape shape{1, 1000, 7};
  EXPECT_EQ(schedule.level(shape), kGentle) << "the first window is critical";
  EXPECT_EQ(window_of(schedule, shape, 10.0), kGentle) << "nothing to compare with yet";
  EXPECT_EQ(window_of(schedule, shape, 12.0), kHard) << "20% < 50%: quiet";
  EXPECT_EQ(window_of(schedule, shape, 1.0), kHard)
      << "the first hard window sets the hard reference: a level's own norm never triggers";
  EXPECT_EQ(window_of(schedule, shape, 1.2), kHard);
  EXPECT_EQ(window_of(schedule, shape, 1.9), kGentle) << "58% since the last hard window";
  EXPECT_EQ(window_of(schedule, shape, 11.0), kHard) << "10% since the last gentle window (12)";
}

TEST(LevelSchedule, DecidesOnlyAtAWindowsEnd) {
  LevelSchedule schedule({4, 0.5});
  const CallShape shape{1, 1000, 7};
  window_of(schedule, shape, 5.0);
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(schedule.record(shape, kGentle, 5.0));
    EXPECT_EQ(schedule.level(shape), kGentle) << "mid-window";
  }
  EXPECT_TRUE(schedule.record(shape, kGentle, 5.0)) << "the window's last call switches";
  EXPECT_EQ(schedule.level(shape), kHard);
}

TEST(LevelSchedule, ChangeExactlyAtTheThresholdIsQuiet) {
  LevelSchedule schedule({1, 0.5});
  const CallShape shape{1, 1000, 7};
  window_of(schedule, shape, 8.0);
  EXPECT_EQ(window_of(schedule, shape, 12.0), kHard) << "|12 - 8| / 8 = 0.5, not above";
  LevelSchedule strict({1, 0.0});
  window_of(strict, shape, 8.0);
  EXPECT_EQ(window_of(strict, shape, 8.0), kHard) << "no change at all is quiet at threshold 0";
  EXPECT_EQ(window_of(strict, shape, 8.0), kHard);
  EXPECT_EQ(window_of(strict, shape, 8.000001), kGentle);
}

TEST(LevelSchedule, AWindowsMeanIsJudgedNotItsCalls) {
  LevelSchedule schedule({4, 0.5});
  const CallShape shape{1, 1000, 7};
  window_of(schedule, shape, 10.0);
  // One call far off, three that pull the mean back: 10 +- 30%.
  for (double norm : {22.0, 6.0, 6.0, 6.0}) schedule.record(shape, kGentle, norm);
  EXPECT_EQ(schedule.level(shape), kHard);
}

TEST(LevelSchedule, ANormThatIsNotFiniteMakesTheWindowCritical) {
  LevelSchedule schedule({2, 0.5});
  const CallShape shape{1, 1000, 7};
  window_of(schedule, shape, 3.0);
  window_of(schedule, shape, 3.0);
  ASSERT_EQ(schedule.level(shape), kHard);
  schedule.record(shape, kHard, 3.0);
  schedule.record(shape, kHard, std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(schedule.level(shape), kGentle);
  EXPECT_EQ(window_of(schedule, shape, 3.0), kHard) << "the NaN became no reference";
}

TEST(LevelSchedule, AWindowSentAtBothLevelsIsNotJudged) {
  LevelSchedule schedule({2, 0.5});
  const CallShape shape{1, 1000, 7};
  window_of(schedule, shape, 3.0);
  window_of(schedule, shape, 3.0);
  ASSERT_EQ(schedule.level(shape), kHard);
  // A call queued (decided) before the switch, reduced after it.
  schedule.record(shape, kGentle, 100.0);
  EXPECT_FALSE(schedule.record(shape, kHard, 100.0));
  EXPECT_EQ(schedule.level(shape), kHard);
  EXPECT_EQ(window_of(schedule, shape, 3.0), kHard) << "the mixed window set no reference";
  const auto summaries = schedule.summaries();
  ASSERT_EQ(summaries.size(), 1u);
  EXPECT_EQ(summaries[0].second.windows, 3u) << "the mixed one is not counted as judged";
}

TEST(LevelSchedule, ShapesAndCommunicatorsKeepTheirOwnWindows) {
  LevelSchedule schedule({1, 0.5});
  const CallShape a{1, 1000, 7}, b{1, 2000, 7}, c{2, 1000, 7};
  window_of(schedule, a, 1.0);
  window_of(schedule, a, 1.0);
  EXPECT_EQ(schedule.level(a), kHard);
  EXPECT_EQ(schedule.level(b), kGentle);
  EXPECT_EQ(schedule.level(c), kGentle);
  schedule.forget_communicator(1);
  EXPECT_EQ(schedule.level(a), kGentle) << "a freed communicator starts again";
  const auto summaries = schedule.summaries();
  ASSERT_EQ(summaries.size(), 1u) << "a and its class: 1000 x 4 bytes, class 11";
  EXPECT_EQ(summaries[0].first, (std::pair<std::uint64_t, std::uint32_t>{1, 11}));
  EXPECT_EQ(summaries[0].second.calls[kGentle], 2u);
  EXPECT_EQ(summaries[0].second.switches, 1u);
  EXPECT_EQ(summaries[0].second.critical, 1u);
}

TEST(LevelSchedule, RelativeChange) {
  EXPECT_DOUBLE_EQ(relative_change(15, 10), 0.5);
  EXPECT_DOUBLE_EQ(relative_change(5, 10), 0.5);
  EXPECT_DOUBLE_EQ(relative_change(0, 0), 0.0);
  EXPECT_TRUE(std::isinf(relative_change(1, 0)));
}

// The runtime's decision follows the shape's level: the hard level's
// compressor once a quiet window closed, on the same route.
TEST(LevelSchedule, TheDecisionCarriesTheShapesLevelAndItsCompressor) {
  Settings settings;
  settings.compressor = "topk";
  settings.adaptive = Adaptive::accordion;
  settings.topk_ratio = 0.01;
  settings.topk_ratio_hard = 0.001;
  settings.adaptive_window = 1;
  Runtime runtime(settings, nullptr, 0);
  const CallShape shape{3, 100000, 1};
  Runtime::Locked shared = runtime.shared();
  ASSERT_TRUE(shared->policy.adapts());
  CallDecision first = shared->decide(shape, ReductionPath::topk);
  EXPECT_TRUE(first.levels_adapt);
  EXPECT_EQ(first.level, kGentle);
  EXPECT_EQ(first.compressor, shared->policy.levels[kGentle]);
  EXPECT_EQ(first.compressor->compressed_bytes(100000), 1000u * 8u) << "k = 1000: index + value";
  EXPECT_FALSE(shared->reduced(shape, first, 2.0));
  EXPECT_TRUE(shared->reduced(shape, shared->decide(shape, ReductionPath::topk), 2.0));
  CallDecision hard = shared->decide(shape, ReductionPath::topk);
  EXPECT_EQ(hard.level, kHard);
  EXPECT_EQ(hard.compressor, shared->policy.levels[kHard]);
  EXPECT_EQ(hard.compressor->compressed_bytes(100000), 100u * 8u);
  EXPECT_EQ(hard.route, ReductionPath::topk);
  EXPECT_EQ(hard.error_feedback, first.error_feedback) << "one residual across levels";
}

// slimreduce_set_topk_ratio: the user's one ratio from then on, no levels.
TEST(LevelSchedule, ARatioSetThroughTheApiIsTheOneLevel) {
  Settings settings;
  settings.compressor = "topk";
  settings.adaptive = Adaptive::accordion;
  settings.topk_ratio = 0.01;
  settings.topk_ratio_hard = 0.001;
  Runtime runtime(settings, nullptr, 0);
  ASSERT_TRUE(runtime.policy().adapts());
  ASSERT_TRUE(runtime.set_topk_ratio(0.05));
  EXPECT_FALSE(runtime.policy().adapts());
  Runtime::Locked shared = runtime.shared();
  EXPECT_FALSE(shared->levels.has_value());
  const CallDecision call = shared->decide({1, 100000, 1}, ReductionPath::topk);
  EXPECT_FALSE(call.levels_adapt);
  EXPECT_EQ(call.compressor->compressed_bytes(100000), 5000u * 8u);
}

}  // namespace
}  // namespace slimreduce
