// Payloads from other ranks are checked before they are accumulated
// (algorithms/gathered.h, check_payloads): a top-k payload whose index is out
// of range or out of order fails the call with an error, whole or fused,
// rather than writing outside the output; a well-formed one goes through.
// Where the device sums them (the host has let go of the call), the device
// checks them itself: kernels::topk_accumulate_gathered, the CPU twin of
// that kernel, gives every value NaN for a corrupt payload of any rank.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <ostream>
#include <vector>

#include "algorithms/fused_gathered.h"
#include "algorithms/gathered.h"
#include "compressors/registry.h"
#include "kernels/element_rules.h"
#include "kernels/topk.h"

namespace slimreduce::algorithms {
namespace {

// Two ranks in one process: the other rank's slot is this rank's payload,
// with one index overwritten when asked.
class TwoRanks final : public backends::Transport {
 public:
  explicit TwoRanks(std::int64_t bad_index = -1, std::size_t at = 0)
      : Transport(0, 2, backends::MemoryKind::host, backends::Execution::blocking),
        bad_index_(bad_index),
        at_(at) {}
  Status sendrecv(const void*, std::size_t, int, void*, std::size_t, int) override {
    return Status::internal();
  }
  Status allgather(const void* send, std::size_t bytes, void* gathered) override {
    auto* out = static_cast<std::byte*>(gathered);
    std::memcpy(out, send, bytes);
    std::memcpy(out + bytes, send, bytes);
    if (bad_index_ >= 0) {
      const auto index = static_cast<std::uint32_t>(bad_index_);
      std::memcpy(out + bytes + at_ + sizeof index, &index, sizeof index);  // entry 1
    }
    return {};
  }
  Status reduce_scatter_sum(const float*, float*, std::size_t) override {
    return Status::internal();
  }
  Status split(int, int, std::unique_ptr<Transport>*) override { return Status::internal(); }

 private:
  std::int64_t bad_index_;
  std::size_t at_;
};

constexpr std::size_t kCount = 1000;

std::unique_ptr<compressors::GatheredCompressor> topk() {
  compressors::CompressorOptions options;
  options.topk_ratio = 0.01;  // 10 entries
  auto made = compressors::make_compressor("topk", options);
  return std::unique_ptr<compressors::GatheredCompressor>(
      static_cast<compressors::GatheredCompressor*>(made.release()));
}

std::vector<float> input() {
  std::vector<float> values(kCount);
  for (std::size_t i = 0; i < kCount; ++i) values[i] = float((i * 37) % 101) - 50.0f;
  return values;
}

Status run_one(TwoRanks& transport) {
  auto compressor = topk();
  const std::size_t slot = compressor->compressed_bytes(kCount);
  std::vector<std::byte> payload(slot), gathered(2 * slot);
  GatheredAllreduce allreduce(transport, *compressor, kCount, slot, payload.data(),
                              gathered.data());
  const std::vector<float> in = input();
  allreduce.compress(in.data(), nullptr);
  return allreduce.communicate();
}

TEST(GatheredPayloads, WellFormedOnesGoThrough) {
  TwoRanks transport;
  EXPECT_TRUE(run_one(transport).ok());
}

TEST(GatheredPayloads, AnIndexPastTheEndIsAnError) {
  TwoRanks transport(kCount);
  EXPECT_FALSE(run_one(transport).ok());
  TwoRanks far(0xffffffffll);
  EXPECT_FALSE(run_one(far).ok());
}

TEST(GatheredPayloads, AnIndexOutOfOrderIsAnError) {
  TwoRanks transport(0);  // entry 1 below entry 0 (or equal to it)
  EXPECT_FALSE(run_one(transport).ok());
}

TEST(GatheredPayloads, AFusedBatchChecksEachTensor) {
  auto compressor = topk();
  const std::vector<float> in = input();
  std::vector<float> out_a(kCount), out_b(kCount);
  std::vector<BatchTensor> tensors = {{in.data(), nullptr, out_a.data(), kCount},
                                      {in.data(), nullptr, out_b.data(), kCount}};
  const std::size_t slot = FusedGathered::slot_bytes(*compressor, tensors);
  const std::size_t second = compressor->compressed_bytes(kCount);  // where tensor 2's payload is
  for (std::int64_t bad : {std::int64_t{-1}, std::int64_t{kCount + 5}}) {
    TwoRanks transport(bad, second);
    std::vector<std::byte> payload(slot), gathered(2 * slot);
    FusedGathered fused(transport, *compressor, tensors, payload.data(), gathered.data());
    fused.compress();
    EXPECT_EQ(fused.communicate().ok(), bad < 0) << "bad index " << bad;
  }
}

// One way a payload from another rank can be corrupt: its entry `entry` set
// to `index` in rank `rank`'s payload (kWellFormed: left alone; kRepeat: set
// to the entry before it).
constexpr std::int64_t kWellFormed = -1, kRepeat = -2;
struct Corruption {
  const char* name;
  int rank;
  std::size_t entry;
  std::int64_t index;
};

void PrintTo(const Corruption& c, std::ostream* out) { *out << c.name; }

class DeviceCheck : public ::testing::TestWithParam<Corruption> {};

TEST_P(DeviceCheck, ACorruptPayloadMakesEveryValueNaNAndNothingElse) {
  namespace k = kernels;
  const Corruption c = GetParam();
  constexpr int kRanks = 3;
  const std::size_t kk = k::topk_count(kCount, 0.01);
  const std::size_t bytes = k::topk_payload_bytes(kk, k::TopkValues::fp32), stride = bytes + 16;
  std::vector<std::byte> gathered(stride * kRanks);
  std::vector<float> plain(kCount, 0.0f);
  k::TopkScratch scratch;
  for (int r = 0; r < kRanks; ++r) {
    std::vector<float> in = input();
    for (float& x : in) x *= float(r + 1);
    k::topk_compress(in.data(), nullptr, kCount, kk, k::TopkValues::fp32,
                     gathered.data() + r * stride, scratch);
    k::topk_accumulate(gathered.data() + r * stride, kk, k::TopkValues::fp32, plain.data());
  }
  std::byte* entry = gathered.data() + c.rank * stride + c.entry * 4;
  if (c.index == kRepeat) {
    std::memcpy(entry, entry - 4, 4);
  } else if (c.index != kWellFormed) {
    const auto index = static_cast<std::uint32_t>(c.index);
    std::memcpy(entry, &index, 4);
  }
  std::vector<float> got(kCount, 1.0f);
  k::topk_accumulate_gathered(gathered.data(), stride, kRanks, kk, k::TopkValues::fp32, kCount,
                              got.data());
  for (std::size_t i = 0; i < kCount; ++i) {
    const std::uint32_t want =
        c.index == kWellFormed ? k::float_bits(plain[i]) : std::uint32_t{0x7fc00000u};
    ASSERT_EQ(k::float_bits(got[i]), want) << c.name << ", value " << i;
  }
}

// The entries of input() at 1%: 10 distinct ascending indices per rank.
INSTANTIATE_TEST_SUITE_P(Payloads, DeviceCheck,
                         ::testing::Values(Corruption{"well_formed", 0, 0, kWellFormed},
                                           Corruption{"past_the_end_in_rank_1", 1, 4, kCount},
                                           Corruption{"far_past_the_end_in_rank_2", 2, 9,
                                                      0xffffffffll},
                                           Corruption{"last_entry_at_n_in_rank_0", 0, 9, kCount},
                                           Corruption{"out_of_order_in_rank_1", 1, 5, 0},
                                           Corruption{"a_repeated_index_in_rank_2", 2, 1, kRepeat}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace slimreduce::algorithms
