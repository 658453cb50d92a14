//===- DispatchShape.h - the sizes of a group's slots -----------*- C++ -*-===//
//
// The decoder dispatch, combine and combine_weights_grad share on both
// backends: their rule's check, their dtypes, their sizes.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_SHAPES_DISPATCHSHAPE_H
#define TWILL_RUNTIME_BACKEND_SHAPES_DISPATCHSHAPE_H

#include "runtime/backend/shapes/ShapeRule.h"
#include "support/HostDevice.h"

#include <vector>

namespace twill {

/// `groups` groups of `tokens` tokens, `k` slots a token, values `width`
/// wide: each group has rows() rows.
struct DispatchShape {
  int64_t groups, tokens, k, width;
  TWILL_HOST_DEVICE int64_t rows() const { return tokens * k; }
};

/// Checks the instruction by its rule, and its dtypes: positions (operand
/// 1) i32, every other value f32 (weights, where there are, operand 2).
inline llvm::Expected<DispatchShape> dispatchShape(const InstructionView &in) {
  if (auto error = checkShapeRule(in))
    return std::move(error);
  int operands = in.numOperands();
  std::vector<DType> dtypes(operands + 1, F32);
  dtypes[1] = I32;
  if (auto error = in.expect(operands, 1, dtypes))
    return std::move(error);
  llvm::ArrayRef<int64_t> positions = in.shape(1);
  return DispatchShape{positions[0], positions[1], positions[2], in.dim(0, 0)};
}

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_SHAPES_DISPATCHSHAPE_H
