// The timeline (core/runtime/timeline.h): off, it writes nothing; on, every span
// reaches <prefix>.<rank>.json, also past its held buffer, as one JSON array
// of complete events; after finish() nothing more is written.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <sstream>
#include <string>

#include "core/runtime/timeline.h"

namespace slimreduce {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::size_t count_of(const std::string& text, const std::string& part) {
  std::size_t found = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1))
    ++found;
  return found;
}

TEST(Timeline, OffWritesNothing) {
  Timeline timeline("");
  EXPECT_FALSE(timeline.on());
  timeline.span("COMPRESS", 1.0, 2.0, "\"count\": 1");
  timeline.finish();
}

TEST(Timeline, EverySpanReachesTheRanksFileAsOneArray) {
  char folder[] = "/tmp/slimreduce-timeline-XXXXXX";
  ASSERT_NE(mkdtemp(folder), nullptr);
  const std::string prefix = std::string(folder) + "/trace";
  constexpr int kSpans = 10000;  // more than the timeline holds before writing
  {
    Timeline timeline(prefix);
    ASSERT_TRUE(timeline.on());
    timeline.know_rank(3);
    for (int i = 0; i < kSpans; ++i) timeline.span("COMMUNICATE", i, i + 0.5, "\"count\": 7");
    timeline.finish();
    timeline.span("COMPRESS", 1.0, 2.0, "");  // after finish: dropped
  }
  const std::string text = read_file(prefix + ".3.json");
  ASSERT_GE(text.size(), 4u);
  EXPECT_EQ(text.substr(0, 2), "[\n");
  EXPECT_EQ(text.substr(text.size() - 3), "\n]\n");
  EXPECT_EQ(count_of(text, "\"ph\": \"X\""), std::size_t{kSpans});
  EXPECT_EQ(count_of(text, "\"name\": \"COMMUNICATE\""), std::size_t{kSpans});
  EXPECT_EQ(count_of(text, "\"pid\": 3"), std::size_t{kSpans});
  EXPECT_EQ(count_of(text, "COMPRESS\""), 0u);
  EXPECT_EQ(count_of(text, "},\n{"), std::size_t{kSpans - 1}) << "one comma between events";
}

}  // namespace
}  // namespace slimreduce
