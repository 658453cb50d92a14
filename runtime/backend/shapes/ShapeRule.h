//===- ShapeRule.h - an instruction's shapes by its op's rule ---*- C++ -*-===//
//
// The shape rule an op's ODS names (`shapeRule`, opmodel/Shapes.h), over
// an instruction's buffers: the rule the dialect's verifier checked the
// op by, so a decoder need not name it, and says what is wrong in the
// compiler's words.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_SHAPES_SHAPERULE_H
#define TWILL_RUNTIME_BACKEND_SHAPES_SHAPERULE_H

#include "runtime/backend/InstructionView.h"

namespace twill {

/// Fails, as the instruction's error, where its buffers break its op's
/// shape rule, or where its op has none; first, as the loader does, where
/// it has more or fewer operands or results than its kind takes.
llvm::Error checkShapeRule(const InstructionView &in);

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_SHAPES_SHAPERULE_H
