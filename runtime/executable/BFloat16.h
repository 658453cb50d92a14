//===- BFloat16.h - bf16 storage of fp32 values -----------------*- C++ -*-===//
//
// bf16 is the top half of an fp32: widening is exact, narrowing rounds to
// nearest even, as PyTorch and CUDA's __float2bfloat16_rn do, so a number
// stored by the cpu and the cuda backend is the same bits (a NaN stays a
// NaN, though CUDA's carries no payload).
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_EXECUTABLE_BFLOAT16_H
#define TWILL_RUNTIME_EXECUTABLE_BFLOAT16_H

#include <cstdint>
#include <cstring>

namespace twill {

inline float bf16ToFloat(uint16_t bf16) {
  uint32_t bits = uint32_t(bf16) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

inline uint16_t floatToBF16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN: keep it quiet, and a NaN
    return uint16_t((bits >> 16) | 0x40);
  uint32_t roundingBias = 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t((bits + roundingBias) >> 16);
}

inline void widenBF16(const uint16_t *from, float *to, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    to[i] = bf16ToFloat(from[i]);
}

inline void narrowToBF16(const float *from, uint16_t *to, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    to[i] = floatToBF16(from[i]);
}

} // namespace twill

#endif // TWILL_RUNTIME_EXECUTABLE_BFLOAT16_H
