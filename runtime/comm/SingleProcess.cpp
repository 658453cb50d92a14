//===- SingleProcess.cpp - the launch of a build without MPI --------------===//
//
// One process is the whole launch: every axis has one rank, and the
// collectives are those of a process alone (LocalCommunicator.cpp).
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"

#include <cstdlib>

using namespace twill;

void Communicator::initialize(int &, char **&) {}
void Communicator::finalize() {}
void Communicator::abortAll() { std::_Exit(1); }
int Communicator::launchedRanks() { return 1; }
int Communicator::ranksOnThisNode() { return 1; }
int Communicator::rankOnThisNode() { return 0; }

llvm::Expected<std::unique_ptr<Communicator>>
Communicator::create(llvm::ArrayRef<std::string> axisNames,
                     llvm::ArrayRef<int64_t> shape) {
  std::unique_ptr<Communicator> communicator =
      standIn(axisNames, shape, std::vector<int64_t>(shape.size(), 0));
  if (llvm::Error error = communicator->layOut(axisNames, shape))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        llvm::toString(std::move(error)) +
            " (this twill-train was built without MPI and runs one rank)");
  return communicator;
}
