// The per-element rules the CPU kernels and their GPU twins share
// (kernels/element_rules.h), where hardware would let the paths differ: NaNs
// made or passed on by a sum, and NaNs divided for an average.
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

}  // namespace
}  // namespace slimreduce::kernels
