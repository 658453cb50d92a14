//===- DropoutTest.cpp - the dropout mask's generator ---------------------===//

#include "support/Dropout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace twill;

namespace {

// Random123's known answers for philox4x32 with 10 rounds (kat_vectors).
TEST(Dropout, PhiloxMatchesRandom123KnownAnswers) {
  struct Case {
    uint32_t counter[4], key[2], expected[4];
  } cases[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (Case &c : cases) {
    philox4x32x10(c.counter, c.key[0], c.key[1]);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(c.counter[i], c.expected[i]) << "word " << i;
  }
}

// About `rate` of the elements dropped, independently of one another: the
// fraction over 2^20 elements within 5 standard deviations, and a feature's
// neighbours in its group of four no more often dropped together than
// chance says.
TEST(Dropout, DropsTheRateAskedIndependently) {
  for (double rate : {0.05, 0.1, 0.5}) {
    DropoutKey key{7, dropoutStream("q_proj", 6), 3, dropoutThreshold(rate)};
    int64_t dropped = 0, pairs = 0, n = 0;
    for (uint32_t token = 0; token < 1024; ++token)
      for (uint32_t group = 0; group < 256; ++group) {
        unsigned keeps = dropoutKeeps4(key, token, group);
        for (int i = 0; i < 4; ++i)
          dropped += !((keeps >> i) & 1);
        pairs += !(keeps & 1) && !(keeps & 2);
        n += 4;
      }
    double sigma = std::sqrt(rate * (1 - rate) / n);
    EXPECT_NEAR(double(dropped) / n, rate, 5 * sigma) << "rate " << rate;
    double pairRate = rate * rate, pairSigma =
        std::sqrt(pairRate * (1 - pairRate) / (n / 4));
    EXPECT_NEAR(double(pairs) / (n / 4), pairRate, 5 * pairSigma);
  }
}

// Each part of the key and counter changes the mask; a feature's bit is the
// one its group's word gives.
TEST(Dropout, EveryCoordinateChangesTheMask) {
  DropoutKey base{1, 2, 3, dropoutThreshold(0.5)};
  auto mask = [](const DropoutKey &key, uint32_t token) {
    uint64_t bits = 0;
    for (uint32_t feature = 0; feature < 64; ++feature)
      bits |= uint64_t(dropoutKeeps(key, token, feature)) << feature;
    return bits;
  };
  uint64_t reference = mask(base, 5);
  DropoutKey seed = base, stream = base, micro = base, microHigh = base;
  seed.seed = 9;
  stream.stream = 4;
  micro.microBatch = 4;
  microHigh.microBatch = 3 + (uint64_t(1) << 32);
  for (const DropoutKey &key : {seed, stream, micro, microHigh})
    EXPECT_NE(mask(key, 5), reference);
  EXPECT_NE(mask(base, 6), reference);
  for (uint32_t feature = 0; feature < 64; ++feature)
    EXPECT_EQ(dropoutKeeps(base, 5, feature),
              bool((dropoutKeeps4(base, 5, feature / 4) >> (feature % 4)) & 1));
}

// The cpu kernel's lanes give each group's bits as dropoutKeeps4 does.
TEST(Dropout, LanesAreGroupsSideBySide) {
  DropoutKey key{3, 99, (uint64_t(5) << 32) | 17, dropoutThreshold(0.3)};
  unsigned keeps[kDropoutLanes];
  for (uint32_t first : {0u, 13u, 0xfffffff0u}) {
    dropoutKeepsLanes(key, 41, first, keeps);
    for (int i = 0; i < kDropoutLanes; ++i)
      EXPECT_EQ(keeps[i], dropoutKeeps4(key, 41, first + uint32_t(i)))
          << first << " + " << i;
  }
}

// The stream is FNV-1a of the module's name (the oracle hashes the same).
TEST(Dropout, StreamIsFnv1aOfTheName) {
  EXPECT_EQ(dropoutStream("", 0), 2166136261u);
  EXPECT_EQ(dropoutStream("a", 1), 0xe40c292cu);
  const char *name = "model.layers.0.self_attn.q_proj";
  EXPECT_NE(dropoutStream(name, std::strlen(name)),
            dropoutStream("model.layers.1.self_attn.q_proj", 31));
}

} // namespace
