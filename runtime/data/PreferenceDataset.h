//===- PreferenceDataset.h - preference pairs for DPO -----------*- C++ -*-===//
//
// Preference data as TRL's DPOTrainer reads it: {"prompt", "chosen",
// "rejected"} per line, plain strings or conversations (lists of
// {"role", "content"} messages through the model's chat template); without
// "prompt", the longest common start of chosen and rejected is the prompt
// (TRL's extract_prompt). Each pair is tokenized as TRL tokenizes it: a
// string with the tokenizer's special tokens added (chosen and rejected
// ending in the eos_token's text, added where missing), a conversation as
// apply_chat_template gives it (the prompt with the generation prompt);
// the prompt's ids are those the prompt alone shares with both prompt +
// chosen and prompt + rejected, the completions the rest of each.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_DATA_PREFERENCEDATASET_H
#define TWILL_RUNTIME_DATA_PREFERENCEDATASET_H

#include "runtime/data/ChatFormat.h"
#include "runtime/data/TokenizedDataset.h"

#include <optional>

namespace twill {

struct PreferencePair {
  std::vector<int32_t> prompt, chosen, rejected;
  int64_t line = 0; // where its file holds it, from 1
};

/// Reads and tokenizes every line of `path`; a line without chosen or
/// rejected, or with neither strings nor conversations, is an error naming
/// the file and the line.
llvm::Expected<std::vector<PreferencePair>>
readPreferenceJsonl(llvm::StringRef path, const Tokenizer &tokenizer,
                    const ChatFormat &format);

/// Pairs already tokenized: {"prompt_ids", "chosen_ids", "rejected_ids"}
/// per line, as `twill-tokenize --format preference` writes them; none
/// where the file's first line holds no "chosen_ids" (its pairs are text,
/// which readPreferenceJsonl reads).
llvm::Expected<std::optional<std::vector<PreferencePair>>>
readTokenizedPairs(llvm::StringRef path);

/// Fails, naming `path` and the pair's line, unless every id of `pairs` is
/// inside a `vocab`-token vocabulary.
llvm::Error checkPairVocabulary(llvm::ArrayRef<PreferencePair> pairs,
                                llvm::StringRef path, int64_t vocab);

/// Drops the pairs whose prompt alone fills `maxLength` tokens (TRL drops
/// them: keeping the start of each sequence would leave no completion
/// token); returns how many.
int64_t dropFullyTruncated(std::vector<PreferencePair> &pairs,
                           int64_t maxLength);

/// Each pair as a row of 2 x `seqLen` positions (train.objective DPO):
/// prompt + chosen in the first half (segment 0), prompt + rejected in the
/// second (segment 1), each cut to `seqLen` tokens keeping its start (TRL's
/// max_length) and padded, its positions from 0; labelled to predict each
/// completion token (the prompt's and the padding's -100).
std::vector<Row> pairRows(llvm::ArrayRef<PreferencePair> pairs, int64_t seqLen);

} // namespace twill

#endif // TWILL_RUNTIME_DATA_PREFERENCEDATASET_H
