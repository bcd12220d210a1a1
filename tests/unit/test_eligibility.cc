// The one classifier both sides use (core/runtime/eligibility.h): the same
// facts get the same route on MPI and NCCL, except where BackendRules says
// otherwise, and docs/architecture.md's table of deliberate differences is
// those rules. Needs no MPI, NCCL or GPU.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "compressors/registry.h"
#include "core/runtime/compressor_choice.h"
#include "core/runtime/eligibility.h"

namespace slimreduce {
namespace {

using compressors::DeviceKernels;

DeviceKernels kernels_of(ReductionPath route) {
  switch (route) {
    case ReductionPath::cast:
      return DeviceKernels::cast16;
    case ReductionPath::topk:
      return DeviceKernels::topk;
    case ReductionPath::low_rank:
      return DeviceKernels::low_rank;
    case ReductionPath::sharded:
      return DeviceKernels::sharded;
    case ReductionPath::pass_through:
      break;
  }
  return DeviceKernels::none;
}

// The rule `backend` takes for the compressor `name`. A build without CUDA
// gives no compressor GPU kernels: the NCCL rule then gets those of the
// compressor's route, so that what tells the sides apart below is the rules
// alone (the no_gpu_kernels case checks a compressor without them).
EligibilityRule rule_for(const std::string& name, const BackendRules& backend,
                         std::uint64_t min_bytes = 65536) {
  Settings settings;
  settings.compressor = name;
  settings.min_bytes = min_bytes;
  EligibilityRule rule =
      eligibility_rule(settings, compressor_named(name, settings).get(), backend);
  if (backend.needs_device_kernels && rule.compressing && rule.kernels == DeviceKernels::none)
    rule.kernels = kernels_of(rule.route);
  return rule;
}

// Eligible on both sides: fp32 SUM, 1 Mi values on device buffers, 4 ranks.
CallFacts eligible() {
  CallFacts facts;
  facts.elem = ElemType::fp32;
  facts.op = ReduceOp::sum;
  facts.count = 1 << 20;
  facts.usable_buffers = true;
  facts.device_buffers = true;
  facts.comm_ready = true;
  facts.comm_size = 4;
  return facts;
}

ReductionPath path(const CallFacts& facts, const EligibilityRule& rule,
                   const BackendRules& backend) {
  return classify(facts, rule, backend).path;
}

TEST(SharedEligibility, EveryCompressorsGpuKernelsServeItsRoute) {
  Settings settings;
  for (const std::string& name : compressors::registered_names()) {
    settings.compressor = name;
    const auto compressor = compressor_named(name, settings);
    ASSERT_TRUE(compressor) << name;
    const ReductionPath route = route_of(compressor->aggregation());
    EXPECT_NE(route, ReductionPath::pass_through) << name;
    if (compressor->device_kernels() != DeviceKernels::none) {
      EXPECT_EQ(compressor->device_kernels(), kernels_of(route)) << name;
    }
    EXPECT_EQ(path(eligible(), rule_for(name, kMpiRules), kMpiRules), route) << name;
    EXPECT_EQ(path(eligible(), rule_for(name, kNcclRules), kNcclRules), route) << name;
  }
  EXPECT_FALSE(rule_for("none", kMpiRules).compressing);
  EXPECT_FALSE(rule_for("none", kNcclRules).compressing);
}

// A compressor that counts the questions about its GPU kernels.
class Asked : public compressors::SummableCompressor {
 public:
  std::string_view name() const override { return "asked"; }
  bool default_error_feedback() const override { return false; }
  std::size_t compressed_bytes(std::size_t n) const override { return n * 2; }
  void compress(const float*, float*, std::size_t, void*) override {}
  std::size_t wire_element_bytes() const override { return 2; }
  void accumulate(const void*, void*, std::size_t) const override {}
  void decompress(const void*, float*, std::size_t) const override {}
  DeviceKernels device_kernels() const override {
    ++kernel_questions;
    return DeviceKernels::cast16;
  }
  std::uint64_t device_max_count() const override {
    ++kernel_questions;
    return 10;
  }
  mutable int kernel_questions = 0;
};

// PowerSGD answers device_kernels() by loading cuBLAS: an MPI job on host
// buffers must never make it (job_numpy_blas_powersgd_np2 saw cuBLAS in numpy's namespace).
TEST(SharedEligibility, TheMpiRuleNeverAsksForGpuKernels) {
  Asked asked;
  const EligibilityRule mpi = eligibility_rule(Settings{}, &asked, kMpiRules);
  EXPECT_EQ(asked.kernel_questions, 0);
  EXPECT_EQ(mpi.route, ReductionPath::cast);
  const EligibilityRule nccl = eligibility_rule(Settings{}, &asked, kNcclRules);
  EXPECT_EQ(asked.kernel_questions, 2);
  EXPECT_EQ(nccl.kernels, DeviceKernels::cast16);
  EXPECT_EQ(nccl.device_max_count, 10u);
}

// auto: no compressor of the policy's; each side classifies fp32 calls as
// eligible (the candidate's route comes with each call's decision), and the
// NCCL side keeps 16-bit calls out (only top-k takes them, and no candidate
// is chosen yet when a call is classified).
TEST(SharedEligibility, AutoTakesFp32CallsOnBothSides) {
  Settings settings;
  settings.compressor = "auto";
  settings.min_bytes = 65536;
  auto reason = [](const CallFacts& facts, const EligibilityRule& rule,
                   const BackendRules& backend) {
    return std::string(classify(facts, rule, backend).reason);
  };
  for (const BackendRules* backend : {&kMpiRules, &kNcclRules}) {
    const EligibilityRule rule = eligibility_rule(settings, nullptr, *backend);
    EXPECT_TRUE(rule.compressing);
    EXPECT_EQ(reason(eligible(), rule, *backend), "");
    CallFacts half = eligible();
    half.elem = ElemType::fp16;
    EXPECT_EQ(reason(half, rule, *backend), "datatype");
    CallFacts small = eligible();
    small.count = 1024;
    EXPECT_EQ(reason(small, rule, *backend), "size");
  }
  settings.compressor = "none";
  EXPECT_FALSE(eligibility_rule(settings, nullptr, kNcclRules).compressing);
}

// A change of the eligible call, and whether each side then still compresses it.
struct Difference {
  const char* name;
  std::function<void(CallFacts&, EligibilityRule&)> change;
  bool mpi_compresses;
  bool nccl_compresses;
};

void PrintTo(const Difference& difference, std::ostream* out) { *out << difference.name; }

class Differences : public ::testing::TestWithParam<Difference> {};

TEST_P(Differences, OnlyTheBackendRulesTellTheSidesApart) {
  const Difference& difference = GetParam();
  for (const std::string& name : compressors::registered_names()) {
    CallFacts mpi_facts = eligible(), nccl_facts = eligible();
    EligibilityRule mpi_rule = rule_for(name, kMpiRules), nccl_rule = rule_for(name, kNcclRules);
    difference.change(mpi_facts, mpi_rule);
    difference.change(nccl_facts, nccl_rule);
    const CallFacts& facts = nccl_facts;
    EXPECT_EQ(path(mpi_facts, mpi_rule, kMpiRules) != ReductionPath::pass_through,
              difference.mpi_compresses)
        << name;
    EXPECT_EQ(path(nccl_facts, nccl_rule, kNcclRules) != ReductionPath::pass_through,
              difference.nccl_compresses && (name == "topk" || facts.elem == ElemType::fp32))
        << name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Eligibility, Differences,
    ::testing::Values(
        Difference{"same", [](CallFacts&, EligibilityRule&) {}, true, true},
        Difference{"one_rank", [](CallFacts& f, EligibilityRule&) { f.comm_size = 1; }, false,
                   true},
        Difference{"average", [](CallFacts& f, EligibilityRule&) { f.op = ReduceOp::average; },
                   false, true},
        // Only top-k takes 16-bit inputs, on NCCL (the test's condition above).
        Difference{"bf16_input", [](CallFacts& f, EligibilityRule&) { f.elem = ElemType::bf16; },
                   false, true},
        Difference{"host_buffers", [](CallFacts& f, EligibilityRule&) { f.device_buffers = false; },
                   true, false},
        Difference{"no_gpu_kernels",
                   [](CallFacts&, EligibilityRule& r) { r.kernels = DeviceKernels::none; }, true,
                   false},
        Difference{"over_device_count",
                   [](CallFacts& f, EligibilityRule& r) { r.device_max_count = f.count - 1; }, true,
                   false},
        // Facts that pass on both sides alike.
        Difference{"max_op", [](CallFacts& f, EligibilityRule&) { f.op = ReduceOp::other; }, false,
                   false},
        Difference{"integers", [](CallFacts& f, EligibilityRule&) { f.elem = ElemType::other; },
                   false, false},
        Difference{"under_min_bytes",
                   [](CallFacts& f, EligibilityRule& r) { r.min_bytes = f.bytes() + 1; }, false,
                   false},
        Difference{"empty",
                   [](CallFacts& f, EligibilityRule& r) {
                     f.count = 0;
                     r.min_bytes = 0;
                   },
                   false, false},
        Difference{"bad_buffers", [](CallFacts& f, EligibilityRule&) { f.usable_buffers = false; },
                   false, false},
        Difference{"comm_not_ready", [](CallFacts& f, EligibilityRule&) { f.comm_ready = false; },
                   false, false},
        Difference{"per_call_config", [](CallFacts& f, EligibilityRule&) { f.coll_config = true; },
                   false, false}),
    [](const ::testing::TestParamInfo<Difference>& info) { return info.param.name; });

TEST(SharedEligibility, AverageIsMarkedOnlyWhereTaken) {
  CallFacts facts = eligible();
  facts.op = ReduceOp::average;
  EXPECT_TRUE(classify(facts, rule_for("fp16", kNcclRules), kNcclRules).average);
  EXPECT_FALSE(classify(eligible(), rule_for("fp16", kNcclRules), kNcclRules).average);
  EXPECT_STREQ(classify(facts, rule_for("fp16", kMpiRules), kMpiRules).reason, "op");
}

TEST(SharedEligibility, MinBytesCountsTheCallersElementSize) {
  CallFacts facts = eligible();
  facts.elem = ElemType::bf16;
  facts.count = 32768;  // 64 KiB of bf16
  EXPECT_EQ(path(facts, rule_for("topk", kNcclRules), kNcclRules), ReductionPath::topk);
  facts.count = 32767;
  EXPECT_STREQ(classify(facts, rule_for("topk", kNcclRules), kNcclRules).reason, "size");
}

// docs/architecture.md, "Deliberate differences between the sides": one row
// per BackendRules field, `| `field` | MPI's value | NCCL's value | why |`.
std::map<std::string, std::pair<std::string, std::string>> documented_rules() {
  std::ifstream doc(std::string(SLIMREDUCE_SOURCE_DIR) + "/docs/architecture.md");
  std::map<std::string, std::pair<std::string, std::string>> rows;
  std::string line;
  while (std::getline(doc, line)) {
    if (line.rfind("| `", 0) != 0) continue;
    std::vector<std::string> cells;
    std::stringstream row(line.substr(1));
    for (std::string cell; std::getline(row, cell, '|');) {
      cell.erase(0, cell.find_first_not_of(' '));
      cell.erase(cell.find_last_not_of(' ') + 1);
      cells.push_back(cell);
    }
    if (cells.size() >= 3 && cells[0].size() > 2)
      rows[cells[0].substr(1, cells[0].size() - 2)] = {cells[1], cells[2]};
  }
  return rows;
}

std::string yes_no(bool value) { return value ? "yes" : "no"; }

TEST(SharedEligibility, TheArchitectureDocumentsTableIsTheRules) {
  const auto rows = documented_rules();
  const std::map<std::string, std::pair<std::string, std::string>> rules{
      {"fewest_ranks",
       {std::to_string(kMpiRules.fewest_ranks), std::to_string(kNcclRules.fewest_ranks)}},
      {"takes_average", {yes_no(kMpiRules.takes_average), yes_no(kNcclRules.takes_average)}},
      {"takes_16bit_topk",
       {yes_no(kMpiRules.takes_16bit_topk), yes_no(kNcclRules.takes_16bit_topk)}},
      {"needs_device_buffers",
       {yes_no(kMpiRules.needs_device_buffers), yes_no(kNcclRules.needs_device_buffers)}},
      {"needs_device_kernels",
       {yes_no(kMpiRules.needs_device_kernels), yes_no(kNcclRules.needs_device_kernels)}},
      {"device_count_capped",
       {yes_no(kMpiRules.device_count_capped), yes_no(kNcclRules.device_count_capped)}}};
  for (const auto& [field, values] : rules) {
    ASSERT_TRUE(rows.count(field)) << "docs/architecture.md has no row for `" << field << "`";
    EXPECT_EQ(rows.at(field), values) << field;
  }
}

}  // namespace
}  // namespace slimreduce
