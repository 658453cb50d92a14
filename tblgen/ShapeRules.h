//===- ShapeRules.h - the shape rules the ops' ODS names --------*- C++ -*-===//
//
// Read for the emitters that declare the rules, call them on the runtime's
// instructions, and verify the dialect's ops by them.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_TBLGEN_SHAPERULES_H
#define TWILL_TBLGEN_SHAPERULES_H

#include "tblgen/OpRecords.h"

namespace twill::tblgen {

/// A function of twill::shapes and the ops that name it, with the values
/// it takes (the first op's names).
struct ShapeRule {
  std::string function;
  std::vector<OdsValue> values;
  std::vector<const OpRecord *> ops;
};

/// The values an op's shape rule takes: its operands and results; fails
/// on a variadic one, or an optional operand before a required one.
std::vector<OdsValue> shapeRuleValues(const OpRecord &op);

/// Every rule the ops name, in the order first named; fails where two ops
/// that name one rule differ in the values it takes.
std::vector<ShapeRule> readShapeRules(const std::vector<OpRecord> &ops);

} // namespace twill::tblgen

#endif // TWILL_TBLGEN_SHAPERULES_H
