//===- Dispatch.h - tokens sorted by expert and back ------------*- C++ -*-===//
//
// A mixture of experts runs each expert on the tokens routed to it, so a
// group's tokens are put in order of expert: slot (t, j), token t's j-th
// choice, becomes row `positions[t, j]` of the group's rows, the rows of
// expert 0 first, each expert's in slot order (a stable sort, the same on
// every backend). `dispatch` copies each token into its slots' rows,
// `combine` sums each token's rows back, weighted; each is the other's
// gradient. Both backends run these functions, a slot or a token a call.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_SUPPORT_DISPATCH_H
#define TWILL_SUPPORT_DISPATCH_H

#include "support/HostDevice.h"

#include <cstdint>

namespace twill::dispatch {

/// The rows of one group's slots (`indices` [slots], each an expert of
/// `experts`) and how many each expert gets (`counts` [experts]). An index
/// outside the experts takes no row: its position is -1.
TWILL_HOST_DEVICE inline void expertPositions(const int32_t *indices,
                                              int64_t slots, int64_t experts,
                                              int32_t *positions,
                                              int32_t *counts) {
  auto valid = [&](int32_t e) { return e >= 0 && e < experts; };
  for (int64_t e = 0; e < experts; ++e)
    counts[e] = 0;
  for (int64_t s = 0; s < slots; ++s)
    if (valid(indices[s]))
      ++counts[indices[s]];
  // counts[e] becomes expert e's next row, from the first after the
  // experts before it, and ends as the first after its own.
  int32_t first = 0;
  for (int64_t e = 0; e < experts; ++e) {
    int32_t count = counts[e];
    counts[e] = first;
    first += count;
  }
  for (int64_t s = 0; s < slots; ++s)
    positions[s] = valid(indices[s]) ? counts[indices[s]]++ : -1;
  for (int64_t e = experts - 1; e > 0; --e)
    counts[e] -= counts[e - 1];
}

/// Element `h` of a token's combined value: the weighted sum of its k
/// slots' rows (`rows` [rows, width]; `positions` and `weights` [k], no
/// weights: 1), in slot order; a slot without a row adds nothing.
TWILL_HOST_DEVICE inline float combineElement(const float *rows,
                                              const int32_t *positions,
                                              const float *weights, int64_t k,
                                              int64_t width, int64_t h) {
  float sum = 0;
  for (int64_t j = 0; j < k; ++j)
    if (positions[j] >= 0)
      sum += (weights ? weights[j] : 1.0f) * rows[positions[j] * width + h];
  return sum;
}

/// dL/dweight of a slot: its row's dot product with its token's dL/dout.
TWILL_HOST_DEVICE inline float weightGrad(const float *row, const float *grad,
                                          int64_t width) {
  float sum = 0;
  for (int64_t h = 0; h < width; ++h)
    sum += row[h] * grad[h];
  return sum;
}

} // namespace twill::dispatch

#endif // TWILL_SUPPORT_DISPATCH_H
