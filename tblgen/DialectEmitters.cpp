//===- DialectEmitters.cpp - the ops' verifiers and delegations -----------===//
//
// -gen-op-delegations: verifyShapeRule(op) of each op whose ODS names a
// shape rule (its `sameElementType` values of one element type, then the
// rule over its operands' and results' shapes), and verify() and
// getShardingRule() of each op whose ODS names the dialect's helper that
// does it all (`verifier`, `shardingRule`, which may be verifyShapeRule),
// so an op that is checked or sharded as others are writes no function of
// its own. With GET_SHAPE_RULE_VERIFIER_DECLS: the verifiers' declarations.
//
//===----------------------------------------------------------------------===//

#include "tblgen/ShapeRules.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TableGen/Error.h"
#include "llvm/TableGen/TableGenBackend.h"

using namespace llvm;
using namespace twill::tblgen;

/// The op's value `name`, which must be a required one.
static const OdsValue &requiredValue(const OpRecord &op,
                                     const std::vector<OdsValue> &values,
                                     StringRef name) {
  auto value = find_if(
      values, [&](const OdsValue &value) { return value.name == name; });
  if (value == values.end() || value->optional)
    PrintFatalError(op.def, "'" + op.mnemonic + "' has no required value '" +
                                name + "' (sameElementType)");
  return *value;
}

static void emitShapeRuleVerifier(const OpRecord &op, StringRef cppClass,
                                  raw_ostream &os) {
  std::vector<OdsValue> values = shapeRuleValues(op);
  os << "::llvm::LogicalResult mlir::twill::verifyShapeRule(" << cppClass
     << " op) {\n";
  if (op.sameElementType.size() > 1) {
    os << "  if (::mlir::failed(expectSameElementType(op, {";
    ListSeparator comma;
    for (StringRef name : op.sameElementType)
      os << comma << "op." << requiredValue(op, values, name).getter << "()";
    os << "})))\n    return ::mlir::failure();\n";
  }
  os << "  return check(op, ::twill::shapes::" << op.shapeRule << "(";
  ListSeparator comma;
  for (const OdsValue &value : values)
    os << comma << (value.optional ? "shapeIfAny" : "shapeOf") << "(op."
       << value.getter << "())";
  os << "));\n}\n";
}

static void emitDelegations(const RecordKeeper &records, raw_ostream &os) {
  emitSourceFileHeader("Each op's shape rule verifier, and its verifier and "
                       "sharding rule where a helper of the dialect is",
                       os, records);
  std::vector<OpRecord> ops = readOps(records);
  os << "#ifdef GET_SHAPE_RULE_VERIFIER_DECLS\n"
        "#undef GET_SHAPE_RULE_VERIFIER_DECLS\n";
  for (const OpRecord &op : ops)
    if (!op.shapeRule.empty())
      os << "::llvm::LogicalResult verifyShapeRule("
         << StringRef(op.cppClass).rsplit(':').second << " op);\n";
  os << "#else\n";
  for (const OpRecord &op : ops) {
    // Not "::mlir::...": after a return type, that would continue its name.
    StringRef cppClass = StringRef(op.cppClass).ltrim(':');
    if (!op.sameElementType.empty() && op.shapeRule.empty())
      PrintFatalError(op.def, "'" + op.mnemonic +
                                  "' names sameElementType "
                                  "values but no shape rule");
    if (!op.shapeRule.empty())
      emitShapeRuleVerifier(op, cppClass, os);
    if (!op.verifier.empty())
      os << "::llvm::LogicalResult " << cppClass << "::verify() {\n"
         << "  return " << op.verifier << "(*this);\n}\n";
    if (!op.shardingRule.empty())
      os << "::mlir::twill::ShardingRule " << cppClass
         << "::getShardingRule() {\n  return " << op.shardingRule
         << "(*this);\n}\n";
  }
  os << "#endif\n";
}

static TableGen::Emitter::Opt
    delegations("gen-op-delegations", emitDelegations,
                "the shape rule verifiers, and verify() and "
                "getShardingRule() of the ops whose ODS names a helper");
