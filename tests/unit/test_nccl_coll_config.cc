// ncclAllReduceConfig (NCCL 2.32): a call whose per-call config leaves every
// choice to NCCL is the plain ncclAllReduce and may be compressed; a config
// that asks for anything passes the call through. Needs no GPU and no NCCL.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backends/nccl_coll_config.h"

namespace slimreduce {
namespace {

TEST(NcclCollConfig, NullAndTheInitializersValuesArePlain) {
  EXPECT_TRUE(nccl_coll_config_plain(nullptr));
  const NcclCollConfigV23200 unset = nccl_coll_config_defaults();
  EXPECT_TRUE(nccl_coll_config_plain(&unset));
  // The version is NCCL's code, whatever the header was: it asks nothing.
  NcclCollConfigV23200 versioned = unset;
  versioned.version = 23203;
  EXPECT_TRUE(nccl_coll_config_plain(&versioned));
}

TEST(NcclCollConfig, AnEmptyAlgorithmSelectionIsAutomatic) {
  NcclCollConfigV23200 c = nccl_coll_config_defaults();
  c.algSelection = "";
  EXPECT_TRUE(nccl_coll_config_plain(&c));
  c.algSelection = "ring";
  EXPECT_FALSE(nccl_coll_config_plain(&c));
}

// Fields that do not change how NCCL runs the call: still the plain call, so
// ranks that differ in them (a per-rank profiler tag) decide alike.
TEST(NcclCollConfig, AProfilerTagOrAForceWithoutSelectionChangesNothing) {
  NcclCollConfigV23200 c = nccl_coll_config_defaults();
  c.userProfilerTag = 42;
  EXPECT_TRUE(nccl_coll_config_plain(&c));
  c = nccl_coll_config_defaults();
  c.forceAlgSelection = 0;
  EXPECT_TRUE(nccl_coll_config_plain(&c));
}

// An uninitialized config whose size happens to match: its magic is checked
// before its selection string (a wild pointer) is read.
TEST(NcclCollConfig, ABadMagicIsNotPlainAndItsPointersAreNotRead) {
  NcclCollConfigV23200 c = nccl_coll_config_defaults();
  c.magic = 0x12345678;
  c.algSelection = reinterpret_cast<const char*>(0x8);  // would fault if read
  EXPECT_FALSE(nccl_coll_config_plain(&c));
}

// One field set to something other than the initializer's value.
struct FieldChange {
  std::string name;
  std::function<void(NcclCollConfigV23200&)> set;
};

class NcclCollConfigField : public ::testing::TestWithParam<FieldChange> {};

TEST_P(NcclCollConfigField, AnySetFieldPassesTheCallThrough) {
  NcclCollConfigV23200 c = nccl_coll_config_defaults();
  GetParam().set(c);
  EXPECT_FALSE(nccl_coll_config_plain(&c)) << GetParam().name;
}

int event_stand_in = 0;
int ext_stand_in = 0;

INSTANTIATE_TEST_SUITE_P(
    EachField, NcclCollConfigField,
    ::testing::Values(FieldChange{"magic", [](auto& c) { c.magic = 0; }},
                      FieldChange{"size_smaller", [](auto& c) { c.size -= 8; }},
                      FieldChange{"size_of_a_later_nccl", [](auto& c) { c.size += 8; }},
                      FieldChange{"ext", [](auto& c) { c.ext = &ext_stand_in; }},
                      FieldChange{"minCTAs", [](auto& c) { c.minCTAs = 2; }},
                      FieldChange{"maxCTAs", [](auto& c) { c.maxCTAs = 8; }},
                      FieldChange{"nvlsCTAs", [](auto& c) { c.nvlsCTAs = 0; }},
                      FieldChange{"cgaClusterSize", [](auto& c) { c.cgaClusterSize = 1; }},
                      FieldChange{"algSelection", [](auto& c) { c.algSelection = "tree"; }},
                      FieldChange{"forceAlgSelection_with_a_selection",
                                  [](auto& c) {
                                    c.algSelection = "ring";
                                    c.forceAlgSelection = 0;
                                  }},
                      FieldChange{"CTAPolicy", [](auto& c) { c.CTAPolicy = 1; }},
                      FieldChange{"launchCompletionEvent",
                                  [](auto& c) { c.launchCompletionEvent = &event_stand_in; }}),
    [](const ::testing::TestParamInfo<FieldChange>& info) { return info.param.name; });

// A later NCCL's config is larger; it is read no further than its size says,
// so a config at the end of a mapping is not read past.
TEST(NcclCollConfig, AConfigIsNotReadPastItsOwnSize) {
  std::vector<unsigned char> bytes(sizeof(std::size_t));
  const std::size_t tiny = sizeof(std::size_t);
  std::memcpy(bytes.data(), &tiny, sizeof tiny);
  EXPECT_FALSE(nccl_coll_config_plain(bytes.data()));
}

}  // namespace
}  // namespace slimreduce
