//===- Opcodes.cpp - what the runtime knows of each instruction kind ------===//

#include "runtime/executable/Opcodes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

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

// Each op's ODS says which collectives move values between ranks and
// which op a start begins (proto/OpTable.inc).

Arity twill::arityOf(Opcode opcode) {
  switch (opcode) {
#define TWILL_OPCODE_ARITY(opcode, leastOperands, mostOperands, leastResults,  \
                           mostResults)                                        \
  case opcode:                                                                 \
    return {leastOperands, mostOperands, leastResults, mostResults};
#include "proto/OpTable.inc"
  default:
    return {0, -1, 0, -1};
  }
}

bool twill::isCollective(Opcode opcode) {
  switch (blockingOf(opcode)) {
#define TWILL_OPCODE_BETWEEN_RANKS(opcode) case opcode:
#include "proto/OpTable.inc"
    return true;
  default:
    return false;
  }
}

Opcode twill::startOf(Opcode blocking) {
  switch (blocking) {
#define TWILL_OPCODE_START(start, blocking)                                    \
  case blocking:                                                               \
    return start;
#include "proto/OpTable.inc"
  default:
    return OPCODE_UNSPECIFIED;
  }
}

Opcode twill::blockingOf(Opcode opcode) {
  switch (opcode) {
#define TWILL_OPCODE_START(start, blocking)                                    \
  case start:                                                                  \
    return blocking;
#include "proto/OpTable.inc"
  default:
    return opcode;
  }
}

bool twill::isStart(Opcode opcode) { return blockingOf(opcode) != opcode; }

llvm::Expected<std::vector<int>>
twill::pairStartsWithWaits(const EntryPoint &entry) {
  auto problem = [&](int index, const llvm::Twine &what) {
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        llvm::formatv("{0}: instruction {1} ({2}) {3}", entry.name(), index,
                      opcodeName(entry.instructions(index).opcode()),
                      what.str()));
  };
  std::vector<int> partner(entry.instructions_size(), -1);
  llvm::DenseMap<int, int> inFlight; // result buffer -> its start
  for (int index = 0; index < entry.instructions_size(); ++index) {
    const Instruction &instruction = entry.instructions(index);
    for (int operand : instruction.operands())
      if (instruction.opcode() != WAIT && inFlight.count(operand))
        return problem(index, llvm::formatv("reads buffer {0} while the "
                                            "collective or copy writing it "
                                            "is in flight (before its wait)",
                                            operand));
    if (instruction.opcode() == WAIT) {
      if (instruction.operands_size() != 1 || instruction.results_size() != 0)
        return problem(index, "must name one started result and write none");
      auto started = inFlight.find(instruction.operands(0));
      if (started == inFlight.end())
        return problem(index, "waits for nothing in flight");
      partner[index] = started->second;
      partner[started->second] = index;
      inFlight.erase(started);
    } else if (isStart(instruction.opcode())) {
      if (instruction.operands_size() != 1 || instruction.results_size() != 1)
        return problem(index, "must read one buffer and write one");
      inFlight[instruction.results(0)] = index;
    }
  }
  if (!inFlight.empty()) {
    int first = entry.instructions_size();
    for (auto [buffer, start] : inFlight)
      first = std::min(first, start);
    return problem(first, "is never waited");
  }
  return partner;
}
