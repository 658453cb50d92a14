//===- NcclComm.cpp - NCCL communicators on the mesh axes -----------------===//

#include "runtime/backend/cuda/NcclComm.h"

#include "llvm/Support/FormatVariadic.h"

using namespace twill;

llvm::Error twill::checkNccl(ncclResult_t result, llvm::StringRef call) {
  if (result == ncclSuccess)
    return llvm::Error::success();
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 call + " failed: " +
                                     ncclGetErrorString(result));
}

llvm::Expected<std::unique_ptr<NcclComm>>
NcclComm::create(const Communicator &mpi, const Mesh &mesh) {
  auto comm = std::unique_ptr<NcclComm>(new NcclComm);
  ncclUniqueId id;
  if (mpi.rank() == 0)
    if (llvm::Error error = checkNccl(ncclGetUniqueId(&id), "ncclGetUniqueId"))
      return std::move(error);
  if (llvm::Error error = mpi.broadcast(&id, sizeof(id), 0))
    return std::move(error);
  if (llvm::Error error = checkNccl(
          ncclCommInitRank(&comm->world, mpi.worldSize(), id, mpi.rank()),
          "ncclCommInitRank"))
    return std::move(error);
  // One communicator per axis: the color is the rank's place on the other
  // axes, the key its coordinate on this one.
  for (int axis = 0; axis < mesh.axes_size(); ++axis) {
    int color = 0;
    for (int other = 0; other < mesh.axes_size(); ++other)
      if (other != axis)
        color = color * int(mesh.shape(other)) +
                mpi.coordinate(mesh.axes(other));
    ncclComm_t split = nullptr;
    if (llvm::Error error = checkNccl(
            ncclCommSplit(comm->world, color, mpi.coordinate(mesh.axes(axis)),
                          &split, nullptr),
            "ncclCommSplit"))
      return std::move(error);
    comm->axes.push_back({mesh.axes(axis), split});
  }
  return comm;
}

void NcclComm::abort() {
  for (auto &[name, comm] : axes)
    if (comm)
      ncclCommAbort(comm);
  if (world)
    ncclCommAbort(world);
  axes.clear();
  world = nullptr;
}

NcclComm::~NcclComm() {
  for (auto &[name, comm] : axes)
    ncclCommDestroy(comm);
  if (world)
    ncclCommDestroy(world);
}

llvm::Expected<ncclComm_t> NcclComm::axis(llvm::StringRef name) const {
  for (const auto &[axisName, comm] : axes)
    if (axisName == name)
      return comm;
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "the mesh has no axis '" + name + "'");
}

llvm::Expected<ncclComm_t> NcclComm::wholeAxis(llvm::StringRef name,
                                               int64_t ranks) const {
  llvm::Expected<ncclComm_t> comm = axis(name);
  if (!comm)
    return comm.takeError();
  int count = 0;
  if (llvm::Error error = checkNccl(ncclCommCount(*comm, &count),
                                    "ncclCommCount"))
    return std::move(error);
  if (count != ranks)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        llvm::formatv("cannot gather or scatter over axis '{0}' of {1} "
                      "ranks: its NCCL communicator holds {2}, the others "
                      "are absent",
                      name, ranks, count));
  return comm;
}
