//===- TrainingData.h - the rows a run trains and evaluates on --*- C++ -*-===//
//
// What a training run reads before any weight: the job's data as its
// data.format says (pre-tokenized, alpaca, chat or preference JSONL, the
// text through the model's tokenizer and chat template), packed into rows
// of train.seq_len and checked (ids inside the vocabulary, some token
// trained on), so a bad file fails in seconds, not after the weights load.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_TRAIN_TRAININGDATA_H
#define TWILL_RUNTIME_TRAIN_TRAININGDATA_H

#include "proto/job_config.pb.h"
#include "runtime/data/TokenizedDataset.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <string>
#include <vector>

namespace twill {

/// Where reading says what it read (rank 0's log), and where each warning
/// goes (a stream that begins it, as WithColor::warning does).
struct DataLog {
  llvm::raw_ostream &report;
  std::function<llvm::raw_ostream &()> warn;
};

/// The rows of `path`, read as the job's data.format reads them.
llvm::Expected<std::vector<Row>>
readRows(const JobConfig &job, llvm::StringRef path, const DataLog &log);

/// A run's training rows and the rows it evaluates on (if any).
struct TrainingData {
  std::string source; // the training file
  std::vector<Row> rows, evalRows;
};

/// The training rows of data.path (`dataOverride` where given: --data),
/// and the eval rows of `evalPath` where given.
llvm::Expected<TrainingData> readTrainingData(const JobConfig &job,
                                              llvm::StringRef dataOverride,
                                              llvm::StringRef evalPath,
                                              const DataLog &log);

} // namespace twill

#endif // TWILL_RUNTIME_TRAIN_TRAININGDATA_H
