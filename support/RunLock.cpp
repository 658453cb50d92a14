//===- RunLock.cpp - an output folder held by one run at a time -----------===//

#include "support/RunLock.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <random>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace twill;

static llvm::Error problem(const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
}

/// The lock file's one line: "host H pid P started T token K".
static std::string readHolder(int fd) {
  char text[512] = {};
  ssize_t got = pread(fd, text, sizeof(text) - 1, 0);
  return got > 0 ? llvm::StringRef(text, got).trim().str() : std::string();
}

static std::string newToken() {
  std::random_device random;
  return llvm::formatv("{0:x-8}{1:x-8}{2:x-8}", random(), random(), random())
      .str();
}

llvm::Expected<RunLock> RunLock::take(llvm::StringRef folder,
                                      llvm::StringRef inherited) {
  llvm::SmallString<256> path(folder);
  llvm::sys::path::append(path, ".twill-run.lock");
  if (std::error_code error = llvm::sys::fs::create_directories(folder))
    return problem("cannot create " + folder + ": " + error.message());
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return problem("cannot open " + path + ": " + std::strerror(errno));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int why = errno;
    std::string holder = readHolder(fd);
    close(fd);
    if (why != EWOULDBLOCK)
      return problem("cannot lock " + path + ": " + std::strerror(why));
    if (!inherited.empty() &&
        llvm::StringRef(holder).ends_with(" token " + inherited.str()))
      return RunLock(-1, inherited.str()); // the launcher's, which started us
    std::string who =
        holder.empty() ? "a run that has not said who it is"
                       : llvm::StringRef(holder).split(" token ").first.str();
    return problem(llvm::formatv(
        "{0} is in use by another run ({1}): two runs into one output "
        "folder would overwrite each other's log, checkpoints and adapter; "
        "wait for it to end, or give this one another "
        "checkpoint.output_dir",
        folder, who));
  }
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::time_t now = std::time(nullptr);
  char started[32] = {};
  std::strftime(started, sizeof(started), "%Y-%m-%dT%H:%M:%SZ",
                std::gmtime(&now));
  std::string token = newToken();
  std::string line = llvm::formatv("host {0} pid {1} started {2} token {3}\n",
                                   host, getpid(), started, token);
  if (ftruncate(fd, 0) != 0 ||
      pwrite(fd, line.data(), line.size(), 0) != ssize_t(line.size())) {
    int why = errno;
    close(fd);
    return problem("cannot write " + path + ": " + std::strerror(why));
  }
  return RunLock(fd, token);
}

void RunLock::keepAcrossExec() const {
  if (fd >= 0)
    fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) & ~FD_CLOEXEC);
}

void RunLock::keepFromChildren(llvm::StringRef token) {
  DIR *descriptors = token.empty() ? nullptr : opendir("/proc/self/fd");
  if (!descriptors)
    return;
  while (dirent *entry = readdir(descriptors)) {
    int fd = std::atoi(entry->d_name); // "." and ".." read as 0
    struct stat file;
    // A regular file's only: a pipe or a socket is not read from.
    if (fd > STDERR_FILENO && fd != dirfd(descriptors) &&
        fstat(fd, &file) == 0 && S_ISREG(file.st_mode) &&
        llvm::StringRef(readHolder(fd)).ends_with(" token " + token.str()))
      fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC);
  }
  closedir(descriptors);
}

RunLock::RunLock(RunLock &&other)
    : fd(other.fd), ownToken(std::move(other.ownToken)) {
  other.fd = -1;
}

RunLock::~RunLock() {
  if (fd >= 0)
    close(fd); // the lock goes with the last descriptor of its file
}
