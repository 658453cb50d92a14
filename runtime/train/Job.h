//===- Job.h - one rank's run of a compiled job -----------------*- C++ -*-===//
//
// What twill-train does once its flags are read: loads the Executable,
// joins the mesh's ranks, fills the parameters from the checkpoint, and
// trains (or evaluates one batch, or writes the base), reporting as rank
// 0 and ending the whole job on any rank's error.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_TRAIN_JOB_H
#define TWILL_RUNTIME_TRAIN_JOB_H

#include "runtime/profile/Profiler.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/Program.h"
#include "runtime/train/Trainer.h"
#include "runtime/train/TrainingData.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>

namespace twill {

/// What a run is asked to do: twill-train's flags (its --help says each).
struct JobOptions {
  std::string executablePath;
  std::string weightsPath, adapterPath; // empty: the job's base, no adapter
  std::string dataPath, evalDataPath;   // empty: the job's data, none
  std::string backend = "cpu";
  std::string resumePath;
  bool evalOnly = false; // --eval: one batch, no training
  std::string batchPath, dumpLogitsPath, gradientsPath;
  std::string profilePath, writeBasePath;
  std::string runLockToken; // `twill train`'s, for its watchdog
};

/// Prints "twill-train: error: <message>" in one write, so that the lines
/// of several ranks sharing a terminal do not interleave.
void printError(const llvm::Twine &message);

/// One rank's run of the job `options` name.
class JobRun {
public:
  explicit JobRun(JobOptions options) : options(std::move(options)) {}

  /// Loads the Executable and runs it: the exit status. An error is
  /// printed and, with several ranks, ends the whole job.
  int run();
  /// Marks the run's end with `status` for `twill train`'s watchdog
  /// (RunWatchdog.h), where it launched the run and the run knew its rank.
  void markEnd(int status);
  /// This rank's number as the watchdog knows it, once the run knew it.
  std::optional<int> watchedRank() const {
    return runEnd ? std::optional<int>(runEnd->rank) : std::nullopt;
  }

private:
  int run(Executable executable);
  int fail(const llvm::Twine &message);
  int fail(llvm::Error error);
  /// Where progress goes: stdout on rank 0; the other ranks compute the
  /// same figures and keep quiet.
  llvm::raw_ostream &report();
  /// Where a warning goes: stderr on rank 0, marked as one.
  llvm::raw_ostream &warn();

  int writeBase(Program &program);
  int runEval(Program &program, llvm::StringRef baseDir);
  int runTraining(Program &program, TrainingData &data);
  llvm::Expected<std::string> startingAdapter();
  llvm::Expected<TrainPosition> startingPosition(Program &program);
  llvm::Error prepareReference(Program &program, TrainingData &data,
                               const TrainPosition &start);
  void reportTrained(const JobConfig &job, const TrainResult &done);
  llvm::Error reportEvaluation(Program &program, llvm::ArrayRef<Row> evalRows,
                               const Evaluation &before);
  llvm::Error writeProfile(const Profiler &profiler, int rank, int worldSize);

  JobOptions options;
  bool isFirstRank = true;
  /// Where this rank marks the run's end for the watchdog: set when
  /// launched by `twill train`.
  struct RunEnd {
    std::string folder;
    int rank = 0;
  };
  std::optional<RunEnd> runEnd;
};

} // namespace twill

#endif // TWILL_RUNTIME_TRAIN_JOB_H
