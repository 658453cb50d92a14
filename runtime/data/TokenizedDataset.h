//===- TokenizedDataset.h - pre-tokenized JSONL into rows -------*- C++ -*-===//
//
// Examples are `{"input_ids": [...], "labels": [...]}` lines, labels aligned
// with the tokens as Hugging Face writes them (-100: not trained on;
// without "labels" every token is). Rows are what the program reads:
// `seq_len` positions of tokens, next-token labels, positions and document
// segments; packing puts several examples in a row, each with positions
// from 0 and its own segment, so attention never crosses examples.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_DATA_TOKENIZEDDATASET_H
#define TWILL_RUNTIME_DATA_TOKENIZEDDATASET_H

#include "support/IgnoreLabel.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

namespace twill {

struct Example {
  std::vector<int32_t> inputIds, labels;
  int64_t line = 0; // where its file holds it, from 1 (0: not from a file)
};

/// Fails, naming `path` and the example's line, unless every token id and
/// every label (but -100) of `examples` is inside a `vocab`-token vocabulary:
/// found when the data loads, not by a kernel hours into training.
llvm::Error checkVocabulary(llvm::ArrayRef<Example> examples,
                            llvm::StringRef path, int64_t vocab);
/// The same of `ids` (`what` they are) of `path`'s line `line`; with
/// `ignorable` -100 may be among them.
llvm::Error checkIds(llvm::ArrayRef<int32_t> ids, llvm::StringRef path,
                     int64_t line, llvm::StringRef what, int64_t vocab,
                     bool ignorable);

/// Reads every line of `path`; a malformed line is an error naming the file
/// and the line.
llvm::Expected<std::vector<Example>> readTokenizedJsonl(llvm::StringRef path);

/// One row of a batch, each vector `seq_len` long; the attention mask is 1
/// at an example's token and 0 at padding.
struct Row {
  std::vector<int32_t> tokens, labels, positions, segments, attentionMask;
  /// DPO with a precomputed reference: the reference model's
  /// log-probabilities of the row's chosen and rejected sequences, once
  /// computed (runtime/train/Reference.h).
  std::optional<std::array<float, 2>> reference;
};

struct PackResult {
  std::vector<Row> rows;
  /// Examples cut to seq_len, and the tokens cut off them.
  int64_t truncatedExamples = 0, truncatedTokens = 0;
  /// The labels trained on in the rows, and those cut off with the tokens.
  int64_t labelsKept = 0, labelsCut = 0;
  /// The longest example's tokens: the seq_len that cuts none.
  int64_t longestExample = 0;
  /// Examples with no label at all (a conversation without an assistant
  /// turn), and the line of the first.
  int64_t unlabelledExamples = 0, firstUnlabelledLine = 0;
};

/// Lays `examples` into rows of `seqLen`: several per row when `packed`,
/// one per row otherwise. Labels become next-token labels: position i is
/// trained to predict label i + 1 of its example.
PackResult packExamples(llvm::ArrayRef<Example> examples, int64_t seqLen,
                        bool packed);

/// A row with no tokens to train on, to complete a last batch.
Row paddingRow(int64_t seqLen);

} // namespace twill

#endif // TWILL_RUNTIME_DATA_TOKENIZEDDATASET_H
