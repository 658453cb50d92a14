//===- Opcodes.h - what the runtime knows of each op ------------*- C++ -*-===//
//
// The Opcode enum, generated from each op's ODS entry (tblgen/), is the
// one list of instruction kinds; what the runtime decides per kind comes
// with it (proto/OpTable.inc: attributes, arity, starts, collectives; each
// backend's runners) or is a switch over all of it (-Werror=switch).
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_EXECUTABLE_OPCODES_H
#define TWILL_RUNTIME_EXECUTABLE_OPCODES_H

#include "proto/OpcodeAttributes.h"
#include "proto/executable.pb.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace twill {

/// "matmul", "cross_entropy_grad": the twill op's name, for messages and
/// profiles.
std::string opcodeName(Opcode opcode);

/// Every opcode, OPCODE_UNSPECIFIED aside.
std::vector<Opcode> allOpcodes();

/// How many operands and results an instruction of a kind has, as its
/// op's ODS says (-1: no bound).
struct Arity {
  int leastOperands, mostOperands, leastResults, mostResults;

  /// Whether `count` lies in [least, most] (most -1: no bound).
  static bool admits(int count, int least, int most) {
    return count >= least && (most < 0 || count <= most);
  }
  bool admits(int operands, int results) const {
    return admits(operands, leastOperands, mostOperands) &&
           admits(results, leastResults, mostResults);
  }
};
Arity arityOf(Opcode opcode);

/// The kinds that move values between ranks, blocking or started
/// (local_slice only slices).
bool isCollective(Opcode opcode);

/// ALL_GATHER_START for ALL_GATHER, OFFLOAD_START for OFFLOAD, ...;
/// OPCODE_UNSPECIFIED for a kind that has no start (a collective's, or a
/// copy's to or from host memory).
Opcode startOf(Opcode blocking);
/// ALL_GATHER for ALL_GATHER_START, OFFLOAD for OFFLOAD_START, ...; any
/// other kind itself.
Opcode blockingOf(Opcode opcode);
bool isStart(Opcode opcode);

/// Per instruction of `entry`, the index of its partner: a start's wait, a
/// wait's start (-1 for the rest). Fails unless every start (one operand,
/// one result) is waited exactly once later in the entry, every wait (its
/// one operand a start's result, no result of its own) ends a collective
/// or copy in flight, and nothing but its wait reads a result in flight.
llvm::Expected<std::vector<int>> pairStartsWithWaits(const EntryPoint &entry);

} // namespace twill

#endif // TWILL_RUNTIME_EXECUTABLE_OPCODES_H
