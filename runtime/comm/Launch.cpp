//===- Launch.cpp - the transport of this launch
//---------------------------===//
//
// Communicator's launch-wide calls, sent to the transport that started this
// process (Transports.h), chosen once in initialize(): torchrun's variables
// without an MPI launcher's mean TCP; otherwise MPI where the build has it
// (mpirun, srun, or one rank alone: MPI's singleton), else one process.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Transports.h"

#include <cstdlib>

using namespace twill;

namespace {

/// A process alone: every axis has one rank.
llvm::Expected<std::unique_ptr<Communicator>>
createAlone(llvm::ArrayRef<std::string> axes, llvm::ArrayRef<int64_t> shape) {
  std::unique_ptr<Communicator> communicator =
      Communicator::standIn(axes, shape, std::vector<int64_t>(shape.size(), 0));
  int64_t ranks = 1;
  for (int64_t size : shape)
    ranks *= size;
  if (ranks == 1)
    return communicator;
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      "the job's mesh has " + std::to_string(ranks) +
          " ranks, and this process was launched alone: launch its ranks "
          "with mpirun, or with torchrun's variables (RANK, WORLD_SIZE, "
          "MASTER_ADDR, MASTER_PORT)");
}

const Transport kAlone = {[](int &, char **&) {},
                          [] {},
                          [] {},
                          [] { return 1; },
                          [] { return 1; },
                          [] { return 0; },
                          createAlone};

const Transport *active = &kAlone;

} // namespace

void Communicator::initialize(int &argc, char **&argv) {
  if (launchedWithSockets())
    active = &kSocketTransport;
#ifdef TWILL_WITH_MPI
  else
    active = &kMpiTransport;
#endif
  active->initialize(argc, argv);
}

void Communicator::finalize() { active->finalize(); }
void Communicator::abortAll() {
  active->abortAll();
  std::_Exit(1);
}
int Communicator::launchedRanks() { return active->launchedRanks(); }
int Communicator::ranksOnThisNode() { return active->ranksOnThisNode(); }
int Communicator::rankOnThisNode() { return active->rankOnThisNode(); }

llvm::Expected<std::unique_ptr<Communicator>>
Communicator::create(llvm::ArrayRef<std::string> axes,
                     llvm::ArrayRef<int64_t> shape) {
  return active->create(axes, shape);
}
