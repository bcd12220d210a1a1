// Payloads from other ranks are checked before they are accumulated
// (algorithms/gathered.h, check_payloads): a top-k payload whose index is out
// of range or out of order fails the call with an error, whole or fused,
// rather than writing outside the output; a well-formed one goes through.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "algorithms/fused_gathered.h"
#include "algorithms/gathered.h"
#include "compressors/registry.h"

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

}  // namespace
}  // namespace slimreduce::algorithms
