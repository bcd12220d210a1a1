// The ranks' agreement on what shapes the wire (core/runtime/wire_agreement.h):
// which settings count, the record's layout, the fingerprint's verdict, and
// the one line a disagreement ends the job with.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/runtime/wire_agreement.h"

namespace slimreduce::wire_agreement {
namespace {

std::vector<char> records_of(const std::vector<Settings>& per_rank,
                             const std::vector<std::string>& versions) {
  std::vector<char> all;
  for (std::size_t r = 0; r < per_rank.size(); ++r) {
    const std::vector<char> one = record(fields(per_rank[r], versions[r]));
    all.insert(all.end(), one.begin(), one.end());
  }
  return all;
}

// MAX over ranks of each rank's two words, as MPI_MAX gives it.
Fingerprint reduce_max(const std::vector<Settings>& per_rank) {
  Fingerprint out{{0, 0}};
  for (const Settings& settings : per_rank) {
    const Fingerprint f = fingerprint(record(fields(settings, "1.0")));
    out.words[0] = std::max(out.words[0], f.words[0]);
    out.words[1] = std::max(out.words[1], f.words[1]);
  }
  return out;
}

TEST(WireAgreement, WireShapingSettingsAndTheVersionAreInTheRecord) {
  Settings settings;
  settings.compressor = "topk";
  const std::vector<std::string> f = fields(settings, "9.9.9");
  ASSERT_GE(f.size(), 10u);
  EXPECT_EQ(f[0], "SLIMREDUCE_VERSION=9.9.9");
  EXPECT_EQ(f[1], "SLIMREDUCE_COMPRESSOR=topk");
  const std::string all = [&] {
    std::string joined;
    for (const auto& field : f) joined += field + ";";
    return joined;
  }();
  for (const char* name :
       {"SLIMREDUCE_TOPK_RATIO=", "SLIMREDUCE_MIN_BYTES=", "SLIMREDUCE_WARMUP_STEPS=",
        "SLIMREDUCE_PARTITION_BYTES=", "SLIMREDUCE_FUSION_THRESHOLD=", "SLIMREDUCE_HIERARCHICAL="})
    EXPECT_NE(all.find(name), std::string::npos) << name;
  for (const char* name : {"SLIMREDUCE_REPORT=", "SLIMREDUCE_LOG_LEVEL=", "SLIMREDUCE_TIMELINE=",
                           "SLIMREDUCE_PIPELINE=", "SLIMREDUCE_POWERSGD_BLAS="})
    EXPECT_EQ(all.find(name), std::string::npos) << name << " does not shape the wire";
  EXPECT_LE(f.size(), kFields);
}

TEST(WireAgreement, RecordIsFixedSizeFieldsCutAndPadded) {
  const std::vector<char> r = record({"A=1", std::string(100, 'x')});
  ASSERT_EQ(r.size(), kRecordBytes);
  EXPECT_EQ(std::string(r.data()), "A=1");
  EXPECT_EQ(std::string(r.data() + kFieldBytes), std::string(kFieldBytes - 1, 'x'));
  EXPECT_EQ(r[2 * kFieldBytes], '\0');
}

TEST(WireAgreement, SameSettingsAgree) {
  Settings a;
  a.compressor = "fp16";
  EXPECT_TRUE(all_agree(reduce_max({a, a, a})));
  EXPECT_EQ(describe_disagreement(records_of({a, a, a}, {"1", "1", "1"}), 3), "");
}

TEST(WireAgreement, ALoggingSettingDoesNotCount) {
  Settings a, b;
  b.log_level = LogLevel::debug;
  b.report = "stderr";
  EXPECT_TRUE(all_agree(reduce_max({a, b})));
}

TEST(WireAgreement, ARatioThatDiffersNamesTheSettingValuesAndRanks) {
  Settings a, b;
  a.compressor = b.compressor = "topk";
  b.topk_ratio = 0.05;
  EXPECT_FALSE(all_agree(reduce_max({a, b, a})));
  EXPECT_EQ(describe_disagreement(records_of({a, b, a}, {"1", "1", "1"}), 3),
            "ranks disagree on SLIMREDUCE_TOPK_RATIO: 0.010000 on ranks 0, 2; 0.050000 on rank 1 "
            "(every rank must run the same SlimReduce version with the same SLIMREDUCE_* "
            "settings that shape the wire)");
}

// int8's codes shape its blocks (a scale, or a step and an offset, per
// bucket): ranks that differ are refused, and the line names the setting.
TEST(WireAgreement, QuantCodesThatDifferAreNamed) {
  Settings a, b;
  a.compressor = b.compressor = "int8";
  b.quant_codes = compressors::QuantCodes::minmax;
  EXPECT_FALSE(all_agree(reduce_max({a, b})));
  EXPECT_TRUE(all_agree(reduce_max({b, b})));
  const std::string line = describe_disagreement(records_of({a, b}, {"1", "1"}), 2);
  EXPECT_EQ(line.rfind("ranks disagree on SLIMREDUCE_QUANT_CODES: width on rank 0; minmax on "
                       "rank 1",
                       0),
            0u)
      << line;
}

TEST(WireAgreement, TheFirstFieldThatDiffersIsNamed) {
  Settings a, b;
  a.compressor = "fp16";
  b.compressor = "int8";
  b.min_bytes = 4;
  EXPECT_FALSE(all_agree(reduce_max({a, b})));
  const std::string line = describe_disagreement(records_of({a, b}, {"1", "1"}), 2);
  EXPECT_EQ(
      line.rfind("ranks disagree on SLIMREDUCE_COMPRESSOR: fp16 on rank 0; int8 on rank 1", 0), 0u)
      << line;
}

TEST(WireAgreement, AnotherVersionIsNamedFirst) {
  Settings a;
  const std::string line = describe_disagreement(records_of({a, a}, {"0.9", "1.0"}), 2);
  EXPECT_EQ(line.rfind("ranks disagree on SLIMREDUCE_VERSION: 0.9 on rank 0; 1.0 on rank 1", 0), 0u)
      << line;
}

TEST(WireAgreement, FieldsThatDoNotPairUpAreShownWhole) {
  std::vector<char> records = record({"SLIMREDUCE_VERSION=1", "SLIMREDUCE_X=1"});
  const std::vector<char> other = record({"SLIMREDUCE_VERSION=1", "SLIMREDUCE_Y=2"});
  records.insert(records.end(), other.begin(), other.end());
  const std::string line = describe_disagreement(records, 2);
  EXPECT_EQ(line.rfind("ranks disagree on what shapes the wire: SLIMREDUCE_X=1 on rank 0; "
                       "SLIMREDUCE_Y=2 on rank 1",
                       0),
            0u)
      << line;
}

}  // namespace
}  // namespace slimreduce::wire_agreement
