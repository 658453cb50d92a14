//===- CpuBackend.h - runs an Executable on the CPU -------------*- C++ -*-===//
//
// The reference backend: fp32, OpenBLAS GEMMs, OpenMP loops. It executes the
// instructions of an entry point in order over a BufferSet, checking each
// instruction's operands against what its kernel needs before running it
// (so a corrupt Executable is an error, never an out-of-bounds access).
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_CPU_CPUBACKEND_H
#define TWILL_RUNTIME_BACKEND_CPU_CPUBACKEND_H

#include "runtime/comm/Communicator.h"
#include "runtime/executable/Executable.h"

namespace twill {

class CpuBackend {
public:
  /// Runs `entry` over `buffers` (parameters and inputs already filled);
  /// collectives go through `comm` (none: a program without collectives).
  static llvm::Error run(const EntryPoint &entry, BufferSet &buffers,
                         Communicator *comm);
};

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_CPU_CPUBACKEND_H
