//===- ShapeRuleEmitters.cpp - each op's shape rule from its ODS ----------===//
//
// An op's ODS names its shape rule (`shapeRule`): a function of
// twill::shapes that takes one Shape an operand and then a result, in ODS
// order. -gen-shape-rules declares each rule once for opmodel/Shapes.h;
// -gen-instruction-shape-rules gives the runtime's checkShapeRule the
// rule of each opcode over an instruction's buffers. The dialect's
// verifyShapeRule calls the same rules (DialectEmitters.cpp), so the
// compiler and the runtime check one rule in one set of words.
//
//===----------------------------------------------------------------------===//

#include "tblgen/ShapeRules.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TableGen/Error.h"
#include "llvm/TableGen/TableGenBackend.h"

using namespace llvm;
using namespace twill::tblgen;

std::vector<OdsValue> twill::tblgen::shapeRuleValues(const OpRecord &op) {
  std::vector<OdsValue> values = odsValues(op);
  bool optionalSeen = false;
  for (const OdsValue &value : values) {
    if (value.variadic)
      PrintFatalError(op.def, "'" + op.mnemonic + "' has a shape rule, " +
                                  "which takes no variadic value ('" +
                                  value.name + "')");
    if (!value.result && optionalSeen && !value.optional)
      PrintFatalError(op.def, "'" + op.mnemonic + "' has a shape rule, " +
                                  "whose optional operands come last");
    optionalSeen |= value.optional && !value.result;
  }
  return values;
}

std::vector<ShapeRule>
twill::tblgen::readShapeRules(const std::vector<OpRecord> &ops) {
  std::vector<ShapeRule> rules;
  StringMap<size_t> byFunction;
  for (const OpRecord &op : ops) {
    if (op.shapeRule.empty())
      continue;
    std::vector<OdsValue> values = shapeRuleValues(op);
    auto [at, inserted] = byFunction.try_emplace(op.shapeRule, rules.size());
    if (inserted) {
      rules.push_back({op.shapeRule, values, {&op}});
      continue;
    }
    ShapeRule &rule = rules[at->second];
    bool same = rule.values.size() == values.size();
    for (size_t i = 0; same && i < values.size(); ++i)
      same = rule.values[i].optional == values[i].optional &&
             rule.values[i].result == values[i].result;
    if (!same)
      PrintFatalError(op.def, "'" + op.mnemonic + "' names shape rule '" +
                                  op.shapeRule + "', whose values are " +
                                  rule.ops.front()->mnemonic + "'s: not its");
    rule.ops.push_back(&op);
  }
  return rules;
}

/// "(input, weight) -> (result)": the values a rule takes, for comments.
static std::string signature(const std::vector<OdsValue> &values) {
  std::string operands, results;
  for (const OdsValue &value : values) {
    std::string &to = value.result ? results : operands;
    to += (to.empty() ? "" : ", ") + value.name + (value.optional ? "?" : "");
  }
  return "(" + operands + ") -> (" + results + ")";
}

static void emitShapeRules(const RecordKeeper &records, raw_ostream &os) {
  emitSourceFileHeader("The shape rule each op's ODS names", os, records);
  std::vector<OpRecord> ops = readOps(records);
  for (const ShapeRule &rule : readShapeRules(ops)) {
    os << "/// ";
    ListSeparator comma;
    for (const OpRecord *op : rule.ops)
      os << comma << op->mnemonic;
    os << ": " << signature(rule.values) << ".\n"
       << "llvm::Error " << rule.function << "(";
    ListSeparator params;
    for (const OdsValue &value : rule.values)
      os << params << (value.optional ? "std::optional<Shape> " : "Shape ")
         << convertToCamelFromSnakeCase(value.name);
    os << ");\n";
  }
}

static void emitInstructionShapeRules(const RecordKeeper &records,
                                      raw_ostream &os) {
  emitSourceFileHeader("checkShapeRule's case of each opcode whose op has a "
                       "shape rule",
                       os, records);
  for (const OpRecord &op : readExecutableOps(records)) {
    if (op.shapeRule.empty())
      continue;
    os << "case " << op.opcodeName
       << ":\n  return in.check(shapes::" << op.shapeRule << "(";
    ListSeparator comma;
    int operand = 0, result = 0;
    for (const OdsValue &value : shapeRuleValues(op)) {
      os << comma;
      if (value.result)
        os << "resultShape(" << result++ << ")";
      else if (value.optional)
        os << "optionalShape(" << operand++ << ")";
      else
        os << "in.shape(" << operand++ << ")";
    }
    os << "));\n";
  }
}

static TableGen::Emitter::Opt
    shapeRules("gen-shape-rules", emitShapeRules,
               "the declaration of each shape rule the ops name");
static TableGen::Emitter::Opt
    instructionShapeRules("gen-instruction-shape-rules",
                          emitInstructionShapeRules,
                          "the runtime's shape rule check of each opcode");
