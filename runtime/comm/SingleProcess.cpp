//===- SingleProcess.cpp - the collectives of a build without MPI ---------===//
//
// One process is the whole launch: every axis has one rank, so a gather, a
// scatter, a reduction or an exchange over it leaves the values as they are.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"

#include <cstdlib>
#include <cstring>

using namespace twill;

struct Communicator::Transport {};

void Communicator::initialize(int &, char **&) {}
void Communicator::finalize() {}
void Communicator::abortAll() { std::_Exit(1); }
int Communicator::launchedRanks() { return 1; }

llvm::Expected<std::unique_ptr<Communicator>>
Communicator::create(llvm::ArrayRef<std::string> axisNames,
                     llvm::ArrayRef<int64_t> shape) {
  auto communicator = std::unique_ptr<Communicator>(new Communicator());
  if (llvm::Error error = communicator->layOut(axisNames, shape))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        llvm::toString(std::move(error)) +
            " (this twill-train was built without MPI and runs one rank)");
  return communicator;
}

Communicator::~Communicator() = default;

/// Checks the axis and copies what one rank holds.
static llvm::Error copy(llvm::Expected<const void *> axis, const void *in,
                        void *out, int64_t bytes) {
  if (!axis)
    return axis.takeError();
  if (in != out)
    std::memmove(out, in, bytes);
  return llvm::Error::success();
}

static int64_t product(llvm::ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t size : shape)
    count *= size;
  return count;
}

llvm::Error Communicator::allGather(llvm::StringRef axis, const float *in,
                                    float *out, llvm::ArrayRef<int64_t> inShape,
                                    int64_t) {
  return copy(findAxis(axis), in, out, product(inShape) * sizeof(float));
}

llvm::Error Communicator::reduceScatter(llvm::StringRef axis, const float *in,
                                        float *out,
                                        llvm::ArrayRef<int64_t> inShape,
                                        int64_t) {
  return copy(findAxis(axis), in, out, product(inShape) * sizeof(float));
}

llvm::Error Communicator::allReduce(llvm::StringRef axis, const float *in,
                                    float *out, int64_t count) {
  return copy(findAxis(axis), in, out, count * sizeof(float));
}

llvm::Error Communicator::allReduce(llvm::StringRef axis, const int64_t *in,
                                    int64_t *out, int64_t count) {
  return copy(findAxis(axis), in, out, count * sizeof(int64_t));
}

llvm::Error Communicator::allReduce(llvm::StringRef axis, double *values,
                                    int64_t count, bool) {
  return copy(findAxis(axis), values, values, count * sizeof(double));
}

llvm::Error Communicator::sumOverWorld(float *, int64_t) {
  return llvm::Error::success();
}

llvm::Error Communicator::barrier() { return llvm::Error::success(); }

llvm::Error Communicator::broadcast(void *, int64_t, int) const {
  return llvm::Error::success();
}

llvm::Error Communicator::allToAll(llvm::StringRef axis, const float *in,
                                   float *out, llvm::ArrayRef<int64_t> inShape,
                                   int64_t, int64_t) {
  return copy(findAxis(axis), in, out, product(inShape) * sizeof(float));
}
