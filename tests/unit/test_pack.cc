// Tests for kernels/pack.h, the CPU twin of the GPU's batched pack/unpack of
// fusion buffers. The reference is the one-tensor cast kernels (tested on
// their own in test_cast.cc) applied tensor by tensor, and memcpy for fp32.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/element_rules.h"
#include "kernels/pack.h"

namespace slimreduce::kernels {
namespace {

constexpr std::uint8_t kPoison = 0xA5;

std::size_t width_of(FusedType type) { return type == FusedType::fp32 ? 4 : 2; }

const char* name_of(FusedType type) {
  return type == FusedType::fp32 ? "fp32" : type == FusedType::fp16 ? "fp16" : "bf16";
}

// Gradient-like values with NaN payloads, infinities, subnormals and values
// past fp16's range sprinkled in.
std::vector<float> values(std::size_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) {
    const unsigned pick = rng() % 500;
    if (pick == 0) {
      x = bits_float(0x7fc12345u);
    } else if (pick == 1) {
      x = -INFINITY;
    } else if (pick == 2) {
      x = bits_float(0x00000abcu);
    } else if (pick == 3) {
      x = 70000.0f;
    } else {
      x = normal(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 30) - 15);
    }
  }
  return v;
}

// A batch of `tensors` tensors of random sizes (the first empty), laid out
// one after the other at fusion_align'ed offsets, with error feedback on
// every other one.
struct Batch {
  std::vector<std::vector<float>> in, residual;
  std::vector<PackItem> items;
  std::size_t elements = 0;  // of the fusion buffer

  Batch(int tensors, std::size_t max_size, std::uint32_t seed) {
    std::mt19937 rng(seed);
    for (int t = 0; t < tensors; ++t) {
      const std::size_t n = t == 0 ? 0 : rng() % (max_size + 1);
      in.push_back(values(n, rng));
      residual.push_back(values(n, rng));
      for (float& r : residual.back()) r = std::isfinite(r) ? r * 1e-3f : 0.0f;
    }
    for (int t = 0; t < tensors; ++t) {
      const std::size_t n = in[t].size();
      items.push_back(
          {in[t].data(), t % 2 ? residual[t].data() : nullptr, n, elements, fusion_align(n) - n});
      elements += fusion_align(n);
    }
  }
};

class PackBatch : public ::testing::TestWithParam<std::tuple<FusedType, std::size_t>> {};

TEST_P(PackBatch, EachTensorIsItsOwnCastAtItsOffsetAndPadsAreZero) {
  const auto [type, max_size] = GetParam();
  Batch batch(40, max_size, 1);
  Batch reference(40, max_size, 1);  // the same inputs and residuals, packed one by one
  const std::size_t width = width_of(type);
  std::vector<std::uint8_t> fused(batch.elements * width + 64, kPoison);
  pack_batch(type, batch.items.data(), batch.items.size(), fused.data());
  for (std::size_t t = 0; t < batch.items.size(); ++t) {
    const PackItem& item = reference.items[t];
    const std::uint8_t* got = fused.data() + item.offset * width;
    std::vector<std::uint8_t> want(item.count * width);
    if (type == FusedType::fp32) {
      if (item.count) std::memcpy(want.data(), item.in, want.size());
    } else {
      compress(type == FusedType::fp16 ? HalfFormat::fp16 : HalfFormat::bf16, item.in,
               item.residual, reinterpret_cast<std::uint16_t*>(want.data()), item.count,
               Isa::scalar);
    }
    // An empty tensor's want.data() may be null, which memcmp must not get.
    ASSERT_TRUE(want.empty() || std::memcmp(got, want.data(), want.size()) == 0) << "tensor " << t;
    for (std::size_t b = 0; b < item.pad * width; ++b) {
      ASSERT_EQ(got[want.size() + b], 0) << "pad byte " << b << " of tensor " << t;
    }
    if (type != FusedType::fp32 && item.residual) {
      ASSERT_EQ(std::memcmp(batch.residual[t].data(), reference.residual[t].data(),
                            item.count * sizeof(float)),
                0)
          << "residual of tensor " << t;
    }
  }
  for (std::size_t b = batch.elements * width; b < fused.size(); ++b) {
    ASSERT_EQ(fused[b], kPoison) << "wrote past the buffer at byte " << b;
  }
}

TEST_P(PackBatch, UnpackWidensAndDividesAsTheGpuTwinDoes) {
  const auto [type, max_size] = GetParam();
  Batch batch(25, max_size, 2);
  std::vector<std::uint8_t> fused(batch.elements * width_of(type));
  pack_batch(type, batch.items.data(), batch.items.size(), fused.data());
  for (int divisor : {1, 3, 8}) {
    std::vector<std::vector<float>> out;
    std::vector<UnpackItem> items;
    for (const PackItem& p : batch.items) {
      out.emplace_back(p.count, -1.0f);
      items.push_back({out.back().data(), p.count, p.offset});
    }
    unpack_batch(type, fused.data(), items.data(), items.size(), divisor);
    for (std::size_t t = 0; t < items.size(); ++t) {
      for (std::size_t i = 0; i < items[t].count; ++i) {
        const std::size_t at = items[t].offset + i;
        float widened = 0;
        if (type == FusedType::fp32) {
          std::memcpy(&widened, fused.data() + at * 4, 4);
        } else {
          std::uint16_t h = 0;
          std::memcpy(&h, fused.data() + at * 2, 2);
          widened = type == FusedType::fp16 ? fp16_bits_to_float(h) : bf16_bits_to_float(h);
        }
        // Divisor 1 keeps every bit (NaN payloads too); others divide once.
        const float want = divisor == 1 ? widened : widened / static_cast<float>(divisor);
        ASSERT_EQ(float_bits(out[t][i]), float_bits(want))
            << "tensor " << t << " element " << i << " divisor " << divisor;
      }
    }
  }
}

TEST_P(PackBatch, EveryInstructionSetGivesTheSameBits) {
  const auto [type, max_size] = GetParam();
  Batch scalar_batch(30, max_size, 3), best_batch(30, max_size, 3);
  const std::size_t bytes = scalar_batch.elements * width_of(type);
  std::vector<std::uint8_t> scalar(bytes, 1), best(bytes, 2);
  pack_batch(type, scalar_batch.items.data(), scalar_batch.items.size(), scalar.data(),
             Isa::scalar);
  pack_batch(type, best_batch.items.data(), best_batch.items.size(), best.data(), best_isa());
  EXPECT_EQ(scalar, best) << isa_name(best_isa());
  for (std::size_t t = 0; t < scalar_batch.residual.size(); ++t) {
    const std::vector<float>& want = scalar_batch.residual[t];
    // Bits, not ==: a residual may hold NaN; an empty one's data() may be null.
    EXPECT_TRUE(want.empty() || std::memcmp(want.data(), best_batch.residual[t].data(),
                                            want.size() * sizeof(float)) == 0)
        << "residual of tensor " << t;
  }
}

INSTANTIATE_TEST_SUITE_P(
    TypesAndSizes, PackBatch,
    ::testing::Combine(::testing::Values(FusedType::fp32, FusedType::fp16, FusedType::bf16),
                       ::testing::Values(std::size_t{7}, std::size_t{100}, std::size_t{5000})),
    [](const auto& info) {
      return std::string(name_of(std::get<0>(info.param))) + "_upto" +
             std::to_string(std::get<1>(info.param));
    });

TEST(PackBatch, AFp32BufferCarriesEveryBitBackIncludingNaNPayloads) {
  const std::vector<float> in = {bits_float(0x7fc12345u), bits_float(0xffa00001u), -0.0f,
                                 bits_float(0x00000001u), 3.5f};
  const PackItem item{in.data(), nullptr, in.size(), 0, fusion_align(in.size()) - in.size()};
  std::vector<float> fused(fusion_align(in.size()), 1.0f), out(in.size());
  pack_batch(FusedType::fp32, &item, 1, fused.data());
  const UnpackItem back{out.data(), out.size(), 0};
  unpack_batch(FusedType::fp32, fused.data(), &back, 1, 1);
  for (std::size_t i = 0; i < in.size(); ++i) EXPECT_EQ(float_bits(out[i]), float_bits(in[i]));
  EXPECT_EQ(float_bits(fused[in.size()]), 0u) << "the pad is +0";
}

TEST(PackBatch, FusionOffsetsAreSixteenByteAlignedForEveryWidth) {
  for (std::size_t n : {0u, 1u, 7u, 8u, 9u, 1000u}) {
    EXPECT_EQ(fusion_align(n) % 8, 0u);
    EXPECT_GE(fusion_align(n), n);
    EXPECT_LT(fusion_align(n) - n, 8u);
  }
}

TEST(PackBatch, ADivisorBelowOneIsRefused) {
  float out = 0, fused = 1;
  const UnpackItem item{&out, 1, 0};
  EXPECT_THROW(unpack_batch(FusedType::fp32, &fused, &item, 1, 0), std::invalid_argument);
}

}  // namespace
}  // namespace slimreduce::kernels
