//===- JobSecret.h - a launch without MPI: the job's secret -----*- C++ -*-===//
//
// What each rank proves to rank 0's hub, and the hub to it (SocketAuth.h),
// found in this order:
//   - TWILL_JOB_SECRET: the secret itself, the same on every rank (at
//     least 16 characters);
//   - TWILL_JOB_SECRET_FILE: a file holding it (a Kubernetes Secret mounted
//     as a file, a file in a shared folder only the user can read);
//   - neither, with the hub on this machine: a fresh random secret rank 0
//     writes for its job in a folder only this user can read
//     ($XDG_RUNTIME_DIR/twill, else /tmp/twill-UID) and the ranks of this
//     machine read. A rank on another machine must be given one of the two
//     variables: nothing that crosses the network hands a secret over.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_COMM_JOBSECRET_H
#define TWILL_RUNTIME_COMM_JOBSECRET_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace twill::sockets {

/// The secret of the job `token` names, for rank `rank`; rank 0 writes the
/// machine's own where neither variable gives one. `masterAddress` is
/// MASTER_ADDR, the hub's host.
llvm::Expected<std::string> jobSecret(int rank, llvm::StringRef token,
                                      const char *masterAddress);

/// Whether the secret is the one rank 0 writes on this machine: no
/// variable gives one and `masterAddress` is this machine.
bool secretIsMachines(const char *masterAddress);

/// Rank 0, at the end: removes the secret it wrote, if it wrote one.
void forgetJobSecret(llvm::StringRef token);

/// Whether `host` names this machine (a loopback address or one of its
/// interfaces').
bool isThisMachine(const char *host);

} // namespace twill::sockets

#endif // TWILL_RUNTIME_COMM_JOBSECRET_H
