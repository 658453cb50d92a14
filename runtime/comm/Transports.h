//===- Transports.h - how a launch's ranks reach each other -----*- C++ -*-===//
//
// Communicator's launch-wide calls (Launch.cpp) go to the transport the
// launch uses: MPI's under mpirun or srun (MpiTransport.cpp, in a build
// with MPI), TCP's under a launcher that sets torchrun's variables
// (SocketTransport.cpp), or a process alone.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_COMM_TRANSPORTS_H
#define TWILL_RUNTIME_COMM_TRANSPORTS_H

#include "runtime/comm/Communicator.h"

namespace twill {

/// A transport's launch-wide calls, as Communicator's of the same names.
struct Transport {
  void (*initialize)(int &argc, char **&argv);
  void (*finalize)();
  void (*abortAll)();
  int (*launchedRanks)();
  int (*ranksOnThisNode)();
  int (*rankOnThisNode)();
  llvm::Expected<std::unique_ptr<Communicator>> (*create)(
      llvm::ArrayRef<std::string> axes, llvm::ArrayRef<int64_t> shape);
};

#ifdef TWILL_WITH_MPI
extern const Transport kMpiTransport;
#endif
extern const Transport kSocketTransport;

/// Whether this process was launched with torchrun's variables (RANK,
/// WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and not by an MPI launcher.
bool launchedWithSockets();

} // namespace twill

#endif // TWILL_RUNTIME_COMM_TRANSPORTS_H
