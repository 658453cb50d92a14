//===- OpRecords.cpp - reading Twill_Op's fields --------------------------===//

#include "tblgen/OpRecords.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/Twine.h"
#include "llvm/TableGen/Error.h"

#include <algorithm>
#include <map>

using namespace llvm;
using namespace twill::tblgen;

/// The string field `name`; a fatal error naming the op where it is unset.
static std::string required(const Record &def, StringRef name) {
  if (def.isValueUnset(name))
    PrintFatalError(&def, "twill op '" + def.getValueAsString("opName") +
                              "' sets no " + name);
  return def.getValueAsString(name).str();
}

/// The values of `values` (an ODS arguments or results dag), attributes
/// aside.
static std::vector<OdsValue> valuesOf(const DagInit &values, bool result) {
  std::vector<OdsValue> found;
  for (unsigned i = 0; i < values.getNumArgs(); ++i) {
    const auto *def = dyn_cast<DefInit>(values.getArg(i));
    if (!def || def->getDef()->isSubClassOf("Attr"))
      continue;
    std::string name = values.getArgNameStr(i).str();
    found.push_back({name, getterOf(name),
                     def->getDef()->isSubClassOf("Optional"),
                     def->getDef()->isSubClassOf("Variadic"), result});
  }
  return found;
}

/// How many of `values` an instruction has: at least, and at most (-1: any
/// number).
static std::pair<int, int> countValues(const std::vector<OdsValue> &values) {
  int least = 0, most = 0;
  for (const OdsValue &value : values) {
    least += value.variadic || value.optional ? 0 : 1;
    most = value.variadic || most < 0 ? -1 : most + 1;
  }
  return {least, most};
}

std::string twill::tblgen::getterOf(StringRef name) {
  return "get" + convertToCamelFromSnakeCase(name, /*capitalizeFirst=*/true);
}

std::string twill::tblgen::cppClassOf(const Record &def) {
  StringRef name = def.getName();
  return (def.getValueAsDef("opDialect")->getValueAsString("cppNamespace") +
          "::" + name.substr(name.find('_') + 1))
      .str();
}

static OpRecord readOp(const Record &def) {
  OpRecord op;
  op.def = &def;
  op.mnemonic = def.getValueAsString("opName").str();
  op.opcodeName = StringRef(op.mnemonic).upper();
  if (def.isValueUnset("opcode"))
    PrintFatalError(&def, "twill op '" + op.mnemonic +
                              "' has no opcode (0: it is never emitted)");
  op.opcode = def.getValueAsInt("opcode");
  op.summary = def.getValueAsString("summary").str();
  op.cppClass = cppClassOf(def);
  op.attributes = def.getValueAsDef("executableAttributes");
  op.starts = def.getValueAsString("starts").str();
  op.collective = def.getValueAsString("collective").str();
  op.betweenRanks = def.getValueAsBit("betweenRanks");
  std::tie(op.leastOperands, op.mostOperands) =
      countValues(valuesOf(*def.getValueAsDag("arguments"), false));
  std::tie(op.leastResults, op.mostResults) =
      def.getValueAsBit("writesResults")
          ? countValues(valuesOf(*def.getValueAsDag("results"), true))
          : std::pair{0, 0};
  op.verifier = def.getValueAsString("verifier").str();
  op.shardingRule = def.getValueAsString("shardingRule").str();
  op.shapeRule = def.getValueAsString("shapeRule").str();
  for (StringRef name : def.getValueAsListOfStrings("sameElementType"))
    op.sameElementType.push_back(name.str());
  for (const Record *gradient : def.getValueAsListOfDefs("gradients")) {
    StringRef name = gradient->getValueAsString("op");
    const Record *gradOp = def.getRecords().getDef(name);
    if (!gradOp || !gradOp->isSubClassOf("Twill_Op"))
      PrintFatalError(&def, "'" + op.mnemonic + "''s gradient names '" + name +
                                "', which is no twill op");
    op.gradients.emplace_back(gradient->getValueAsString("operand").str(),
                              gradOp);
  }
  if (op.opcode != 0) {
    op.cpu.function = required(def, "cpuRunner");
    op.cuda.function = required(def, "cudaRunner");
    op.cuda.bf16 = def.getValueAsBit("cudaRunsBf16");
    if (op.cuda.function.empty())
      PrintFatalError(&def, "twill op '" + op.mnemonic +
                                "' has no cuda runner: every op runs on cuda");
  }
  return op;
}

/// Gives each start op its blocking op's collective kind.
static void inheritCollectives(std::vector<OpRecord> &ops) {
  StringMap<std::string> collectives;
  for (const OpRecord &op : ops)
    collectives[op.mnemonic] = op.collective;
  for (OpRecord &op : ops)
    if (!op.starts.empty())
      op.collective = collectives.lookup(op.starts);
}

std::vector<OpRecord> twill::tblgen::readOps(const RecordKeeper &records) {
  std::vector<OpRecord> ops;
  for (const Record *def : records.getAllDerivedDefinitions("Twill_Op"))
    ops.push_back(readOp(*def));
  inheritCollectives(ops);
  return ops;
}

std::vector<OpRecord>
twill::tblgen::readExecutableOps(const RecordKeeper &records) {
  std::vector<OpRecord> ops;
  std::map<int64_t, const Record *> byOpcode;
  StringMap<const OpRecord *> byMnemonic;
  for (const Record *def : records.getAllDerivedDefinitions("Twill_Op")) {
    OpRecord op = readOp(*def);
    if (op.opcode < 0)
      PrintFatalError(def, "opcode " + Twine(op.opcode) + " is negative");
    if (op.opcode == 0)
      continue;
    auto [at, inserted] = byOpcode.emplace(op.opcode, def);
    if (!inserted)
      PrintFatalError(def, "opcode " + Twine(op.opcode) + " is also " +
                               at->second->getValueAsString("opName") + "'s");
    ops.push_back(std::move(op));
  }
  std::sort(ops.begin(), ops.end(), [](const OpRecord &a, const OpRecord &b) {
    return a.opcode < b.opcode;
  });
  for (const OpRecord &op : ops)
    byMnemonic[op.mnemonic] = &op;
  for (const OpRecord &op : ops)
    if (!op.starts.empty() && !byMnemonic.count(op.starts))
      PrintFatalError(op.def, "'" + op.mnemonic + "' starts '" + op.starts +
                                  "', which is no op the Executable carries");
  inheritCollectives(ops);
  return ops;
}

std::vector<OdsValue> twill::tblgen::odsValues(const OpRecord &op) {
  std::vector<OdsValue> values =
      valuesOf(*op.def->getValueAsDag("arguments"), false);
  for (OdsValue &result : valuesOf(*op.def->getValueAsDag("results"), true))
    values.push_back(std::move(result));
  return values;
}

StringRef twill::tblgen::attributesField(const OpRecord &op) {
  return op.attributes->getValueAsString("instructionField");
}

std::string twill::tblgen::attributesCase(StringRef field) {
  return "k" + convertToCamelFromSnakeCase(field, /*capitalizeFirst=*/true);
}

std::string twill::tblgen::attributesMessage(StringRef field) {
  return convertToCamelFromSnakeCase(field, /*capitalizeFirst=*/true) +
         "Attributes";
}

const Record *twill::tblgen::odsAttribute(const OpRecord &op, StringRef name) {
  const DagInit *arguments = op.def->getValueAsDag("arguments");
  for (unsigned i = 0; i < arguments->getNumArgs(); ++i) {
    if (arguments->getArgNameStr(i) != name)
      continue;
    const auto *def = dyn_cast<DefInit>(arguments->getArg(i));
    if (!def || !def->getDef()->isSubClassOf("Attr"))
      return nullptr;
    const Record *attribute = def->getDef();
    while (!attribute->isValueUnset("baseAttr"))
      attribute = attribute->getValueAsDef("baseAttr");
    return attribute;
  }
  return nullptr;
}

/// The proto type of a field written from `attribute` (an ODS attribute,
/// OptionalAttr and the like looked through): whether repeated, and which.
static std::pair<bool, std::string> protoTypeOf(const Record &attribute) {
  StringRef kind = attribute.getName();
  if (kind == "F64Attr")
    return {false, "double"};
  if (kind == "I64Attr")
    return {false, "int64"};
  if (kind == "StrAttr")
    return {false, "string"};
  if (kind == "UnitAttr" || kind == "BoolAttr")
    return {false, "bool"};
  if (kind == "DenseI64ArrayAttr")
    return {true, "int64"};
  return {false, ""};
}

static AttributeField readField(const Record &def, StringRef message,
                                const std::vector<const OpRecord *> &ops) {
  AttributeField field{&def,
                       def.getValueAsString("name").str(),
                       def.getValueAsInt("number"),
                       "",
                       false,
                       {}};
  for (StringRef value : def.getValueAsListOfStrings("enumValues"))
    field.enumValues.push_back(value.str());
  const OpRecord *typedBy = nullptr;
  for (const OpRecord *op : ops) {
    const Record *attribute = odsAttribute(*op, field.name);
    if (!attribute)
      continue;
    auto [repeated, type] = protoTypeOf(*attribute);
    if (type.empty())
      PrintFatalError(op->def, "attribute '" + field.name + "' of '" +
                                   op->mnemonic + "' is of kind " +
                                   attribute->getName() +
                                   ", which no attributes field takes "
                                   "(protoTypeOf, tblgen/OpRecords.cpp)");
    if (!field.enumValues.empty()) {
      if (type != "string" || repeated)
        PrintFatalError(op->def, "'" + op->mnemonic + "' names " + message +
                                     "." + field.name +
                                     "'s value in no string attribute");
      type = convertToCamelFromSnakeCase(field.name, /*capitalizeFirst=*/true);
    }
    if (typedBy && (type != field.protoType || repeated != field.repeated))
      PrintFatalError(op->def, "attribute '" + field.name + "' of '" +
                                   op->mnemonic + "' is not of '" +
                                   typedBy->mnemonic + "'s type");
    typedBy = op;
    field.protoType = type;
    field.repeated = repeated;
  }
  if (!typedBy)
    PrintFatalError(&def, "no op that carries " + message +
                              " has an "
                              "attribute '" +
                              field.name + "'");
  return field;
}

std::vector<AttributesMessage>
twill::tblgen::readAttributesMessages(const std::vector<OpRecord> &ops) {
  std::map<int64_t, const Record *> byNumber;
  std::map<const Record *, std::vector<const OpRecord *>> carriers;
  for (const OpRecord &op : ops) {
    if (attributesField(op).empty())
      continue;
    carriers[op.attributes].push_back(&op);
    auto [at, inserted] =
        byNumber.emplace(op.attributes->getValueAsInt("number"), op.attributes);
    if (!inserted && at->second != op.attributes)
      PrintFatalError(op.attributes, "attributes number " + Twine(at->first) +
                                         " is also " + at->second->getName() +
                                         "'s");
  }
  std::vector<AttributesMessage> messages;
  for (auto [number, def] : byNumber) {
    AttributesMessage message{
        def, def->getValueAsString("instructionField").str(), number, {}};
    std::string name = attributesMessage(message.field);
    for (const Record *field : def->getValueAsListOfDefs("fields"))
      message.fields.push_back(readField(*field, name, carriers[def]));
    messages.push_back(std::move(message));
  }
  return messages;
}
