//===- Fp8.h - e4m3 (float8_e4m3fn) values ----------------------*- C++ -*-===//
//
// A frozen weight stored in FP8 (quantization.base FP8): each value an
// e4m3 byte (1 sign, 4 exponent bits of bias 7, 3 mantissa bits; no
// infinities, 0x7f and 0xff NaN, the largest finite 448), as torch's
// float8_e4m3fn holds it, times its row's fp32 scale. Shared by the
// runtime's quantizer and both backends' dequantize kernels; and the
// rounding of a product's input to e4m3 in blocks (quantization.fp8_inputs
// E4M3_BLOCKS), which both backends compute with exactly these steps.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_SUPPORT_FP8_H
#define TWILL_SUPPORT_FP8_H

#include "support/HostDevice.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace twill::fp8 {

/// The largest finite e4m3 value.
inline constexpr float kMax = 448.0f;

/// The value of e4m3 byte `bits` (exact in fp32).
inline float toFloat(uint8_t bits) {
  int exponent = (bits >> 3) & 0xf, mantissa = bits & 0x7;
  float sign = bits & 0x80 ? -1.0f : 1.0f;
  if (exponent == 0xf && mantissa == 0x7)
    return NAN;
  if (exponent == 0) // subnormal: mantissa x 2^-9
    return sign * float(mantissa) * 0x1p-9f;
  return sign * std::ldexp(1.0f + float(mantissa) / 8, exponent - 7);
}

/// `value` rounded to the nearest e4m3 (ties to even), as torch casts to
/// float8_e4m3fn: past the largest finite value, or NaN, it is NaN (0x7f
/// with the sign).
inline uint8_t fromFloat(float value) {
  uint8_t sign = std::signbit(value) ? 0x80 : 0;
  double magnitude = std::fabs(double(value));
  if (std::isnan(value))
    return 0x7f;
  if (magnitude < 0x1p-6) { // subnormal: units of 2^-9, ties to even
    double units = std::nearbyint(magnitude * 512);
    return sign | uint8_t(units); // 8 units is the least normal, 0x08
  }
  int exponent = std::ilogb(magnitude);
  double eighths = std::nearbyint(std::ldexp(magnitude, -exponent) * 8);
  if (eighths == 16) { // rounded up to the next power of two
    eighths = 8;
    ++exponent;
  }
  if (exponent > 8 || (exponent == 8 && eighths > 14))
    return sign | 0x7f; // past 448
  return sign | uint8_t((exponent + 7) << 3) | uint8_t(eighths - 8);
}

/// The scale of a block of values whose largest magnitude is `amax`: the
/// block rounded over it spans e4m3's range (a block of zeros keeps 1).
TWILL_HOST_DEVICE inline float blockScale(float amax) {
  return amax > 0 ? amax / kMax : 1.0f;
}

/// `value` rounded to the nearest e4m3 value (ties to even), past +-448
/// held at it: the value of fromFloat's byte where that is finite, as a
/// float; NaN stays NaN.
TWILL_HOST_DEVICE inline float roundToE4m3(float value) {
  if (value != value)
    return value;
  float magnitude = fminf(fabsf(value), kMax);
  if (magnitude < 0x1p-6f) // subnormal: units of 2^-9, ties to even
    magnitude = nearbyintf(magnitude * 512.0f) * 0x1p-9f;
  else { // keep 3 of fp32's 23 mantissa bits, ties to even
    uint32_t bits;
#ifdef __CUDA_ARCH__
    bits = __float_as_uint(magnitude);
#else
    std::memcpy(&bits, &magnitude, sizeof bits);
#endif
    bits = (bits + 0x7ffffu + ((bits >> 20) & 1u)) & 0xfff00000u;
#ifdef __CUDA_ARCH__
    magnitude = __uint_as_float(bits);
#else
    std::memcpy(&magnitude, &bits, sizeof bits);
#endif
  }
  return copysignf(magnitude, value);
}

/// `value` of a block whose scale is `scale` (blockScale), rounded: its
/// e4m3 code's value times the scale.
TWILL_HOST_DEVICE inline float roundInBlock(float value, float scale) {
  return roundToE4m3(value / scale) * scale;
}

/// The 256 values by byte, for a kernel to take as its argument (a device
/// reads its value from it).
struct Table {
  float values[256];
};

inline Table table() {
  Table t;
  for (int bits = 0; bits < 256; ++bits)
    t.values[bits] = toFloat(uint8_t(bits));
  return t;
}

} // namespace twill::fp8

#endif // TWILL_SUPPORT_FP8_H
