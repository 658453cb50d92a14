//===- Executable.h - loading and checking compiled jobs --------*- C++ -*-===//

#ifndef TWILL_RUNTIME_EXECUTABLE_EXECUTABLE_H
#define TWILL_RUNTIME_EXECUTABLE_EXECUTABLE_H

#include "proto/executable.pb.h"
#include "runtime/executable/MemoryPlan.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstddef>
#include <vector>

namespace twill {

/// Reads a .twx file written by twillc and verifies it.
llvm::Expected<Executable> loadExecutable(llvm::StringRef path);

/// Checks what the runtime relies on: sizes agree with shapes and dtypes,
/// every buffer index is in range, every buffer is written once, every
/// operand is written before it is read, every instruction has a known
/// opcode and all its attributes, and the memory plan is sound.
llvm::Error verifyExecutable(const Executable &executable);

int64_t numElements(const Buffer &buffer);
int64_t bytesPerElement(DType dtype);

/// The memory of every buffer of an Executable: the values its memory plan
/// places share one arena, the others have their own.
class BufferSet {
public:
  explicit BufferSet(const Executable &executable);

  const Executable &executable() const { return program; }
  const Buffer &info(int id) const { return program.buffers(id); }
  const MemoryPlan &plan() const { return memoryPlan; }
  /// Buffer `id`'s host memory, allocated when first asked for (zeros at
  /// first for memory of its own), so a backend computing elsewhere leaves
  /// the values it never reads back without host memory.
  std::byte *data(int id);

  template <typename T> T *as(int id) {
    return reinterpret_cast<T *>(data(id));
  }

  /// The host copy of a float buffer (fp32, or bf16 widened), or of a
  /// byte buffer (each byte's value), as fp32 values; an error for any
  /// other dtype.
  llvm::Expected<std::vector<float>> floats(int id);
  /// Stores fp32 values (as many as the buffer holds) in a float buffer,
  /// rounding them for a bf16 one.
  llvm::Error setFloats(int id, llvm::ArrayRef<float> values);
  /// Stores bytes (as many as the buffer holds) in a U8 buffer.
  llvm::Error setBytes(int id, llvm::ArrayRef<uint8_t> bytes);

private:
  const Executable &program;
  MemoryPlan memoryPlan;
  std::vector<std::vector<std::byte>> storage;
  std::vector<std::byte> arena, hostArena;
};

} // namespace twill

#endif // TWILL_RUNTIME_EXECUTABLE_EXECUTABLE_H
