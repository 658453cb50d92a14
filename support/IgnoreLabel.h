//===- IgnoreLabel.h - the label of a position not trained on ---*- C++ -*-===//
//
// Hugging Face's convention, which the data the runtime reads follows and
// the loss the compiler traces skips: stated once, for both.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_SUPPORT_IGNORELABEL_H
#define TWILL_SUPPORT_IGNORELABEL_H

#include <cstdint>

namespace twill {

/// The label of a position that is not trained on (Hugging Face's -100).
inline constexpr int32_t kIgnoreLabel = -100;

} // namespace twill

#endif // TWILL_SUPPORT_IGNORELABEL_H
