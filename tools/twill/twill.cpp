//===- twill.cpp - one command from a job to its running ranks ------------===//
//
//   twill train JOB.textproto [key=value ...] [--nproc N] [-- FLAGS ...]
//   twill plan JOB.textproto [key=value ...] --cluster FILE [-o OUT]
//   twill plan --calibrate cluster.textproto [--nproc N]
//
// Resolves the job as twillc does, compiles it into its output folder
// (checkpoint.output_dir/job.twx) unless the program there was compiled
// from the same resolved job by the same twillc, checks the number of
// ranks against dp x tp, and starts them, holding the output folder's run
// lock from before compiling to the run's end: inside a Slurm allocation with
// srun, elsewhere with mpirun (or, for one rank, twill-train itself).
// FLAGS after `--` go to every twill-train (--backend=cuda, --eval-data,
// ...). twillc and twill-train are the ones beside this program.
//
//===----------------------------------------------------------------------===//

#include "frontend/config/JobConfig.h"
#include "proto/ExecutableChecksum.h"
#include "support/RunLock.h"
#include "support/RunWatchdog.h"
#include "support/Sha256File.h"
#include "support/ToolOutput.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <cstring>
#include <thread>
#include <unistd.h>

using namespace twill;

static const char *kUsage =
    "usage: twill train JOB.textproto [key=value ...] [--nproc N] "
    "[-- twill-train flags ...]\n"
    "       twill plan JOB.textproto [key=value ...] --cluster FILE "
    "[-o plan.textproto]\n"
    "       twill plan --calibrate cluster.textproto [--nproc N]\n"
    "\n"
    "Compiles the job (reusing the program in its output folder when the "
    "resolved\njob and twillc are unchanged) and starts dp x tp ranks of "
    "twill-train: with\nsrun inside a Slurm allocation, with mpirun "
    "elsewhere. plan chooses the mesh,\nactivation checkpointing and "
    "micro-batch for a cluster (twillc --plan).\n";

static int fail(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "twill") << message << "\n";
  return 1;
}

/// What `twill train` was asked.
struct Request {
  std::string job;
  std::vector<std::string> overrides, trainFlags;
  int64_t ranks = 0; // --nproc; 0: dp x tp
};

static llvm::Expected<Request> parseTrain(llvm::ArrayRef<const char *> args) {
  Request request;
  auto problem = [](const llvm::Twine &what) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   what + "\n" + kUsage);
  };
  for (size_t i = 0; i < args.size(); ++i) {
    llvm::StringRef arg = args[i];
    if (arg == "--") {
      request.trainFlags.assign(args.begin() + i + 1, args.end());
      break;
    }
    if (arg == "--nproc" || arg.starts_with("--nproc=")) {
      llvm::StringRef value = arg.consume_front("--nproc=") ? arg : "";
      if (value.empty() && ++i < args.size())
        value = args[i];
      if (value.getAsInteger(10, request.ranks) || request.ranks < 1)
        return problem("--nproc needs a positive number of ranks, got '" +
                       value + "'");
    } else if (arg.starts_with("-")) {
      return problem("unknown flag " + arg +
                     " (twill-train's flags go after `--`)");
    } else if (request.job.empty()) {
      request.job = arg.str();
    } else if (arg.contains('=')) {
      request.overrides.push_back(arg.str());
    } else {
      return problem("'" + arg +
                     "' is neither a key=value override nor a flag");
    }
  }
  if (request.job.empty())
    return problem("no job given");
  return request;
}

/// The program beside this one named `name`.
static std::string sibling(const char *argv0, llvm::StringRef name) {
  static int anchor;
  llvm::SmallString<256> path(llvm::sys::fs::getMainExecutable(argv0, &anchor));
  llvm::sys::path::remove_filename(path);
  llvm::sys::path::append(path, name);
  return path.str().str();
}

/// Why `program` is not what twillc (whose contents hash to `compiler`)
/// compiles `job` to; empty when it is. The program says what made it (its
/// job and its twillc's hash) and is sealed with a checksum: its file's
/// size and time say nothing.
static std::string whyNotUpToDate(llvm::StringRef program, const JobConfig &job,
                                  llvm::StringRef compiler) {
  if (!llvm::sys::fs::exists(program))
    return "there is none yet";
  auto file = llvm::MemoryBuffer::getFile(program, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  Executable executable;
  if (!file || !executable.ParseFromArray((*file)->getBufferStart(),
                                          (*file)->getBufferSize()))
    return "it cannot be read as a program";
  if (executable.format_version() != EXECUTABLE_FORMAT)
    return "another release of twillc wrote it";
  if (!isIntact((*file)->getBuffer(), executable))
    return "it is damaged (its checksum does not match)";
  if (executable.compiler_sha256() != compiler)
    return "another twillc compiled it";
  // Two jobs are the same job when their deterministic bytes are.
  if (deterministicBytes(executable.job()) != deterministicBytes(job))
    return "it was compiled from another job, or other overrides";
  return "";
}

/// Runs `argv` and waits; its exit status.
static int run(llvm::ArrayRef<std::string> argv) {
  llvm::SmallVector<llvm::StringRef> args(argv.begin(), argv.end());
  std::string error;
  int status = llvm::sys::ExecuteAndWait(args.front(), args, std::nullopt, {},
                                         0, 0, &error);
  if (status < 0)
    return fail(args.front() + ": " + error);
  return status;
}

/// The program `job` compiles to, in its output folder: compiled again
/// (into a temporary file renamed into place) unless the one there was
/// compiled from this job by this twillc. The caller holds the folder's
/// run lock.
static llvm::Expected<std::string> compiled(const Request &request,
                                            const JobConfig &job,
                                            const std::string &twillc) {
  llvm::StringRef folder = job.checkpoint().output_dir();
  if (std::error_code error = llvm::sys::fs::create_directories(folder))
    return llvm::createStringError(error, "cannot create %s: %s",
                                   folder.str().c_str(),
                                   error.message().c_str());
  llvm::SmallString<256> program(folder);
  llvm::sys::path::append(program, "job.twx");
  // Compiling would rename the program over a device or a FIFO there.
  if (llvm::sys::fs::exists(program) &&
      !llvm::sys::fs::is_regular_file(program))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "%s is not a regular file (a device or a FIFO): remove it, and twill "
        "compiles the job into it",
        program.c_str());
  llvm::Expected<std::string> compiler = sha256OfFile(twillc);
  if (!compiler)
    return compiler.takeError();
  std::string why = whyNotUpToDate(program, job, *compiler);
  if (why.empty()) {
    llvm::outs() << "twill: " << program
                 << " is up to date (compiled from this job by this twillc)\n";
    return program.str().str();
  }
  std::vector<std::string> compile = {twillc, request.job};
  compile.insert(compile.end(), request.overrides.begin(),
                 request.overrides.end());
  compile.insert(compile.end(), {"-o", program.str().str()});
  llvm::outs() << "twill: compiling " << request.job << " into " << program
               << " (" << why << ")\n";
  llvm::outs().flush();
  if (run(compile) != 0)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "twillc failed on " + request.job);
  return program.str().str();
}

/// How the ranks start: srun inside a Slurm allocation, mpirun elsewhere,
/// twill-train alone for one rank.
static llvm::Expected<std::vector<std::string>>
launcher(int64_t ranks, const std::string &trainer, const std::string &program,
         llvm::ArrayRef<std::string> flags) {
  std::vector<std::string> argv;
  // An empty SLURM_JOB_ID (an unset one, exported blank) is no allocation.
  const char *allocation = std::getenv("SLURM_JOB_ID");
  if (allocation && *allocation) {
    if (const char *tasks = std::getenv("SLURM_NTASKS")) {
      int64_t allocated = 0;
      if (!llvm::StringRef(tasks).getAsInteger(10, allocated) &&
          allocated < ranks)
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            llvm::formatv("the job needs {0} ranks (dp x tp), and this Slurm "
                          "allocation has {1} tasks: ask sbatch or salloc "
                          "for --ntasks={0}",
                          ranks, allocated));
    }
    argv = {"srun", "--mpi=pmix", "--ntasks=" + std::to_string(ranks),
            "--kill-on-bad-exit=1"};
  } else if (ranks > 1) {
    llvm::ErrorOr<std::string> mpirun = llvm::sys::findProgramByName("mpirun");
    if (!mpirun)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("the job has {0} ranks and there is no mpirun on "
                        "PATH: install Open MPI (openmpi-bin), or run "
                        "inside a Slurm allocation",
                        ranks));
    argv = {*mpirun, "-np", std::to_string(ranks)};
    if (ranks > int64_t(std::thread::hardware_concurrency()))
      argv.push_back("--oversubscribe"); // more ranks than cores
    if (geteuid() == 0)
      argv.push_back("--allow-run-as-root"); // containers run as root
  }
  argv.push_back(trainer);
  argv.push_back(program);
  argv.insert(argv.end(), flags.begin(), flags.end());
  return argv;
}

/// Prints `command`, then becomes it.
static int become(std::vector<std::string> command) {
  llvm::outs() << "twill: " << llvm::join(command, " ") << "\n";
  llvm::outs().flush();
  std::vector<char *> argv;
  for (std::string &arg : command)
    argv.push_back(arg.data());
  argv.push_back(nullptr);
  execvp(argv.front(), argv.data());
  return fail(llvm::formatv("cannot start {0}: {1}", argv.front(),
                            std::strerror(errno)));
}

/// The value of twill-train's flag `name` ("--data") among `flags`, as
/// `--data=X` or `--data X`; empty if not given.
static std::string flagValue(llvm::ArrayRef<std::string> flags,
                             llvm::StringRef name) {
  std::string value;
  for (size_t i = 0; i < flags.size(); ++i) {
    llvm::StringRef flag = flags[i];
    if (flag == name && i + 1 < flags.size())
      value = flags[i + 1];
    else if (flag.consume_front(name) && flag.consume_front("="))
      value = flag.str();
  }
  return value;
}

/// Every file or folder the ranks will read, checked before the job is
/// compiled (minutes for a large model), so a wrong path fails at once and
/// names the setting that gave it. Each with the setting that names it.
static llvm::Error checkInputs(const JobConfig &job,
                               llvm::ArrayRef<std::string> flags) {
  auto unreadable = [](llvm::StringRef path, bool folder) -> std::string {
    if (!llvm::sys::fs::exists(path))
      return "does not exist";
    if (!folder && !llvm::sys::fs::is_regular_file(path))
      return "is not a file";
    int fd;
    if (std::error_code error = llvm::sys::fs::openFileForRead(path, fd))
      return "cannot be read: " + error.message();
    llvm::sys::Process::SafelyCloseFileDescriptor(fd);
    return "";
  };
  struct Input {
    std::string setting, path;
    bool folder = false; // a model folder or a .safetensors file
  };
  std::string data = flagValue(flags, "--data");
  std::string weights = flagValue(flags, "--weights");
  std::vector<Input> inputs = {
      {data.empty() ? "data.path" : "--data",
       data.empty() ? job.data().path() : data},
      {"--eval-data", flagValue(flags, "--eval-data")},
      {"tokenizer", job.tokenizer()},
      {"data.chat_template", job.data().chat_template()},
      {"--adapter", flagValue(flags, "--adapter"), true}};
  if (!job.checkpoint().random_base())
    inputs.push_back({weights.empty() ? "checkpoint.base_dir" : "--weights",
                      weights.empty() ? job.checkpoint().base_dir() : weights,
                      true});
  // --eval and --write-base read no training data; a training run does.
  bool trains = llvm::none_of(flags, [](llvm::StringRef flag) {
    return flag == "--eval" || flag.starts_with("--eval=") ||
           flag.starts_with("--write-base");
  });
  if (trains && inputs.front().path.empty())
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "no data: set data.path in the job or pass `-- --data FILE`");
  std::string problems;
  for (const Input &input : inputs)
    if (!input.path.empty())
      if (std::string why = unreadable(input.path, input.folder); !why.empty())
        problems += "\n  " + input.setting + ": " + input.path + " " + why;
  if (problems.empty())
    return llvm::Error::success();
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "the job's inputs are not all there (nothing "
                                 "was compiled or run):" +
                                     problems);
}

static int train(const char *argv0, llvm::ArrayRef<const char *> args) {
  llvm::Expected<Request> request = parseTrain(args);
  if (!request)
    return fail(llvm::toString(request.takeError()));
  llvm::Expected<JobConfig> job =
      loadJobConfig(request->job, request->overrides);
  if (!job)
    return fail(llvm::toString(job.takeError()));
  int64_t dp = job->parallel().dp(), tp = job->parallel().tp();
  if (request->ranks && request->ranks != dp * tp)
    return fail(llvm::formatv(
        "the job's mesh is parallel.dp={0} x parallel.tp={1} = {2} ranks, and "
        "--nproc is {3}: set parallel.dp and parallel.tp so their product is "
        "{3}, or leave --nproc out",
        dp, tp, dp * tp, request->ranks));
  if (llvm::Error error = checkInputs(*job, request->trainFlags))
    return fail(llvm::toString(std::move(error)));
  // Held from here to the run's end: what this process becomes (mpirun,
  // srun or twill-train) keeps it, and passes its token to twill-train.
  llvm::Expected<RunLock> lock = RunLock::take(job->checkpoint().output_dir());
  if (!lock)
    return fail(llvm::toString(lock.takeError()));
  lock->keepAcrossExec();
  llvm::Expected<std::string> program =
      compiled(*request, *job, sibling(argv0, "twillc"));
  if (!program)
    return fail(llvm::toString(program.takeError()));
  std::vector<std::string> flags = {"--run-lock=" + lock->token()};
  flags.insert(flags.end(), request->trainFlags.begin(),
               request->trainFlags.end());
  llvm::Expected<std::vector<std::string>> command =
      launcher(dp * tp, sibling(argv0, "twill-train"), *program, flags);
  if (!command)
    return fail(llvm::toString(command.takeError()));
  // Replaced by the launcher: its exit status and signals are the job's;
  // watched, so that it ends once the ranks have.
  if (llvm::Error error = startRunWatchdog(
          job->checkpoint().output_dir(), lock->token(), dp * tp,
          2 * job->parallel().collective_timeout_s()))
    return fail(llvm::toString(std::move(error)));
  return become(std::move(*command));
}

/// twill plan JOB ...: twillc --plan, with the job and its overrides as
/// given. twill plan --calibrate FILE [--nproc N]: twill-calibrate on N
/// ranks (1 by default), started as a job's ranks are.
static int plan(const char *argv0, llvm::ArrayRef<const char *> args) {
  if (!args.empty() && llvm::StringRef(args.front()) == "--calibrate") {
    if (args.size() != 2 && args.size() != 4)
      return fail(llvm::Twine("--calibrate needs a file to write, and may "
                              "take --nproc N\n") +
                  kUsage);
    int64_t ranks = 1;
    if (args.size() == 4 && (llvm::StringRef(args[2]) != "--nproc" ||
                             llvm::StringRef(args[3]).getAsInteger(10, ranks) ||
                             ranks < 1 || ranks > 4096))
      return fail(llvm::Twine("--calibrate FILE takes --nproc N (N from 1 "
                              "to 4096: the ranks of one node's or a few "
                              "nodes' measurement) and nothing else\n") +
                  kUsage);
    llvm::Expected<std::vector<std::string>> command =
        launcher(ranks, sibling(argv0, "twill-calibrate"), args[1], {});
    if (!command)
      return fail(llvm::toString(command.takeError()));
    return become(std::move(*command));
  }
  // --nproc sizes a calibration's ranks; a plan compiles on one process
  // (twillc said only "Unknown command line argument").
  for (llvm::StringRef arg : args)
    if (arg == "--nproc" || arg.starts_with("--nproc="))
      return fail(llvm::Twine("--nproc belongs to twill plan --calibrate; a "
                              "plan's devices are its --cluster file's\n") +
                  kUsage);
  std::vector<std::string> command = {sibling(argv0, "twillc")};
  command.insert(command.end(), args.begin(), args.end());
  command.push_back("--plan");
  return become(std::move(command));
}

int main(int argc, char **argv) {
  twill::checkStandardOutputAtExit("twill");
  llvm::StringRef command = argc > 1 ? argv[1] : "";
  if (command == "train")
    return train(argv[0], llvm::ArrayRef(argv + 2, argc - 2));
  if (command == "plan")
    return plan(argv[0], llvm::ArrayRef(argv + 2, argc - 2));
  if (command == "--help" || command == "-h" || command == "help") {
    llvm::outs() << kUsage;
    return 0;
  }
  return fail((command.empty() ? llvm::Twine("no command")
                               : "unknown command '" + command + "'") +
              "\n" + kUsage);
}
