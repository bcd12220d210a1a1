// GoogleTest runs nothing and exits 0 when a pattern of --gtest_filter names
// no test (a renamed suite, a parameterized suite's prefix forgotten): a test
// that selects nothing passes silently. Debian's GoogleTest 1.12 has no flag
// that refuses that, so every test program's main calls this first.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace slimreduce::testing {

// GoogleTest's own pattern rule: '*' any run of characters, '?' any one.
inline bool filter_pattern_matches(const char* pattern, const char* name) {
  if (*pattern == '\0') return *name == '\0';
  if (*pattern == '*')
    return filter_pattern_matches(pattern + 1, name) ||
           (*name != '\0' && filter_pattern_matches(pattern, name + 1));
  if (*name == '\0') return false;
  return (*pattern == '?' || *pattern == *name) && filter_pattern_matches(pattern + 1, name + 1);
}

inline std::vector<std::string> split_patterns(const std::string& list) {
  std::vector<std::string> patterns;
  std::size_t begin = 0;
  while (begin <= list.size()) {
    const std::size_t end = std::min(list.find(':', begin), list.size());
    if (end > begin) patterns.push_back(list.substr(begin, end - begin));
    begin = end + 1;
  }
  return patterns;
}

// The full names ("Suite.Test", "Prefix/Suite.Test/3") of every registered test.
inline std::vector<std::string> registered_test_names() {
  std::vector<std::string> names;
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  for (int s = 0; s < unit.total_test_suite_count(); ++s) {
    const ::testing::TestSuite& suite = *unit.GetTestSuite(s);
    for (int t = 0; t < suite.total_test_count(); ++t)
      names.push_back(std::string(suite.name()) + "." + suite.GetTestInfo(t)->name());
  }
  return names;
}

// The patterns of `filter` that name no registered test: a positive pattern
// selects none, or a negative one excludes none (a stale exclusion hides a
// test that was renamed into it later, or says a test exists that does not).
inline std::vector<std::string> dead_filter_patterns(const std::string& filter,
                                                     const std::vector<std::string>& names) {
  const std::size_t dash = filter.find('-');
  std::vector<std::string> patterns = split_patterns(filter.substr(0, dash));
  if (dash != std::string::npos) {
    for (const std::string& negative : split_patterns(filter.substr(dash + 1)))
      patterns.push_back(negative);
  }
  std::vector<std::string> dead;
  for (const std::string& pattern : patterns) {
    bool any = false;
    for (const std::string& name : names)
      any = any || filter_pattern_matches(pattern.c_str(), name.c_str());
    if (!any) dead.push_back(pattern);
  }
  return dead;
}

// Whether every pattern of this run's --gtest_filter names a test; if not,
// says which on stderr (when `loud`).
inline bool every_filter_pattern_names_a_test(bool loud) {
#ifdef GTEST_FLAG_GET
  const std::string filter = GTEST_FLAG_GET(filter);
#else
  const std::string filter = ::testing::GTEST_FLAG(filter);
#endif
  const std::vector<std::string> dead = dead_filter_patterns(filter, registered_test_names());
  if (loud) {
    for (const std::string& pattern : dead)
      std::fprintf(stderr, "FAIL: --gtest_filter pattern '%s' names no test of this program\n",
                   pattern.c_str());
  }
  return dead.empty();
}

}  // namespace slimreduce::testing
