// The settings parser: every accepted form, and malformed values with the
// exact error line a user sees.
#include <gtest/gtest.h>

#include <algorithm>

#include "compressors/registry.h"
#include "core/runtime/settings.h"

namespace slimreduce {
namespace {

Settings parse(std::initializer_list<std::pair<std::string, std::string>> entries) {
  return parse_settings(Environment(entries));
}

TEST(Settings, DefaultsWhenNothingIsSet) {
  const Settings s = parse({});
  EXPECT_EQ(s.compressor, "none");
  EXPECT_DOUBLE_EQ(s.topk_ratio, 0.01);
  EXPECT_FALSE(s.error_feedback.has_value());
  EXPECT_EQ(s.min_bytes, 65536u);
  EXPECT_EQ(s.warmup_steps, 0u);
  EXPECT_EQ(s.ef_max_bytes, 4ull << 30);
  EXPECT_EQ(s.fusion_threshold, 64ull << 20);
  EXPECT_EQ(s.partition_bytes, 4ull << 20);
  EXPECT_EQ(s.priority, Priority::fifo);
  EXPECT_FALSE(s.hierarchical);
  EXPECT_FALSE(s.local_size.has_value());
  EXPECT_EQ(s.report, "");
  EXPECT_EQ(s.log_level, LogLevel::warn);
  EXPECT_EQ(s.topk_values, TopkValueFormat::fp32);
  EXPECT_EQ(s.powersgd_rank, 4);
  EXPECT_DOUBLE_EQ(s.powersgd_min_compression, 2.0);
}

TEST(Settings, PowerSgdRankAndMinimumCompression) {
  const Settings s = parse({{"SLIMREDUCE_COMPRESSOR", "powersgd"},
                            {"SLIMREDUCE_POWERSGD_RANK", "64"},
                            {"SLIMREDUCE_POWERSGD_MIN_COMPRESSION", "1"}});
  EXPECT_EQ(s.compressor, "powersgd");
  EXPECT_EQ(s.powersgd_rank, 64);
  EXPECT_DOUBLE_EQ(s.powersgd_min_compression, 1.0);
  EXPECT_EQ(parse({{"SLIMREDUCE_POWERSGD_RANK", "1"}}).powersgd_rank, 1);
  EXPECT_DOUBLE_EQ(
      parse({{"SLIMREDUCE_POWERSGD_MIN_COMPRESSION", "12.5"}}).powersgd_min_compression, 12.5);
}

TEST(Settings, PowerSgdBlas) {
  EXPECT_EQ(parse({}).powersgd_blas, compressors::PowerSgdProducts::automatic);
  EXPECT_EQ(parse({{"SLIMREDUCE_POWERSGD_BLAS", "builtin"}}).powersgd_blas,
            compressors::PowerSgdProducts::builtin);
  // Accepted only where the private copy loads (scripts/setup.sh installs it).
  EXPECT_EQ(parse({{"SLIMREDUCE_POWERSGD_BLAS", "openblas"}}).powersgd_blas,
            compressors::PowerSgdProducts::openblas);
  const std::vector<std::string> lines =
      describe_settings(parse({{"SLIMREDUCE_POWERSGD_BLAS", "builtin"}}));
  EXPECT_NE(std::find(lines.begin(), lines.end(), "SLIMREDUCE_POWERSGD_BLAS=builtin"), lines.end());
}

TEST(Settings, TopkAlgorithmAndQuantBucket) {
  EXPECT_EQ(parse({}).topk_algorithm, compressors::TopkAlgorithm::automatic);
  EXPECT_EQ(parse({}).quant_bucket, 512u);
  EXPECT_EQ(parse({{"SLIMREDUCE_TOPK_ALGORITHM", "sharded"}}).topk_algorithm,
            compressors::TopkAlgorithm::sharded);
  EXPECT_EQ(parse({{"SLIMREDUCE_TOPK_ALGORITHM", "gather"}}).topk_algorithm,
            compressors::TopkAlgorithm::gather);
  const Settings s = parse({{"SLIMREDUCE_COMPRESSOR", "int8"}, {"SLIMREDUCE_QUANT_BUCKET", "1"}});
  EXPECT_EQ(s.compressor, "int8");
  EXPECT_EQ(s.quant_bucket, 1u);
  EXPECT_EQ(parse({{"SLIMREDUCE_QUANT_BUCKET", "16777216"}}).quant_bucket, 16777216u);
}

// The quantizer's width: 8 unless asked; int4 and int2 are names of their own.
TEST(Settings, QuantBits) {
  EXPECT_EQ(parse({}).quant_bits, 8);
  EXPECT_EQ(parse({{"SLIMREDUCE_QUANT_BITS", "4"}}).quant_bits, 4);
  EXPECT_EQ(parse({{"SLIMREDUCE_QUANT_BITS", "2"}}).quant_bits, 2);
  for (const char* name : {"quant", "int4", "int2"})
    EXPECT_EQ(parse({{"SLIMREDUCE_COMPRESSOR", name}}).compressor, name);
  const std::vector<std::string> lines = describe_settings(parse({{"SLIMREDUCE_QUANT_BITS", "2"}}));
  EXPECT_NE(std::find(lines.begin(), lines.end(), "SLIMREDUCE_QUANT_BITS=2"), lines.end());
}

// Min-max codes at every width: with int4, int2, quant at 4 bits, its
// adaptive levels and auto's candidates alike.
TEST(Settings, MinmaxCodesAtEveryWidth) {
  for (const Environment& env :
       {Environment{{"SLIMREDUCE_COMPRESSOR", "int4"}, {"SLIMREDUCE_QUANT_CODES", "minmax"}},
        Environment{{"SLIMREDUCE_COMPRESSOR", "int2"}, {"SLIMREDUCE_QUANT_CODES", "minmax"}},
        Environment{{"SLIMREDUCE_COMPRESSOR", "quant"},
                    {"SLIMREDUCE_QUANT_BITS", "4"},
                    {"SLIMREDUCE_QUANT_CODES", "minmax"}},
        Environment{{"SLIMREDUCE_COMPRESSOR", "quant"},
                    {"SLIMREDUCE_ADAPTIVE", "accordion"},
                    {"SLIMREDUCE_QUANT_BITS", "8,2"},
                    {"SLIMREDUCE_QUANT_CODES", "minmax"}},
        Environment{{"SLIMREDUCE_COMPRESSOR", "auto"},
                    {"SLIMREDUCE_AUTO_CANDIDATES", "none,int4"},
                    {"SLIMREDUCE_QUANT_CODES", "minmax"}}}) {
    EXPECT_EQ(parse_settings(env).quant_codes, compressors::QuantCodes::minmax) << env[0].second;
  }
}

// The quantizer's codes: each width's own unless asked; anything else refused,
// naming the variable.
TEST(Settings, QuantCodes) {
  EXPECT_EQ(parse({}).quant_codes, compressors::QuantCodes::by_width);
  EXPECT_EQ(parse({{"SLIMREDUCE_QUANT_CODES", "width"}}).quant_codes,
            compressors::QuantCodes::by_width);
  EXPECT_EQ(parse({{"SLIMREDUCE_QUANT_CODES", "absmax"}}).quant_codes,
            compressors::QuantCodes::absmax);
  EXPECT_EQ(parse({{"SLIMREDUCE_QUANT_CODES", "minmax"}}).quant_codes,
            compressors::QuantCodes::minmax);
  for (const char* bad : {"", "MINMAX", "min-max", "absmax ", "symmetric"}) {
    try {
      parse({{"SLIMREDUCE_QUANT_CODES", bad}});
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const SettingsError& e) {
      EXPECT_EQ(e.variable(), "SLIMREDUCE_QUANT_CODES");
      EXPECT_NE(std::string(e.what()).find("absmax, minmax"), std::string::npos) << e.what();
    }
  }
  const std::vector<std::string> lines =
      describe_settings(parse({{"SLIMREDUCE_QUANT_CODES", "minmax"}}));
  EXPECT_NE(std::find(lines.begin(), lines.end(), "SLIMREDUCE_QUANT_CODES=minmax"), lines.end());
}

// By width: min-max at 4 and 2 bits, absmax at 8 (docs/performance.md 13),
// seen in the bytes of one part (min-max keeps two fp32s per bucket, absmax one).
TEST(Settings, QuantCodesByWidthPickEachWidthsCodes) {
  using compressors::QuantCodes;
  const std::size_t n = 4096, buckets = n / 512;
  for (const auto& [name, bits] : {std::pair{"int8", 8}, {"int4", 4}, {"int2", 2}}) {
    for (const QuantCodes asked : {QuantCodes::by_width, QuantCodes::absmax, QuantCodes::minmax}) {
      compressors::CompressorOptions options;
      options.quant_codes = asked;
      const auto compressor = compressors::make_compressor(name, options);
      ASSERT_NE(compressor, nullptr) << name;
      const bool minmax = compressors::codes_at(asked, bits) == QuantCodes::minmax;
      EXPECT_EQ(minmax, asked == QuantCodes::minmax || (asked == QuantCodes::by_width && bits != 8))
          << name;
      const std::size_t codes = n * static_cast<std::size_t>(bits) / 8;
      const std::size_t per_bucket = minmax ? 8 : 4;  // two fp32s, or one
      ASSERT_NE(compressor->sharded_codec(), nullptr) << name;
      EXPECT_EQ(compressor->sharded_codec()->part_capacity(n, n), codes + buckets * per_bucket)
          << name << " asked " << static_cast<int>(asked);
    }
  }
}

// The quantizer's rounding and its seed: nearest and 0 unless asked; anything
// else refused, naming the variable.
TEST(Settings, QuantRoundingAndSeed) {
  using compressors::QuantRounding;
  EXPECT_EQ(parse({}).quant_rounding, QuantRounding::nearest);
  EXPECT_EQ(parse({}).quant_seed, 0u);
  EXPECT_EQ(parse({{"SLIMREDUCE_QUANT_ROUNDING", "stochastic"}}).quant_rounding,
            QuantRounding::stochastic);
  EXPECT_EQ(parse({{"SLIMREDUCE_QUANT_ROUNDING", "nearest"}}).quant_rounding,
            QuantRounding::nearest);
  EXPECT_EQ(parse({{"SLIMREDUCE_QUANT_SEED", "18446744073709551615"}}).quant_seed,
            18446744073709551615ull);
  for (const auto& [variable, bad] : {std::pair{"SLIMREDUCE_QUANT_ROUNDING", "fair"},
                                      {"SLIMREDUCE_QUANT_ROUNDING", ""},
                                      {"SLIMREDUCE_QUANT_ROUNDING", "Stochastic"},
                                      {"SLIMREDUCE_QUANT_SEED", "-1"},
                                      {"SLIMREDUCE_QUANT_SEED", "seven"},
                                      {"SLIMREDUCE_QUANT_SEED", "18446744073709551616"}}) {
    try {
      parse({{variable, bad}});
      ADD_FAILURE() << variable << " accepted '" << bad << "'";
    } catch (const SettingsError& e) {
      EXPECT_EQ(e.variable(), variable) << bad;
    }
  }
  // fp8 rounds to nearest only: asked for stochastic, refused (as a candidate of auto too).
  for (const Environment& env :
       {Environment{{"SLIMREDUCE_COMPRESSOR", "fp8"}, {"SLIMREDUCE_QUANT_ROUNDING", "stochastic"}},
        Environment{{"SLIMREDUCE_COMPRESSOR", "auto"},
                    {"SLIMREDUCE_AUTO_CANDIDATES", "none,fp8"},
                    {"SLIMREDUCE_QUANT_ROUNDING", "stochastic"}}}) {
    try {
      parse_settings(env);
      ADD_FAILURE() << "fp8 with stochastic rounding accepted";
    } catch (const SettingsError& e) {
      EXPECT_EQ(e.variable(), "SLIMREDUCE_QUANT_ROUNDING");
      EXPECT_NE(std::string(e.what()).find("fp8"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(parse_settings({{"SLIMREDUCE_COMPRESSOR", "fp8"}}).compressor, "fp8");
  const std::vector<std::string> lines = describe_settings(
      parse({{"SLIMREDUCE_QUANT_ROUNDING", "stochastic"}, {"SLIMREDUCE_QUANT_SEED", "7"}}));
  EXPECT_NE(std::find(lines.begin(), lines.end(), "SLIMREDUCE_QUANT_ROUNDING=stochastic"),
            lines.end());
  EXPECT_NE(std::find(lines.begin(), lines.end(), "SLIMREDUCE_QUANT_SEED=7"), lines.end());
}

TEST(Settings, OtherEnvironmentIsIgnored) {
  EXPECT_EQ(parse({{"PATH", "/bin"}, {"SLIMREDUCEX", "1"}}).compressor, "none");
}

TEST(Settings, AcceptsEveryDocumentedForm) {
  const Settings s = parse({{"SLIMREDUCE_COMPRESSOR", "bf16"},
                            {"SLIMREDUCE_TOPK_RATIO", "1"},
                            {"SLIMREDUCE_ERROR_FEEDBACK", "1"},
                            {"SLIMREDUCE_MIN_BYTES", "1MiB"},
                            {"SLIMREDUCE_WARMUP_STEPS", "5"},
                            {"SLIMREDUCE_EF_MAX_BYTES", "2G"},
                            {"SLIMREDUCE_FUSION_THRESHOLD", "0"},
                            {"SLIMREDUCE_PARTITION_BYTES", "512K"},
                            {"SLIMREDUCE_PIPELINE", "1"},
                            {"SLIMREDUCE_PRIORITY", "reverse"},
                            {"SLIMREDUCE_HIERARCHICAL", "1"},
                            {"SLIMREDUCE_LOCAL_SIZE", "2"},
                            {"SLIMREDUCE_REPORT", "/tmp/run"},
                            {"SLIMREDUCE_TIMELINE", "/tmp/trace.json"},
                            {"SLIMREDUCE_LOG_LEVEL", "debug"},
                            {"SLIMREDUCE_TOPK_VALUES", "fp16"}});
  EXPECT_EQ(s.compressor, "bf16");
  EXPECT_DOUBLE_EQ(s.topk_ratio, 1.0);
  EXPECT_EQ(s.error_feedback, true);
  EXPECT_EQ(s.min_bytes, 1u << 20);
  EXPECT_EQ(s.warmup_steps, 5u);
  EXPECT_EQ(s.ef_max_bytes, 2ull << 30);
  EXPECT_EQ(s.fusion_threshold, 0u);
  EXPECT_EQ(s.partition_bytes, 512u << 10);
  EXPECT_EQ(s.pipeline, Pipelining::on);
  EXPECT_EQ(s.priority, Priority::reverse);
  EXPECT_TRUE(s.hierarchical);
  EXPECT_EQ(s.local_size, 2);
  EXPECT_EQ(s.report, "/tmp/run");
  EXPECT_EQ(s.timeline, "/tmp/trace.json");
  EXPECT_EQ(s.log_level, LogLevel::debug);
  EXPECT_EQ(s.topk_values, TopkValueFormat::fp16);
}

TEST(Settings, EveryCompressorAndChoiceIsAccepted) {
  for (const char* name : {"none", "fp16", "bf16"}) {
    EXPECT_EQ(parse({{"SLIMREDUCE_COMPRESSOR", name}}).compressor, name);
  }
  for (const char* level : {"error", "warn", "info", "debug"}) {
    EXPECT_NO_THROW(parse({{"SLIMREDUCE_LOG_LEVEL", level}}));
  }
  EXPECT_EQ(parse({}).pipeline, Pipelining::automatic);
  EXPECT_EQ(parse({{"SLIMREDUCE_PIPELINE", "auto"}}).pipeline, Pipelining::automatic);
  EXPECT_EQ(parse({{"SLIMREDUCE_PIPELINE", "0"}}).pipeline, Pipelining::off);
  EXPECT_EQ(parse({{"SLIMREDUCE_ERROR_FEEDBACK", "0"}}).error_feedback, false);
  EXPECT_EQ(parse({{"SLIMREDUCE_REPORT", "stderr"}}).report, "stderr");
}

struct ByteCase {
  const char* text;
  std::uint64_t bytes;
};

class ByteSizes : public ::testing::TestWithParam<ByteCase> {};

TEST_P(ByteSizes, ParseToBytes) {
  EXPECT_EQ(parse_byte_size(GetParam().text), GetParam().bytes);
  EXPECT_EQ(parse({{"SLIMREDUCE_MIN_BYTES", GetParam().text}}).min_bytes, GetParam().bytes);
}

INSTANTIATE_TEST_SUITE_P(Forms, ByteSizes,
                         ::testing::Values(ByteCase{"0", 0}, ByteCase{"65536", 65536},
                                           ByteCase{"64K", 65536}, ByteCase{"64k", 65536},
                                           ByteCase{"64KB", 65536}, ByteCase{"64KiB", 65536},
                                           ByteCase{"1M", 1 << 20}, ByteCase{"1MB", 1 << 20},
                                           ByteCase{"1MiB", 1 << 20}, ByteCase{"4G", 4ull << 30},
                                           ByteCase{"4GiB", 4ull << 30}, ByteCase{"1T", 1ull << 40},
                                           ByteCase{"100B", 100}));

struct BadCase {
  const char* variable;
  const char* value;
  const char* accepted;  // what the error line must offer instead
};

class BadSettings : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadSettings, FailWithOneLineNamingVariableValueAndWhatIsAccepted) {
  const BadCase& bad = GetParam();
  try {
    parse({{bad.variable, bad.value}});
    FAIL() << bad.variable << "=" << bad.value << " was accepted";
  } catch (const SettingsError& error) {
    const std::string expected = std::string(bad.variable) + "='" + bad.value +
                                 "' is not accepted; expected " + bad.accepted;
    EXPECT_EQ(std::string(error.what()), expected);
    EXPECT_EQ(error.variable(), bad.variable);
  }
}

constexpr const char* kSizes = "a byte size: 65536, 64K, 64KiB, 1M, 1MiB, 4G (powers of 1024)";
constexpr const char* kCompressors =
    "none, fp16, bf16, topk, powersgd, int8, quant, int4, int2, fp8, auto";
constexpr const char* kCandidates =
    "a comma-separated list, each once, of: none, fp16, bf16, topk, powersgd, int8, quant, int4, "
    "int2, fp8 (not auto; set only with SLIMREDUCE_COMPRESSOR=auto)";
constexpr const char* kQuantBits =
    "8, 4, 2, or two as gentle,hard (the hard one fewer) with SLIMREDUCE_ADAPTIVE=accordion";
constexpr const char* kRank =
    "a whole number in [1, 64], or two as gentle,hard (the hard one smaller) with "
    "SLIMREDUCE_ADAPTIVE=accordion";
constexpr const char* kTimes = "a number >= 1";
constexpr const char* kBlas =
    "auto, openblas (an error unless Debian's libopenblas0-serial loads), builtin";
constexpr const char* kRatio =
    "a number in (0, 1], or two as gentle,hard (the hard one smaller) with "
    "SLIMREDUCE_ADAPTIVE=accordion";
constexpr const char* kFlag = "0, 1";
constexpr const char* kCount = "a whole number >= 0";

INSTANTIATE_TEST_SUITE_P(
    Malformed, BadSettings,
    ::testing::Values(
        BadCase{"SLIMREDUCE_COMPRESSOR", "fp17", kCompressors},
        BadCase{"SLIMREDUCE_COMPRESSOR", "", kCompressors},
        BadCase{"SLIMREDUCE_COMPRESSOR", "FP16", kCompressors},
        BadCase{"SLIMREDUCE_COMPRESSOR", "int3", kCompressors},
        BadCase{"SLIMREDUCE_QUANT_BITS", "3", kQuantBits},
        BadCase{"SLIMREDUCE_QUANT_BITS", "16", kQuantBits},
        BadCase{"SLIMREDUCE_QUANT_BITS", "abc", kQuantBits},
        BadCase{"SLIMREDUCE_QUANT_BITS", "", kQuantBits},
        BadCase{"SLIMREDUCE_QUANT_BITS", "04", kQuantBits},
        BadCase{"SLIMREDUCE_MIN_BYTES", "-3", kSizes},
        BadCase{"SLIMREDUCE_MIN_BYTES", "1.5M", kSizes},
        BadCase{"SLIMREDUCE_MIN_BYTES", "12Q", kSizes}, BadCase{"SLIMREDUCE_MIN_BYTES", "", kSizes},
        BadCase{"SLIMREDUCE_MIN_BYTES", " 64K", kSizes},
        BadCase{"SLIMREDUCE_MIN_BYTES", "99999999999999999999", kSizes},
        BadCase{"SLIMREDUCE_EF_MAX_BYTES", "20000000000T", kSizes},
        BadCase{"SLIMREDUCE_TOPK_RATIO", "2", kRatio},
        BadCase{"SLIMREDUCE_TOPK_RATIO", "0", kRatio},
        BadCase{"SLIMREDUCE_TOPK_RATIO", "-0.1", kRatio},
        BadCase{"SLIMREDUCE_TOPK_RATIO", "nan", kRatio},
        BadCase{"SLIMREDUCE_TOPK_RATIO", "0.01x", kRatio},
        BadCase{"SLIMREDUCE_ERROR_FEEDBACK", "yes", kFlag},
        BadCase{"SLIMREDUCE_WARMUP_STEPS", "-1", kCount},
        BadCase{"SLIMREDUCE_WARMUP_STEPS", "ten", kCount},
        BadCase{"SLIMREDUCE_PRIORITY", "lifo", "fifo, reverse"},
        BadCase{"SLIMREDUCE_PRIORITY", "loud", "fifo, reverse"},
        BadCase{"SLIMREDUCE_PIPELINE", "yes", "auto, 0, 1"},
        BadCase{"SLIMREDUCE_HIERARCHICAL", "true", "0, 1, auto"},
        BadCase{"SLIMREDUCE_LOCAL_SIZE", "0", "a whole number >= 1"},
        BadCase{"SLIMREDUCE_PARTITION_BYTES", "0", kSizes},
        BadCase{"SLIMREDUCE_LOG_LEVEL", "verbose", "error, warn, info, debug"},
        BadCase{"SLIMREDUCE_REPORT", "",
                "stderr, or a path prefix P (each rank writes P.<rank>.json)"},
        BadCase{"SLIMREDUCE_TOPK_VALUES", "int8", "fp32, fp16"},
        BadCase{"SLIMREDUCE_TOPK_ALGORITHM", "allgather", "gather, sharded, auto"},
        BadCase{"SLIMREDUCE_QUANT_BUCKET", "0", "a whole number in [1, 16777216]"},
        BadCase{"SLIMREDUCE_QUANT_BUCKET", "16777217", "a whole number in [1, 16777216]"},
        BadCase{"SLIMREDUCE_POWERSGD_RANK", "0", kRank},
        BadCase{"SLIMREDUCE_POWERSGD_RANK", "65", kRank},
        BadCase{"SLIMREDUCE_POWERSGD_RANK", "-4", kRank},
        BadCase{"SLIMREDUCE_POWERSGD_RANK", "4.5", kRank},
        BadCase{"SLIMREDUCE_POWERSGD_RANK", "", kRank},
        BadCase{"SLIMREDUCE_POWERSGD_MIN_COMPRESSION", "0.5", kTimes},
        BadCase{"SLIMREDUCE_POWERSGD_MIN_COMPRESSION", "inf", kTimes},
        BadCase{"SLIMREDUCE_POWERSGD_MIN_COMPRESSION", "nan", kTimes},
        BadCase{"SLIMREDUCE_POWERSGD_MIN_COMPRESSION", "2x", kTimes},
        BadCase{"SLIMREDUCE_POWERSGD_MIN_COMPRESSION", "", kTimes},
        BadCase{"SLIMREDUCE_POWERSGD_BLAS", "mkl", kBlas},
        BadCase{"SLIMREDUCE_POWERSGD_BLAS", "OpenBLAS", kBlas},
        BadCase{"SLIMREDUCE_AUTO_CANDIDATES", "", kCandidates},
        BadCase{"SLIMREDUCE_AUTO_CANDIDATES", "fp16,zip", kCandidates},
        BadCase{"SLIMREDUCE_AUTO_CANDIDATES", "none,auto", kCandidates},
        BadCase{"SLIMREDUCE_AUTO_CANDIDATES", "fp16,,int8", kCandidates},
        BadCase{"SLIMREDUCE_AUTO_CANDIDATES", "fp16,fp16", kCandidates},
        BadCase{"SLIMREDUCE_TOPK_RATIO", "0.1,0.01,0.001", kRatio},
        BadCase{"SLIMREDUCE_TOPK_RATIO", "0.01,", kRatio},
        BadCase{"SLIMREDUCE_TOPK_RATIO", ",0.001", kRatio},
        BadCase{"SLIMREDUCE_TOPK_RATIO", "0.01,2", kRatio},
        BadCase{"SLIMREDUCE_POWERSGD_RANK", "8,4,1", kRank},
        BadCase{"SLIMREDUCE_POWERSGD_RANK", "4,0", kRank},
        BadCase{"SLIMREDUCE_ADAPTIVE", "on", "off, accordion"},
        BadCase{"SLIMREDUCE_ADAPTIVE_WINDOW", "0", "a whole number >= 1 (set only with accordion)"},
        BadCase{"SLIMREDUCE_ADAPTIVE_WINDOW", "-5",
                "a whole number >= 1 (set only with accordion)"},
        BadCase{"SLIMREDUCE_ADAPTIVE_THRESHOLD", "-0.5", "a number >= 0 (set only with accordion)"},
        BadCase{"SLIMREDUCE_ADAPTIVE_THRESHOLD", "nan",
                "a number >= 0 (set only with accordion)"}));

TEST(Settings, AutoTakesItsCandidatesOrTheDefaultList) {
  const Settings plain = parse({{"SLIMREDUCE_COMPRESSOR", "auto"}});
  EXPECT_TRUE(plain.chooses_compressor());
  EXPECT_EQ(plain.candidates(), (std::vector<std::string>{"none", "fp16", "int8"}));
  const Settings listed = parse(
      {{"SLIMREDUCE_COMPRESSOR", "auto"}, {"SLIMREDUCE_AUTO_CANDIDATES", "topk,none,powersgd"}});
  EXPECT_EQ(listed.candidates(), (std::vector<std::string>{"topk", "none", "powersgd"}));
  EXPECT_FALSE(parse({{"SLIMREDUCE_COMPRESSOR", "fp16"}}).chooses_compressor());
}

// SLIMREDUCE_HIERARCHICAL=auto makes the node sub-communicators and chooses
// flat or two-level with the compressor: only under SLIMREDUCE_COMPRESSOR=auto.
TEST(Settings, HierarchicalAutoChoosesWithTheCompressorOrForAFixedOne) {
  const Settings chosen =
      parse({{"SLIMREDUCE_COMPRESSOR", "auto"}, {"SLIMREDUCE_HIERARCHICAL", "auto"}});
  EXPECT_TRUE(chosen.hierarchical);
  EXPECT_TRUE(chosen.chooses_hierarchy);
  const std::vector<std::string> lines = describe_settings(chosen);
  EXPECT_NE(std::find(lines.begin(), lines.end(), "SLIMREDUCE_HIERARCHICAL=auto"), lines.end());
  const Settings fixed = parse({{"SLIMREDUCE_HIERARCHICAL", "1"}});
  EXPECT_TRUE(fixed.hierarchical);
  EXPECT_FALSE(fixed.chooses_hierarchy);
  // A fixed compressor that has a two-level form: flat or two-level is measured for it alone.
  for (const char* compressor : {"int8", "fp16", "topk", "int4"}) {
    const Settings one =
        parse({{"SLIMREDUCE_COMPRESSOR", compressor}, {"SLIMREDUCE_HIERARCHICAL", "auto"}});
    EXPECT_TRUE(one.chooses_hierarchy) << compressor;
    EXPECT_TRUE(one.chooses()) << compressor;
    EXPECT_FALSE(one.chooses_compressor()) << compressor;
  }
  EXPECT_FALSE(fixed.chooses());
  for (const char* compressor : {"none", "powersgd"}) {
    try {
      parse({{"SLIMREDUCE_COMPRESSOR", compressor}, {"SLIMREDUCE_HIERARCHICAL", "auto"}});
      FAIL() << "auto accepted with " << compressor << ", which has no two-level form";
    } catch (const SettingsError& error) {
      EXPECT_EQ(error.variable(), "SLIMREDUCE_HIERARCHICAL");
      EXPECT_EQ(std::string(error.what()),
                "SLIMREDUCE_HIERARCHICAL='auto' is not accepted; expected 0 or 1 with "
                "SLIMREDUCE_COMPRESSOR=" +
                    std::string(compressor) +
                    ", which has no two-level form to measure (auto needs a compressor that has "
                    "one, or SLIMREDUCE_COMPRESSOR=auto)");
    }
  }
  try {
    parse({{"SLIMREDUCE_COMPRESSOR", "topk"},
           {"SLIMREDUCE_TOPK_RATIO", "0.01,0.001"},
           {"SLIMREDUCE_ADAPTIVE", "accordion"},
           {"SLIMREDUCE_HIERARCHICAL", "auto"}});
    FAIL() << "auto accepted with adaptive levels";
  } catch (const SettingsError& error) {
    EXPECT_EQ(error.variable(), "SLIMREDUCE_HIERARCHICAL");
    EXPECT_NE(std::string(error.what()).find("SLIMREDUCE_ADAPTIVE=accordion"), std::string::npos);
  }
  EXPECT_THROW(parse({{"SLIMREDUCE_HIERARCHICAL", "two"}}), SettingsError);
}

TEST(BadSettings, CandidatesWithoutAutoAreRefusedNamingTheVariable) {
  for (const char* compressor : {"none", "fp16"}) {
    try {
      parse({{"SLIMREDUCE_COMPRESSOR", compressor}, {"SLIMREDUCE_AUTO_CANDIDATES", "none,fp16"}});
      FAIL() << "candidates accepted with SLIMREDUCE_COMPRESSOR=" << compressor;
    } catch (const SettingsError& error) {
      EXPECT_EQ(error.variable(), "SLIMREDUCE_AUTO_CANDIDATES");
      EXPECT_EQ(std::string(error.what()),
                std::string("SLIMREDUCE_AUTO_CANDIDATES='none,fp16' is not accepted; expected "
                            "unset unless SLIMREDUCE_COMPRESSOR=auto (SLIMREDUCE_COMPRESSOR=") +
                    compressor + ")");
    }
  }
}

TEST(Settings, AccordionTakesTwoLevelsOfTheCompressor) {
  const Settings topk = parse({{"SLIMREDUCE_COMPRESSOR", "topk"},
                               {"SLIMREDUCE_ADAPTIVE", "accordion"},
                               {"SLIMREDUCE_TOPK_RATIO", "0.01,0.001"}});
  EXPECT_TRUE(topk.adapts_levels());
  EXPECT_DOUBLE_EQ(topk.topk_ratio, 0.01);
  ASSERT_TRUE(topk.topk_ratio_hard.has_value());
  EXPECT_DOUBLE_EQ(*topk.topk_ratio_hard, 0.001);
  EXPECT_EQ(topk.window(), kDefaultAdaptiveWindow);
  EXPECT_DOUBLE_EQ(topk.threshold(), 0.5);
  const Settings low_rank = parse({{"SLIMREDUCE_COMPRESSOR", "powersgd"},
                                   {"SLIMREDUCE_ADAPTIVE", "accordion"},
                                   {"SLIMREDUCE_POWERSGD_RANK", "4,1"},
                                   {"SLIMREDUCE_ADAPTIVE_WINDOW", "25"},
                                   {"SLIMREDUCE_ADAPTIVE_THRESHOLD", "0"}});
  EXPECT_EQ(low_rank.powersgd_rank, 4);
  EXPECT_EQ(low_rank.powersgd_rank_hard, 1);
  EXPECT_EQ(low_rank.window(), 25u);
  EXPECT_DOUBLE_EQ(low_rank.threshold(), 0.0);
  const Settings widths = parse({{"SLIMREDUCE_COMPRESSOR", "quant"},
                                 {"SLIMREDUCE_ADAPTIVE", "accordion"},
                                 {"SLIMREDUCE_QUANT_BITS", "8,2"}});
  EXPECT_EQ(widths.quant_bits, 8);
  EXPECT_EQ(widths.quant_bits_hard, 2);
  const Settings one = parse({{"SLIMREDUCE_COMPRESSOR", "topk"}, {"SLIMREDUCE_TOPK_RATIO", "0.1"}});
  EXPECT_FALSE(one.adapts_levels());
  EXPECT_FALSE(one.topk_ratio_hard.has_value()) << "one value keeps today's behaviour";
}

// Settings that only make sense together, refused at start-up naming the one to change.
TEST(BadSettings, LevelsAndAccordionAreRefusedTogetherNamingTheVariable) {
  struct Case {
    std::vector<std::pair<std::string, std::string>> env;
    const char* variable;
    const char* message;
  };
  const std::vector<Case> cases = {
      {{{"SLIMREDUCE_COMPRESSOR", "topk"},
        {"SLIMREDUCE_ADAPTIVE", "accordion"},
        {"SLIMREDUCE_TOPK_RATIO", "0.001,0.01"}},
       "SLIMREDUCE_TOPK_RATIO",
       "SLIMREDUCE_TOPK_RATIO='0.001000,0.010000' is not accepted; expected gentle,hard with the "
       "hard level a smaller ratio (e.g. 0.01,0.001)"},
      {{{"SLIMREDUCE_COMPRESSOR", "powersgd"},
        {"SLIMREDUCE_ADAPTIVE", "accordion"},
        {"SLIMREDUCE_POWERSGD_RANK", "4,4"}},
       "SLIMREDUCE_POWERSGD_RANK",
       "SLIMREDUCE_POWERSGD_RANK='4,4' is not accepted; expected gentle,hard with the hard level "
       "a smaller rank (e.g. 4,1)"},
      {{{"SLIMREDUCE_COMPRESSOR", "topk"}, {"SLIMREDUCE_TOPK_RATIO", "0.01,0.001"}},
       "SLIMREDUCE_TOPK_RATIO",
       "SLIMREDUCE_TOPK_RATIO='0.010000,0.001000' is not accepted; expected one ratio unless "
       "SLIMREDUCE_ADAPTIVE=accordion"},
      {{{"SLIMREDUCE_COMPRESSOR", "topk"}, {"SLIMREDUCE_ADAPTIVE", "accordion"}},
       "SLIMREDUCE_TOPK_RATIO",
       "SLIMREDUCE_TOPK_RATIO='0.010000' is not accepted; expected two levels, gentle,hard (e.g. "
       "0.01,0.001), with SLIMREDUCE_ADAPTIVE=accordion"},
      {{{"SLIMREDUCE_COMPRESSOR", "fp16"}, {"SLIMREDUCE_ADAPTIVE", "accordion"}},
       "SLIMREDUCE_ADAPTIVE",
       "SLIMREDUCE_ADAPTIVE='accordion' is not accepted; expected off unless "
       "SLIMREDUCE_COMPRESSOR is a compressor with two levels, topk, powersgd or quant "
       "(SLIMREDUCE_COMPRESSOR=fp16 has one)"},
      {{{"SLIMREDUCE_COMPRESSOR", "int8"}, {"SLIMREDUCE_ADAPTIVE", "accordion"}},
       "SLIMREDUCE_ADAPTIVE",
       "SLIMREDUCE_ADAPTIVE='accordion' is not accepted; expected off unless "
       "SLIMREDUCE_COMPRESSOR is a compressor with two levels, topk, powersgd or quant "
       "(SLIMREDUCE_COMPRESSOR=int8 has one)"},
      {{{"SLIMREDUCE_COMPRESSOR", "quant"},
        {"SLIMREDUCE_ADAPTIVE", "accordion"},
        {"SLIMREDUCE_QUANT_BITS", "4,8"}},
       "SLIMREDUCE_QUANT_BITS",
       "SLIMREDUCE_QUANT_BITS='4,8' is not accepted; expected gentle,hard with the hard level "
       "fewer bits (e.g. 8,4)"},
      {{{"SLIMREDUCE_COMPRESSOR", "quant"}, {"SLIMREDUCE_QUANT_BITS", "8,4"}},
       "SLIMREDUCE_QUANT_BITS",
       "SLIMREDUCE_QUANT_BITS='8,4' is not accepted; expected one width unless "
       "SLIMREDUCE_ADAPTIVE=accordion"},
      {{{"SLIMREDUCE_COMPRESSOR", "topk"}, {"SLIMREDUCE_ADAPTIVE_WINDOW", "10"}},
       "SLIMREDUCE_ADAPTIVE_WINDOW",
       "SLIMREDUCE_ADAPTIVE_WINDOW='10' is not accepted; expected unset unless "
       "SLIMREDUCE_ADAPTIVE=accordion"},
  };
  for (const Case& bad : cases) {
    try {
      parse_settings(Environment(bad.env.begin(), bad.env.end()));
      FAIL() << bad.message << ": accepted";
    } catch (const SettingsError& error) {
      EXPECT_EQ(error.variable(), bad.variable);
      EXPECT_EQ(std::string(error.what()), bad.message);
    }
  }
}

TEST(BadSettings, UnknownNameIsATypo) {
  try {
    parse({{"SLIMREDUCE_COMPRESSER", "fp16"}});
    FAIL() << "a misspelt name was accepted";
  } catch (const SettingsError& error) {
    const std::string message = error.what();
    EXPECT_EQ(
        message.rfind("SLIMREDUCE_COMPRESSER='fp16' is not accepted; expected a known setting", 0),
        0u)
        << message;
    EXPECT_NE(message.find("SLIMREDUCE_COMPRESSOR"), std::string::npos);
  }
}

TEST(Settings, DescribeListsEverySettingOnce) {
  const auto lines = describe_settings(parse({{"SLIMREDUCE_COMPRESSOR", "fp16"}}));
  EXPECT_EQ(lines.size(), 30u);
  EXPECT_EQ(lines.front(), "SLIMREDUCE_COMPRESSOR=fp16");
  EXPECT_NE(settings_markdown().find("| `SLIMREDUCE_MIN_BYTES` | 65536 |"), std::string::npos);
}

}  // namespace
}  // namespace slimreduce

namespace slimreduce {
namespace {

// The doc line of SLIMREDUCE_ERROR_FEEDBACK names every compressor whose
// error feedback is on by default, and no other (it once left out int8).
TEST(Settings, ErrorFeedbackDocLineNamesEachCompressorOnByDefault) {
  const std::string table = settings_markdown();
  const std::size_t row = table.find("| `SLIMREDUCE_ERROR_FEEDBACK` | ");
  ASSERT_NE(row, std::string::npos);
  const std::size_t start = table.find("| ", row + 2) + 2;
  const std::string default_text = table.substr(start, table.find(" |", start) - start);
  const std::string on_part = default_text.substr(0, default_text.find(", 0 for"));
  for (const std::string& name : compressors::registered_names()) {
    const bool on = compressors::make_compressor(name, {})->default_error_feedback();
    const bool named = on_part.find(name) != std::string::npos;
    EXPECT_EQ(on, named) << name << " in \"" << default_text << "\"";
  }
}

}  // namespace
}  // namespace slimreduce
