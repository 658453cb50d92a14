//===- InstructionView.h - one instruction, checked ---------*- C++ -*-===//
//
// What every backend's kernels see of an instruction: its operands and
// results (shapes, dtypes, where their values are), its attributes, and the
// checks a kernel makes before it touches memory, so a corrupt Executable is
// an error, never an out-of-bounds access. Each op family's decoders, which
// both backends' runners of the family share, are in shapes/.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_INSTRUCTIONVIEW_H
#define TWILL_RUNTIME_BACKEND_INSTRUCTIONVIEW_H

#include "runtime/backend/Blocks.h"
#include "runtime/comm/Communicator.h"
#include "runtime/executable/Executable.h"
#include "runtime/executable/Opcodes.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <optional>
#include <string>

namespace twill {

/// One instruction's operands, results and attributes, with the checks its
/// kernel needs.
class InstructionView {
public:
  /// `address` gives where a buffer's values are: host memory for the cpu
  /// backend, device memory for cuda. `widened`: the backend gives the
  /// kernel its bf16 values widened to fp32 (see bf16Buffers), so they
  /// show as F32.
  InstructionView(const Executable &executable, const Instruction &instruction,
                  llvm::function_ref<void *(int id)> address,
                  Communicator *comm, bool widened = false)
      : executable(executable), instruction(instruction), address(address),
        comm(comm), widened(widened) {}

  llvm::Error fail(const llvm::Twine &what) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   opcodeName(opcode()) + ": " + what);
  }
  /// What a shape rule of opmodel/Shapes.h found wrong, if anything, as
  /// this instruction's error: in the words of the compiler's verifier.
  llvm::Error check(llvm::Error rule) const {
    if (!rule)
      return llvm::Error::success();
    return fail(llvm::toString(std::move(rule)));
  }

  /// The buffer of operand (or, after the operands, result) `index`.
  int bufferId(int index) const {
    return index < instruction.operands_size()
               ? instruction.operands(index)
               : instruction.results(index - instruction.operands_size());
  }
  Opcode opcode() const { return instruction.opcode(); }
  /// The instruction itself: its attributes, by kind.
  const Instruction &operator*() const { return instruction; }
  const Instruction *operator->() const { return &instruction; }
  int numOperands() const { return instruction.operands_size(); }
  int numResults() const { return instruction.results_size(); }
  const Buffer &info(int index) const {
    return executable.buffers(bufferId(index));
  }
  llvm::ArrayRef<int64_t> shape(int index) const {
    return llvm::ArrayRef<int64_t>(info(index).shape().data(),
                                   info(index).shape_size());
  }
  int64_t count(int index) const { return numElements(info(index)); }
  /// The dtype of the values the kernel sees.
  DType dtype(int index) const {
    DType stored = info(index).dtype();
    return widened && stored == BF16 ? F32 : stored;
  }
  /// The float dtype of value `index` as the kernel sees it: bf16 (for a
  /// kernel that reads bf16 as stored) or fp32; checks compare the rest of
  /// the model's values against it.
  DType floatType(int index = 0) const {
    return dtype(index) == BF16 ? BF16 : F32;
  }
  int64_t dim(int index, int fromEnd) const {
    return shape(index)[shape(index).size() - 1 - fromEnd];
  }

  template <typename T> T *data(int index) const {
    return static_cast<T *>(address(bufferId(index)));
  }

  /// Fails unless the instruction has `operands` operands and `results`
  /// results, with these dtypes (operands first). Shapes are the rules'
  /// (opmodel/Shapes.h).
  llvm::Error expect(int operands, int results,
                     llvm::ArrayRef<DType> dtypes) const {
    if (llvm::Error error = expectCounts(operands, results))
      return error;
    for (auto [index, dtype] : llvm::enumerate(dtypes))
      if (llvm::Error error = expectDType(index, dtype))
        return error;
    return llvm::Error::success();
  }
  /// The same, every value of one dtype.
  llvm::Error expect(int operands, int results, DType all) const {
    if (llvm::Error error = expectCounts(operands, results))
      return error;
    for (int index = 0; index < operands + results; ++index)
      if (llvm::Error error = expectDType(index, all))
        return error;
    return llvm::Error::success();
  }

  llvm::Error expectCounts(int operands, int results) const {
    if (instruction.operands_size() == operands &&
        instruction.results_size() == results)
      return llvm::Error::success();
    return fail(llvm::formatv("expects {0} operands and {1} results", operands,
                              results));
  }
  llvm::Error expectDType(int index, DType dtype) const {
    if (this->dtype(index) == dtype)
      return llvm::Error::success();
    return fail(llvm::formatv("value {0} has dtype {1}, the kernel needs {2}",
                              index, DType_Name(this->dtype(index)),
                              DType_Name(dtype)));
  }

  llvm::Error expectSameCount(int a, int b) const {
    if (count(a) == count(b))
      return llvm::Error::success();
    return fail(llvm::formatv("values {0} and {1} differ in size", a, b));
  }

  /// The communicator, or an error for a program run without one.
  llvm::Expected<Communicator *> communicator() const {
    if (comm)
      return comm;
    return fail("needs a communicator: run it under twill-train");
  }

private:
  const Executable &executable;
  const Instruction &instruction;
  llvm::function_ref<void *(int id)> address;
  Communicator *comm;
  bool widened;
};

/// The distinct bf16 buffers of an instruction, those it reads and those it
/// writes. A backend without a bf16 kernel for the op widens the first to
/// fp32 before the kernel and rounds the second back after it: bf16
/// storage, fp32 compute, one rounding per result.
struct BF16Buffers {
  llvm::SmallVector<int> read, written;
  bool empty() const { return read.empty() && written.empty(); }
};

inline BF16Buffers bf16Buffers(const Executable &executable,
                               const Instruction &instruction) {
  BF16Buffers found;
  auto note = [&](int id, llvm::SmallVector<int> &into) {
    if (executable.buffers(id).dtype() == BF16 && !llvm::is_contained(into, id))
      into.push_back(id);
  };
  for (int id : instruction.operands())
    note(id, found.read);
  for (int id : instruction.results())
    note(id, found.written);
  return found;
}

/// This rank's coordinate along a mesh axis, and the axis size.
struct AxisPosition {
  int coordinate = 0, size = 1;
};

/// Where this rank is along an op's `shard_axis`, if it has one (not
/// empty): partitioning gave it for ops that hold one rank's block and need
/// its offset.
inline llvm::Expected<std::optional<AxisPosition>>
shardAxis(const InstructionView &in, const std::string &axis) {
  if (axis.empty())
    return std::nullopt;
  llvm::Expected<Communicator *> comm = in.communicator();
  if (!comm)
    return comm.takeError();
  int size = (*comm)->axisSize(axis);
  if (size < 0)
    return in.fail("the mesh has no axis '" + axis + "'");
  return AxisPosition{(*comm)->coordinate(axis), size};
}

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_INSTRUCTIONVIEW_H
