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
// resume with another is refused naming the fields that differ.
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
};

/// Writes `outputDir/step_<steps>/` (a collective: every rank calls it).
llvm::Error saveCheckpoint(Program &program, llvm::StringRef outputDir,
                           const TrainPosition &position);

/// Restores the trainable parameters and optimizer state from `path` (a
/// step_N folder, or an output folder: its latest complete checkpoint) and
/// returns where to continue.
llvm::Expected<TrainPosition> loadCheckpoint(Program &program,
                                             llvm::StringRef path);

/// For a run that starts afresh into `outputDir`: fails, naming them, when
/// it holds complete checkpoints of an earlier run, which would lie beside
/// the new run's and be taken by a later `--resume outputDir`.
llvm::Error checkNoEarlierCheckpoints(llvm::StringRef outputDir);

} // namespace twill

#endif // TWILL_RUNTIME_TRAIN_CHECKPOINT_H
