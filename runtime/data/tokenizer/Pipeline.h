//===- Pipeline.h - a tokenizer's text around its model ---------*- C++ -*-===//
//
// What Hugging Face tokenizers does to text around the BPE model, as
// tokenizer.json describes it: normalizers (NFC, NFKC, Prepend, Replace),
// pre-tokenizers that cut it into the pieces the model encodes one by one
// (ByteLevel, Split, Metaspace, Digits), and decoders that turn tokens back
// into text (ByteLevel, ByteFallback, Metaspace, Replace, Fuse, Strip).
// A Sequence of either is its steps in order.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_DATA_TOKENIZER_PIPELINE_H
#define TWILL_RUNTIME_DATA_TOKENIZER_PIPELINE_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace twill {

/// A pattern tokenizer.json names: a literal string, or a regex (Oniguruma
/// syntax as tokenizers has it; PCRE2 with Unicode properties runs it).
class TextPattern {
public:
  static llvm::Expected<TextPattern> literal(llvm::StringRef text);
  static llvm::Expected<TextPattern> regex(llvm::StringRef pattern);
  TextPattern(TextPattern &&) noexcept;
  TextPattern &operator=(TextPattern &&) noexcept;
  ~TextPattern();

  /// The [begin, end) byte ranges of its matches in `text`, left to right,
  /// not overlapping; after an empty match the search goes on a character
  /// later, as Oniguruma's does. A match PCRE2 gives up on (its match
  /// limit, as Oniguruma's retry limit stops tokenizers) is an error naming
  /// the pattern, never the end of the matches.
  llvm::Expected<std::vector<std::pair<size_t, size_t>>>
  matches(llvm::StringRef text) const;
  /// `text` with every match replaced by `content`.
  llvm::Expected<std::string> replaceAll(llvm::StringRef text,
                                         llvm::StringRef content) const;

private:
  TextPattern() = default;
  std::string text; // a literal's text, a regex's source
  struct Compiled;
  std::unique_ptr<Compiled> compiled; // a regex's
};

struct NormalizerStep {
  enum Kind { Nfc, Nfkc, Prepend, Replace } kind;
  std::string content;                  // Prepend's text, Replace's replacement
  std::shared_ptr<TextPattern> pattern; // Replace's
};
/// `text` through each step in order; an error is a pattern's.
llvm::Expected<std::string> normalize(llvm::ArrayRef<NormalizerStep> steps,
                                      llvm::StringRef text);

/// Takes each piece of text the model encodes on its own, and whether it
/// starts the input text (Metaspace prepends to the first piece alone).
using PieceSink =
    llvm::function_ref<llvm::Error(llvm::StringRef piece, bool atStart)>;

/// How a Split keeps what its pattern matches.
enum class SplitBehavior {
  Removed,
  Isolated,
  MergedWithPrevious,
  MergedWithNext,
  Contiguous
};

struct PreTokenizerStep {
  enum Kind { ByteLevel, Split, Metaspace, Digits } kind;
  // ByteLevel: a space before a piece that starts without one, and a cut
  // by GPT-2's pattern first; then each byte as GPT-2's character for it.
  bool addPrefixSpace = false, useRegex = false;
  // Split: by `pattern`, keeping matches as `behavior` says (the non-
  // matches instead with `invert`).
  std::shared_ptr<TextPattern> pattern;
  SplitBehavior behavior = SplitBehavior::Isolated;
  bool invert = false;
  // Metaspace: spaces become `replacement`, which starts pieces as
  // `prepend` says (always, first: the input's first piece, never); with
  // `split`, a piece per replacement, each starting with it.
  std::string replacement;
  enum Prepend { Always, First, Never } prepend = Always;
  bool split = false;
  // Digits: each digit a piece, or each run of digits.
  bool individualDigits = false;
};
/// The pieces of `text` (which starts the input if `atStart`) through each
/// step in order, to `sink` in text order; the first error (a pattern's, or
/// the sink's) ends it.
llvm::Error preTokenize(llvm::ArrayRef<PreTokenizerStep> steps,
                        llvm::StringRef text, bool atStart, PieceSink sink);

struct DecoderStep {
  enum Kind { ByteLevel, ByteFallback, Metaspace, Replace, Fuse, Strip } kind;
  std::string content; // Replace's replacement; Strip's character
  std::shared_ptr<TextPattern> pattern; // Replace's
  std::string replacement;              // Metaspace's
  bool prependFirst = true;             // Metaspace: a prepended space
  uint64_t start = 0, stop = 0;         // Strip's counts
};
/// The text of `tokens` through each step in order (tokens joined by a
/// space without any step, as tokenizers joins them); an error is a
/// pattern's.
llvm::Expected<std::string> decodeTokens(llvm::ArrayRef<DecoderStep> steps,
                                         std::vector<std::string> tokens);

/// GPT-2's byte-level alphabet: the character (UTF-8) byte `byte` is
/// written as, and the byte of a character (-1 for one outside it).
llvm::StringRef byteLevelChar(unsigned char byte);
int byteOfByteLevelChar(llvm::StringRef character);

} // namespace twill

#endif // TWILL_RUNTIME_DATA_TOKENIZER_PIPELINE_H
