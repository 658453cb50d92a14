//===- HostInstruction.h - one instruction over host buffers ----*- C++ -*-===//
//
// For the tests of a cpu runner: an instruction, the Executable's buffers
// it names, and where their values are, as the cpu backend would give
// them.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_TEST_UNIT_HOSTINSTRUCTION_H
#define TWILL_TEST_UNIT_HOSTINSTRUCTION_H

#include "runtime/backend/InstructionView.h"

#include <functional>
#include <string>
#include <vector>

namespace twill::test {

/// The error's message, "" for none.
inline std::string problemOf(llvm::Error error) {
  return error ? llvm::toString(std::move(error)) : "";
}

/// One instruction over host buffers, as the cpu backend runs it.
class HostInstruction {
public:
  explicit HostInstruction(Opcode opcode) { instruction.set_opcode(opcode); }
  HostInstruction(const HostInstruction &) = delete; // its address refers to it
  template <typename T>
  void operand(DType dtype, std::vector<int64_t> shape, std::vector<T> &data) {
    instruction.add_operands(add(dtype, shape, data.data()));
  }
  template <typename T>
  void result(DType dtype, std::vector<int64_t> shape, std::vector<T> &data) {
    instruction.add_results(add(dtype, shape, data.data()));
  }
  Instruction *operator->() { return &instruction; }
  InstructionView view() const {
    return InstructionView(executable, instruction, address, nullptr);
  }

private:
  int add(DType dtype, const std::vector<int64_t> &shape, void *data) {
    Buffer &buffer = *executable.add_buffers();
    buffer.set_dtype(dtype);
    for (int64_t dim : shape)
      buffer.add_shape(dim);
    memory.push_back(data);
    return executable.buffers_size() - 1;
  }
  Executable executable;
  Instruction instruction;
  std::vector<void *> memory;
  // What the view's function_ref refers to, as long as the instruction.
  std::function<void *(int)> address = [this](int id) { return memory[id]; };
};

} // namespace twill::test

#endif // TWILL_TEST_UNIT_HOSTINSTRUCTION_H
