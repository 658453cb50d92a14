//===- OpcodeAttributes.h - the attributes each Opcode carries --*- C++ -*-===//
//
// Read from the Opcode enum's `attributes` option (executable.proto), for
// the emitter, which writes them, and the loader, which holds every
// instruction to them.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_PROTO_OPCODEATTRIBUTES_H
#define TWILL_PROTO_OPCODEATTRIBUTES_H

#include "proto/executable.pb.h"

namespace twill {

/// The attributes an instruction of this kind carries (none: it has none).
/// ExecutableTest holds every option to a field of the oneof.
inline Instruction::AttributesCase attributesOf(Opcode opcode) {
  const google::protobuf::EnumValueDescriptor *value =
      Opcode_descriptor()->FindValueByNumber(opcode);
  if (!value)
    return Instruction::ATTRIBUTES_NOT_SET;
  const google::protobuf::FieldDescriptor *field =
      Instruction::descriptor()->FindFieldByName(
          value->options().GetExtension(attributes));
  if (!field || !field->containing_oneof())
    return Instruction::ATTRIBUTES_NOT_SET;
  return Instruction::AttributesCase(field->number());
}

} // namespace twill

#endif // TWILL_PROTO_OPCODEATTRIBUTES_H
