//===- RopeFrequencies.h - the rotary embedding's frequencies ---*- C++ -*-===//
//
// What both backends' rope kernels rotate by: the same table, computed in
// double on the host (the cuda backend copies it to the device once).
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_ROPEFREQUENCIES_H
#define TWILL_RUNTIME_BACKEND_ROPEFREQUENCIES_H

#include "runtime/backend/Blocks.h"

#include <cmath>
#include <cstdint>
#include <vector>

namespace twill {

/// The rotation frequency of each of the headDim / 2 pairs: Llama's inverse
/// frequencies, with Llama 3.1 scaling when `scaling.factor` is set, or
/// each divided by the factor when it alone is (linear).
inline std::vector<double>
ropeFrequencies(int64_t headDim, double theta,
                const RopeFrequencyScaling &scaling) {
  std::vector<double> frequencies(headDim / 2);
  for (int64_t i = 0; i < headDim / 2; ++i) {
    double frequency = 1.0 / std::pow(theta, double(2 * i) / headDim);
    if (scaling.factor > 0 && scaling.originalMaxPosition == 0) {
      frequency /= scaling.factor;
    } else if (scaling.factor > 0) {
      double wavelength = 2 * M_PI / frequency;
      double original = double(scaling.originalMaxPosition);
      if (wavelength > original / scaling.lowFreqFactor) {
        frequency /= scaling.factor;
      } else if (wavelength >= original / scaling.highFreqFactor) {
        double smooth = (original / wavelength - scaling.lowFreqFactor) /
                        (scaling.highFreqFactor - scaling.lowFreqFactor);
        frequency =
            (1 - smooth) * frequency / scaling.factor + smooth * frequency;
      }
    }
    frequencies[i] = frequency;
  }
  return frequencies;
}

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_ROPEFREQUENCIES_H
