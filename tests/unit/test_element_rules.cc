// The per-element rules the CPU kernels and their GPU twins share
// (kernels/element_rules.h), where hardware would let the paths differ: NaNs
// made or passed on by a sum, NaNs divided for an average, what error
// feedback keeps, and top-k's ordering key.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/element_rules.h"

namespace slimreduce::kernels {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(ElementRules, OppositeInfinitiesMakeTheX86DefaultNan) {
  // A GPU would make 0x7fffffff; every path gives what an x86 CPU gives.
  EXPECT_EQ(float_bits(add_nan_first(kInf, -kInf)), 0xffc00000u);
  EXPECT_EQ(float_bits(add_nan_first(-kInf, kInf)), 0xffc00000u);
  EXPECT_EQ(add_nan_first(kInf, kInf), kInf);
  EXPECT_EQ(add_nan_first(1.5f, 2.25f), 3.75f);
}

TEST(ElementRules, TheFirstOperandsNanWinsQuieted) {
  const float first = bits_float(0x7f800123u),
              second = bits_float(0xffc00456u);  // signalling, quiet
  EXPECT_EQ(float_bits(add_nan_first(first, second)), 0x7fc00123u);
  EXPECT_EQ(float_bits(add_nan_first(second, first)), 0xffc00456u);
  EXPECT_EQ(float_bits(add_nan_first(1.0f, first)), 0x7fc00123u);
  EXPECT_EQ(float_bits(add_nan_first(-kInf, second)), 0xffc00456u);
}

TEST(ElementRules, DividingKeepsANansSignAndPayload) {
  const float signalling = bits_float(0x7f800001u);
  EXPECT_EQ(float_bits(divide_keeping_nan(signalling, 1)), 0x7f800001u) << "1 divides nothing";
  EXPECT_EQ(float_bits(divide_keeping_nan(bits_float(0xff812345u), 3)), 0xffc12345u);
  EXPECT_EQ(float_bits(divide_keeping_nan(bits_float(0x7fc00009u), 8)), 0x7fc00009u);
  EXPECT_EQ(divide_keeping_nan(6.0f, 3), 2.0f);
  EXPECT_EQ(float_bits(divide_keeping_nan(1.0f, 3)), float_bits(1.0f / 3.0f));
  EXPECT_EQ(divide_keeping_nan(-kInf, 4), -kInf);
  EXPECT_EQ(float_bits(divide_keeping_nan(bits_float(0x00000003u), 2)), 0x00000002u)
      << "a subnormal halves and rounds to even, as a division does";
}

TEST(ElementRules, TheResidualIsWhatWasLostUnlessWhatWasSentIsNotFinite) {
  EXPECT_EQ(residual_after(1.0f, 0.75f), 0.25f);
  EXPECT_EQ(residual_after(-3.0f, -3.0f), 0.0f);
  // An fp16 overflow sends inf; a NaN input sends NaN: the residual restarts at 0.
  EXPECT_EQ(float_bits(residual_after(70000.0f, kInf)), 0u);
  EXPECT_EQ(float_bits(residual_after(-70000.0f, -kInf)), 0u);
  EXPECT_EQ(float_bits(residual_after(bits_float(0x7fc00001u), bits_float(0x7fc00001u))), 0u);
  // Top-k sends the value itself: nothing lost, even for a subnormal.
  EXPECT_EQ(float_bits(residual_after(bits_float(0x00000003u), bits_float(0x00000003u))), 0u);
}

TEST(ElementRules, TheTopkKeyOrdersNanAboveInfAboveNumbersBySize) {
  EXPECT_GT(magnitude_key(bits_float(0x7fc00000u)), magnitude_key(kInf));
  EXPECT_EQ(magnitude_key(bits_float(0xffc00000u)), magnitude_key(bits_float(0x7fc00000u)));
  EXPECT_GT(magnitude_key(-kInf), magnitude_key(std::numeric_limits<float>::max()));
  EXPECT_GT(magnitude_key(-2.0f), magnitude_key(1.5f));
  EXPECT_EQ(magnitude_key(-2.0f), magnitude_key(2.0f));
  EXPECT_EQ(magnitude_key(-0.0f), magnitude_key(0.0f));
  EXPECT_GT(magnitude_key(bits_float(0x00000001u)), magnitude_key(0.0f));
}

}  // namespace
}  // namespace slimreduce::kernels
