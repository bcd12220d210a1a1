// The check every multi-rank test program runs before its tests
// (tests/strict_filter.h): a --gtest_filter pattern that names no test fails
// the run instead of passing it with nothing run.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/strict_filter.h"

namespace slimreduce::testing {
namespace {

struct PatternCase {
  const char* pattern;
  const char* name;
  bool matches;
};

class PatternMatch : public ::testing::TestWithParam<PatternCase> {};

TEST_P(PatternMatch, FollowsGoogleTestsGlobRule) {
  const PatternCase& c = GetParam();
  EXPECT_EQ(filter_pattern_matches(c.pattern, c.name), c.matches) << c.pattern << " ~ " << c.name;
}

INSTANTIATE_TEST_SUITE_P(
    Patterns, PatternMatch,
    ::testing::Values(PatternCase{"Suite.Test", "Suite.Test", true},
                      PatternCase{"Suite.Tes", "Suite.Test", false},
                      PatternCase{"Suite.*", "Suite.Test", true},
                      PatternCase{"*", "Kinds/Suite.Test/7", true},
                      PatternCase{"Suite*", "Kinds/Suite.Test/0", false},  // the prefix
                      PatternCase{"Kinds/Suite.*", "Kinds/Suite.Test/0", true},
                      PatternCase{"*/Suite.*", "Kinds/Suite.Test/0", true},
                      PatternCase{"Suite.T?st", "Suite.Test", true},
                      PatternCase{"Suite.T?st", "Suite.Tst", false},
                      PatternCase{"A*B*C", "AxxBxxC", true}, PatternCase{"A*B*C", "AxxCxxB", false},
                      PatternCase{"", "Suite.Test", false}));

const std::vector<std::string> kNames = {"Iallreduce.FusedResults", "Iallreduce.Counts",
                                         "Kinds/EveryCompletion.Completes/0",
                                         "Kinds/EveryCompletion.Completes/1", "Priority.First"};

TEST(DeadPatterns, NoneWhenEveryPatternNamesATest) {
  EXPECT_TRUE(dead_filter_patterns("*", kNames).empty());
  EXPECT_TRUE(dead_filter_patterns("", kNames).empty());
  EXPECT_TRUE(dead_filter_patterns("Iallreduce.*:Kinds/EveryCompletion.*", kNames).empty());
  EXPECT_TRUE(dead_filter_patterns("-Priority.*", kNames).empty());
}

TEST(DeadPatterns, APositivePatternThatSelectsNothing) {
  EXPECT_EQ(dead_filter_patterns("Iallreduce.Fused*:EveryCompletion*", kNames),
            std::vector<std::string>{"EveryCompletion*"});
}

TEST(DeadPatterns, ANegativePatternThatExcludesNothing) {
  EXPECT_EQ(dead_filter_patterns("Iallreduce.*-Priority.*:Fatal*", kNames),
            std::vector<std::string>{"Fatal*"});
  EXPECT_EQ(dead_filter_patterns("-Nothing.*", kNames), std::vector<std::string>{"Nothing.*"});
}

TEST(DeadPatterns, EveryDeadPatternIsNamed) {
  EXPECT_EQ(dead_filter_patterns("A.*:Iallreduce.Counts:B.*-C.*", kNames),
            (std::vector<std::string>{"A.*", "B.*", "C.*"}));
}

// This program's own tests, through GoogleTest's registry.
TEST(DeadPatterns, ReadsThisProgramsRegisteredTests) {
  const std::vector<std::string> names = registered_test_names();
  EXPECT_TRUE(dead_filter_patterns("DeadPatterns.*:Patterns/PatternMatch.*", names).empty());
  EXPECT_EQ(dead_filter_patterns("PatternMatch.*", names),
            std::vector<std::string>{"PatternMatch.*"});
}

}  // namespace
}  // namespace slimreduce::testing
