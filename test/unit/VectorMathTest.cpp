//===- VectorMathTest.cpp - the cpu backend's vector arithmetic -----------===//
//
// expApprox and sumInBlocks stand in for std::exp and a double sum in the
// softmax, cross-entropy, SiLU and RMSNorm kernels: they are checked here
// against those, over the whole range the kernels use.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/VectorMath.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

using namespace twill;

namespace {

/// How many floats apart two finite floats of one sign are.
int64_t ulpsApart(float a, float b) {
  int32_t x, y;
  std::memcpy(&x, &a, sizeof(x));
  std::memcpy(&y, &b, sizeof(y));
  return std::llabs(int64_t(x) - int64_t(y));
}

TEST(VectorMath, ExpApproxIsWithinTwoUlpOverItsRange) {
  int64_t worst = 0, checked = 0;
  // Every 1024th float of [0, 88], and its negation down to -87: about two
  // million arguments.
  int32_t last;
  float top = 88.0f;
  std::memcpy(&last, &top, sizeof(last));
  for (int32_t bits = 0; bits <= last; bits += 1024) {
    float x;
    std::memcpy(&x, &bits, sizeof(x));
    for (float argument : {x, -x}) {
      if (argument < -87.0f)
        continue;
      float expected = float(std::exp(double(argument)));
      worst = std::max(worst, ulpsApart(cpu::expApprox(argument), expected));
      ++checked;
    }
  }
  EXPECT_GT(checked, 1000000);
  EXPECT_LE(worst, 2);
  // Outside it: tiny rather than zero below, saturated above, never NaN.
  EXPECT_GT(cpu::expApprox(-1000.0f), 0.0f);
  EXPECT_LT(cpu::expApprox(-1000.0f), 1e-37f);
  EXPECT_FLOAT_EQ(cpu::expApprox(1000.0f), cpu::expApprox(88.0f));
}

TEST(VectorMath, SumInBlocksOfOneSignIsADoubleSumToFloatPrecision) {
  // The kernels' sums: exponentials and squares, of mixed size, over more
  // than one block and a ragged last one.
  std::vector<float> terms(1000);
  for (size_t i = 0; i < terms.size(); ++i)
    terms[i] = float(std::exp(std::sin(double(i)) * 8));
  double exact = 0;
  for (float term : terms)
    exact += term;
  double sum = cpu::sumInBlocks(int64_t(terms.size()),
                                [&](int64_t i) { return terms[i]; });
  EXPECT_NEAR(sum, exact, 1e-6 * exact);
  EXPECT_EQ(cpu::sumInBlocks(0, [](int64_t) { return 1.0f; }), 0.0);
  EXPECT_EQ(cpu::sumInBlocks(513, [](int64_t) { return 1.0f; }), 513.0);
}

} // namespace
