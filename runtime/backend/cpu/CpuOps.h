//===- CpuOps.h - the cpu backend's runners, by family ----------*- C++ -*-===//
//
// The runners, one file per family (CpuElementwise.cpp, CpuMatmul.cpp,
// ...; the cuda backend's are alike): each checks its instruction and runs
// its kernels (CpuKernels.h) on fp32 values (the backend widens bf16 ones
// first). Which runner runs an opcode is its op's ODS entry's word
// (cpuRunner), generated into CpuRunners.inc.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_CPU_CPUOPS_H
#define TWILL_RUNTIME_BACKEND_CPU_CPUOPS_H

#include "runtime/backend/InstructionView.h"
#include "runtime/backend/KernelTable.h"

namespace twill::cpu {

using Kernel = llvm::Error (*)(const InstructionView &);
using Kernels = KernelTable<Kernel>;

/// Each runner an op's ODS names (cpuRunner), declared from them.
#define TWILL_RUNNER_FUNCTION(function)                                        \
  llvm::Error function(const InstructionView &in);
#include "runtime/backend/cpu/CpuRunners.inc"

/// Each opcode's runner, as its op's ODS names it (CpuBackend.cpp).
const Kernels &kernelTable();
/// The opcodes whose op names no cpu runner: the collectives, their starts
/// and waits, which CpuCollectives runs.
bool runByCollectives(Opcode opcode);

} // namespace twill::cpu

#endif // TWILL_RUNTIME_BACKEND_CPU_CPUOPS_H
