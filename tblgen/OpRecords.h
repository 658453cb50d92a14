//===- OpRecords.h - what twill-tblgen reads of each twill op ---*- C++ -*-===//
//
// The fields Twill_Op adds to an ODS op (dialects/twill/TwillDialect.td),
// read once and checked, for every emitter: each op's one definition is
// its ODS entry, and what the Executable and the backends need of it is
// generated from these.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_TBLGEN_OPRECORDS_H
#define TWILL_TBLGEN_OPRECORDS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/TableGen/Record.h"

#include <optional>
#include <string>
#include <vector>

namespace twill::tblgen {

/// A backend's runner of an op: the function in the backend's namespace.
struct Runner {
  std::string function; // empty: the backend's run loop runs it itself
  bool bf16 = false;    // reads and writes bf16 values as stored (cuda)
};

struct OpRecord {
  const llvm::Record *def;
  std::string mnemonic;   // "rms_norm_grad"
  std::string opcodeName; // "RMS_NORM_GRAD"
  int64_t opcode;         // executable.proto's number; 0: never emitted
  std::string summary;
  std::string cppClass;           // "::mlir::twill::RmsNormGradOp"
  const llvm::Record *attributes; // its Twill_Attributes (TwillExecutable.td)
  std::string starts;             // the mnemonic of the op a start op begins
  // A collective's twill::shapes::Collective ("": none; a start op's is
  // its blocking op's), and whether it moves values between ranks.
  std::string collective;
  bool betweenRanks;
  // How many operands and results its instruction has (-1: no bound), as
  // its ODS operands and results say.
  int leastOperands, mostOperands, leastResults, mostResults;
  Runner cpu, cuda;
  // The dialect's helpers that verify it and give its sharding rule, each
  // called with the op ("" where its own code does).
  std::string verifier, shardingRule;
  // Its shape rule, a function of twill::shapes ("": none), and the values
  // that share one element type.
  std::string shapeRule;
  std::vector<std::string> sameElementType;
  // Its gradient, where each differentiable operand's is one op of its
  // operands and attributes (Twill_GradientOf): the operand, and the def of
  // the op whose result is its cotangent.
  std::vector<std::pair<std::string, const llvm::Record *>> gradients;
};

/// An operand or result of an op, as its ODS names it.
struct OdsValue {
  std::string name;   // "log_sum_exp"
  std::string getter; // "getLogSumExp"
  bool optional, variadic, result;
};
/// The op's operands, then its results, attributes aside.
std::vector<OdsValue> odsValues(const OpRecord &op);
/// "getLogSumExp": the accessor ODS gives the value or attribute `name`
/// ("log_sum_exp"; an attribute's, with "Attr" after it).
std::string getterOf(llvm::StringRef name);
/// "::mlir::twill::RmsNormGradOp": the C++ class of the op `def` defines.
std::string cppClassOf(const llvm::Record &def);

/// Every op of the twill dialect, the ones no program carries too, in the
/// order of their definitions.
std::vector<OpRecord> readOps(const llvm::RecordKeeper &records);

/// Every op of the twill dialect that the Executable carries (opcode > 0),
/// in opcode order; fails (PrintFatalError, at the op) on a missing or
/// repeated opcode, a runner missing on a backend, or a start of no op.
std::vector<OpRecord> readExecutableOps(const llvm::RecordKeeper &records);

/// The Instruction.attributes field an op's Twill_Attributes names, ""
/// for none.
llvm::StringRef attributesField(const OpRecord &op);
/// "kRmsNorm": the oneof case of Instruction.attributes' field `field`.
std::string attributesCase(llvm::StringRef field);
/// "RmsNormAttributes": the message of that field.
std::string attributesMessage(llvm::StringRef field);

/// A field of an attributes message, as the proto has it and as the
/// emitter writes it from each op that carries the message.
struct AttributeField {
  const llvm::Record *def; // its Twill_Field
  std::string name;
  int64_t number;
  std::string protoType; // "double", "int64", "string", "bool", or the enum
  bool repeated;
  std::vector<std::string> enumValues;
};
struct AttributesMessage {
  const llvm::Record *def; // its Twill_Attributes
  std::string field;       // "rms_norm"
  int64_t number;          // in Instruction.attributes
  std::vector<AttributeField> fields;
};
/// Every message some op carries, in their oneof's order, each field's type
/// from the ODS attribute of its name of the ops that carry it; fails
/// where no such op has the attribute, or two disagree on its type.
std::vector<AttributesMessage>
readAttributesMessages(const std::vector<OpRecord> &ops);
/// The ODS attribute `name` of `op` (OptionalAttr, DefaultValuedAttr and
/// ConfinedAttr looked through), or null where it has none.
const llvm::Record *odsAttribute(const OpRecord &op, llvm::StringRef name);

} // namespace twill::tblgen

#endif // TWILL_TBLGEN_OPRECORDS_H
