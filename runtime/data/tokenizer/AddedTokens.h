//===- AddedTokens.h - tokens found in text before the model ----*- C++ -*-===//
//
// tokenizer.json's added_tokens: strings recognised whole wherever they
// occur (leftmost, the longest first), before the pre-tokenizer cuts the
// text; the special ones (<|eot_id|>, <s>) among them. A token may take
// the whitespace before (lstrip) or after (rstrip) it, match only as a
// word of its own (single_word), and match the text as the normalizer
// leaves it (normalized) instead of the raw text.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_DATA_TOKENIZER_ADDEDTOKENS_H
#define TWILL_RUNTIME_DATA_TOKENIZER_ADDEDTOKENS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <array>
#include <string>
#include <vector>

namespace twill {

struct AddedToken {
  std::string content;
  int32_t id;
  bool special = false, lstrip = false, rstrip = false, normalized = false,
       singleWord = false;
};

/// A stretch of text: an added token's (`id` >= 0) or text for the
/// pipeline; `begin` is where it starts.
struct Segment {
  llvm::StringRef text;
  int32_t id;
  size_t begin;
};

class AddedTokens {
public:
  /// Adds `token`; a normalized one (matched against normalized text) is
  /// its content as the normalizer leaves it, `normalizedContent`. Fails,
  /// naming the token, where its content is empty or added before, or its
  /// id is another's or past those a vocabulary may have.
  llvm::Error add(AddedToken token, std::string normalizedContent);

  /// `text` cut at the added tokens matched in it: those matched on raw
  /// text (`normalizedText` false) or on normalized text; special tokens
  /// only when `allowSpecial`.
  std::vector<Segment> split(llvm::StringRef text, bool normalizedText,
                             bool allowSpecial) const;

  /// The token `content` names, or null.
  const AddedToken *find(llvm::StringRef content) const {
    auto it = byContent.find(content);
    return it == byContent.end() ? nullptr : &tokens[it->second];
  }
  /// The token of id `id`, or null.
  const AddedToken *byId(int32_t id) const {
    auto it = indexById.find(id);
    return it == indexById.end() ? nullptr : &tokens[it->second];
  }
  llvm::ArrayRef<AddedToken> all() const { return tokens; }

private:
  std::vector<AddedToken> tokens;
  llvm::StringMap<size_t> byContent;
  llvm::DenseMap<int32_t, size_t> indexById;
  std::array<std::vector<int>, 256> byFirstByte; // longest pattern first
};

} // namespace twill

#endif // TWILL_RUNTIME_DATA_TOKENIZER_ADDEDTOKENS_H
