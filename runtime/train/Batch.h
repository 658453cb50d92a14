//===- Batch.h - filling a step's inputs ------------------------*- C++ -*-===//

#ifndef TWILL_RUNTIME_TRAIN_BATCH_H
#define TWILL_RUNTIME_TRAIN_BATCH_H

#include "runtime/data/TokenizedDataset.h"
#include "runtime/train/Program.h"

namespace twill {

/// The per-position inputs of a batch, in the order of Row's fields, and
/// their keys in a batch JSON file (--batch).
inline constexpr ValueRole kBatchInputs[] = {TOKENS, LABELS, POSITIONS,
                                             SEGMENTS};
inline constexpr llvm::StringLiteral kBatchKeys[] = {"tokens", "labels",
                                                     "positions", "segments"};

/// The rows of micro-batch `index` (of `batchSize` rows) of `order`, the
/// indices of `rows` in the order they are read (all rows in file order
/// when empty), padded with empty rows past its end.
std::vector<Row> microBatch(llvm::ArrayRef<Row> rows,
                            llvm::ArrayRef<int64_t> order, int64_t index,
                            int64_t batchSize, int64_t seqLen);

/// DPO's pairs among `rows` that its loss counts: those with a labelled
/// token in each of their sequences, segment 0 (chosen) and 1 (rejected)
/// (dpo::Pair::counted; a padding row has none).
int64_t countedPairs(llvm::ArrayRef<Row> rows);

/// The labels of `rows` a loss is trained on (all but -100).
int64_t labelledTokens(llvm::ArrayRef<Row> rows);

/// Fills the batch inputs from `rows` (batch_size of them), with LoRA
/// dropout `token_index` (each position's index in the batch), with the
/// routers' load-balancing loss the attention mask, and with a precomputed
/// DPO reference its log-probabilities (each row's, which must be
/// computed).
llvm::Error fillBatch(Program &program, llvm::ArrayRef<Row> rows);

/// Where the program has the routers' load-balancing loss: sets the
/// labelled tokens of the step the next micro-batches are of (every
/// micro-batch's, every rank's), which weight it.
void setStepTokens(Program &program, int64_t tokens);

/// Fills the reference_logps input (DPO's precomputed reference) from
/// `whole`, batch_size x 2 values.
llvm::Error fillReferenceLogps(Program &program, llvm::ArrayRef<float> whole);

/// Fills the batch inputs from the JSON object in `path`, which maps each
/// input's name to batch_size rows of seq_len integers ("attention_mask"
/// where there is padding: all 1 without it); the batch is a step of its
/// own.
llvm::Error loadBatchJson(Program &program, llvm::StringRef path);

} // namespace twill

#endif // TWILL_RUNTIME_TRAIN_BATCH_H
