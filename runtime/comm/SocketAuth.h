//===- SocketAuth.h - a launch without MPI: who may join --------*- C++ -*-===//
//
// The hub lets in only the ranks of its own job: those that know the job's
// secret (JobSecret.h). Each side proves it by challenge and response, so
// the secret never crosses the network:
//
//   hub  -> rank  Greeting: the job's token and a fresh nonce of the hub's
//   rank -> hub   Hello: its rank, WORLD_SIZE, a fresh nonce of its own,
//                 HMAC-SHA256(secret, "rank" | both nonces | rank | size)
//                 and its hostname
//   hub  -> rank  Answer: HMAC-SHA256(secret, "hub" | both nonces | rank |
//                 verdict) and the verdict: empty where the rank is let in,
//                 else why not (a rank taken, a rank outside the job)
//
// A hello without the proof is refused unproved (an Abort), and the
// connection closed. A rank sends nothing of the job's before the hub has
// proved itself, and the hub takes nothing from a connection before it
// has. The token is no
// secret: it lets a rank pass by another job's hub among several ports.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_COMM_SOCKETAUTH_H
#define TWILL_RUNTIME_COMM_SOCKETAUTH_H

#include "runtime/comm/SocketProtocol.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <array>
#include <cstdint>
#include <string>

namespace twill::sockets {

/// HMAC-SHA256 (RFC 2104) of `message` under `key`.
std::array<uint8_t, 32> hmacSha256(llvm::StringRef key,
                                   llvm::StringRef message);

/// `bytes` bytes from the system's random source, as hex.
llvm::Expected<std::string> randomHex(int bytes);

/// Whether `a` and `b` are equal, in a time that depends on their lengths
/// only.
bool sameBytes(llvm::StringRef a, llvm::StringRef b);

/// What a rank sends to prove it knows `secret`, and what the hub sends
/// back to prove it does, over the two nonces of one connection.
std::string rankProof(llvm::StringRef secret, llvm::StringRef hubNonce,
                      llvm::StringRef rankNonce, int rank, int ranks);
std::string hubProof(llvm::StringRef secret, llvm::StringRef hubNonce,
                     llvm::StringRef rankNonce, int rank,
                     llvm::StringRef verdict);

/// An Answer's bytes: the hub's proof, then the verdict.
std::string answerBytes(llvm::StringRef proof, llvm::StringRef verdict);
/// The verdict of an Answer's `bytes` if its proof is the hub's, else why
/// not.
llvm::Expected<std::string> readAnswer(llvm::StringRef bytes,
                                       llvm::StringRef secret,
                                       llvm::StringRef hubNonce,
                                       llvm::StringRef rankNonce, int rank);

/// A Greeting's bytes: the token, a newline, the hub's nonce.
std::string greetingBytes(llvm::StringRef token, llvm::StringRef nonce);
/// The token and nonce of a greeting (the nonce empty where it has none).
std::pair<std::string, std::string> splitGreeting(llvm::StringRef bytes);

/// A rank's Hello, as the hub reads it.
struct Hello {
  int rank = 0, ranks = 0;
  std::string nonce, proof, hostname;
};
/// The Hello message of a rank.
Message helloMessage(const Hello &hello);
/// The hello of `message`, or why it is none.
llvm::Expected<Hello> readHello(const Message &message);

/// The hello of `message` if it proves its sender knows `secret`, on a
/// connection the hub greeted with `hubNonce`; else why not.
llvm::Expected<Hello> admit(const Message &message, llvm::StringRef secret,
                            llvm::StringRef hubNonce);

} // namespace twill::sockets

#endif // TWILL_RUNTIME_COMM_SOCKETAUTH_H
