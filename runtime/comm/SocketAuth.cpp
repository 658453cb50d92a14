//===- SocketAuth.cpp - a launch without MPI: who may join ----------------===//

#include "runtime/comm/SocketAuth.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/SHA256.h"

#include <cerrno>
#include <cstring>
#include <sys/random.h>

using namespace twill;
using namespace twill::sockets;

static llvm::Error authError(const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
}

std::array<uint8_t, 32> sockets::hmacSha256(llvm::StringRef key,
                                            llvm::StringRef message) {
  constexpr size_t kBlock = 64;
  std::array<uint8_t, kBlock> padded{};
  if (key.size() > kBlock) {
    std::array<uint8_t, 32> hashed =
        llvm::SHA256::hash(llvm::arrayRefFromStringRef(key));
    std::copy(hashed.begin(), hashed.end(), padded.begin());
  } else {
    std::copy(key.bytes_begin(), key.bytes_end(), padded.begin());
  }
  std::array<uint8_t, kBlock> inner, outer;
  for (size_t i = 0; i < kBlock; ++i) {
    inner[i] = padded[i] ^ 0x36;
    outer[i] = padded[i] ^ 0x5c;
  }
  llvm::SHA256 first;
  first.update(inner);
  first.update(message);
  std::array<uint8_t, 32> innerHash = first.final();
  llvm::SHA256 second;
  second.update(outer);
  second.update(innerHash);
  return second.final();
}

llvm::Expected<std::string> sockets::randomHex(int bytes) {
  std::vector<uint8_t> buffer(bytes);
  for (size_t at = 0; at < buffer.size();) {
    ssize_t got = getrandom(buffer.data() + at, buffer.size() - at, 0);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return authError(llvm::Twine("no random bytes from the system: ") +
                       std::strerror(errno));
    at += got;
  }
  return llvm::toHex(buffer, /*LowerCase=*/true);
}

bool sockets::sameBytes(llvm::StringRef a, llvm::StringRef b) {
  if (a.size() != b.size())
    return false;
  unsigned char differ = 0;
  for (size_t i = 0; i < a.size(); ++i)
    differ |= a[i] ^ b[i];
  return differ == 0;
}

static std::string proof(llvm::StringRef secret, llvm::StringRef message) {
  return llvm::toHex(hmacSha256(secret, message), /*LowerCase=*/true);
}

std::string sockets::rankProof(llvm::StringRef secret, llvm::StringRef hubNonce,
                               llvm::StringRef rankNonce, int rank, int ranks) {
  return proof(secret, llvm::formatv("rank|{0}|{1}|{2}|{3}", hubNonce,
                                     rankNonce, rank, ranks)
                           .str());
}

std::string sockets::hubProof(llvm::StringRef secret, llvm::StringRef hubNonce,
                              llvm::StringRef rankNonce, int rank,
                              llvm::StringRef verdict) {
  return proof(secret, llvm::formatv("hub|{0}|{1}|{2}|{3}", hubNonce, rankNonce,
                                     rank, verdict)
                           .str());
}

std::string sockets::answerBytes(llvm::StringRef proof,
                                 llvm::StringRef verdict) {
  return (proof + verdict).str();
}

llvm::Expected<std::string> sockets::readAnswer(llvm::StringRef bytes,
                                                llvm::StringRef secret,
                                                llvm::StringRef hubNonce,
                                                llvm::StringRef rankNonce,
                                                int rank) {
  llvm::StringRef proof = bytes.take_front(64), verdict = bytes.drop_front(64);
  if (!sameBytes(proof, hubProof(secret, hubNonce, rankNonce, rank, verdict)))
    return authError("a hub answered that does not know the job's secret");
  return verdict.str();
}

std::string sockets::greetingBytes(llvm::StringRef token,
                                   llvm::StringRef nonce) {
  return (token + "\n" + nonce).str();
}

std::pair<std::string, std::string>
sockets::splitGreeting(llvm::StringRef bytes) {
  auto [token, nonce] = bytes.rsplit('\n');
  return {token.str(), nonce.str()};
}

Message sockets::helloMessage(const Hello &hello) {
  Message message;
  message.frame.kind = Kind::Hello;
  message.frame.rank = hello.rank;
  message.frame.sequence = uint64_t(hello.ranks);
  std::string bytes = hello.nonce + "\n" + hello.proof + "\n" + hello.hostname;
  message.bytes.assign(bytes.begin(), bytes.end());
  return message;
}

llvm::Expected<Hello> sockets::readHello(const Message &message) {
  if (message.frame.kind != Kind::Hello)
    return authError("it sent something before its hello");
  if (message.frame.sequence > uint64_t(INT32_MAX))
    return authError("its hello has no WORLD_SIZE a job can have");
  Hello hello;
  hello.rank = message.frame.rank;
  hello.ranks = int(message.frame.sequence);
  llvm::StringRef bytes(message.bytes.data(), message.bytes.size());
  auto [nonce, rest] = bytes.split('\n');
  auto [proof, hostname] = rest.split('\n');
  hello.nonce = nonce.str();
  hello.proof = proof.str();
  hello.hostname = hostname.str();
  if (hello.nonce.size() < 32 || hello.proof.size() != 64)
    return authError("its hello carries no proof of the job's secret");
  return hello;
}

llvm::Expected<Hello> sockets::admit(const Message &message,
                                     llvm::StringRef secret,
                                     llvm::StringRef hubNonce) {
  llvm::Expected<Hello> hello = readHello(message);
  if (!hello)
    return hello.takeError();
  if (!sameBytes(hello->proof, rankProof(secret, hubNonce, hello->nonce,
                                         hello->rank, hello->ranks)))
    return authError(llvm::formatv("it said it is rank {0}, and did not prove "
                                   "it knows the job's secret "
                                   "(TWILL_JOB_SECRET)",
                                   hello->rank));
  return std::move(*hello);
}
