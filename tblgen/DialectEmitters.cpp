//===- DialectEmitters.cpp - the ops' verifiers and delegations -----------===//
//
// -gen-op-delegations: verifyShapeRule(op) of each op whose ODS names a
// shape rule (its `sameElementType` values of one element type, then the
// rule over its operands' and results' shapes), and verify() and
// getShardingRule() of each op whose ODS names the dialect's helper that
// does it all (`verifier`, `shardingRule`, which may be verifyShapeRule),
// so an op that is checked or sharded as others are writes no function of
// its own; buildVJP of each op whose ODS gives its `gradients`; and
// collectiveKindOf and hasStartOp from the collectives' `collective` and
// the start ops' `starts`. With GET_SHAPE_RULE_VERIFIER_DECLS: the
// verifiers' declarations.
//
//===----------------------------------------------------------------------===//

#include "tblgen/ShapeRules.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
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

/// What the gradient op's argument `name` is in the forward op's
/// buildVJP: the cotangent of its first result (`grad`), or its operand,
/// result or attribute of that name.
static std::string gradientArgument(const OpRecord &op,
                                    const std::vector<OdsValue> &values,
                                    const Record &gradOp, StringRef name) {
  if (name == "grad")
    return "cotangents[0]";
  for (const OdsValue &value : values)
    if (value.name == name)
      return value.getter + "()";
  if (odsAttribute(op, name))
    return getterOf(name) + "Attr()";
  PrintFatalError(op.def, "'" + op.mnemonic + "''s gradient op " +
                              gradOp.getName() + " takes '" + name +
                              "', which it has not");
}

/// buildVJP of an op whose ODS gives its gradients: each operand's
/// cotangent one op, made where asked for and the result has one.
static void emitGradients(const OpRecord &op, StringRef cppClass,
                          raw_ostream &os) {
  std::vector<OdsValue> values = odsValues(op);
  os << "::mlir::FailureOr<::llvm::SmallVector<::mlir::Value>> " << cppClass
     << "::buildVJP(::mlir::OpBuilder &builder, ::mlir::ValueRange "
        "cotangents, ::llvm::ArrayRef<bool> needed) {\n"
        "  ::llvm::SmallVector<::mlir::Value> "
        "grads(getOperation()->getNumOperands());\n";
  for (const auto &[operand, gradOp] : op.gradients) {
    auto value = find_if(values, [&](const OdsValue &value) {
      return value.name == operand && !value.result;
    });
    if (value == values.end() ||
        any_of(make_range(values.begin(), value + 1),
               [](const OdsValue &v) { return v.optional || v.variadic; }))
      PrintFatalError(op.def, "'" + op.mnemonic + "' has no operand '" +
                                  operand + "' before any optional one, " +
                                  "whose gradient its ODS gives");
    if (gradOp->getValueAsDag("results")->getNumArgs() != 1)
      PrintFatalError(op.def, "'" + op.mnemonic + "''s gradient op " +
                                  gradOp->getName() + " has not one result");
    int index = value - values.begin();
    os << "  if (needed[" << index << "] && cotangents[0])\n    grads[" << index
       << "] = " << StringRef(cppClassOf(*gradOp)).rsplit(':').second
       << "::create(builder, getLoc(), "
       << value->getter << "().getType()";
    const DagInit *arguments = gradOp->getValueAsDag("arguments");
    for (unsigned i = 0; i < arguments->getNumArgs(); ++i)
      os << ", "
         << gradientArgument(op, values, *gradOp, arguments->getArgNameStr(i));
    os << ");\n";
  }
  os << "  return grads;\n}\n";
}

/// collectiveKindOf(op), each collective's and each start's kind (their
/// ODS's `collective`), and hasStartOp(op), whether some op starts it.
static void emitCollectiveKinds(const std::vector<OpRecord> &ops,
                                raw_ostream &os) {
  MapVector<StringRef, std::vector<StringRef>> classesByKind;
  std::vector<StringRef> started;
  for (const OpRecord &op : ops) {
    if (!op.collective.empty())
      classesByKind[op.collective].push_back(op.cppClass);
    if (!op.starts.empty())
      for (const OpRecord &blocking : ops)
        if (blocking.mnemonic == op.starts)
          started.push_back(blocking.cppClass);
  }
  os << "std::optional<::twill::shapes::Collective>\n"
        "mlir::twill::collectiveKindOf(::mlir::Operation *op) {\n";
  for (const auto &[kind, classes] : classesByKind)
    os << "  if (::llvm::isa<" << join(classes, ", ") << ">(op))\n"
       << "    return ::twill::shapes::Collective::" << kind << ";\n";
  os << "  return std::nullopt;\n}\n"
     << "bool mlir::twill::hasStartOp(::mlir::Operation *op) {\n"
     << "  return ::llvm::isa<" << join(started, ", ") << ">(op);\n}\n";
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
    if (!op.gradients.empty())
      emitGradients(op, cppClass, os);
    if (!op.shardingRule.empty())
      os << "::mlir::twill::ShardingRule " << cppClass
         << "::getShardingRule() {\n  return " << op.shardingRule
         << "(*this);\n}\n";
  }
  emitCollectiveKinds(ops, os);
  os << "#endif\n";
}

static TableGen::Emitter::Opt
    delegations("gen-op-delegations", emitDelegations,
                "the shape rule verifiers, and verify() and "
                "getShardingRule() of the ops whose ODS names a helper");
