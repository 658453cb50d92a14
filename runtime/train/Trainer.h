//===- Trainer.h - the training loop ----------------------------*- C++ -*-===//
//
// Runs the compiled step over a dataset: for each optimizer step,
// gradient_accumulation_steps micro-batches of @train_step (which sum
// gradients and token counts into the program's state), then
// @optimizer_step. Logs one line per step and appends it to a metrics JSONL
// file; writes a checkpoint (the PEFT adapter, or for full fine-tuning the
// model, and the resumable state) every save_every steps, and the adapter or
// model at the end.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_TRAIN_TRAINER_H
#define TWILL_RUNTIME_TRAIN_TRAINER_H

#include "runtime/data/TokenizedDataset.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/Program.h"
#include "llvm/Support/raw_ostream.h"

namespace twill {

struct TrainResult {
  int64_t steps = 0;   // taken, this run's and a resumed run's before it
  int64_t skipped = 0; // of this run's, without a labelled token: no update
  double lastLoss = 0;
  // This run's: the positions its micro-batches held (padding too), the
  // labelled ones among them, its wall time, and the most memory it held.
  int64_t positions = 0, labelled = 0;
  double seconds = 0;
  Backend::PeakMemory peakMemory;
};

/// How a run lays its optimizer steps over `rows` rows, as the Hugging Face
/// Trainer does: an epoch's micro-batches (the last one padded past the
/// rows), gradient_accumulation_steps of them a step but the last step's,
/// which takes what is left; the steps of an epoch (train.max_steps_per_epoch
/// may cut it short; 0: no rows) and of the run.
struct Schedule {
  int64_t microBatchesPerEpoch = 0, stepsPerEpoch = 0, totalSteps = 0;
};
Schedule scheduleOf(const TrainConfig &settings, int64_t rows);

/// The rows (their indices, ascending, each once) that training from
/// `start` reads: each epoch's order as far as its steps go.
std::vector<int64_t> rowsRead(const JobConfig &job, int64_t rows,
                              const TrainPosition &start);

/// Trains `program` on `rows` (read from `source`, named in errors) from
/// `start` (a resumed checkpoint's position); `log` gets the per-step
/// lines.
llvm::Expected<TrainResult> train(Program &program, llvm::ArrayRef<Row> rows,
                                  llvm::StringRef source,
                                  llvm::raw_ostream &log,
                                  const TrainPosition &start = {});

/// Next-token accuracy and mean loss of the model on `rows`, through
/// @forward: the fraction of counted positions whose most likely token is
/// the label.
struct Evaluation {
  double accuracy = 0, loss = 0;
  int64_t tokens = 0;
  /// Under DPO: the loss per pair (not per token), how many pairs, and
  /// TRL's metrics' means over them (support/Dpo.h's order).
  int64_t pairs = 0;
  std::vector<double> dpoMetrics;
};
llvm::Expected<Evaluation> evaluate(Program &program, llvm::ArrayRef<Row> rows);

} // namespace twill

#endif // TWILL_RUNTIME_TRAIN_TRAINER_H
