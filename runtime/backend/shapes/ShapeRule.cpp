//===- ShapeRule.cpp - each opcode's shape rule, generated ----------------===//

#include "runtime/backend/shapes/ShapeRule.h"

#include "opmodel/Shapes.h"
#include "runtime/executable/Opcodes.h"

using namespace twill;

llvm::Error twill::checkShapeRule(const InstructionView &in) {
  if (!arityOf(in.opcode()).admits(in.numOperands(), in.numResults()))
    return in.fail(llvm::formatv("has {0} operands and {1} results, which "
                                 "its kind does not take",
                                 in.numOperands(), in.numResults()));
  [[maybe_unused]] auto resultShape = [&](int index) {
    return in.shape(in.numOperands() + index);
  };
  // An optional operand, the last ones: there where the instruction has it
  // (the generated cases may call neither).
  [[maybe_unused]] auto optionalShape =
      [&](int index) -> std::optional<shapes::Shape> {
    if (index < in.numOperands())
      return in.shape(index);
    return std::nullopt;
  };
  switch (in.opcode()) {
#include "runtime/backend/shapes/ShapeRules.inc"
  default:
    return in.fail("its op has no shape rule");
  }
}
