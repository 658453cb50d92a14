//===- RunLock.h - an output folder held by one run at a time ---*- C++ -*-===//
//
// Two runs writing one folder would interleave their logs and replace each
// other's program, checkpoints and adapter. A run holds an flock on
// FOLDER/.twill-run.lock for its whole life, and the file says who holds
// it, so a second run is refused naming the first. The kernel drops the
// lock when the holder exits, however it ends: no stale lock is left.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_SUPPORT_RUNLOCK_H
#define TWILL_SUPPORT_RUNLOCK_H

#include "llvm/Support/Error.h"

#include <string>

namespace twill {

class RunLock {
public:
  /// Takes `folder`'s lock, or fails naming the run that holds it. A lock
  /// whose holder wrote `inherited` (the launcher that started this
  /// process, which passed its token down) is this run's own.
  static llvm::Expected<RunLock> take(llvm::StringRef folder,
                                      llvm::StringRef inherited = "");

  /// Kept open across exec, so that the launcher's lock stays held by
  /// what it becomes (mpirun, srun or twill-train) until the run ends.
  void keepAcrossExec() const;
  /// In a process the launcher became by exec (one rank: `twill train`
  /// execs twill-train itself), before it starts any process: the
  /// descriptor of the lock holding `token` that it carried in closes on
  /// that process's execs. MPI_Init on one rank forks a daemon (Open MPI's
  /// singleton orted) that outlives the rank by a moment, and would hold
  /// the folder after the run returned.
  static void keepFromChildren(llvm::StringRef token);
  /// What a process this run starts passes to take() as `inherited`.
  const std::string &token() const { return ownToken; }

  RunLock(RunLock &&other);
  RunLock &operator=(RunLock &&) = delete;
  ~RunLock();

private:
  RunLock(int fd, std::string token) : fd(fd), ownToken(std::move(token)) {}
  int fd = -1; // -1: held by the launcher
  std::string ownToken;
};

} // namespace twill

#endif // TWILL_SUPPORT_RUNLOCK_H
