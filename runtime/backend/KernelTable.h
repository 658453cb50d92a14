//===- KernelTable.h - each opcode's runner in one backend ------*- C++ -*-===//
//
// Filled from the runners each op's ODS entry names (cpuRunner,
// cudaRunner), generated into the backend's Runners.inc: an op that names
// none does not build, so every opcode has its runner (or, on the cpu, is
// run by the run loop itself). The run loop still refuses an instruction
// without one, naming its opcode: a value no op has.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_KERNELTABLE_H
#define TWILL_RUNTIME_BACKEND_KERNELTABLE_H

#include "runtime/executable/Opcodes.h"

#include <optional>
#include <vector>

namespace twill {

template <typename Kernel> class KernelTable {
public:
  KernelTable() : kernels(Opcode_MAX + 1) {}

  /// Runs `opcode` with `kernel`.
  void add(Opcode opcode, Kernel kernel) { kernels[opcode] = kernel; }

  /// The kernel of `opcode`, or null.
  const Kernel *find(Opcode opcode) const {
    if (opcode < 0 || size_t(opcode) >= kernels.size() || !kernels[opcode])
      return nullptr;
    return &*kernels[opcode];
  }

private:
  std::vector<std::optional<Kernel>> kernels; // by opcode
};

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_KERNELTABLE_H
