// Which ncclAllReduce calls the GPU path compresses: only float SUM/AVG on
// device buffers of blocking communicators, at least SLIMREDUCE_MIN_BYTES;
// 16-bit floats only for top-k. Needs no GPU and no NCCL.
#include <gtest/gtest.h>

#include "core/nccl/eligibility.h"
#include "kernels/device.h"

namespace slimreduce {
namespace {

Settings with_compressor(const std::string& name, std::uint64_t min_bytes = 65536) {
  Settings settings;
  settings.compressor = name;
  settings.min_bytes = min_bytes;
  return settings;
}

// A call's arguments and its communicator, as the NCCL engine reads them.
struct NcclCall {
  int datatype = kNcclFloat32;
  int op = kNcclSum;
  std::uint64_t count = 1 << 20;
  bool device_buffers = true;
  bool blocking_comm = true;
  int comm_size = 4;
  bool coll_config = false;
};

NcclCall eligible_facts() { return NcclCall{}; }

// Through the front the engine uses (nccl_call_facts), then the shared classifier.
ReductionVerdict classify_nccl(const NcclCall& call, const Settings& settings) {
  CallFacts facts = nccl_call_facts(call.datatype, call.op, call.count, call.coll_config);
  facts.device_buffers = call.device_buffers;
  facts.comm_ready = call.blocking_comm;
  facts.comm_size = call.comm_size;
  return slimreduce::classify_nccl(facts, settings);
}

TEST(NcclEligibility, Fp32SumOnDeviceIsCompressedByEveryCompressor) {
  EXPECT_EQ(classify_nccl(eligible_facts(), with_compressor("fp16")).path, ReductionPath::cast);
  EXPECT_EQ(classify_nccl(eligible_facts(), with_compressor("bf16")).path, ReductionPath::cast);
  EXPECT_EQ(classify_nccl(eligible_facts(), with_compressor("topk")).path, ReductionPath::topk);
  EXPECT_FALSE(classify_nccl(eligible_facts(), with_compressor("fp16")).average);
}

TEST(NcclEligibility, CompressorNoneAndUnknownPassThrough) {
  EXPECT_EQ(classify_nccl(eligible_facts(), with_compressor("none")).path,
            ReductionPath::pass_through);
}

// PowerSGD runs its device steps where cuBLAS can be loaded (a CUDA build on a
// machine with the toolkit), and passes through where not: never guessed at.
// fp32 only: a 16-bit tensor passes through.
TEST(NcclEligibility, LowRankWhereItsDeviceStepsCanRun) {
  const bool steps = slimreduce::kernels::device::low_rank_available(nullptr);
  EXPECT_EQ(classify_nccl(eligible_facts(), with_compressor("powersgd")).path,
            steps ? ReductionPath::low_rank : ReductionPath::pass_through);
  NcclCall half = eligible_facts();
  half.datatype = kNcclFloat16;
  EXPECT_EQ(classify_nccl(half, with_compressor("powersgd")).path, ReductionPath::pass_through);
}

// int8 takes the sharded plan (core/nccl/sharded.h), average too; fp32 only:
// 16-bit tensors pass through, as do the other ops.
TEST(NcclEligibility, Int8TakesTheShardedPlanForFp32SumAndAvg) {
  EXPECT_EQ(classify_nccl(eligible_facts(), with_compressor("int8")).path, ReductionPath::sharded);
  NcclCall avg = eligible_facts();
  avg.op = kNcclAvg;
  const ReductionVerdict verdict = classify_nccl(avg, with_compressor("int8"));
  EXPECT_EQ(verdict.path, ReductionPath::sharded);
  EXPECT_TRUE(verdict.average);
  NcclCall half = eligible_facts();
  half.datatype = kNcclBfloat16;
  EXPECT_EQ(classify_nccl(half, with_compressor("int8")).path, ReductionPath::pass_through);
  NcclCall max = eligible_facts();
  max.op = 2;
  EXPECT_EQ(classify_nccl(max, with_compressor("int8")).path, ReductionPath::pass_through);
}

TEST(NcclEligibility, AvgIsCompressedAndDividedOnce) {
  NcclCall facts = eligible_facts();
  facts.op = kNcclAvg;
  const ReductionVerdict verdict = classify_nccl(facts, with_compressor("bf16"));
  EXPECT_EQ(verdict.path, ReductionPath::cast);
  EXPECT_TRUE(verdict.average);
}

TEST(NcclEligibility, OtherOpsPassThroughPreMulSumToo) {
  for (int op : {1, 2, 3, 5, 6, 1000}) {  // prod, max, min, the first PreMulSum handles
    NcclCall facts = eligible_facts();
    facts.op = op;
    EXPECT_EQ(classify_nccl(facts, with_compressor("fp16")).path, ReductionPath::pass_through)
        << op;
  }
}

TEST(NcclEligibility, SixteenBitFloatsOnlyForTopk) {
  for (int type : {kNcclFloat16, kNcclBfloat16}) {
    NcclCall facts = eligible_facts();
    facts.datatype = type;
    EXPECT_EQ(classify_nccl(facts, with_compressor("fp16")).path, ReductionPath::pass_through);
    EXPECT_EQ(classify_nccl(facts, with_compressor("bf16")).path, ReductionPath::pass_through);
    EXPECT_EQ(classify_nccl(facts, with_compressor("topk")).path, ReductionPath::topk);
  }
}

TEST(NcclEligibility, OtherTypesPassThrough) {
  for (int type : {0, 1, 2, 3, 4, 5, 8, 10, 11, 12, -1}) {  // ints, fp64, fp8, bogus
    NcclCall facts = eligible_facts();
    facts.datatype = type;
    EXPECT_EQ(classify_nccl(facts, with_compressor("topk")).path, ReductionPath::pass_through)
        << type;
  }
}

TEST(NcclEligibility, MinBytesCountsTheCallersElementSize) {
  NcclCall facts = eligible_facts();
  facts.count = 16384;  // 64 KiB of fp32
  EXPECT_EQ(classify_nccl(facts, with_compressor("fp16")).path, ReductionPath::cast);
  facts.count = 16383;
  EXPECT_EQ(classify_nccl(facts, with_compressor("fp16")).path, ReductionPath::pass_through);
  facts.datatype = kNcclBfloat16;
  facts.count = 32768;  // 64 KiB of bf16
  EXPECT_EQ(classify_nccl(facts, with_compressor("topk")).path, ReductionPath::topk);
  facts.count = 32767;
  EXPECT_EQ(classify_nccl(facts, with_compressor("topk")).path, ReductionPath::pass_through);
}

TEST(NcclEligibility, EmptyCallsPassThroughEvenWithNoMinimum) {
  NcclCall facts = eligible_facts();
  facts.count = 0;
  EXPECT_EQ(classify_nccl(facts, with_compressor("fp16", 0)).path, ReductionPath::pass_through);
}

TEST(NcclEligibility, HostBuffersPassThrough) {
  NcclCall facts = eligible_facts();
  facts.device_buffers = false;
  EXPECT_EQ(classify_nccl(facts, with_compressor("fp16")).path, ReductionPath::pass_through);
}

TEST(NcclEligibility, NonBlockingOrUnknownCommunicatorsPassThrough) {
  NcclCall facts = eligible_facts();
  facts.blocking_comm = false;
  EXPECT_EQ(classify_nccl(facts, with_compressor("fp16")).path, ReductionPath::pass_through);
  facts = eligible_facts();
  facts.comm_size = 0;
  EXPECT_EQ(classify_nccl(facts, with_compressor("topk")).path, ReductionPath::pass_through);
}

TEST(NcclEligibility, APerCallConfigThatAsksForAnythingPassesThrough) {
  NcclCall facts = eligible_facts();
  facts.coll_config = true;
  for (const char* name : {"fp16", "bf16", "topk"}) {
    const ReductionVerdict verdict = classify_nccl(facts, with_compressor(name));
    EXPECT_EQ(verdict.path, ReductionPath::pass_through) << name;
    EXPECT_STREQ(verdict.reason, "per-call config") << name;
  }
}

TEST(NcclEligibility, TopkNeedsUint32Indices) {
  NcclCall facts = eligible_facts();
  facts.count = 0x100000000ull;
  EXPECT_EQ(classify_nccl(facts, with_compressor("topk")).path, ReductionPath::pass_through);
  EXPECT_EQ(classify_nccl(facts, with_compressor("fp16")).path, ReductionPath::cast);
}

TEST(NcclEligibility, ElementSizes) {
  EXPECT_EQ(nccl_elem(kNcclFloat32), ElemType::fp32);
  EXPECT_EQ(nccl_elem(kNcclFloat16), ElemType::fp16);
  EXPECT_EQ(nccl_elem(kNcclBfloat16), ElemType::bf16);
  EXPECT_EQ(nccl_elem(8), ElemType::other);
  EXPECT_EQ(nccl_call_facts(kNcclFloat32, kNcclSum, 3, false).bytes(), 12u);
  EXPECT_EQ(nccl_call_facts(kNcclBfloat16, kNcclSum, 3, false).bytes(), 6u);
  EXPECT_EQ(nccl_call_facts(8, kNcclSum, 3, false).bytes(), 0u);
}

NcclModeFacts mode(const char* env, bool has_config, int config_blocking = kNcclConfigUndefInt,
                   NcclParent parent = NcclParent::none) {
  NcclModeFacts facts;
  facts.env_blocking = env;
  facts.has_config = has_config;
  facts.config_blocking = config_blocking;
  facts.parent = parent;
  return facts;
}

TEST(NcclBlockingMode, DefaultIsBlockingAndTheConfigDecidesWithoutTheEnvironment) {
  EXPECT_TRUE(nccl_blocking_mode(mode(nullptr, false)));
  EXPECT_TRUE(nccl_blocking_mode(mode(nullptr, true)));  // NCCL_CONFIG_UNDEF_INT: the default
  EXPECT_TRUE(nccl_blocking_mode(mode(nullptr, true, 1)));
  EXPECT_FALSE(nccl_blocking_mode(mode(nullptr, true, 0)));
}

TEST(NcclBlockingMode, TheEnvironmentOverridesTheConfig) {
  EXPECT_TRUE(nccl_blocking_mode(mode("1", true, 0)));
  EXPECT_FALSE(nccl_blocking_mode(mode("0", true, 1)));
  EXPECT_FALSE(nccl_blocking_mode(mode("0", false)));
  EXPECT_FALSE(nccl_blocking_mode(mode("0x0", false)));  // strtoll, base 0, as NCCL reads it
  EXPECT_TRUE(nccl_blocking_mode(mode("1", false, kNcclConfigUndefInt, NcclParent::non_blocking)));
  // Values NCCL ignores: the config (or default) decides.
  EXPECT_FALSE(nccl_blocking_mode(mode("", true, 0)));
  EXPECT_TRUE(nccl_blocking_mode(mode("", false)));
  EXPECT_FALSE(nccl_blocking_mode(mode("2", true, 0)));
  EXPECT_TRUE(nccl_blocking_mode(mode("2", false)));
  EXPECT_TRUE(nccl_blocking_mode(mode("99999999999999999999", false)));  // out of range
}

TEST(NcclBlockingMode, OnlyASplitWithoutConfigInheritsItsParentsMode) {
  EXPECT_FALSE(nccl_blocking_mode(mode(nullptr, false, 0, NcclParent::non_blocking)));
  EXPECT_TRUE(nccl_blocking_mode(mode(nullptr, false, 0, NcclParent::blocking)));
  // A config that leaves the mode unset gets NCCL's default, not the parent's.
  EXPECT_TRUE(
      nccl_blocking_mode(mode(nullptr, true, kNcclConfigUndefInt, NcclParent::non_blocking)));
  EXPECT_FALSE(nccl_blocking_mode(mode(nullptr, true, 0, NcclParent::blocking)));
  // A parent we never saw: its mode is not known, so the child is not taken as blocking.
  EXPECT_FALSE(nccl_blocking_mode(mode(nullptr, false, kNcclConfigUndefInt, NcclParent::unknown)));
}

TEST(NcclBlockingMode, AnInitInProgressIsNonBlocking) {
  NcclModeFacts facts = mode("1", true, 1);
  facts.init_in_progress = true;
  EXPECT_FALSE(nccl_blocking_mode(facts));
}

TEST(NcclShapeRule, ZeroRanksMeansAskAgainLater) {
  // A communicator created inside a group answers 0 ranks, with success,
  // until the outermost ncclGroupEnd.
  EXPECT_EQ(nccl_shape(true, 0), NcclShape::later);
  EXPECT_EQ(nccl_shape(true, 4), NcclShape::ready);
  EXPECT_EQ(nccl_shape(true, 1), NcclShape::ready);
  EXPECT_EQ(nccl_shape(false, 4), NcclShape::never);
  // Until then its calls pass through.
  NcclCall facts = eligible_facts();
  facts.comm_size = 0;
  EXPECT_EQ(classify_nccl(facts, with_compressor("fp16")).path, ReductionPath::pass_through);
}

}  // namespace
}  // namespace slimreduce
