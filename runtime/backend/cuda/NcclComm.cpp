//===- NcclComm.cpp - NCCL communicators on the mesh axes -----------------===//

#include "runtime/backend/cuda/NcclComm.h"

#include "llvm/Support/FormatVariadic.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

using namespace twill;

llvm::Error twill::checkNccl(ncclResult_t result, llvm::StringRef call) {
  if (result == ncclSuccess)
    return llvm::Error::success();
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 call + " failed: " +
                                     ncclGetErrorString(result));
}

llvm::Expected<int> twill::sharedGpuCtas(int ranksPerGpu, int ncclVersion,
                                         const char *enable) {
  if (ranksPerGpu <= 1)
    return 0;
  // NCCL_VERSION(2, 30, 0): the first with NCCL_MULTI_RANK_GPU_ENABLE.
  constexpr int kFirstShared = 23000;
  std::string sharing = llvm::formatv(
      "{0} ranks share each GPU of this node (more ranks than GPUs)",
      ranksPerGpu);
  if (ncclVersion < kFirstShared)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        llvm::formatv("{0}: NCCL takes that from 2.30 on, and this is NCCL "
                      "{1}.{2}.{3}; launch one rank per GPU, or load a newer "
                      "NCCL (LD_LIBRARY_PATH)",
                      sharing, ncclVersion / 10000, ncclVersion / 100 % 100,
                      ncclVersion % 100));
  if (!enable || llvm::StringRef(enable) != "1")
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        sharing + ": NCCL runs them only with NCCL_MULTI_RANK_GPU_ENABLE=1 "
                  "(slower than one rank per GPU: for trying a mesh)");
  return std::max(1, 8 / ranksPerGpu);
}

llvm::Expected<std::unique_ptr<NcclComm>>
NcclComm::create(const Communicator &mpi, const Mesh &mesh) {
  auto comm = std::unique_ptr<NcclComm>(new NcclComm);
  comm->timeout = mpi.timeout();
  ncclUniqueId id;
  if (mpi.rank() == 0)
    if (llvm::Error error = checkNccl(ncclGetUniqueId(&id), "ncclGetUniqueId"))
      return std::move(error);
  if (llvm::Error error = mpi.broadcast(&id, sizeof(id), 0))
    return std::move(error);
  // Non-blocking: no NCCL call waits for another rank inside NCCL, so a
  // rank that never comes is seen by settle() and the job ends.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  int devices = 0, version = 0;
  if (cudaError_t result = cudaGetDeviceCount(&devices))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   llvm::Twine("cudaGetDeviceCount failed: ") +
                                       cudaGetErrorString(result));
  if (llvm::Error error = checkNccl(ncclGetVersion(&version), "ncclGetVersion"))
    return std::move(error);
  int ranks = Communicator::ranksOnThisNode();
  llvm::Expected<int> ctas =
      sharedGpuCtas((ranks + devices - 1) / std::max(devices, 1), version,
                    std::getenv("NCCL_MULTI_RANK_GPU_ENABLE"));
  if (!ctas)
    return ctas.takeError();
  if (*ctas > 0)
    config.maxCTAs = *ctas;
  // The call writes comm->world: it is read only after the call returns
  // (an argument beside the call could be read before it, as nullptr).
  ncclResult_t started = ncclCommInitRankConfig(&comm->world, mpi.worldSize(),
                                                id, mpi.rank(), &config);
  if (llvm::Error error =
          comm->settle(comm->world, started, "ncclCommInitRankConfig"))
    return std::move(error);
  // One communicator per axis: the color is the rank's place on the other
  // axes, the key its coordinate on this one. They inherit non-blocking.
  for (int axis = 0; axis < mesh.axes_size(); ++axis) {
    int color = 0;
    for (int other = 0; other < mesh.axes_size(); ++other)
      if (other != axis)
        color = color * int(mesh.shape(other)) +
                mpi.coordinate(mesh.axes(other));
    // NCCL writes `split` from a thread of its own once the child is made,
    // and says the parent is ready again only after that: the parent is
    // what is waited on (NVIDIA/nccl#1472), then the child checked.
    ncclComm_t split = nullptr;
    ncclResult_t result =
        ncclCommSplit(comm->world, color, mpi.coordinate(mesh.axes(axis)),
                      &split, nullptr);
    llvm::Error settled = comm->settle(comm->world, result, "ncclCommSplit");
    // A child NCCL made is ended with the others, also after an error.
    if (split)
      comm->axes.push_back({mesh.axes(axis), split});
    if (settled)
      return std::move(settled);
    if (!split)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "ncclCommSplit made no communicator for mesh axis '" +
              mesh.axes(axis) + "'");
    if (llvm::Error error = comm->settle(split, ncclSuccess,
                                         "ncclCommSplit (its communicator)"))
      return std::move(error);
  }
  return comm;
}

llvm::Error NcclComm::settle(ncclComm_t comm, ncclResult_t result,
                             llvm::StringRef call) {
  if (result != ncclSuccess && result != ncclInProgress)
    return checkNccl(result, call);
  // A call may return ncclSuccess with its work still going on (NCCL 2.28's
  // ncclCommSplit does: the GPU runs found the next call refused, "Attempt
  // to use communicator before the previous operation returned
  // ncclSuccess"): the communicator's own state says when it is done.
  if (llvm::Error error = checkNccl(ncclCommGetAsyncError(comm, &result),
                                    "ncclCommGetAsyncError"))
    return error;
  auto began = std::chrono::steady_clock::now();
  while (result == ncclInProgress) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - began)
            .count() > timeout) {
      abort();
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("{0} did not complete within {1} s "
                        "(parallel.collective_timeout_s): a rank did not "
                        "arrive; the NCCL communicators are aborted",
                        call, timeout));
    }
    std::this_thread::yield();
    if (llvm::Error error = checkNccl(ncclCommGetAsyncError(comm, &result),
                                      "ncclCommGetAsyncError"))
      return error;
  }
  return checkNccl(result, call);
}

llvm::Error NcclComm::asyncError() {
  std::vector<ncclComm_t> all;
  for (auto &[name, comm] : axes)
    all.push_back(comm);
  all.push_back(world);
  for (ncclComm_t comm : all) {
    ncclResult_t state = ncclSuccess;
    if (comm)
      if (llvm::Error error = checkNccl(ncclCommGetAsyncError(comm, &state),
                                        "ncclCommGetAsyncError"))
        return error;
    if (state != ncclSuccess && state != ncclInProgress) {
      abort();
      return checkNccl(state, "a collective");
    }
  }
  return llvm::Error::success();
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
  std::vector<ncclComm_t> all;
  for (auto &[name, comm] : axes)
    if (comm)
      all.push_back(comm);
  if (world)
    all.push_back(world);
  // Finalizing is collective: bounded like every other wait; past it, or on
  // an error, everything is aborted instead.
  for (ncclComm_t comm : all)
    if (llvm::Error error =
            settle(comm, ncclCommFinalize(comm), "ncclCommFinalize")) {
      llvm::consumeError(std::move(error));
      abort();
      return;
    }
  for (ncclComm_t comm : all)
    ncclCommDestroy(comm);
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
