//===- JobSecret.cpp - a launch without MPI: the job's secret -------------===//

#include "runtime/comm/JobSecret.h"
#include "runtime/comm/SocketAuth.h"

#include "llvm/Support/FormatVariadic.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace twill;
using namespace twill::sockets;

namespace {

/// Shorter secrets are guessed; longer ones are no file a user means.
constexpr size_t kMinSecret = 16, kMaxSecret = 4096;

llvm::Error secretError(const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
}

llvm::Expected<std::string> checked(std::string secret,
                                    const llvm::Twine &from) {
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r'))
    secret.pop_back();
  if (secret.size() < kMinSecret)
    return secretError(from + ": the job's secret has " +
                       llvm::Twine(secret.size()) + " characters, fewer than " +
                       llvm::Twine(kMinSecret));
  return secret;
}

/// The contents of the regular file `path`; where `private_`, a file only
/// this user may read, not reached through a link.
llvm::Expected<std::string> readSecretFile(const std::string &path,
                                           bool private_) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK |
                                  (private_ ? O_NOFOLLOW : 0));
  if (fd < 0)
    return secretError(
        llvm::formatv("cannot read {0}: {1}", path, std::strerror(errno)));
  struct stat status;
  std::string why;
  if (fstat(fd, &status) != 0 || !S_ISREG(status.st_mode))
    why = "it is not a regular file";
  else if (status.st_size > off_t(kMaxSecret))
    why = llvm::formatv("it holds more than {0} bytes", kMaxSecret);
  else if (private_ &&
           (status.st_uid != geteuid() || (status.st_mode & 077) != 0))
    why = "others than its owner may read it, or another user owns it";
  std::string secret(status.st_size, '\0');
  if (why.empty() && read(fd, secret.data(), secret.size()) != status.st_size)
    why = "it could not be read whole";
  close(fd);
  if (!why.empty())
    return secretError(llvm::formatv("cannot read {0}: {1}", path, why));
  return secret;
}

/// The folder of this user's secrets, made only theirs: $XDG_RUNTIME_DIR
/// (a folder of the user's own where the system has one), else /tmp.
llvm::Expected<std::string> privateFolder() {
  const char *runtime = std::getenv("XDG_RUNTIME_DIR");
  std::string folder = runtime && *runtime
                           ? std::string(runtime) + "/twill"
                           : "/tmp/twill-" + std::to_string(geteuid());
  if (mkdir(folder.c_str(), 0700) != 0 && errno != EEXIST)
    return secretError(
        llvm::formatv("cannot make {0}: {1}", folder, std::strerror(errno)));
  struct stat status;
  if (lstat(folder.c_str(), &status) != 0 || !S_ISDIR(status.st_mode) ||
      status.st_uid != geteuid() || (status.st_mode & 077) != 0)
    return secretError(
        llvm::formatv("{0} is not a folder only this user may open: it "
                      "cannot hold the job's secret (set TWILL_JOB_SECRET)",
                      folder));
  return folder;
}

/// Where rank 0 keeps the secret of the job `token` names.
llvm::Expected<std::string> machineSecretPath(llvm::StringRef token) {
  llvm::Expected<std::string> folder = privateFolder();
  if (!folder)
    return folder.takeError();
  std::string name;
  for (char c : token)
    name += std::isalnum(static_cast<unsigned char>(c)) || c == '-' ? c : '_';
  return *folder + "/job-" + name + ".secret";
}

/// Rank 0: a fresh secret, written whole where the ranks of this machine
/// look (a crash leaves the last job's, which proves nothing to this one).
llvm::Expected<std::string> writeMachineSecret(llvm::StringRef token) {
  llvm::Expected<std::string> path = machineSecretPath(token);
  if (!path)
    return path.takeError();
  llvm::Expected<std::string> secret = randomHex(32);
  if (!secret)
    return secret.takeError();
  std::string written = *path + ".new";
  unlink(written.c_str());
  int fd = open(written.c_str(),
                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  bool whole = fd >= 0 && write(fd, secret->data(), secret->size()) ==
                              ssize_t(secret->size());
  if (fd >= 0)
    close(fd);
  if (!whole || rename(written.c_str(), path->c_str()) != 0) {
    std::string why = std::strerror(errno);
    unlink(written.c_str());
    return secretError(
        llvm::formatv("cannot write the job's secret to {0}: {1}", *path, why));
  }
  return secret;
}

bool isLoopback(const sockaddr *address) {
  if (address->sa_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in *>(address)
                      ->sin_addr.s_addr) >>
            24) == 127;
  if (address->sa_family == AF_INET6) {
    const in6_addr &six =
        reinterpret_cast<const sockaddr_in6 *>(address)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(&six) ||
           (IN6_IS_ADDR_V4MAPPED(&six) && six.s6_addr[12] == 127);
  }
  return false;
}

bool sameAddress(const sockaddr *a, const sockaddr *b) {
  if (a->sa_family != b->sa_family)
    return false;
  if (a->sa_family == AF_INET)
    return reinterpret_cast<const sockaddr_in *>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in *>(b)->sin_addr.s_addr;
  return a->sa_family == AF_INET6 &&
         std::memcmp(&reinterpret_cast<const sockaddr_in6 *>(a)->sin6_addr,
                     &reinterpret_cast<const sockaddr_in6 *>(b)->sin6_addr,
                     sizeof(in6_addr)) == 0;
}

} // namespace

bool sockets::isThisMachine(const char *host) {
  addrinfo hints{}, *found = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  if (!host || getaddrinfo(host, nullptr, &hints, &found) != 0)
    return false;
  ifaddrs *interfaces = nullptr;
  getifaddrs(&interfaces);
  bool local = false;
  for (addrinfo *at = found; at && !local; at = at->ai_next) {
    local = isLoopback(at->ai_addr);
    for (ifaddrs *each = interfaces; each && !local; each = each->ifa_next)
      local = each->ifa_addr && sameAddress(each->ifa_addr, at->ai_addr);
  }
  if (interfaces)
    freeifaddrs(interfaces);
  freeaddrinfo(found);
  return local;
}

bool sockets::secretIsMachines(const char *masterAddress) {
  return !std::getenv("TWILL_JOB_SECRET") &&
         !std::getenv("TWILL_JOB_SECRET_FILE") && isThisMachine(masterAddress);
}

llvm::Expected<std::string> sockets::jobSecret(int rank, llvm::StringRef token,
                                               const char *masterAddress) {
  if (const char *given = std::getenv("TWILL_JOB_SECRET"))
    return checked(given, "TWILL_JOB_SECRET");
  if (const char *file = std::getenv("TWILL_JOB_SECRET_FILE")) {
    llvm::Expected<std::string> secret = readSecretFile(file, false);
    if (!secret)
      return secretError("TWILL_JOB_SECRET_FILE: " +
                         llvm::toString(secret.takeError()));
    return checked(std::move(*secret),
                   llvm::Twine("TWILL_JOB_SECRET_FILE=") + file);
  }
  if (!isThisMachine(masterAddress))
    return secretError(llvm::formatv(
        "rank {0}: {1}, and only a secret the job is given lets ranks of "
        "other machines in: set TWILL_JOB_SECRET (or TWILL_JOB_SECRET_FILE), "
        "the same on every rank",
        rank,
        rank == 0 ? llvm::formatv("MASTER_ADDR={0} is not an address of this "
                                  "machine, where rank 0's hub is",
                                  masterAddress ? masterAddress : "")
                        .str()
                  : llvm::formatv("rank 0's hub (MASTER_ADDR={0}) is on "
                                  "another machine",
                                  masterAddress ? masterAddress : "")
                        .str()));
  if (rank == 0)
    return writeMachineSecret(token);
  llvm::Expected<std::string> path = machineSecretPath(token);
  if (!path)
    return path.takeError();
  return readSecretFile(*path, true);
}

void sockets::forgetJobSecret(llvm::StringRef token) {
  if (std::getenv("TWILL_JOB_SECRET") || std::getenv("TWILL_JOB_SECRET_FILE"))
    return;
  if (llvm::Expected<std::string> path = machineSecretPath(token))
    unlink(path->c_str());
  else
    llvm::consumeError(path.takeError());
}
