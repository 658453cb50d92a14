//===- CpuCollectives.h - the cpu backend's collectives ---------*- C++ -*-===//
//
// The collectives of one run of an entry point, through the Communicator:
// each starts (a blocking one is waited at once) and stays in flight, by
// the buffer it writes, until its wait. Between instructions the backend
// moves everything in flight on (MPI advances a non-blocking collective
// only inside MPI calls), so transfers overlap the compute between a start
// and its wait.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_CPU_CPUCOLLECTIVES_H
#define TWILL_RUNTIME_BACKEND_CPU_CPUCOLLECTIVES_H

#include "runtime/backend/InstructionView.h"
#include "runtime/comm/Communicator.h"
#include "runtime/executable/Executable.h"
#include "llvm/ADT/DenseMap.h"

#include <memory>

namespace twill {

class CpuCollectives {
public:
  CpuCollectives(BufferSet &buffers, Communicator *comm)
      : buffers(buffers), comm(comm) {}

  /// Starts the collective `instruction` (or its START form); bf16 values
  /// travel as fp32 and are rounded once, when the wait puts them in
  /// place.
  llvm::Error start(const Instruction &instruction);
  /// Ends the collective that writes buffer `result`.
  llvm::Error wait(int result);
  /// Moves the collectives in flight on, without blocking.
  llvm::Error progress();

private:
  BufferSet &buffers;
  Communicator *comm;
  llvm::DenseMap<int, std::unique_ptr<Communicator::Pending>> inFlight;
};

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_CPU_CPUCOLLECTIVES_H
