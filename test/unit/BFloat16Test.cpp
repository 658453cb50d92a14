//===- BFloat16Test.cpp - bf16 rounding -----------------------------------===//

#include "runtime/executable/BFloat16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

using namespace twill;

static float fromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(floatToBF16(1.0f), 0x3f80);
  // Halfway between 0x3f80 and 0x3f81: to the even one, down.
  EXPECT_EQ(floatToBF16(fromBits(0x3f808000)), 0x3f80);
  // Halfway between 0x3f81 and 0x3f82: to the even one, up.
  EXPECT_EQ(floatToBF16(fromBits(0x3f818000)), 0x3f82);
  // Just past halfway: up.
  EXPECT_EQ(floatToBF16(fromBits(0x3f808001)), 0x3f81);
  EXPECT_EQ(floatToBF16(fromBits(0x3f807fff)), 0x3f80);
  EXPECT_EQ(floatToBF16(-0.0f), 0x8000);
  EXPECT_EQ(floatToBF16(-2.5f), 0xc020);
}

TEST(BFloat16, KeepsInfinitiesAndNaNs) {
  float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(floatToBF16(inf), 0x7f80);
  EXPECT_EQ(floatToBF16(-inf), 0xff80);
  // The largest float rounds up past bf16's largest: infinity, as in torch.
  EXPECT_EQ(floatToBF16(std::numeric_limits<float>::max()), 0x7f80);
  // A NaN whose payload lies only in the dropped bits stays a NaN.
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBF16(fromBits(0x7f800001)))));
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBF16(fromBits(0xffc00000)))));
}

TEST(BFloat16, WidensExactlyAndRoundsWithinHalfAnUlp) {
  std::mt19937 random(3);
  std::normal_distribution<float> normal(0.0f, 10.0f);
  std::vector<float> values(4096);
  for (float &value : values)
    value = normal(random);
  std::vector<uint16_t> narrow(values.size());
  std::vector<float> wide(values.size());
  narrowToBF16(values.data(), narrow.data(), values.size());
  widenBF16(narrow.data(), wide.data(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    // 8 significant bits: half an ulp is 2^-8 of the value, at most.
    EXPECT_LE(std::fabs(wide[i] - values[i]),
              std::ldexp(std::fabs(values[i]), -8))
        << values[i];
    EXPECT_EQ(floatToBF16(wide[i]), narrow[i]); // exact round trip
  }
}
