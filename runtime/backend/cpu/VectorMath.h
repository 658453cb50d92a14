//===- VectorMath.h - loops the compiler vectorizes, per CPU ----*- C++ -*-===//
//
// The cpu backend is built for any x86-64, but its exp-heavy row kernels
// (softmax, cross-entropy, SiLU) are cloned for AVX-512 and AVX2 as well
// and the best clone is chosen when the program starts (GCC's
// target_clones). Their loops call expApprox, which is plain float
// arithmetic without branches or library calls, so each clone's loops
// become vector code of its width.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_CPU_VECTORMATH_H
#define TWILL_RUNTIME_BACKEND_CPU_VECTORMATH_H

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TWILL_CPU_CLONES                                                       \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TWILL_CPU_CLONES
#endif

namespace twill::cpu {

/// e^x in float, within 2 ulp of the correctly rounded value for x in
/// [-87, 88] (Cody-Waite reduction to r in [-ln2/2, ln2/2] and Cephes'
/// degree-6 polynomial for e^r, then 2^n put in the exponent); below -87 it
/// gives ~1e-38 rather than 0, above 88 it saturates. Branch-free, so a
/// loop of it vectorizes.
inline float expApprox(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  // n = round(x / ln2) by the 1.5 * 2^23 trick: exact for |n| < 2^22.
  const float shifter = 12582912.0f;
  float shifted = x * 1.44269504088896341f + shifter;
  float n = shifted - shifter;
  float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t exponent = (int32_t(n) + 127) << 23;
  float twoToN;
  std::memcpy(&twoToN, &exponent, sizeof(twoToN));
  return p * twoToN;
}

/// sum term(i) for i in [0, count): float vector lanes over 256 terms at a
/// time, those partial sums added in double, at the speed of a float sum (a
/// double accumulator keeps GCC from vectorizing the loop). Terms of one
/// sign (exponentials, squares) sum to within ~1e-7 of a double sum; a sum
/// that cancels errs by float rounding of each block's terms.
template <typename Term> inline double sumInBlocks(int64_t count, Term term) {
  double sum = 0;
  for (int64_t start = 0; start < count; start += 256) {
    int64_t end = std::min<int64_t>(count, start + 256);
    float partial = 0;
#pragma omp simd reduction(+ : partial)
    for (int64_t i = start; i < end; ++i)
      partial += term(i);
    sum += partial;
  }
  return sum;
}

} // namespace twill::cpu

#endif // TWILL_RUNTIME_BACKEND_CPU_VECTORMATH_H
