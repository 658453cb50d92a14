//===- CpuBackend.h - runs an Executable on the CPU -------------*- C++ -*-===//
//
// The reference backend: fp32, oneDNN GEMMs, OpenMP loops. It executes the
// instructions of an entry point in order over a BufferSet, checking each
// instruction's operands against what its kernel needs before running it
// (so a corrupt Executable is an error, never an out-of-bounds access).
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_CPU_CPUBACKEND_H
#define TWILL_RUNTIME_BACKEND_CPU_CPUBACKEND_H

#include "runtime/backend/Backend.h"

namespace twill {

/// Gives this rank's kernels their threads: OMP_NUM_THREADS if set, else
/// the cores the launcher bound the rank to, else the machine's cores
/// shared among its ranks. Once; createCpuBackend does it.
void useRankThreads();

class CpuBackend : public Backend {
public:
  CpuBackend(BufferSet &buffers, Communicator *comm)
      : buffers(buffers), comm(comm) {}
  llvm::StringRef name() const override { return "cpu"; }

  /// Runs `entry` over `buffers` (parameters and inputs already filled);
  /// collectives go through `comm` (none: a program without collectives).
  /// With a profiler, each instruction's wall-clock time is recorded.
  static llvm::Error run(const EntryPoint &entry, BufferSet &buffers,
                         Communicator *comm, Profiler *profiler = nullptr);

  llvm::Error run(const EntryPoint &entry,
                  llvm::ArrayRef<WriteBack> writeBacks) override;
  // The host copies are the backend's own memory: nothing moves.
  llvm::Error upload(llvm::ArrayRef<int>) override {
    return llvm::Error::success();
  }
  llvm::Error download(llvm::ArrayRef<int>) override {
    return llvm::Error::success();
  }
  /// The process's peak resident set (getrusage): the computation's memory
  /// is the host's.
  PeakMemory peakMemory() const override;

private:
  BufferSet &buffers;
  Communicator *comm;
};

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_CPU_CPUBACKEND_H
