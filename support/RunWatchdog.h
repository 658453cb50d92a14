//===- RunWatchdog.h - a launched job ends once its ranks have --*- C++ -*-===//
//
// `twill train` becomes its launcher (mpirun, srun or twill-train) by exec,
// so that signals and the exit status are the job's. But a launcher can
// outlive its ranks (seen once: a 2 x 2 mpirun waiting after every rank had
// exited), and a rank can hang where no collective's timeout reaches it
// (in MPI_Finalize, or after its last collective). So, before the exec,
// `twill train` forks a watchdog over the process it becomes: every rank
// marks the run's end in the output folder as it ends (the first mark
// stays), and the watchdog, once a rank has ended, gives the launcher twice
// parallel.collective_timeout_s (long enough for every other rank to time
// out of a collective, and for MPI to end), then ends it and what it
// started on this node, saying so.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_SUPPORT_RUNWATCHDOG_H
#define TWILL_SUPPORT_RUNWATCHDOG_H

#include "llvm/Support/Error.h"

namespace twill {

/// In a rank of a run that `twill train` launched (whose run lock token is
/// `token`): marks the run's end in `folder`, unless a rank already did.
void markRunEnded(llvm::StringRef folder, llvm::StringRef token, int rank,
                  int status);

/// In `twill train`, holding `folder`'s run lock, just before it execs the
/// launcher: forks the watchdog over this process, which ends it
/// `graceSeconds` after a rank of the run `token` marked its end.
llvm::Error startRunWatchdog(llvm::StringRef folder, llvm::StringRef token,
                             double graceSeconds);

} // namespace twill

#endif // TWILL_SUPPORT_RUNWATCHDOG_H
