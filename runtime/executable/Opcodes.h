//===- Opcodes.h - what the runtime knows of each instruction kind -*- C++ -*-===//
//
// The Opcode enum (proto/executable.proto) is the one list of instruction
// kinds. What is decided per kind (the attributes it carries here, the
// kernel in each backend) is a switch over all of it, so a new kind does
// not compile until every one is answered for it (-Werror=switch).
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_EXECUTABLE_OPCODES_H
#define TWILL_RUNTIME_EXECUTABLE_OPCODES_H

#include "proto/executable.pb.h"

#include <string>
#include <vector>

namespace twill {

/// "matmul", "cross_entropy_grad": the twill op's name, for messages and
/// profiles.
std::string opcodeName(Opcode opcode);

/// Every opcode, OPCODE_UNSPECIFIED aside.
std::vector<Opcode> allOpcodes();

/// The attributes an instruction of this kind carries (none: it has none).
Instruction::AttributesCase attributesOf(Opcode opcode);

/// The kinds that move values between ranks (local_slice only slices).
bool isCollective(Opcode opcode);

} // namespace twill

#endif // TWILL_RUNTIME_EXECUTABLE_OPCODES_H
