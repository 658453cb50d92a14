//===- Executable.h - loading and checking compiled jobs --------*- C++ -*-===//

#ifndef TWILL_RUNTIME_EXECUTABLE_EXECUTABLE_H
#define TWILL_RUNTIME_EXECUTABLE_EXECUTABLE_H

#include "proto/executable.pb.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstddef>
#include <vector>

namespace twill {

/// Reads a .twx file written by twillc and verifies it.
llvm::Expected<Executable> loadExecutable(llvm::StringRef path);

/// Checks what the runtime relies on: sizes agree with shapes and dtypes,
/// every buffer index is in range, every buffer is written once, and every
/// operand is written before it is read.
llvm::Error verifyExecutable(const Executable &executable);

int64_t numElements(const Buffer &buffer);
int64_t bytesPerElement(DType dtype);

/// The memory of every buffer of an Executable.
class BufferSet {
public:
  explicit BufferSet(const Executable &executable);

  const Executable &executable() const { return program; }
  const Buffer &info(int id) const { return program.buffers(id); }
  /// Buffer `id`'s host memory, zeros at first; allocated when first asked
  /// for, so a backend computing elsewhere leaves the values it never reads
  /// back without host memory.
  std::byte *data(int id);

  template <typename T> T *as(int id) {
    return reinterpret_cast<T *>(data(id));
  }

private:
  const Executable &program;
  std::vector<std::vector<std::byte>> storage;
};

} // namespace twill

#endif // TWILL_RUNTIME_EXECUTABLE_EXECUTABLE_H
