//===- Opcodes.cpp - what the runtime knows of each instruction kind ------===//

#include "runtime/executable/Opcodes.h"

#include "llvm/ADT/StringExtras.h"

using namespace twill;

std::string twill::opcodeName(Opcode opcode) {
  return llvm::StringRef(Opcode_Name(opcode)).lower();
}

std::vector<Opcode> twill::allOpcodes() {
  std::vector<Opcode> opcodes;
  for (int value = Opcode_MIN; value <= Opcode_MAX; ++value)
    if (Opcode_IsValid(value) && value != OPCODE_UNSPECIFIED)
      opcodes.push_back(Opcode(value));
  return opcodes;
}

Instruction::AttributesCase twill::attributesOf(Opcode opcode) {
  switch (opcode) {
  case EMBEDDING:
    return Instruction::kEmbedding;
  case MATMUL:
    return Instruction::kMatmul;
  case RMS_NORM:
  case RMS_NORM_GRAD:
  case RMS_NORM_WEIGHT_GRAD:
    return Instruction::kRmsNorm;
  case ROPE:
  case ROPE_GRAD:
    return Instruction::kRope;
  case ATTENTION:
  case ATTENTION_GRAD:
    return Instruction::kAttention;
  case CROSS_ENTROPY:
  case CROSS_ENTROPY_GRAD:
    return Instruction::kCrossEntropy;
  case SCALE:
    return Instruction::kScale;
  case TRANSPOSE:
    return Instruction::kTranspose;
  case CONSTANT:
    return Instruction::kConstant;
  case CLIP_COEFFICIENT:
    return Instruction::kClipCoefficient;
  case LR_SCHEDULE:
    return Instruction::kLrSchedule;
  case ADAMW:
    return Instruction::kAdamw;
  case ALL_REDUCE:
    return Instruction::kAllReduce;
  case ALL_GATHER:
  case REDUCE_SCATTER:
  case LOCAL_SLICE:
    return Instruction::kGather;
  case ALL_TO_ALL:
    return Instruction::kAllToAll;
  case OPCODE_UNSPECIFIED:
  case ADD:
  case MUL:
  case DIV:
  case SWIGLU:
  case RESHAPE:
  case CAST:
  case EMBEDDING_GRAD:
  case SWIGLU_GRAD:
  case GLOBAL_NORM:
  case SUM_SQUARES:
  case SQRT:
  case INCREMENT:
    return Instruction::ATTRIBUTES_NOT_SET;
  }
  return Instruction::ATTRIBUTES_NOT_SET;
}

bool twill::isCollective(Opcode opcode) {
  switch (opcode) {
  case ALL_GATHER:
  case REDUCE_SCATTER:
  case ALL_REDUCE:
  case ALL_TO_ALL:
    return true;
  default:
    return false;
  }
}
