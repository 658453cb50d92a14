//===- Bpe.h - byte-pair encoding of one piece of text ----------*- C++ -*-===//
//
// The model of a Hugging Face BPE tokenizer: a vocabulary of tokens (text,
// in the alphabet the pre-tokenizer leaves: GPT-2's byte characters, or
// SentencePiece's ▁ and characters), and merges, each joining two tokens
// into a third, by priority. A piece starts as its characters' tokens (a
// character outside the vocabulary as its bytes' <0xXX> tokens with byte
// fallback, else the unknown token); the pair of lowest rank, leftmost on
// ties, merges first, until none does. tiktoken's files give no merges:
// there a pair's rank is the id of the token it makes.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_DATA_TOKENIZER_BPE_H
#define TWILL_RUNTIME_DATA_TOKENIZER_BPE_H

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace twill {

/// More token ids than any vocabulary has (Gemma 3's 262,144), fewer than
/// make a table by id (the model's is one) a problem: a file naming id 2^31
/// is an error, not 64 GB of memory.
inline constexpr int32_t kMaxTokenIds = int32_t(1) << 22;

class BpeModel {
public:
  BpeModel() { byteIds.fill(-1); }

  /// Adds token `text` as `id`; fails if either is already taken.
  llvm::Error addToken(llvm::StringRef text, int32_t id);
  /// The merge of `left` and `right`, of priority `rank` (lower first): the
  /// token they make must be in the vocabulary, as they must.
  llvm::Error addMerge(llvm::StringRef left, llvm::StringRef right,
                       int32_t rank);
  /// Every merge of two tokens into a third, ranked by the third's id
  /// (tiktoken's rule).
  void mergeByIds();

  /// Whether a piece that is a token is that token, unmerged (Llama 3's
  /// ignore_merges, tiktoken's rule).
  bool ignoreMerges = false;
  /// A character outside the vocabulary becomes its bytes' <0xXX> tokens.
  bool byteFallback = false;
  /// The token of characters it cannot encode otherwise (-1: they are
  /// dropped, as tokenizers drops them), and whether a run of them is one.
  int32_t unknown = -1;
  bool fuseUnknown = false;

  /// Appends the ids of `piece` (valid UTF-8). Pieces recur (words): the
  /// ids of recent short ones are kept (tokenizers keeps a cache too).
  void encode(llvm::StringRef piece, std::vector<int32_t> &ids) const;

  /// The id of token `text`, or -1.
  int32_t idOf(llvm::StringRef text) const {
    auto it = vocab.find(text);
    return it == vocab.end() ? -1 : it->second;
  }
  /// The text of token `id` (empty for an id it has not).
  llvm::StringRef textOf(int32_t id) const {
    return id >= 0 && size_t(id) < tokens.size() ? llvm::StringRef(tokens[id])
                                                 : llvm::StringRef();
  }
  /// One past the largest id.
  int32_t idEnd() const { return int32_t(tokens.size()); }
  /// How many tokens it has (tokenizers' get_vocab_size; idEnd() but for
  /// ids it has not).
  int64_t size() const { return int64_t(vocab.size()); }

private:
  struct Merge {
    int32_t rank, result;
  };
  static uint64_t pairKey(int32_t left, int32_t right) {
    return uint64_t(uint32_t(left)) << 32 | uint32_t(right);
  }
  /// Appends the starting tokens of `piece`: one per character.
  void startingTokens(llvm::StringRef piece, std::vector<int32_t> &ids) const;
  /// Appends the ids of `piece`, merged.
  void merge(llvm::StringRef piece, std::vector<int32_t> &ids) const;

  llvm::StringMap<int32_t> vocab;
  std::vector<std::string> tokens; // by id; "" for an id it has not
  llvm::DenseMap<uint64_t, Merge> merges;
  std::array<int32_t, 256> byteIds; // the <0xXX> tokens' ids, or -1
  struct Cache {
    std::mutex lock;
    llvm::StringMap<std::vector<int32_t>> ids;
  };
  std::unique_ptr<Cache> cache = std::make_unique<Cache>();
};

} // namespace twill

#endif // TWILL_RUNTIME_DATA_TOKENIZER_BPE_H
