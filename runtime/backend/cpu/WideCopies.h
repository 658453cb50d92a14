//===- WideCopies.h - fp32 copies of bf16 values ----------------*- C++ -*-===//
//
// Every cpu kernel computes in fp32: an instruction's bf16 values (see
// bf16Buffers) are widened into copies before its kernel runs, and the
// copies of its bf16 results rounded back once after it (a collective's:
// when its wait puts the result in place). A collective, whose transport
// moves fp32, also moves bytes (a quantized weight's) as fp32 copies, each
// value exact.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_CPU_WIDECOPIES_H
#define TWILL_RUNTIME_BACKEND_CPU_WIDECOPIES_H

#include "runtime/backend/InstructionView.h"
#include "runtime/executable/BFloat16.h"
#include "llvm/ADT/DenseMap.h"

#include <vector>

namespace twill {

struct WideCopies {
  /// `widenBytes`: U8 values too, as for a collective.
  WideCopies(BufferSet &buffers, const Instruction &instruction,
             bool widenBytes = false)
      : buffers(buffers), bf16(bf16Buffers(buffers.executable(), instruction)) {
    for (int id : bf16.read) {
      std::vector<float> &copy = values[id];
      copy.resize(numElements(buffers.info(id)));
      widenBF16(buffers.as<uint16_t>(id), copy.data(), copy.size());
    }
    for (int id : bf16.written)
      values[id].resize(numElements(buffers.info(id)));
    if (!widenBytes)
      return;
    for (int id : instruction.operands())
      if (buffers.info(id).dtype() == U8 && !values.count(id)) {
        std::vector<float> &copy = values[id];
        copy.assign(buffers.as<uint8_t>(id),
                    buffers.as<uint8_t>(id) + numElements(buffers.info(id)));
      }
    for (int id : instruction.results())
      if (buffers.info(id).dtype() == U8) {
        bytesWritten.push_back(id);
        values[id].resize(numElements(buffers.info(id)));
      }
  }

  /// Where the kernel finds buffer `id`: its copy, or the buffer itself.
  void *address(int id) {
    auto found = values.find(id);
    if (found == values.end())
      return buffers.data(id);
    return found->second.data();
  }
  bool any() const { return !bf16.empty(); }
  /// Rounds the copy of result `id` into its bf16 buffer.
  void narrow(int id) {
    narrowToBF16(values[id].data(), buffers.as<uint16_t>(id),
                 values[id].size());
  }

  /// Puts the copy of a byte result back into its buffer.
  static void narrowBytes(const float *from, uint8_t *to, size_t count) {
    for (size_t i = 0; i < count; ++i)
      to[i] = uint8_t(from[i]);
  }

  BufferSet &buffers;
  BF16Buffers bf16;
  llvm::SmallVector<int> bytesWritten;
  llvm::SmallDenseMap<int, std::vector<float>, 4> values;
};

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_CPU_WIDECOPIES_H
