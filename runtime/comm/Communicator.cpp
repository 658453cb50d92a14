//===- Communicator.cpp - the mesh a launch's ranks form ------------------===//

#include "runtime/comm/Communicator.h"

#include "llvm/Support/FormatVariadic.h"

using namespace twill;

llvm::Error Communicator::layOut(llvm::ArrayRef<std::string> names,
                                 llvm::ArrayRef<int64_t> shape) {
  int64_t meshSize = 1;
  std::string mesh;
  for (size_t i = 0; i < names.size(); ++i) {
    meshSize *= shape[i];
    mesh += (i ? " x " : "") + names[i] + "=" + std::to_string(shape[i]);
  }
  if (meshSize != size)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        llvm::formatv("the job's mesh is {0} ({1} ranks) but {2} ranks were "
                      "started; launch with mpirun -np {1}",
                      mesh, meshSize, size));
  // Row-major coordinates, the first axis major.
  axes.resize(names.size());
  int remaining = worldRank;
  for (int i = int(names.size()) - 1; i >= 0; --i) {
    axes[i] = {names[i], int(shape[i]), int(remaining % shape[i])};
    remaining /= int(shape[i]);
  }
  return llvm::Error::success();
}

llvm::Expected<const Communicator::Axis *>
Communicator::findAxis(llvm::StringRef name) const {
  for (const Axis &axis : axes)
    if (axis.name == name)
      return &axis;
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "the mesh has no axis '" + name + "'");
}

int Communicator::coordinate(llvm::StringRef name) const {
  for (const Axis &axis : axes)
    if (axis.name == name)
      return axis.coordinate;
  return -1;
}

int Communicator::axisSize(llvm::StringRef name) const {
  for (const Axis &axis : axes)
    if (axis.name == name)
      return axis.size;
  return -1;
}

llvm::Error Communicator::Pending::wait() {
  if (llvm::Error error = complete())
    return error;
  for (std::function<void()> &step : steps)
    step();
  steps.clear();
  return llvm::Error::success();
}

std::unique_ptr<Communicator::Pending> Communicator::completed() {
  struct Completed final : Pending {
    llvm::Error complete() override { return llvm::Error::success(); }
  };
  return std::make_unique<Completed>();
}
