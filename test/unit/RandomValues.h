//===- RandomValues.h - the kernel tests' inputs ----------------*- C++ -*-===//

#ifndef TWILL_TEST_UNIT_RANDOMVALUES_H
#define TWILL_TEST_UNIT_RANDOMVALUES_H

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace twill::test {

/// `count` values uniform in [-1, 1), the same for a seed on every run.
inline std::vector<float> randomValues(size_t count, unsigned seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float &value : values)
    value = uniform(generator);
  return values;
}

inline void expectNear(const std::vector<float> &actual,
                       const std::vector<float> &expected,
                       float tolerance = 1e-5f) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i)
    ASSERT_NEAR(actual[i], expected[i], tolerance) << "at " << i;
}

/// Each of `actual` within `absolute` + `relative` |expected| of its
/// reference (computed in double).
inline void expectClose(const std::vector<float> &actual,
                        const std::vector<double> &expected, double relative,
                        double absolute) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i)
    ASSERT_NEAR(actual[i], expected[i],
                absolute + relative * std::abs(expected[i]))
        << "at " << i;
}

} // namespace twill::test

#endif // TWILL_TEST_UNIT_RANDOMVALUES_H
