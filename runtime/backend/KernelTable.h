//===- KernelTable.h - each opcode's runner in one backend ------*- C++ -*-===//
//
// A backend's runners are added where they are written, by family
// (cpu/CpuOps.h, cuda/CudaOps.h), so a new op in a known family touches
// only its family's file. The Opcode enum stays the one list: a table
// answers which opcodes have no runner (KernelTablesTest checks both
// backends'), and the run loop refuses an instruction without one, naming
// its opcode.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_KERNELTABLE_H
#define TWILL_RUNTIME_BACKEND_KERNELTABLE_H

#include "runtime/executable/Opcodes.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <cassert>
#include <initializer_list>
#include <optional>
#include <vector>

namespace twill {

template <typename Kernel> class KernelTable {
public:
  KernelTable() : kernels(Opcode_MAX + 1) {}

  /// The table each of `families` adds its runners to.
  static KernelTable
  of(std::initializer_list<void (*)(KernelTable &)> families) {
    KernelTable table;
    for (auto add : families)
      add(table);
    return table;
  }

  /// Runs each of `opcodes` with `kernel`; an opcode gets one kernel.
  void add(std::initializer_list<Opcode> opcodes, Kernel kernel) {
    for (Opcode opcode : opcodes) {
      assert(!kernels[opcode] && "an opcode given two kernels");
      kernels[opcode] = kernel;
    }
  }

  /// The kernel of `opcode`, or null.
  const Kernel *find(Opcode opcode) const {
    if (opcode < 0 || size_t(opcode) >= kernels.size() || !kernels[opcode])
      return nullptr;
    return &*kernels[opcode];
  }

  /// The opcodes that have no kernel here and are not `runElsewhere` (by
  /// the run loop itself), in the enum's order.
  std::vector<Opcode>
  missing(llvm::function_ref<bool(Opcode)> runElsewhere) const {
    std::vector<Opcode> result;
    for (Opcode opcode : allOpcodes())
      if (!find(opcode) && !runElsewhere(opcode))
        result.push_back(opcode);
    return result;
  }

private:
  std::vector<std::optional<Kernel>> kernels; // by opcode
};

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_KERNELTABLE_H
