//===- LoraScale.h - the factor a LoRA product is scaled by -----*- C++ -*-===//
//
// What the compiler traces (y = W x + scale B A x) and the runtime merges
// (W += scale B A) must agree on, as PEFT computes it.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_SUPPORT_LORASCALE_H
#define TWILL_SUPPORT_LORASCALE_H

#include <cmath>
#include <cstdint>

namespace twill {

/// lora_alpha / r, or with rank-stabilised LoRA (rsLoRA, PEFT's
/// use_rslora) lora_alpha / sqrt(r).
inline double loraScale(double alpha, int64_t rank, bool rankStabilized) {
  return alpha / (rankStabilized ? std::sqrt(double(rank)) : double(rank));
}

} // namespace twill

#endif // TWILL_SUPPORT_LORASCALE_H
