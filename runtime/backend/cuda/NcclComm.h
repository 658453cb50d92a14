//===- NcclComm.h - NCCL communicators on the mesh axes ---------*- C++ -*-===//
//
// The cuda backend's collectives. The launch's Communicator (MPI, or the
// TCP hub) bootstraps NCCL: rank 0 makes the unique id and broadcasts it,
// every rank joins the world communicator, and each mesh axis gets its own
// communicator split from it (the ranks that differ only along that axis,
// ordered by their coordinate on it), as the Communicator lays out its
// axes. All of them are non-blocking, so that no wait for another rank is
// unbounded (settle()).
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_CUDA_NCCLCOMM_H
#define TWILL_RUNTIME_BACKEND_CUDA_NCCLCOMM_H

#include "proto/executable.pb.h"
#include "runtime/comm/Communicator.h"

#include <nccl.h>

#include <memory>
#include <string>
#include <vector>

namespace twill {

/// The most CTAs a rank's NCCL kernels take where `ranksPerGpu` ranks of
/// a node share each GPU (a mesh tried on fewer GPUs than ranks; 0 where
/// each rank has its own: NCCL's default), or why NCCL cannot run so:
/// NCCL from 2.30 on takes several ranks on one GPU when
/// NCCL_MULTI_RANK_GPU_ENABLE=1 (`enable`), and their kernels, each waiting
/// on the others', must fit on the GPU together.
llvm::Expected<int> sharedGpuCtas(int ranksPerGpu, int ncclVersion,
                                  const char *enable);

class NcclComm {
public:
  static llvm::Expected<std::unique_ptr<NcclComm>>
  create(const Communicator &mpi, const Mesh &mesh);
  ~NcclComm();

  /// Ends every communicator at once, with whatever it has in flight (a
  /// collective waiting for a rank that never comes): NCCL's way out.
  void abort();

  /// The communicators are non-blocking: a call may return ncclInProgress,
  /// or even ncclSuccess, and finish later. This waits until `comm` says
  /// `call` is done, no longer than parallel.collective_timeout_s, then
  /// aborts every communicator and fails; an error result names the call.
  llvm::Error settle(ncclComm_t comm, ncclResult_t result,
                     llvm::StringRef call);

  /// Fails, aborting every communicator, once one of them has met an
  /// error in a collective it runs (a peer gone, a network fault): a
  /// stream waiting on such a collective would otherwise wait forever.
  llvm::Error asyncError();

  /// The communicator of mesh axis `name`.
  llvm::Expected<ncclComm_t> axis(llvm::StringRef name) const;
  /// The communicator of mesh axis `name`, checked to hold all `ranks` of
  /// it: a gather or scatter needs every block (a stand-in rank's
  /// communicators hold it alone).
  llvm::Expected<ncclComm_t> wholeAxis(llvm::StringRef name,
                                       int64_t ranks) const;

private:
  double timeout = 600; // seconds, from the Communicator
  ncclComm_t world = nullptr;
  std::vector<std::pair<std::string, ncclComm_t>> axes;
};

/// An error naming the NCCL call, unless `result` is success.
llvm::Error checkNccl(ncclResult_t result, llvm::StringRef call);

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_CUDA_NCCLCOMM_H
