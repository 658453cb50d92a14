//===- RunWatchdog.cpp - a launched job ends once its ranks have ----------===//

#include "support/RunWatchdog.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <optional>
#include <sys/prctl.h>
#include <thread>
#include <unistd.h>

using namespace twill;

/// The folder of a run's marks, and a mark in it.
static std::string marksIn(llvm::StringRef folder, llvm::StringRef mark = "") {
  llvm::SmallString<256> path(folder);
  llvm::sys::path::append(path, ".twill-run", mark);
  return std::string(path);
}
static std::string startedMark(int rank) {
  return "started-" + std::to_string(rank);
}

void twill::markRankStarted(llvm::StringRef folder, int rank) {
  int fd = open(marksIn(folder, startedMark(rank)).c_str(),
                O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0)
    close(fd);
}

void twill::markRunEnded(llvm::StringRef folder, llvm::StringRef token,
                         int rank, int status) {
  // O_EXCL: the first rank's mark stays; a later rank's end adds nothing.
  int fd = open(marksIn(folder, "ended").c_str(),
                O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return;
  std::string line =
      llvm::formatv("token {0} rank {1} status {2}\n", token, rank, status);
  (void)!write(fd, line.data(), line.size());
  close(fd);
}

namespace {
/// A rank's mark: "token T rank R status S\n", once complete.
struct Mark {
  std::string rank, status;
};
} // namespace

static std::optional<Mark> readMark(const std::string &path,
                                    llvm::StringRef token) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return std::nullopt;
  char text[256] = {};
  ssize_t got = read(fd, text, sizeof(text) - 1);
  close(fd);
  llvm::StringRef line(text, got > 0 ? got : 0);
  if (!line.consume_back("\n")) // still being written
    return std::nullopt;
  llvm::SmallVector<llvm::StringRef> words;
  line.split(words, ' ');
  if (words.size() != 6 || words[0] != "token" || words[1] != token)
    return std::nullopt;
  return Mark{words[3].str(), words[5].str()};
}

/// Every process under `root` on this node, from /proc.
static llvm::SmallVector<pid_t> descendantsOf(pid_t root) {
  llvm::DenseMap<pid_t, llvm::SmallVector<pid_t>> children;
  if (DIR *proc = opendir("/proc")) {
    while (dirent *entry = readdir(proc)) {
      pid_t pid = 0;
      if (llvm::StringRef(entry->d_name).getAsInteger(10, pid))
        continue;
      char path[64], text[512] = {};
      std::snprintf(path, sizeof(path), "/proc/%d/stat", int(pid));
      int fd = open(path, O_RDONLY | O_CLOEXEC);
      if (fd < 0)
        continue;
      ssize_t got = read(fd, text, sizeof(text) - 1);
      close(fd);
      // "pid (name) state ppid ...": the name may hold spaces and parens.
      llvm::StringRef stat(text, got > 0 ? got : 0);
      size_t nameEnd = stat.rfind(')');
      llvm::SmallVector<llvm::StringRef> fields;
      if (nameEnd != llvm::StringRef::npos)
        stat.drop_front(nameEnd + 2).split(fields, ' ');
      pid_t parent = 0;
      if (fields.size() > 1 && !fields[1].getAsInteger(10, parent))
        children[parent].push_back(pid);
    }
    closedir(proc);
  }
  llvm::SmallVector<pid_t> found = {root};
  for (size_t next = 0; next < found.size(); ++next)
    for (pid_t child : children.lookup(found[next]))
      found.push_back(child);
  found.erase(found.begin()); // the root itself
  return found;
}

/// How many of `ranks` ranks have marked their start in `marks`.
static int64_t startedRanks(const std::string &marks, int64_t ranks) {
  int64_t started = 0;
  for (int64_t rank = 0; rank < ranks; ++rank)
    started += access((marks + "/" + startedMark(rank)).c_str(), F_OK) == 0;
  return started;
}

/// Ends the launcher, and what it started on this node, saying `why`.
static void endLauncher(pid_t launcher, const std::string &why) {
  std::string line = "twill: " + why +
                     ": ending the launcher (pid " + std::to_string(launcher) +
                     ") and what it started on this node\n";
  (void)!write(STDERR_FILENO, line.data(), line.size());
  kill(launcher, SIGTERM); // mpirun and srun end their ranks on it
  for (int wait = 0; wait < 50 && getppid() == launcher; ++wait)
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (pid_t pid : descendantsOf(launcher))
    kill(pid, SIGKILL);
  kill(launcher, SIGKILL);
}

/// The watchdog's life: ends with the launcher (its parent), or ends the
/// launcher when the ranks have not all started `grace` after the launch,
/// or `grace` after a rank's end.
[[noreturn]] static void watch(const std::string &marks, std::string token,
                               int64_t ranks, pid_t launcher, double grace) {
  using Clock = std::chrono::steady_clock;
  // The terminal's and the scheduler's signals are the launcher's to
  // handle; the watchdog goes when the launcher does.
  for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE})
    std::signal(signal, SIG_IGN);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  // Nothing of the launcher's held open: not the run lock (the next run
  // must find it free when this one ends), not the pipes a caller reads to
  // their end; stderr stays, for the one line the watchdog may say.
  int null = open("/dev/null", O_RDWR);
  dup2(null, STDIN_FILENO);
  dup2(null, STDOUT_FILENO);
  close_range(3, ~0U, 0);
  auto past = [&](Clock::time_point since) {
    return Clock::now() - since >= std::chrono::duration<double>(grace);
  };
  Clock::time_point launched = Clock::now();
  std::optional<Clock::time_point> ended;
  std::optional<Mark> mark;
  int64_t started = 0;
  std::string twice = llvm::formatv("{0} s (twice "
                                    "parallel.collective_timeout_s)",
                                    llvm::format("%g", grace));
  while (getppid() == launcher) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (!mark && (mark = readMark(marks + "/ended", token)))
      ended = Clock::now();
    if (started < ranks)
      started = startedRanks(marks, ranks);
    if (ended && past(*ended)) {
      endLauncher(launcher, "rank " + mark->rank + " ended with status " +
                                mark->status + " " + twice +
                                " ago, and the launcher has not");
      break;
    }
    if (!ended && started < ranks && past(launched)) {
      endLauncher(launcher, llvm::formatv("{0} of {1} ranks started within "
                                          "{2} of the launch (stuck in "
                                          "MPI_Init, or stopped)",
                                          started, ranks, twice));
      break;
    }
  }
  _exit(0);
}

llvm::Error twill::startRunWatchdog(llvm::StringRef folder,
                                    llvm::StringRef token, int64_t ranks,
                                    double graceSeconds) {
  // An earlier run's marks: gone, as this run holds the folder.
  std::string marks = marksIn(folder);
  llvm::sys::fs::remove_directories(marks, /*IgnoreErrors=*/true);
  if (std::error_code error = llvm::sys::fs::create_directories(marks))
    return llvm::createStringError(error, "cannot create %s: %s",
                                   marks.c_str(), error.message().c_str());
  pid_t launcher = getpid();
  pid_t pid = fork();
  if (pid < 0)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        llvm::Twine("cannot start the run's watchdog: ") +
            std::strerror(errno));
  if (pid == 0)
    watch(marks, token.str(), ranks, launcher, graceSeconds);
  return llvm::Error::success();
}
