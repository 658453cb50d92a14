//===- OpcodeAttributes.h - the attributes each Opcode carries --*- C++ -*-===//
//
// Generated from each op's ODS (executableAttributes, proto/OpTable.inc),
// for the emitter, which writes them, and the loader, which holds every
// instruction to them. A field named there that the oneof lacks does not
// build.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_PROTO_OPCODEATTRIBUTES_H
#define TWILL_PROTO_OPCODEATTRIBUTES_H

#include "proto/executable.pb.h"

namespace twill {

/// The attributes an instruction of this kind carries (none: it has none).
inline Instruction::AttributesCase attributesOf(Opcode opcode) {
  switch (opcode) {
#define TWILL_OPCODE_ATTRIBUTES(opcode, field)                                 \
  case opcode:                                                                 \
    return Instruction::field;
#include "proto/OpTable.inc"
  default:
    return Instruction::ATTRIBUTES_NOT_SET;
  }
}

} // namespace twill

#endif // TWILL_PROTO_OPCODEATTRIBUTES_H
