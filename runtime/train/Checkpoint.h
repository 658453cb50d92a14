//===- Checkpoint.h - resumable training state -----------------*- C++ -*-===//
//
// A checkpoint `step_N/` in the output folder holds what a user keeps (the
// PEFT adapter, or the model for full fine-tuning) and, under `state/`,
// what resuming needs: each rank's blocks of the trainable parameters and
// of every optimizer state (`rank-R.safetensors`, as the rank holds them:
// resuming needs the same mesh), and `trainer.json` with the position in
// the data and the integer states. The sampler's order is a function of
// the seed and the epoch, so no random state is saved.
//
// It is written to `step_N.partial/` and renamed to `step_N/` only once
// every rank's files are complete: a crash during a save leaves the
// previous checkpoint as it was. `trainer.json` records the model it is
// state of (the job's model and adaptation sections, field by field): a
// resume with another is refused naming the fields that differ. It also
// records the run that wrote it (an id a fresh run draws, a resumed one
// keeps) and when, so that a folder holding two runs' checkpoints
// (checkpoint.overwrite_output_dir) resumes the one that saved last.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_TRAIN_CHECKPOINT_H
#define TWILL_RUNTIME_TRAIN_CHECKPOINT_H

#include "runtime/train/Program.h"

namespace twill {

/// Where training stands: optimizer steps done, and the epoch and step
/// within it of the next one.
struct TrainPosition {
  int64_t steps = 0, epoch = 0, index = 0;
  /// The checkpoint it was read from (empty: not resumed).
  std::string checkpoint;
  /// The run training belongs to (newRunId(); empty: a checkpoint of a
  /// twill-train that recorded none).
  std::string run;
  /// What choosing the checkpoint passed by: another run's (empty: none).
  std::string passedBy;
};

/// A new run's id: 16 hex digits drawn at random.
std::string newRunId();

/// Writes `outputDir/step_<steps>/` (a collective: every rank calls it).
llvm::Error saveCheckpoint(Program &program, llvm::StringRef outputDir,
                           const TrainPosition &position);

/// Restores the trainable parameters and optimizer state from `path` (a
/// step_N folder, or an output folder: its latest complete checkpoint) and
/// returns where to continue.
llvm::Expected<TrainPosition> loadCheckpoint(Program &program,
                                             llvm::StringRef path);

/// For a run that starts afresh into `outputDir`: fails, naming what it
/// found, where an earlier run left its results there (complete
/// checkpoints, the adapter or model it saved, its metrics), which the new
/// run would replace or leave beside its own for a later `--resume
/// outputDir` to take; unless `overwrite` (checkpoint.overwrite_output_dir),
/// when it returns what it found, to be said, and the run starts.
llvm::Expected<std::string> checkNoEarlierRun(llvm::StringRef outputDir,
                                              bool overwrite);

} // namespace twill

#endif // TWILL_RUNTIME_TRAIN_CHECKPOINT_H
