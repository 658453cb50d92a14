//===- RunWatchdog.h - a launched job ends once its ranks have --*- C++ -*-===//
//
// `twill train` becomes its launcher (mpirun, srun or twill-train) by exec,
// so that signals and the exit status are the job's. But a launcher can
// outlive its ranks (seen once: a 2 x 2 mpirun waiting after every rank had
// exited), and a rank can hang where no collective's timeout reaches it:
// in MPI_Init, before the first collective, or in MPI_Finalize, after the
// last. So, before the exec, `twill train` forks a watchdog over the
// process it becomes. Every rank marks in the output folder's .twill-run/
// that it has started (past MPI_Init, its program loaded) and that it has
// ended (the first end's mark stays). The watchdog ends the launcher, and
// what it started on this node, saying why, when not every rank has
// started twice parallel.collective_timeout_s after the launch, or when
// twice that has passed since a rank ended (long enough for every other
// rank to time out of a collective, and for MPI to end).
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_SUPPORT_RUNWATCHDOG_H
#define TWILL_SUPPORT_RUNWATCHDOG_H

#include "llvm/Support/Error.h"

namespace twill {

/// In a rank of a run that `twill train` launched into `folder`: marks
/// that rank `rank` has started.
void markRankStarted(llvm::StringRef folder, int rank);

/// In a rank of a run that `twill train` launched (whose run lock token is
/// `token`): marks the run's end in `folder`, unless a rank already did.
void markRunEnded(llvm::StringRef folder, llvm::StringRef token, int rank,
                  int status);

/// In `twill train`, holding `folder`'s run lock, just before it execs the
/// launcher of `ranks` ranks: clears the marks of an earlier run and forks
/// the watchdog over this process, which ends it when not every rank has
/// started `graceSeconds` after now, or `graceSeconds` after a rank of the
/// run `token` marked its end.
llvm::Error startRunWatchdog(llvm::StringRef folder, llvm::StringRef token,
                             int64_t ranks, double graceSeconds);

} // namespace twill

#endif // TWILL_SUPPORT_RUNWATCHDOG_H
