//===- SocketHub.h - a launch without MPI: rank 0's hub ---------*- C++ -*-===//
//
// The hub of SocketProtocol.h, on a thread of rank 0's process: it greets
// each connection with its job's token, lets in those whose hello proves the
// job's secret (SocketAuth.h; any other connection is refused by its
// address, and the job goes on waiting for its real ranks), tells each
// every rank's hostname, then gathers each collective's inputs and sends back
// each rank's result. It never blocks on one rank: its sockets are
// non-blocking, each with its queue of bytes to send. A rank that says the job
// ends (Abort), or that leaves while its group waits for it, ends the
// collectives it is part of with that reason.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_COMM_SOCKETHUB_H
#define TWILL_RUNTIME_COMM_SOCKETHUB_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>

namespace twill::sockets {

/// "port 29501", or "ports 29501 to 29508": the ports a hub may take.
inline std::string describePorts(llvm::ArrayRef<int> ports) {
  if (ports.size() == 1)
    return "port " + std::to_string(ports.front());
  return "ports " + std::to_string(ports.front()) + " to " +
         std::to_string(ports.back());
}

class Hub {
public:
  /// Listens at `address` (a host, an address, or an interface's name) on
  /// the first of `ports` free for `ranks` ranks of the job `token` names,
  /// lets in those that prove they know `secret` (SocketAuth.h), and serves
  /// them on a thread of its own until every one has gone.
  static llvm::Expected<std::unique_ptr<Hub>>
  start(llvm::StringRef address, llvm::ArrayRef<int> ports, int ranks,
        std::string token, std::string secret);
  /// The port it listens on.
  int port() const { return listening; }
  /// Waits for the ranks still connected to go (at most 30 s).
  ~Hub();

private:
  Hub() = default;
  void serve();

  int listener = -1, listening = 0, ranks = 0;
  std::string token, secret;
  std::atomic<bool> stopping{false};
  std::thread thread;
};

} // namespace twill::sockets

#endif // TWILL_RUNTIME_COMM_SOCKETHUB_H
